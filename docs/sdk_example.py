"""Recall and propose with the Python SDK. Against the local fake (`make serve` in another terminal):

make example

which is, with the environment of this checkout (`make` creates .venv/):

export LUCY_MEMORY_BASE_URL=http://127.0.0.1:8787 LUCY_MEMORY_TOKEN=lucy-dev-token
.venv/bin/python docs/sdk_example.py
"""

import asyncio
import json
import os

from lucy_memory import AgentMemoryClient, LucyMemoryError, ResponseLostError, create_lucy_http_transport


async def main() -> None:
    client = AgentMemoryClient(
        transport=create_lucy_http_transport(
            base_url=os.environ["LUCY_MEMORY_BASE_URL"],
            allow_insecure_loopback=True,  # permits http:// to a loopback host only; use https:// elsewhere
        ),
        token=os.environ["LUCY_MEMORY_TOKEN"],
        permissions=["memory:read", "memory:propose"],
        client_name="sdk-example",
    )
    async with client:
        proposal = json.dumps(
            {
                "kind": "decision",
                "content": "We use PostgreSQL 16 for the main database.",
                "scope": {"kind": "project", "id": "project_example"},
                "topic": "main-database",
                "importance": 8,
            }
        )
        try:
            proposed = await client.propose(proposal)
        except ResponseLostError as lost:
            # Outcome unknown: repeat the same proposal with the same key (a replay, never a second charge).
            proposed = await client.propose(proposal, idempotency_key=lost.idempotency_key)
        saved = "saved" if proposed.proposal.is_saved else "not saved yet"
        print(f"proposal {proposed.proposal.id}: {proposed.proposal.status} ({saved})")

        status = await client.proposal_status(json.dumps({"proposal_id": proposed.proposal.id}))
        print(f"status now: {status.proposal.status}; credits left: {status.credits.remaining}")

        result = await client.recall('{"query": "Which database did we approve?", "limit": 3}')
        for memory in result.memories:
            print(f"{memory.id} v{memory.version} [{memory.kind}] {memory.content}")
        print(f"{len(result.memories)} approved memories recalled")


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except LucyMemoryError as error:  # one line (its code and detail), not a traceback
        raise SystemExit(f"sdk_example: {error}") from None
