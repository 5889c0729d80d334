"""Issue 14: the review console over HTTP (SPEC 3.10) — sessions, CSRF and Origin, every page and
action through the same domain calls as the control API, stored text always shown as text."""

from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
from collections.abc import AsyncIterator

import httpx
import pytest

from fake_lucy.domain import review, sessions
from fake_lucy.testing import AdminError, FakeAdmin, InProcessFake
from tests.helpers import WORKSPACE, proposal_body, propose

pytestmark = pytest.mark.anyio

CONSOLE = "/_fake/console"
ORIGIN = "http://127.0.0.1:8787"
PAGES = ("/", "/proposals", "/memories", "/requests", "/credits", "/settings", "/reset")


@pytest.fixture
async def browser(fake: InProcessFake) -> AsyncIterator[httpx.AsyncClient]:
    """A client with no token that keeps cookies, as a browser does."""
    async with fake.client(None) as client:
        yield client


async def log_in(browser: httpx.AsyncClient, token: str = InProcessFake.admin_token) -> httpx.Response:
    return await browser.post(CONSOLE + "/login", data={"token": token}, headers={"Origin": ORIGIN})


def csrf_of(html: str) -> str:
    match = re.search(r'name="csrf_token" value="([0-9a-f]{64})"', html)
    assert match is not None, "the page carries the session's CSRF token"
    return match.group(1)


async def act(browser: httpx.AsyncClient, path: str, csrf: str, **fields: str) -> httpx.Response:
    return await browser.post(
        CONSOLE + path, data={"csrf_token": csrf, "next": CONSOLE + "/", **fields}, headers={"Origin": ORIGIN}
    )


@pytest.fixture
async def logged_in(browser: httpx.AsyncClient) -> str:
    """Logs ``browser`` in; returns the session's CSRF token."""
    assert (await log_in(browser)).status_code == 303
    return csrf_of((await browser.get(CONSOLE + "/")).text)


async def test_without_a_session_every_page_is_the_login_page_and_nothing_is_shown(
    fake: InProcessFake, browser: httpx.AsyncClient, api: httpx.AsyncClient
) -> None:
    await propose(api, proposal_body("A secret plan."))
    for path in PAGES:
        response = await browser.get(CONSOLE + path)
        assert response.status_code == 303, path
        assert response.headers["location"] == CONSOLE + "/login"
    login = await browser.get(CONSOLE + "/login")
    assert login.status_code == 200
    assert "A secret plan" not in login.text
    assert (
        await browser.get(CONSOLE + "/events", headers={"Accept": "text/event-stream"})
    ).status_code == 401
    assert (await browser.get(CONSOLE)).headers["location"] == CONSOLE + "/"


async def test_logging_in_sets_an_httponly_strict_cookie_and_keeps_the_token_out_of_every_answer(
    fake: InProcessFake, browser: httpx.AsyncClient
) -> None:
    response = await log_in(browser)
    assert response.status_code == 303
    assert response.headers["location"] == CONSOLE + "/"
    cookie = response.headers["set-cookie"]
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert "Path=/_fake/console;" in cookie + ";"
    page = await browser.get(CONSOLE + "/")
    assert page.status_code == 200
    for answer in (response, page):
        assert fake.admin_token not in answer.text
        assert fake.admin_token not in str(answer.headers)
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"


async def test_a_session_is_stored_only_as_a_digest_in_the_database(
    fake: InProcessFake, browser: httpx.AsyncClient
) -> None:
    await log_in(browser)
    session_id = browser.cookies["fake_lucy_console"]
    stored = fake.fake.db.conn.execute("SELECT id_sha256 FROM console_sessions").fetchall()
    assert session_id not in {row[0] for row in stored}
    assert sessions.resume(fake.fake.db.conn, session_id, fake.fake.console_admin) is not None


async def test_a_wrong_token_or_a_login_from_another_origin_starts_no_session(
    fake: InProcessFake, browser: httpx.AsyncClient
) -> None:
    wrong = await log_in(browser, "not-the-token")
    assert wrong.status_code == 401
    assert "That is not an admin token." in wrong.text
    assert "not-the-token" not in wrong.text
    foreign = await browser.post(
        CONSOLE + "/login", data={"token": fake.admin_token}, headers={"Origin": "http://evil.test"}
    )
    assert foreign.status_code == 403
    assert "set-cookie" not in wrong.headers
    assert "set-cookie" not in foreign.headers


