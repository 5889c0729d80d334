"""Test fixtures' core: the in-process fake, a real uvicorn server, and the admin helper.

```python
async with InProcessFake.start(tmp_path) as fake:          # ASGI in this process
    async with fake.client() as http: ...                   # httpx.AsyncClient on the v1 origin
    await fake.admin.approve(proposal_id)

with LiveServer.start(tmp_path) as server:                 # real uvicorn on 127.0.0.1:<port 0>
    httpx.get(server.base_url + "/healthz")
```
"""

from fake_lucy.testing.admin import AdminError, AdminEvent, EventWatch, FakeAdmin
from fake_lucy.testing.fakes import InProcessFake, LiveServer, ServeProcess
from fake_lucy.testing.transport import InProcessTransport

__all__ = [
    "AdminError",
    "AdminEvent",
    "EventWatch",
    "FakeAdmin",
    "InProcessFake",
    "InProcessTransport",
    "LiveServer",
    "ServeProcess",
]
