"""The ceiling: a bare FastAPI app on the same uvicorn configuration as ``fake-lucy serve``.

``python -m benchmarks.bare_app --port P``: one worker, the fake's HTTP protocol class, no lifespan,
log level warning. ``GET /bare`` and ``POST /bare`` (which reads the body, as the fake does) answer
a small fixed JSON document.
"""

from __future__ import annotations

import argparse

import uvicorn
from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response

from benchmarks.common import PROTOCOL

BODY = b'{"status":"ok","request_id":"req_0123456789abcdefghijkl"}'

# The same FastAPI configuration as the fake's, native telemetry off included, so the ratio
# measures the fake's own work and not a framework setting.
app = FastAPI(
    openapi_url=None,
    docs_url=None,
    redoc_url=None,
    telemetry={"tracing": False, "metrics": False, "logs": False},
)


@app.get("/bare")
async def bare_get() -> Response:
    return Response(BODY, media_type="application/json")


@app.post("/bare")
async def bare_post(request: Request) -> Response:
    await request.body()
    return Response(BODY, media_type="application/json")


@app.get("/healthz")
async def healthz() -> Response:
    return Response(BODY, media_type="application/json")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=args.port, http=PROTOCOL, lifespan="off", log_level="warning"
    )
    uvicorn.Server(config).run()


if __name__ == "__main__":
    main()
