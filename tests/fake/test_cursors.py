"""Issue 18, point 3: a cursor the fake did not issue is 422 ``/cursor`` on every listing, never a 500,
and the keep-alive connection it came on survives."""

from __future__ import annotations

import base64
import http.client
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fake_lucy.http import cursors
from fake_lucy.http.problems import ProblemError
from fake_lucy.testing import LiveServer
from tests.helpers import approved_memory, proposal_body, propose

LISTINGS = ("/_fake/proposals", "/_fake/memories", "/_fake/requests", "/_fake/ledger")
INVALID = [{"pointer": "/cursor", "detail": "is not a cursor this server issued"}]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


class KeepAlive:
    """One HTTP/1.1 connection to the live fake; fails if the server ever closes it."""

    def __init__(self, server: LiveServer) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        self.connection.connect()
        self.socket = self.connection.sock
        self.headers = {"Authorization": f"Bearer {server.admin_token}"}

    def get(self, path: str, cursor: str) -> tuple[int, dict[str, Any]]:
        self.connection.request("GET", f"{path}?cursor={quote(cursor, safe='')}", headers=self.headers)
        response = self.connection.getresponse()
        body = response.read()
        assert not response.will_close, f"the server closed the connection after {response.status}"
        assert self.connection.sock is self.socket, "the connection was reopened"
        return response.status, json.loads(body)

    def close(self) -> None:
        self.connection.close()


@pytest.fixture
def keep_alive(live: LiveServer) -> Iterator[KeepAlive]:
    connection = KeepAlive(live)
    yield connection
    connection.close()


def _assert_refused_or_read(status: int, body: dict[str, Any]) -> None:
    assert status in (200, 422), (status, body)
    if status == 422:
        assert body["code"] == "invalid_request"
        assert body["details"]["errors"] == INVALID
    else:
        assert set(body) == {"items", "next_cursor"}


# JSON values of every shape, strings with lone surrogates included (json.dumps writes them as \udxxx)
_ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=20)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_ANY_TEXT, inner, max_size=4),
    max_leaves=12,
)
_CURSORS = st.one_of(
    st.binary(max_size=64).map(_b64),  # base64 of arbitrary bytes (mostly not UTF-8, not JSON)
    _JSON.map(lambda value: _b64(json.dumps(value).encode("ascii"))),  # base64 of arbitrary JSON
    st.text(max_size=40),  # not base64 at all
    # nesting as deep as a request head holds (16 KiB: a longer one is 431 before any parsing)
    st.integers(min_value=1, max_value=5_000).map(lambda depth: _b64(b"[" * depth + b"]" * depth)),
)


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    # the server is reset once for the test; listings only read, so the examples share it
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(cursor=_CURSORS, listing=st.sampled_from(LISTINGS))
def test_any_cursor_on_any_listing_is_200_or_422_and_the_connection_survives(
    keep_alive: KeepAlive, cursor: str, listing: str
) -> None:
    status, body = keep_alive.get(listing, cursor)
    _assert_refused_or_read(status, body)


NASTY = {
    "lone surrogate": _b64(json.dumps(["\ud800", 1]).encode("ascii")),
    "nested 5000 deep": _b64(b"[" * 5000 + b"]" * 5000),
    "nested objects": _b64(b'{"a":' * 1500 + b"1" + b"}" * 1500),  # within the 16 KiB head
    "not UTF-8": _b64(b"\xff\xfe\x00\x01"),
    "UTF-16 JSON": _b64(json.dumps(5).encode("utf-16")),
    "junk between base64": "MT!!IzNA",
    "non-ASCII": "Mté",
    "padded": _b64(b"5") + "==",
    "another spelling": _b64(b" 5"),
    "a float": _b64(b"5.0"),
    "huge": _b64(b"1" * 5000),
    "wrong types": _b64(json.dumps({"seq": 1}).encode()),
}


@pytest.mark.parametrize("listing", LISTINGS)
@pytest.mark.parametrize("cursor", list(NASTY.values()), ids=list(NASTY))
def test_a_cursor_the_fake_did_not_issue_is_422_on_the_same_connection(
    keep_alive: KeepAlive, listing: str, cursor: str
) -> None:
    status, body = keep_alive.get(listing, cursor)
    assert (status, body["details"]["errors"]) == (422, INVALID)