async def test_a_one_time_link_works_once_and_not_after_ten_minutes(
    fake: InProcessFake, browser: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fake.fake.db.write() as conn:
        token = sessions.create_link(conn, fake.admin_token)
        late = sessions.create_link(conn, fake.admin_token)
    first = await browser.get(f"{CONSOLE}/login/{token}")
    assert first.status_code == 200
    assert 'http-equiv="refresh"' in first.text
    assert first.headers["referrer-policy"] == "no-referrer"
    assert (await browser.get(CONSOLE + "/")).status_code == 200
    async with fake.client(None) as other:
        assert (await other.get(f"{CONSOLE}/login/{token}")).status_code == 403
        real = sessions._now_us
        monkeypatch.setattr(sessions, "_now_us", lambda: real() + (sessions.LINK_SECONDS + 1) * 10**6)
        assert (await other.get(f"{CONSOLE}/login/{late}")).status_code == 403


async def test_a_session_idle_for_twelve_hours_is_over(
    browser: httpx.AsyncClient, logged_in: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sessions._now_us
    monkeypatch.setattr(sessions, "_now_us", lambda: real() + (sessions.IDLE_SECONDS - 60) * 10**6)
    assert (await browser.get(CONSOLE + "/")).status_code == 200  # used: the idle time starts again
    monkeypatch.setattr(sessions, "_now_us", lambda: real() + (2 * sessions.IDLE_SECONDS - 120) * 10**6)
    assert (await browser.get(CONSOLE + "/")).status_code == 200
    monkeypatch.setattr(sessions, "_now_us", lambda: real() + (3 * sessions.IDLE_SECONDS) * 10**6)
    assert (await browser.get(CONSOLE + "/")).status_code == 303


async def test_a_state_change_without_csrf_token_or_same_origin_is_403_and_changes_nothing(
    fake: InProcessFake, browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    created = (await propose(api)).json()["proposal"]
    path = f"{CONSOLE}/proposals/{created['id']}/approve"
    attempts = [
        ({"next": CONSOLE + "/"}, {"Origin": ORIGIN}),  # no token
        ({"csrf_token": "0" * 64}, {"Origin": ORIGIN}),  # a wrong token
        ({"csrf_token": logged_in}, {"Origin": "http://evil.test"}),  # another origin
        ({"csrf_token": logged_in}, {}),  # no Origin at all
        ({"csrf_token": logged_in}, {"Origin": "null"}),
    ]
    for data, headers in attempts:
        response = await browser.post(path, data=data, headers=headers)
        assert response.status_code == 403, (data, headers)
        assert "Refused" in response.text
    as_json = await browser.post(path, json={"csrf_token": logged_in}, headers={"Origin": ORIGIN})
    assert as_json.status_code == 403
    async with fake.client(None) as stranger:  # no session, the right token and origin
        response = await stranger.post(path, data={"csrf_token": logged_in}, headers={"Origin": ORIGIN})
        assert response.status_code == 403
    assert (await admin.proposals())["items"][0]["status"] == "pending"


async def test_a_refused_session_or_origin_is_403_whatever_the_body_and_reset_goes_to_login(
    fake: InProcessFake, browser: httpx.AsyncClient, api: httpx.AsyncClient, logged_in: str
) -> None:
    """The session and the origin are checked before the form is read: an oversized or unreadable
    body is refused as the request is (403), not answered 400; a reset or logout whose session
    ended sends the page to the login page, as the other actions do."""
    created = (await propose(api)).json()["proposal"]
    path = f"{CONSOLE}/proposals/{created['id']}/approve"
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for body in (b"csrf_token=" + b"a" * 20_000, b"\xff\xfe"):
        async with fake.client(None) as stranger:  # no session
            response = await stranger.post(path, content=body, headers={**form, "Origin": ORIGIN})
            assert response.status_code == 403
        foreign = await browser.post(path, content=body, headers={**form, "Origin": "http://evil.test"})
        assert foreign.status_code == 403
    async with fake.client(None) as stranger:
        ended = await stranger.post(CONSOLE + "/reset", data={"confirm": "reset"}, headers={"Origin": ORIGIN})
        assert ended.status_code == 403
        assert "data-login" in ended.text.split("<main", 1)[1]
        # a logout whose session ended already (another tab's logout): out, where the reviewer wanted
        # to be, and the stale cookie goes; nothing changed on the server, so no token is asked for
        stranger.cookies.set("fake_lucy_console", "ended-session", path=CONSOLE)
        out = await stranger.post(CONSOLE + "/logout", data={}, headers={"Origin": ORIGIN})
        assert (out.status_code, out.headers["location"]) == (303, CONSOLE + "/login")
        assert 'fake_lucy_console=""' in out.headers["set-cookie"]
        # another site's form is refused as every state change is: it cannot clear the cookie
        forged = await stranger.post(CONSOLE + "/logout", data={}, headers={"Origin": "http://evil.test"})
        assert forged.status_code == 403
        assert "set-cookie" not in forged.headers


async def test_approve_reject_and_expire_are_the_control_api_decisions(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    ids = [(await propose(api, proposal_body(f"Fact {n}."))).json()["proposal"]["id"] for n in range(3)]
    assert (await act(browser, f"/proposals/{ids[0]}/approve", logged_in)).status_code == 303
    rejected = await act(browser, f"/proposals/{ids[1]}/reject", logged_in, reason="duplicate of fact 0")
    assert rejected.headers["location"] == CONSOLE + "/"
    assert (await act(browser, f"/proposals/{ids[2]}/expire", logged_in)).status_code == 303
    by_id = {p["id"]: p for p in (await admin.proposals())["items"]}
    assert by_id[ids[0]]["status"] == "approved"
    assert (by_id[ids[1]]["status"], by_id[ids[1]]["reason_detail"]) == ("rejected", "duplicate of fact 0")
    assert by_id[ids[2]]["status"] == "expired"
    again = await act(browser, f"/proposals/{ids[0]}/approve", logged_in)
    assert again.status_code == 409
    assert "cannot be approved" in again.text
    unknown = await act(browser, "/proposals/prop_unknown/approve", logged_in)
    assert unknown.status_code == 404


async def test_a_redirect_after_an_action_stays_inside_the_console(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, logged_in: str
) -> None:
    created = (await propose(api)).json()["proposal"]
    response = await browser.post(
        f"{CONSOLE}/proposals/{created['id']}/reject",
        data={"csrf_token": logged_in, "next": "https://evil.test/"},
        headers={"Origin": ORIGIN},
    )
    assert response.headers["location"] == CONSOLE + "/"


async def test_memories_clock_faults_policy_and_reset_from_the_console(
    fake: InProcessFake, browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    proposal = (await propose(api)).json()["proposal"]
    memory = (await admin.approve(proposal["id"]))["memory"]
    asked = await act(browser, f"/memories/{memory['id']}/delete", logged_in)  # no confirmed=yes
    assert asked.status_code == 200
    assert f"Delete memory {memory['id']}? It is no longer recalled" in asked.text
    assert 'name="confirmed" value="yes"' in asked.text
    assert (await admin.memories(include_history=False))["items"][0]["status"] == "active"
    deleted = await act(browser, f"/memories/{memory['id']}/delete", logged_in, confirmed="yes")
    assert deleted.status_code == 303
    assert (await admin.memories(include_history=False))["items"][0]["status"] == "deleted"
    gone = await act(browser, f"/memories/{memory['id']}/delete", logged_in)  # asked of a deleted one
    assert gone.status_code == 409
    assert (await act(browser, f"/memories/{memory['id']}/restore", logged_in)).status_code == 303
    assert (await admin.memories(include_history=False))["items"][0]["status"] == "active"
    before = await admin.clock()
    assert (await act(browser, "/clock/freeze", logged_in, frozen="true")).status_code == 303
    assert (await act(browser, "/clock/advance", logged_in, by="2h")).status_code == 303
    after = await admin.clock()
    assert after["frozen"] is True
    assert after["now"][:13] > before["now"][:13]
    for unreadable in ("soon", "1e3", "1_000s", "\u0663s", "5 d", "nan", "-1h"):  # \u0663: Arabic-Indic 3
        refused = await act(browser, "/clock/advance", logged_in, by=unreadable)
        assert refused.status_code == 400, unreadable
        assert "a duration is a number with s, m, h or d" in refused.text
    assert (await act(browser, "/clock/freeze", logged_in, frozen="maybe")).status_code == 400
    assert (await admin.clock())["frozen"] is True  # neither taken as false
    too_far = await act(browser, "/clock/advance", logged_in, by="1000000000")
    assert too_far.status_code == 400
    assert "under 1,000,000,000" in too_far.text
    assert "must be positive" not in too_far.text
    assert (
        await act(browser, "/faults", logged_in, operation="propose", status="503", count="2")
    ).status_code == 303
    (fault,) = await admin.faults()
    assert (fault["operation"], fault["status"], fault["remaining"]) == ("propose", 503, 2)
    refused = await act(browser, "/faults", logged_in, operation="propose", status="418")
    assert refused.status_code == 422
    assert (await act(browser, "/faults/clear", logged_in)).status_code == 303
    assert await admin.faults() == []
    assert (
        await act(browser, "/tenants/tenant_dev/policy", logged_in, auto_approve="fact,decision")
    ).status_code == 303
    assert (await admin.policy())["auto_approve"] == ["fact", "decision"]
    assert (await act(browser, "/tenants/tenant_dev/policy", logged_in, auto_approve=" ")).status_code == 303
    assert (await admin.policy())["auto_approve"] == "off"  # an emptied box: no auto-approval, shown as off
    for typed, meant in (("ALL", "all"), (" Decision, FACT,decision ", ["decision", "fact"]), ("Off", "off")):
        assert (
            await act(browser, "/tenants/tenant_dev/policy", logged_in, auto_approve=typed)
        ).status_code == 303
        assert (await admin.policy())["auto_approve"] == meant, typed
    alone = await act(browser, "/tenants/tenant_dev/policy", logged_in, auto_approve="off, decision")
    assert (alone.status_code, "off and all stand alone" in alone.text) == (400, True)
    for typed, said in (("maybe", "maybe"), ("none", "none"), ("fact,gossip", "gossip")):
        refused = await act(browser, "/tenants/tenant_dev/policy", logged_in, auto_approve=typed)
        assert refused.status_code == 400, typed
        assert f"auto-approve: {said} is not off, all or a kind (preference, identity" in refused.text
    assert (await act(browser, "/tenants/nobody/policy", logged_in, auto_approve="all")).status_code == 404
    unconfirmed = await act(browser, "/reset", logged_in, confirm="")
    assert unconfirmed.status_code == 400
    assert (await admin.memories())["items"] != []
    assert (await act(browser, "/reset", logged_in, confirm="reset")).status_code == 303
    assert (await admin.memories())["items"] == []
    assert (await browser.get(CONSOLE + "/")).status_code == 200  # the session outlives the reset


async def test_a_tenant_named_with_dots_only_gets_its_own_policy_form(
    browser: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    """``..`` is a valid tenant id: in a form's path it is ``%2E%2E``, never a dot segment that a
    browser would resolve to another page."""
    await admin.create_tenant("..")
    page = (await browser.get(CONSOLE + "/settings")).text
    assert f'action="{CONSOLE}/tenants/%2E%2E/policy"' in page
    assert "/tenants/../policy" not in page
    changed = await act(browser, "/tenants/%2E%2E/policy", logged_in, auto_approve="all")
    assert changed.status_code == 303
    assert (await admin.policy(".."))["auto_approve"] == "all"
    assert (await admin.policy())["auto_approve"] == "off"


async def test_logout_needs_the_csrf_token_and_ends_the_session(
    browser: httpx.AsyncClient, logged_in: str
) -> None:
    refused = await browser.post(CONSOLE + "/logout", data={}, headers={"Origin": ORIGIN})
    assert refused.status_code == 403
    assert (await browser.get(CONSOLE + "/")).status_code == 200
    done = await act(browser, "/logout", logged_in)
    assert done.status_code == 303
    assert done.headers["location"] == CONSOLE + "/login"
    assert (await browser.get(CONSOLE + "/")).status_code == 303


SNEAKY = '<img src=x onerror=alert(1)>\u200b"\u202e\x1b[31m'


async def test_stored_text_is_escaped_and_invisible_characters_are_marked_on_every_page(
    fake: InProcessFake, browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    pending = (await propose(api, proposal_body(SNEAKY, justification=SNEAKY))).json()["proposal"]
    approved = (await propose(api, proposal_body(SNEAKY + " kept"))).json()["proposal"]
    await admin.approve(approved["id"])
    marked = "&lt;img src=x onerror=alert(1)&gt;"
    for path in ("/", "/proposals", "/memories?history=true"):
        html = (await browser.get(CONSOLE + path)).text
        assert "<img" not in html, path
        assert marked in html, path
        assert "⟨U+200B⟩" in html
        assert "⟨U+202E⟩" in html
        assert "⟨U+001B⟩" in html
        for raw in ("\u200b", "\u202e", "\x1b"):
            assert raw not in html, (path, raw)
    assert pending["id"] in (await browser.get(CONSOLE + "/")).text


async def test_the_requests_page_shows_one_line_per_retry_chain_with_its_statuses(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    await admin.add_fault("propose", 503)
    body = proposal_body("Retried once.")
    assert (await propose(api, body, key="chain-key-1")).status_code == 503
    assert (
        await propose(api, body, key="chain-key-1", headers={"Lucy-Retry-Attempt": "1"})
    ).status_code == 201
    assert (
        await propose(api, body, key="chain-key-1", headers={"Lucy-Retry-Attempt": "2"})
    ).status_code == 201
    html = (await browser.get(CONSOLE + "/requests")).text
    rows = [row for row in re.findall(r"<tr[ >].*?</tr>", html, re.DOTALL) if "chain-key-1" in row]
    assert len(rows) == 1
    (row,) = rows
    assert re.search(r"503</span> → <span[^>]*>201</span> → <span[^>]*>201", row)
    assert "1 replayed" in row
    assert "fault flt_" in row


async def test_the_requests_page_marks_the_requests_a_finding_names(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    """SPEC 3.10: findings marked. A recall sent again after a 503 is recall_retried."""
    await admin.add_fault("recall", 503)
    for _ in range(2):
        await api.post("/api/agent-memory/v1/recall", json={"query": "deploys"})
    [finding] = await admin.findings()
    assert finding["code"] == "recall_retried"
    html = (await browser.get(CONSOLE + "/requests")).text
    rows = [row for row in re.findall(r"<tr[ >].*?</tr>", html, re.DOTALL) if "recall" in row]
    assert len(rows) == 2
    assert all("finding recall_retried" in row for row in rows)


async def test_the_requests_page_marks_a_dropped_connection(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    """A recall whose connection the fake closed after the commit (``drop_connection``): its line
    says "1 dropped", its status is "dropped" (there was none), and it is marked as a fault."""
    fault = await admin.add_fault("recall", 503, phase="after_commit", drop_connection=True)
    with pytest.raises(httpx.RemoteProtocolError):
        await api.post("/api/agent-memory/v1/recall", json={"query": "deploys"})
    assert (await api.post("/api/agent-memory/v1/recall", json={"query": "other"})).status_code == 200
    html = (await browser.get(CONSOLE + "/requests")).text
    rows = [row for row in re.findall(r"<tr[ >].*?</tr>", html, re.DOTALL) if "<td>recall</td>" in row]
    assert len(rows) == 2
    [dropped] = [row for row in rows if fault["fault_id"] in row]
    [answered] = [row for row in rows if row is not dropped]
    assert '<span class="mark drop">1 dropped</span>' in dropped
    assert '<span class="code code-x">dropped</span>' in dropped
    assert 'class="faulted"' in dropped
    assert "dropped" not in answered
    assert '<span class="code code-2">200</span>' in answered


async def test_the_queue_shows_each_proposals_kind_topic_importance_and_source_oldest_first(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    """SPEC 3.10: the queue, oldest first, each card with the proposal's kind, topic, importance and
    source (the ``Lucy-Client-Name`` it came with; none is "–"). A minute of the fake's clock
    between the proposals."""
    await admin.set_clock(frozen=True)
    made = [
        (
            proposal_body("Deploys wait for the window.", kind="rule", topic="deploy-window", importance=8),
            "ci-bot",
        ),
        (proposal_body("Reviewers prefer small diffs.", kind="preference", importance=2), None),
        (proposal_body("The API gateway is Envoy.", kind="fact", topic="gateway"), "claude-code"),
    ]
    ids = []
    for body, client_name in made:
        headers = {} if client_name is None else {"Lucy-Client-Name": client_name}
        response = await propose(api, body, headers=headers)
        assert response.status_code == 201, response.text
        ids.append(response.json()["proposal"]["id"])
        await admin.advance_clock(60)
    html = (await browser.get(CONSOLE + "/")).text
    cards = re.findall(r'<article class="proposal" id="([^"]+)".*?</article>', html, re.DOTALL)
    assert cards == ids  # oldest first
    shown = []
    for card in re.findall(r'<article class="proposal".*?</article>', html, re.DOTALL):
        kind = re.search(r'<span class="kind">([^<]*)</span>', card)
        topic = re.search(r'<span class="topic">topic <code dir="auto">([^<]*)</code></span>', card)
        importance = re.search(r'<span class="importance">importance (\d+)</span>', card)
        source = re.search(r"<dt>source</dt><dd>([^<]*)</dd>", card)
        assert kind, card
        assert importance, card
        assert source, card
        shown.append((kind[1], topic[1] if topic else None, int(importance[1]), source[1]))
    assert shown == [
        ("rule", "deploy-window", 8, "ci-bot"),
        ("preference", None, 2, "–"),
        ("fact", "gateway", 5, "claude-code"),
    ]


async def test_the_credits_page_draws_each_balance_as_a_chart(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    for _ in range(3):
        await propose(api)
    await admin.set_balance("acct_dev", 500)
    html = (await browser.get(CONSOLE + "/credits")).text
    assert '<svg class="chart"' in html
    assert 'aria-label="balance from 999 to 500"' in html
    assert "admin_set" in html


async def test_an_account_with_one_ledger_row_or_none_still_gets_its_chart(
    browser: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    """A polyline of one point draws nothing: one balance is a flat line."""
    await admin.create_tenant("tenant-quiet", credits=40)  # no ledger row yet
    html = (await browser.get(CONSOLE + "/credits")).text
    assert html.count('<svg class="chart"') == 2  # the dev account and the quiet one
    assert 'aria-label="balance from 40 to 40"' in html
    assert re.search(r'points="0\.0,[0-9.]+ 240\.0,[0-9.]+"', html)  # two points: a line


async def test_pages_take_their_paging_and_filters_and_refuse_bad_ones(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, logged_in: str
) -> None:
    for n in range(3):
        await propose(api, proposal_body(f"Fact number {n}."))
    everything = (await browser.get(CONSOLE + "/proposals?status=pending")).text
    assert all(f"Fact number {n}." in everything for n in range(3))
    assert (
        "No proposals with status approved"
        in (await browser.get(CONSOLE + "/proposals?status=approved")).text
    )
    for bad in ("/proposals?status=maybe", "/?after=x", "/memories?after=nope"):
        assert (await browser.get(CONSOLE + bad)).status_code == 400, bad
    # the live updates' stream takes the query the control API's stream takes, and refuses the rest
    # as it does (a misspelt after is no stream from the beginning)
    for bad in ("/events?last_event_id=5", "/events?after=1&after=2", "/events?after=x"):
        refused = await browser.get(CONSOLE + bad, headers={"Accept": "text/event-stream"})
        assert (refused.status_code, refused.json()["code"]) == (422, "invalid_request"), bad


async def test_a_server_admin_sees_whose_each_proposal_and_memory_is_a_tenant_admin_needs_not(
    fake: InProcessFake, browser: httpx.AsyncClient, admin: FakeAdmin, api: httpx.AsyncClient
) -> None:
    made = await admin.create_tenant("tenant-other")
    async with fake.client(made["credential"]["token"]) as other_api:
        other = (await propose(other_api, proposal_body("The other tenant plan."))).json()["proposal"]
    await admin.approve(other["id"])
    await propose(api, proposal_body("The dev tenant plan."))
    assert (await log_in(browser)).status_code == 303
    queue = (await browser.get(CONSOLE + "/")).text
    assert "The dev tenant plan." in queue
    assert "<dt>tenant</dt><dd>tenant_dev</dd>" in queue
    for path, tenant in (
        ("/proposals", "tenant-other"),
        ("/proposals", "tenant_dev"),
        ("/memories", "tenant-other"),
    ):
        assert f"<td>{tenant}</td>" in (await browser.get(CONSOLE + path)).text, (path, tenant)
    assert (await log_in(browser, made["admin_token"])).status_code == 303
    for path in ("/", "/proposals", "/memories"):  # its own tenant's only: no column for it
        page = (await browser.get(CONSOLE + path)).text
        assert "<th>tenant</th>" not in page, path
        assert "<dt>tenant</dt>" not in page, path


async def test_a_tenant_admin_logs_in_and_sees_and_changes_only_its_tenant(
    fake: InProcessFake, browser: httpx.AsyncClient, admin: FakeAdmin, api: httpx.AsyncClient
) -> None:
    """SPEC 3.10: the login takes a tenant's admin token too, and its session sees only its tenant."""
    frozen = (await admin.set_clock(frozen=True))["now"]
    made = await admin.create_tenant("tenant-review")
    theirs = (await propose(api, proposal_body("The dev tenant plan."))).json()["proposal"]["id"]
    async with fake.client(made["credential"]["token"]) as tenant_api:
        mine = (await propose(tenant_api, proposal_body("The review tenant plan."))).json()["proposal"]["id"]
    assert (await log_in(browser, made["admin_token"])).status_code == 303
    queue = await browser.get(CONSOLE + "/")
    assert "The review tenant plan." in queue.text
    assert "tenant tenant-review" in queue.text
    for path in PAGES:  # no page shows the other tenant's proposal or requests
        assert "The dev tenant" not in (await browser.get(CONSOLE + path)).text, path
    csrf = csrf_of(queue.text)
    refused = await act(browser, f"/proposals/{theirs}/approve", csrf)
    assert refused.status_code == 404
    assert (await act(browser, f"/proposals/{mine}/approve", csrf)).status_code == 303
    assert (await act(browser, "/clock/advance", csrf, by="3d")).status_code == 303
    assert (await act(browser, "/faults", csrf, operation="recall", status="503")).status_code == 303
    assert (await api.post("/api/agent-memory/v1/recall", json={"query": "plan"})).status_code == 200
    assert (await act(browser, "/reset", csrf, confirm="reset")).status_code == 303
    assert {p["id"]: p["status"] for p in (await admin.proposals())["items"]}[theirs] == "pending"
    assert (await admin.proposals(tenant="tenant-review"))["items"] == []  # reset to its start
    assert (await admin.clock())["now"] == frozen  # the tenant's 3 days moved its clock alone
    await admin.delete_tenant("tenant-review")  # its session ends with it
    assert (await browser.get(CONSOLE + "/")).headers["location"] == CONSOLE + "/login"


@pytest.mark.parametrize("change", ["server reset", "restore of the whole state"])
async def test_a_tenant_admins_session_ends_with_its_tenant_when_the_whole_state_is_replaced(
    fake: InProcessFake, browser: httpx.AsyncClient, admin: FakeAdmin, change: str
) -> None:
    """A server reset or a whole-state restore removes the tenants made since: their admins'
    sessions end as a deletion ends them, so none reaches a tenant made again under the same id."""
    before = await admin.call("GET", "/snapshot")  # the dev seed's state: no tenant-review
    made = await admin.create_tenant("tenant-review")
    assert (await log_in(browser, made["admin_token"])).status_code == 303
    old_csrf = csrf_of((await browser.get(CONSOLE + "/")).text)
    if change == "server reset":
        await admin.reset()
    else:
        await admin.call("PUT", "/snapshot", before)
    again = await admin.create_tenant("tenant-review")
    async with fake.client(again["credential"]["token"]) as tenant_api:
        theirs = (await propose(tenant_api, proposal_body("The new owner's plan."))).json()["proposal"]["id"]
    page = await browser.get(CONSOLE + "/")
    assert page.status_code == 303
    assert page.headers["location"] == CONSOLE + "/login"
    assert (await act(browser, f"/proposals/{theirs}/approve", old_csrf)).status_code in (303, 403)
    assert (await admin.proposals(tenant="tenant-review"))["items"][0]["status"] == "pending"


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])  # noqa: S104 - a setting, nothing binds
async def test_sessions_and_login_links_end_when_the_fake_starts_again_with_another_admin_token(
    tmp_path, host: str
) -> None:
    """Console sessions and links live in the database; the server admin token is the process's.
    A fake started again on the file with another admin token logs out whoever logged in with the
    old one and refuses the old links, or the old token's holder would keep full rights through
    the console after losing them on the control API."""
    database = tmp_path / "fake-lucy.sqlite3"
    first_token, second_token = "first-admin-token-7c1d9e", "second-admin-token-2b8f4a"
    first = InProcessFake(database, admin_token=first_token)
    first.admin_token = first_token
    try:
        async with first.client(None) as old:
            assert (await log_in(old, first_token)).status_code == 303
            cookie = old.cookies["fake_lucy_console"]
            with first.fake.db.write() as conn:
                link = sessions.create_link(conn, first_token)
                kept_link = sessions.create_link(conn, first_token)
            assert (await old.get(CONSOLE + "/")).status_code == 200
    finally:
        await first.aclose()
    same = InProcessFake(database, admin_token=first_token, host=host)
    try:
        async with same.client(None, cookies={"fake_lucy_console": cookie}) as old:
            # the same token: the session lasts (off loopback too: a token of one's own is accepted)
            assert (await old.get(CONSOLE + "/")).status_code == 200
    finally:
        await same.aclose()
    second = InProcessFake(database, admin_token=second_token)
    second.admin_token = second_token
    try:
        async with second.client(None, cookies={"fake_lucy_console": cookie}) as old:
            page = await old.get(CONSOLE + "/")
            assert page.status_code == 303
            assert page.headers["location"] == CONSOLE + "/login"
            assert (await old.get(f"{CONSOLE}/login/{link}")).status_code == 403
            assert (await log_in(old, first_token)).status_code == 401
        async with second.client(None) as new:
            assert (await log_in(new, second_token)).status_code == 303
            assert (await new.get(CONSOLE + "/")).status_code == 200
        assert tuple(second.fake.db.conn.execute("SELECT count(*) FROM console_sessions").fetchone()) == (1,)
    finally:
        await second.aclose()
    # the first token again: its remaining link works, its ended session stays ended
    third = InProcessFake(database, admin_token=first_token)
    try:
        async with third.client(None) as again:
            assert (await again.get(f"{CONSOLE}/login/{kept_link}")).status_code == 200
            assert (await again.get(CONSOLE + "/")).status_code == 200
        async with third.client(None, cookies={"fake_lucy_console": cookie}) as old:
            assert (await old.get(CONSOLE + "/")).status_code == 303
    finally:
        await third.aclose()


async def test_the_built_in_admin_tokens_session_ends_when_the_fake_leaves_loopback(tmp_path) -> None:
    """The built-in admin token is refused off loopback (401 on the control API and the login
    form): a console session it started on loopback is refused there too."""
    database = tmp_path / "fake-lucy.sqlite3"
    loopback = InProcessFake(database)
    try:
        async with loopback.client(None) as browser:
            assert (await log_in(browser)).status_code == 303
            cookie = browser.cookies["fake_lucy_console"]
    finally:
        await loopback.aclose()
    public = InProcessFake(database, host="0.0.0.0")  # noqa: S104 - a setting, nothing binds
    try:
        async with public.client(None, cookies={"fake_lucy_console": cookie}) as browser:
            page = await browser.get(CONSOLE + "/")
            assert page.status_code == 303
            assert page.headers["location"] == CONSOLE + "/login"
    finally:
        await public.aclose()


async def test_a_tenant_admins_session_lasts_only_while_its_token_is_the_tenants_admin_token(
    fake: InProcessFake, browser: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    """A tenant whose admin token changed under the same id (a tenant snapshot brought back by
    another admin, written into the file) no longer lets the old token's session in."""
    made = await admin.create_tenant("tenant-review")
    assert (await log_in(browser, made["admin_token"])).status_code == 303
    assert (await browser.get(CONSOLE + "/")).status_code == 200
    with fake.fake.db.write() as conn:
        conn.execute(
            "UPDATE tenants SET admin_token_sha256 = ? WHERE id = 'tenant-review'",
            (hashlib.sha256(b"another-admins-token").hexdigest(),),
        )
    page = await browser.get(CONSOLE + "/")
    assert page.status_code == 303
    assert page.headers["location"] == CONSOLE + "/login"


async def test_the_queue_shows_a_replaced_version_of_the_proposals_own_tenant_only(
    fake: InProcessFake, browser: httpx.AsyncClient, admin: FakeAdmin, api: httpx.AsyncClient
) -> None:
    """A pending proposal that "replaces" another tenant's memory: a restored snapshot saying so is
    refused, and in a database holding it (a file written before that check) the queue looks the
    replaced version up in the proposal's own tenant, so the other tenant's memory is "no longer
    stored", never shown."""
    theirs = await propose(api, proposal_body("The dev tenant's private roadmap."))
    memory = (await admin.approve(theirs.json()["proposal"]["id"]))["memory"]
    made = await admin.create_tenant("tenant-review")
    async with fake.client(made["credential"]["token"]) as tenant_api:
        mine = (await propose(tenant_api, proposal_body("An innocent note."))).json()["proposal"]["id"]
    async with fake.client(made["admin_token"]) as http:
        own = FakeAdmin(http, tenant="tenant-review")
        document = await own.call("GET", "/snapshot")
        [proposal] = [p for t in document["tenants"] for p in t["proposals"] if p["id"] == mine]
        proposal["replaces"] = {"memory_id": memory["id"], "version": memory["version"]}
        with pytest.raises(AdminError) as refused:
            await own.call("PUT", "/snapshot", document)
    assert refused.value.status == 422
    with contextlib.closing(sqlite3.connect(fake.fake.settings.database)) as conn, conn:
        conn.execute(
            "UPDATE proposals SET replaces_memory_id = ?, replaces_version = ? WHERE id = ?",
            (memory["id"], memory["version"], mine),
        )
    assert (await log_in(browser, made["admin_token"])).status_code == 303
    queue = (await browser.get(CONSOLE + "/")).text
    assert "private roadmap" not in queue
    assert "The replaced version is no longer stored." in queue
    assert "An innocent note." in queue
    assert (await log_in(browser)).status_code == 303  # the server admin's queue: the same lookup
    queue = (await browser.get(CONSOLE + "/")).text
    assert "The replaced version is no longer stored." in queue
    assert "private roadmap" not in queue


async def test_a_tenant_admins_queue_reads_its_own_tenants_clock(
    fake: InProcessFake, browser: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    """Its proposals expire by its clock, so their "in …" and the page's "now" are that clock's."""
    made = await admin.create_tenant("tenant-review")
    async with fake.client(made["admin_token"]) as http:
        own = FakeAdmin(http, tenant="tenant-review")
        await own.set_clock(now="2031-03-01T09:00:00Z", frozen=True)
        async with fake.client(made["credential"]["token"]) as tenant_api:
            await propose(tenant_api, proposal_body("A plan on the tenant's clock."))
    assert (await log_in(browser, made["admin_token"])).status_code == 303
    queue = (await browser.get(CONSOLE + "/")).text
    assert "now 2031-03-01 09:00" in queue
    assert "(in 7d" in queue  # the default 7-day TTL, by the tenant's clock


async def test_the_server_admins_queue_counts_down_each_proposal_by_its_tenants_clock(
    fake: InProcessFake, browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    """A tenant admin moved its clock 6 d 20 h on: its proposal expires in 4 h, not in 7 d."""
    await admin.set_clock(now="2031-03-01T09:00:00Z", frozen=True)
    made = await admin.create_tenant("tenant-ahead")
    async with fake.client(made["credential"]["token"]) as tenant_api:
        await propose(tenant_api, proposal_body("A plan on the tenant's clock."))
    async with fake.client(made["admin_token"]) as http:
        await FakeAdmin(http, tenant="tenant-ahead").advance_clock(6 * 86_400 + 20 * 3600)
    assert (await propose(api, proposal_body("A plan on the server's clock."))).status_code == 201
    assert (await log_in(browser)).status_code == 303  # the server admin's
    queue = (await browser.get(CONSOLE + "/")).text
    assert "now 2031-03-01 09:00" in queue  # the page's clock: the server's
    assert "(in 4h 0m by its tenant's clock, at 2031-03-08 05:00" in queue
    assert "(in 7d 0h)" in queue  # the dev tenant's proposal follows the server clock: no note
    assert queue.count("by its tenant's clock") == 1


async def test_the_reset_page_says_what_this_session_s_reset_does(
    fake: InProcessFake, browser: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    made = await admin.create_tenant("tenant-review")
    assert (await log_in(browser, made["admin_token"])).status_code == 303
    page = (await browser.get(CONSOLE + "/reset")).text
    assert "Reset tenant tenant-review" in page
    assert "Other tenants are not touched." in page
    assert (await log_in(browser)).status_code == 303  # the server admin's
    page = (await browser.get(CONSOLE + "/reset")).text
    assert "Every tenant made since" in page
    assert "is deleted, and its admins' console sessions end" in page


async def test_an_unknown_console_address_or_method_is_a_page_and_a_refused_form_names_its_field(
    browser: httpx.AsyncClient, logged_in: str
) -> None:
    for method, path in (
        ("GET", "/nope"),
        ("POST", "/nope/deeper"),
        ("DELETE", "/nope"),
        ("OPTIONS", "/nope"),
    ):
        response = await browser.request(method, CONSOLE + path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/html"), path
        assert "There is no console page at this address." in response.text
    # an address of the console asked with another method: 405 naming the ones it takes
    for method, path, allowed in (
        ("GET", "/proposals/xyz/approve", "POST"),
        ("GET", "/logout", "POST"),
        ("POST", "/", "GET, HEAD"),
        ("POST", "/memories", "GET, HEAD"),
        ("PUT", "/login", "GET, HEAD, POST"),
        ("DELETE", "/", "GET, HEAD"),
        ("TRACE", "/reset", "GET, HEAD, POST"),
        ("HEAD", "/events", "GET"),
    ):
        response = await browser.request(method, CONSOLE + path)
        assert (response.status_code, response.headers.get("allow")) == (405, allowed), (method, path)
        assert response.headers["content-type"].startswith("text/html"), path
        assert f"it takes {allowed}, not {method}." in response.text
    # HEAD as GET on every page (RFC 9110: monitors and link checkers ask with it);
    # never on a one-time login link, which a GET spends
    for path in ("/login", "/", "/memories", "/settings", "/static/console.js"):
        head, get = await browser.head(CONSOLE + path), await browser.get(CONSOLE + path)
        # (the body, which an ASGI app sends for HEAD too, is dropped by the server on the wire)
        assert head.status_code == get.status_code in (200, 303), path  # a logged-in /login: 303
        assert head.headers.get("content-type") == get.headers.get("content-type"), path
    link = await browser.head(CONSOLE + "/login/" + "x" * 43)
    assert (link.status_code, link.headers.get("allow")) == (405, "GET")
    # logged in, these pages keep the console's navigation and logout; logged out, they have none
    assert f'href="{CONSOLE}/proposals"' in (await browser.get(CONSOLE + "/nope")).text
    assert f'action="{CONSOLE}/logout"' in (await browser.post(CONSOLE + "/memories")).text
    refused = await act(browser, "/faults", logged_in, operation="recall", status="503", count="0")
    assert refused.status_code == 422
    assert refused.headers["content-type"].startswith("text/html")
    assert "count" in refused.text.split("<h1>", 1)[1]  # the field the schema refused
    browser.cookies.clear()
    assert f'href="{CONSOLE}/proposals"' not in (await browser.get(CONSOLE + "/nope")).text


async def test_the_queue_names_when_its_first_proposal_expires_by_a_running_clock_only(
    fake: InProcessFake, browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    """A proposal expires with no event: the page says when (real ms) so that it asks for itself
    again then (console.js); a frozen clock moves only by a control call, which is an event."""
    await admin.set_policy("tenant_dev", proposal_ttl_seconds=90)
    await propose(api, proposal_body("Expires in a minute and a half."))
    assert (await log_in(browser)).status_code == 303
    running = re.search(r'id="next-expiry" data-ms="(\d+)"', (await browser.get(CONSOLE + "/")).text)
    assert running is not None
    assert 80_000 < int(running.group(1)) <= 90_000
    await admin.set_clock(frozen=True)
    assert 'id="next-expiry"' not in (await browser.get(CONSOLE + "/")).text


async def test_a_later_queue_page_left_empty_says_so_and_leads_back_to_the_first(
    fake: InProcessFake, browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    """Its proposals decided (here or elsewhere), page 2 is not "Nothing to review" while page 1
    still holds 50."""
    made = [(await propose(api, proposal_body(f"Plan {n}."))).json()["proposal"]["id"] for n in range(51)]
    first = (await browser.get(CONSOLE + "/")).text
    later = re.search(r'href="(/_fake/console/\?after=\d+)"', first)
    assert later is not None, "page 1 links to page 2"
    assert made[50] in (await browser.get(later.group(1))).text
    await admin.approve(made[50])
    emptied = (await browser.get(later.group(1))).text
    assert "Nothing to review." not in emptied
    assert "Nothing more to review after this point." in emptied
    assert f'<a href="{CONSOLE}/">Back to the first page</a> (50 pending)' in emptied


async def test_a_reason_too_long_is_named_as_the_reason_in_bytes_and_the_proposal_stays_pending(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    proposal = (await propose(api, proposal_body("Keep it short."))).json()["proposal"]["id"]
    refused = await act(browser, f"/proposals/{proposal}/reject", logged_in, reason="漢" * 1000)
    assert refused.status_code == 400
    said = refused.text.split("<h1>", 1)[1]
    assert "the reason is too long: at most 2,048 UTF-8 bytes, this one has 3,000" in said
    assert "reason_detail" not in said
    huge = await act(browser, f"/proposals/{proposal}/reject", logged_in, reason="漢" * 2048)
    assert huge.status_code == 400
    assert "the form is too large (over 16 KiB): a reason holds at most 2,048 UTF-8 bytes" in huge.text
    [listed] = (await admin.proposals(status="pending"))["items"]
    assert listed["id"] == proposal


async def test_a_reason_that_looks_like_a_secret_is_refused_as_the_reason_and_the_proposal_stays_pending(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    proposal = (await propose(api, proposal_body("Keep it short."))).json()["proposal"]["id"]
    reason = "key AKIAIOSFODNN7EXAMPLE"
    refused = await act(browser, f"/proposals/{proposal}/reject", logged_in, reason=reason)
    said = refused.text.split("<h1>", 1)[1]
    assert "the reason holds secret-looking text (aws_access_key_id)" in said
    assert "reason_detail" not in said
    [listed] = (await admin.proposals(status="pending"))["items"]
    assert listed["id"] == proposal


async def test_a_decision_on_a_decided_proposal_says_which_state_it_is_in(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    proposal = (await propose(api, proposal_body("Decided elsewhere."))).json()["proposal"]["id"]
    await admin.expire(proposal)
    refused = await act(browser, f"/proposals/{proposal}/approve", logged_in)
    assert refused.status_code == 409
    assert "the proposal is expired already: a proposal in a final state cannot be approved" in refused.text


async def test_stored_text_takes_its_own_direction_on_every_page_that_shows_it(
    browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin, logged_in: str
) -> None:
    """Right-to-left text (an Arabic sentence) is laid out by its own direction: dir="auto" on
    content, topic and justification, so its punctuation stays at its end."""
    text = "تم اعتماد قاعدة البيانات."
    await propose(api, proposal_body(text, justification=f"{text}!", topic="arabic-note"))
    queue = (await browser.get(CONSOLE + "/")).text
    assert f'<div class="content" dir="auto">{text}</div>' in queue
    assert f'<span dir="auto">{text}!</span>' in queue
    assert '<code dir="auto">arabic-note</code>' in queue
    assert f'<td class="text" dir="auto">{text}</td>' in (await browser.get(CONSOLE + "/proposals")).text


async def test_the_proposals_page_filters_by_tenant_for_the_server_admin(
    fake: InProcessFake, browser: httpx.AsyncClient, api: httpx.AsyncClient, admin: FakeAdmin
) -> None:
    """As ``GET /_fake/proposals?tenant=`` (and ``fake-lucy proposals --tenant``): one tenant's, the
    filter kept on the next page's link; a tenant admin filtering by another tenant gets an empty
    page; a value that is no tenant id is refused, naming the filter."""
    made = await admin.create_tenant("tenant-filtered")
    async with fake.client(made["credential"]["token"]) as other:
        for n in range(51):
            await propose(other, proposal_body(f"Other plan {n}.", scope=WORKSPACE))
    await propose(api, proposal_body("A dev tenant plan."))
    assert (await log_in(browser)).status_code == 303
    page = (await browser.get(CONSOLE + "/proposals", params={"tenant": "tenant_dev"})).text
    assert "A dev tenant plan." in page
    assert "Other plan" not in page
    assert 'name="tenant" value="tenant_dev"' in page
    others = (await browser.get(CONSOLE + "/proposals", params={"tenant": "tenant-filtered"})).text
    assert "A dev tenant plan." not in others
    assert 'href="/_fake/console/proposals?tenant=tenant-filtered&amp;after=' in others
    bad = await browser.get(CONSOLE + "/proposals", params={"tenant": "bad!"})
    assert bad.status_code == 400
    assert "tenant must be a tenant id" in bad.text
    async with fake.client(None) as tenant_browser:
        assert (await log_in(tenant_browser, made["admin_token"])).status_code == 303
        foreign = await tenant_browser.get(CONSOLE + "/proposals", params={"tenant": "tenant_dev"})
        assert foreign.status_code == 200
        assert "A dev tenant plan." not in foreign.text
        assert "No proposals of tenant tenant_dev." in foreign.text
        assert 'name="tenant"' not in foreign.text  # its page has no tenant filter to offer


async def test_settings_and_credits_say_when_they_show_only_the_first_tenants_and_filter_by_one(
    browser, logged_in, admin, monkeypatch
) -> None:
    """A shared fake gathers a tenant per test session: past the pages' first rows (200; 2 here),
    the page says so, and the tenant filter brings any tenant's policy and accounts."""
    monkeypatch.setattr(review, "TENANTS_SHOWN", 2)
    monkeypatch.setattr(review, "ACCOUNTS_SHOWN", 2)
    for name in ("ci-1", "ci-2"):
        await admin.create_tenant(name)
    settings = (await browser.get(CONSOLE + "/settings")).text
    assert "The first 2 of 3 tenants, by id: name a tenant to see its policy." in settings
    assert "Set the auto-approve of tenant_dev" not in settings  # ci-1 and ci-2 come first
    credits = (await browser.get(CONSOLE + "/credits")).text
    assert "The first 2 of 3 accounts, by tenant: name a tenant to see its accounts." in credits
    assert "acct_dev" not in credits.split("<h2>", 1)[0]
    one = (await browser.get(CONSOLE + "/settings", params={"tenant": "tenant_dev"})).text
    assert "Set the auto-approve of tenant_dev" in one
    assert "Set the auto-approve of ci-1" not in one
    assert 'id="policies-cut"' not in one
    accounts = (await browser.get(CONSOLE + "/credits", params={"tenant": "tenant_dev"})).text
    assert "<code>acct_dev</code>" in accounts
    assert 'id="accounts-cut"' not in accounts
    nobody = (await browser.get(CONSOLE + "/settings", params={"tenant": "nobody"})).text
    assert "No tenant nobody." in nobody
    bad = await browser.get(CONSOLE + "/credits", params={"tenant": "bad!"})
    assert bad.status_code == 400
    assert "tenant must be a tenant id" in bad.text


async def test_a_refused_page_or_action_keeps_the_navigation_of_a_logged_in_reviewer(
    browser, logged_in
) -> None:
    for answer in (
        await browser.get(CONSOLE + "/", params={"after": "abc"}),
        await browser.get(CONSOLE + "/memories", params={"history": "yes"}),
        await act(browser, "/proposals/prop_AAAAAAAAAAAAAAAAAAAAAA/approve", logged_in),
    ):
        assert answer.status_code in (400, 404), answer.text
        assert "<nav" in answer.text
        assert "Log out" in answer.text
    history = await browser.get(CONSOLE + "/memories", params={"history": "yes"})
    assert "history is true or false" in history.text


async def test_every_time_column_says_its_zone_and_a_long_reason_is_not_cut_in_the_box(
    browser, logged_in, api
) -> None:
    """Times are the fake's clock in UTC, and each table says so; the reason box takes any length,
    so that the server names a reason over 2,048 UTF-8 bytes instead of the box cutting it silently."""
    await propose(api)
    proposals = (await browser.get(CONSOLE + "/proposals")).text
    assert "<th>created (UTC)</th><th>decided (UTC)</th>" in proposals
    assert "<th>approved (UTC)</th>" in (await browser.get(CONSOLE + "/memories")).text
    assert "<th>at (UTC)</th>" in (await browser.get(CONSOLE + "/credits")).text
    assert "<th>at (UTC)</th>" in (await browser.get(CONSOLE + "/requests")).text
    queue = (await browser.get(CONSOLE + "/")).text
    assert 'name="reason"' in queue
    assert "maxlength" not in queue
