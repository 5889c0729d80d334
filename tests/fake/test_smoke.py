from __future__ import annotations

import pytest

from tests.helpers import approved_memory, propose, recall, status

pytestmark = pytest.mark.anyio


async def test_propose_then_approve_makes_the_memory_recallable(api, admin) -> None:
    created = await propose(api)
    assert created.status_code == 201, created.text
    proposal = created.json()["proposal"]
    assert proposal["status"] == "pending"
    assert (await recall(api, "PostgreSQL")).json()["memories"] == []
    approved = await admin.approve(proposal["id"])
    assert approved["status"] == "approved"
    assert approved["memory"]["version"] == 1
    found = (await recall(api, "postgres database")).json()["memories"]
    assert [m["id"] for m in found] == [approved["memory"]["id"]]
    polled = await status(api, proposal["id"])
    assert polled.json()["proposal"]["status"] == "approved"
    assert (await approved_memory(api, admin, "Deploys go out on Tuesdays."))["status"] == "approved"