@pytest.mark.anyio
async def test_issued_cursors_still_page_every_listing(live, live_admin) -> None:
    async with live.client() as api:
        for content in ("We use PostgreSQL 16.", "We deploy on Fridays.", "Answers are short."):
            await approved_memory(api, live_admin, content)
    for listing, params in (
        ("/_fake/proposals", {"limit": "1"}),
        ("/_fake/memories", {"limit": "1"}),
    ):
        first = (await live_admin.http.get(listing, params=params)).json()
        params["cursor"] = first["next_cursor"]
        second = (await live_admin.http.get(listing, params=params)).json()
        assert first["items"] != second["items"]
        assert second["next_cursor"] is not None


def test_the_decoder_reads_back_exactly_what_the_encoder_wrote() -> None:
    assert cursors.decode_seq(cursors.encode(42)) == 42
    assert cursors.decode_pair(cursors.encode(("mem_é", 3))) == ("mem_é", 3)
    assert cursors.decode_seq(None) == 0
    assert cursors.decode_pair(None) is None
    # never issued (the last page's next_cursor is null): sent back, it would restart the listing
    for empty in (cursors.decode_seq, cursors.decode_pair):
        with pytest.raises(ProblemError):
            empty("")
    for forged in (cursors.encode(("mem_x", 3)), cursors.encode(-1), cursors.encode(2**63)):
        with pytest.raises(ProblemError):
            cursors.decode_seq(forged)
    with pytest.raises(ProblemError):
        cursors.decode_pair(cursors.encode(7))


@pytest.mark.anyio
@pytest.mark.parametrize("end", ["reset", "deletion"])
async def test_a_server_admin_paging_past_another_tenants_reset_misses_no_new_row(
    fake, api, admin, end
) -> None:
    """A tenant's reset deletes the newest proposals, journal and ledger rows; the rows made after
    it are numbered above them, so a cursor issued before the reset still reaches every new row."""
    other = await admin.create_tenant("tenant-reset")
    await propose(api, proposal_body("Before the other tenant's rows."))
    async with fake.client(other["credential"]["token"]) as theirs:
        for n in range(2):
            await propose(theirs, proposal_body(f"The other tenant's plan {n}."))
    # a server admin's place in each listing: at the other tenant's newest row
    newest = {
        listing: max(_seqs(fake, table))
        for listing, table in (("/proposals", "proposals"), ("/requests", "journal"), ("/ledger", "ledger"))
    }
    if end == "reset":
        async with fake.client(other["admin_token"]) as tenant_admin:
            assert (await tenant_admin.post("/_fake/reset")).status_code == 200  # its rows go
    else:
        await admin.delete_tenant("tenant-reset")
    made = (await propose(api, proposal_body("After the other tenant's reset."))).json()["proposal"]
    missed = [  # the new proposal, its request and its charge, each after its cursor
        listing
        for listing, after in newest.items()
        if not (await admin.call("GET", listing, cursor=cursors.encode(after)))["items"]
    ]
    assert missed == []
    page = await admin.call("GET", "/proposals", cursor=cursors.encode(newest["/proposals"]))
    assert [item["id"] for item in page["items"]] == [made["id"]]


def _seqs(fake: Any, table: str) -> list[int]:
    return [row[0] for row in fake.fake.db.conn.execute(f"SELECT seq FROM {table}")]  # noqa: S608 - a constant


@pytest.mark.anyio
async def test_a_tenant_made_after_the_newest_one_was_deleted_is_on_the_page_after_the_cursor(
    fake, admin
) -> None:
    await admin.create_tenant("tenant-first")
    [(newest,)] = fake.fake.db.conn.execute("SELECT max(rowid) FROM tenants")
    after = cursors.encode(newest)  # a page that ended at the newest tenant
    await admin.delete_tenant("tenant-first")
    await admin.create_tenant("tenant-second")
    page = await admin.call("GET", "/tenants", cursor=after)
    assert [t["tenant"] for t in page["items"]] == ["tenant-second"]
