"""The review console in a real headless Chromium against a real uvicorn server (SPEC 3.10).

Waiting is always on the page's DOM (Playwright's auto-waiting ``expect``), never a sleep. What a
click did is checked through the control API. ``make screenshots`` runs this file with
``FAKE_LUCY_SCREENSHOTS=docs/screenshots``: the README's pictures are the pages these tests see.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import httpx
import pytest
from mcp import Client
from mcp.types import Implementation
from playwright.sync_api import Browser, BrowserContext, Dialog, Page, Route, expect

from fake_lucy.domain import sessions
from fake_lucy.domain.clock import format_us, parse_timestamp
from fake_lucy.http.console import COOKIE, COOKIE_ATTRIBUTES
from fake_lucy.store.connection import Database
from fake_lucy.testing import LiveServer
from fake_lucy.testing.pytest_plugin import lucy_mcp_parameters
from fake_lucy.testing.tls import shared_tls_context
from tests.console.conftest import ENABLE, chromium_path
from tests.helpers import V1, proposal_body

if chromium_path() is None:  # one skip line for the whole file, saying how to enable it
    pytest.skip(ENABLE, allow_module_level=True)

CONSOLE = "/_fake/console"
pytestmark = pytest.mark.slow


def v1(server: LiveServer) -> httpx.Client:
    return httpx.Client(
        base_url=server.base_url,
        headers={"Authorization": f"Bearer {server.dev_token}"},
        verify=shared_tls_context(),
    )


def control(server: LiveServer) -> httpx.Client:
    return httpx.Client(
        base_url=server.base_url,
        headers={"Authorization": f"Bearer {server.admin_token}"},
        verify=shared_tls_context(),
    )


def propose(server: LiveServer, body: dict[str, Any] | None = None, **headers: str) -> dict[str, Any]:
    with v1(server) as http:
        response = http.post(
            V1 + "/proposals",
            json=body or proposal_body(),
            headers={"Idempotency-Key": uuid.uuid4().hex, **headers},
        )
    assert response.status_code == 201, response.text
    proposal: dict[str, Any] = response.json()["proposal"]
    return proposal


def proposal_status(server: LiveServer, proposal_id: str) -> dict[str, Any]:
    with control(server) as http:
        items = http.get("/_fake/proposals").json()["items"]
    return next(p for p in items if p["id"] == proposal_id)


@contextlib.contextmanager
def server_database(server: LiveServer) -> Iterator[sqlite3.Connection]:
    """A write transaction on the server's database file (own connection: the server's is busy)."""
    database = Database(server.fake.settings.database)
    try:
        with database.write() as conn:
            yield conn
    finally:
        database.close()


def login_link(server: LiveServer) -> str:
    # what ``fake-lucy serve`` does before printing the link
    with server_database(server) as conn:
        token = sessions.create_link(conn, server.admin_token)
    return f"{server.base_url}{CONSOLE}/login/{token}"


def session_cookie(server: LiveServer, session_id: str) -> dict[str, Any]:
    """The cookie the console sets for a session, in Playwright's form."""
    return {
        "name": COOKIE,
        "value": session_id,
        "domain": urlsplit(server.base_url).hostname or "",
        "path": COOKIE_ATTRIBUTES["path"],
        "httpOnly": COOKIE_ATTRIBUTES["httponly"],
        "sameSite": COOKIE_ATTRIBUTES["samesite"].capitalize(),
        "secure": urlsplit(server.base_url).scheme == "https",
    }


@pytest.fixture(scope="module")
def windows(chromium: Browser) -> Iterator[dict[str, tuple[BrowserContext, Page]]]:
    """One browser context and one page per server, kept across the module's tests: a new context
    and page cost Chromium ~0.4 core-seconds (a renderer process of its own), a navigation in the
    page it has ~0.1. Each test still starts clean (``context``)."""
    held: dict[str, tuple[BrowserContext, Page]] = {}
    yield held
    for context, _ in held.values():
        context.close()


@pytest.fixture
def context(
    chromium: Browser,
    windows: dict[str, tuple[BrowserContext, Page]],
    live: LiveServer,
    request: pytest.FixtureRequest,
) -> Iterator[BrowserContext]:
    """The module's browser context, as a new one is: no cookies, one blank page (``blank``) with
    no routes and no scripts running, the pointer in the corner. Pages a test opened are closed
    after it, and after a failed test the page is not used again (a dialog handler it left waiting
    could answer the next test's dialog). Playwright does not list a page's event listeners, so a
    test that adds one (``page.on``) removes it (``page.remove_listener``), as the markup test does."""
    if live.base_url not in windows:
        made = chromium.new_context(base_url=live.base_url, viewport={"width": 1280, "height": 900})
        made.set_default_timeout(5_000)
        windows[live.base_url] = (made, made.new_page())
    context, tab = windows[live.base_url]
    context.clear_cookies()
    tab.mouse.move(0, 0)
    failed_before = request.session.testsfailed
    yield context
    for other in context.pages:
        if other is not tab:
            other.close()
    if request.session.testsfailed != failed_before:
        tab.close()
        windows[live.base_url] = (context, context.new_page())
    else:
        tab.unroute_all(behavior="ignoreErrors")
        if tab.url.startswith(live.base_url):  # what a new context would not hold: the kept place
            tab.evaluate("window.sessionStorage.clear()")
        tab.goto("about:blank")  # the page's scripts end here, before the next test resets the fake


@pytest.fixture
def blank(context: BrowserContext, windows: dict[str, tuple[BrowserContext, Page]], live: LiveServer) -> Page:
    """The context's page, blank and without a session."""
    return windows[live.base_url][1]


@pytest.fixture
def page(context: BrowserContext, blank: Page, live: LiveServer) -> Page:
    """A page with a console session, on the review queue.

    The session is started as a login starts it (``sessions.start``) and handed to the browser in
    the cookie the console sets (the login test checks that cookie against the real one); the tests
    of logging in and out go through the login form instead (``form_login``)."""
    with server_database(live) as conn:
        session_id = sessions.start(conn, None, live.admin_token)
    context.add_cookies([session_cookie(live, session_id)])
    blank.goto(CONSOLE + "/")
    expect(blank.get_by_role("heading", name="Review queue")).to_be_visible()
    return blank


@pytest.fixture
def form_login(blank: Page, live: LiveServer) -> Page:
    """A page logged in through the login form with the admin token, on the review queue."""
    page = blank
    page.goto(CONSOLE + "/")
    page.get_by_label("Admin token").fill(live.admin_token)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    return page


def test_the_one_time_link_logs_the_browser_in_once(
    context: BrowserContext, blank: Page, live: LiveServer
) -> None:
    link = login_link(live)
    page = blank
    page.goto(link)
    expect(page.get_by_role("heading", name="Review queue")).to_be_visible()
    assert page.url == f"{live.base_url}{CONSOLE}/"  # the link's token is gone from the address
    context.clear_cookies()  # another browser: the link again, without the session it started
    response = page.goto(link)
    assert response is not None
    assert response.status == 403
    expect(page.get_by_role("heading", name="Link used or expired")).to_be_visible()
    page.goto(f"{live.base_url}{CONSOLE}/")
    expect(page.get_by_label("Admin token")).to_be_visible()  # no session: the login page


def test_login_by_admin_token_sets_a_strict_httponly_cookie_and_never_shows_the_token(
    context: BrowserContext, form_login: Page, live: LiveServer
) -> None:
    (cookie,) = context.cookies()
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert cookie["path"] == CONSOLE
    # the cookie the other tests' ``page`` carries is this one, attribute for attribute
    made = session_cookie(live, cookie["value"])
    assert {name: cookie[name] for name in made} == made
    assert live.admin_token not in form_login.content()
    assert live.admin_token not in form_login.url
    assert form_login.evaluate("document.cookie") == ""  # not readable by scripts


def test_a_wrong_admin_token_is_refused_on_the_login_page(context: BrowserContext, blank: Page) -> None:
    page = blank
    page.goto(CONSOLE + "/")
    page.get_by_label("Admin token").fill("not-the-admin-token")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("That is not an admin token.")
    assert context.cookies() == []


def test_a_proposal_made_over_v1_appears_in_the_queue_without_a_reload(page: Page, live: LiveServer) -> None:
    expect(page.locator("article.proposal")).to_have_count(0)
    expect(page.locator("#live-status")).to_have_text("live")  # the event stream is open
    page.evaluate("window.loadedOnce = true")
    created = propose(live, proposal_body("Deploys go out on Tuesdays."))
    card = page.locator(f"article#{created['id']}")
    expect(card).to_contain_text("Deploys go out on Tuesdays.")
    expect(page.locator("#pending-count")).to_have_text("1 pending")
    assert page.evaluate("window.loadedOnce") is True  # the same document: no reload


def test_a_v1_request_appears_on_the_requests_page_without_a_reload(page: Page, live: LiveServer) -> None:
    """The Requests page redraws itself on the ``request`` event (a live tail, as Mailpit's list)."""
    page.goto(CONSOLE + "/requests")
    expect(page.get_by_role("heading", name="Requests")).to_be_visible()
    expect(page.get_by_text("No v1 requests yet.")).to_be_visible()
    expect(page.locator("#live-status")).to_have_text("live")  # the event stream is open
    page.evaluate("window.loadedOnce = true")
    propose(live, proposal_body("Tailed live."), **{"Idempotency-Key": "live-tail-key-0001"})
    row = page.locator("table.requests tbody tr", has=page.locator("code[title='live-tail-key-0001']"))
    expect(row).to_contain_text("propose")
    expect(row).to_contain_text("201")
    expect(page.get_by_text("No v1 requests yet.")).to_have_count(0)
    assert page.evaluate("window.loadedOnce") is True  # the same document: no reload


def test_approve_and_reject_from_the_page_are_decisions_the_control_api_sees(
    page: Page, live: LiveServer
) -> None:
    kept = propose(live, proposal_body("The API gateway is Envoy."))
    dropped = propose(live, proposal_body("The office plant is called Kevin."))
    page.reload()
    page.locator(f"article#{kept['id']}").get_by_role("button", name="Approve").click()
    expect(page.locator(f"article#{kept['id']}")).to_have_count(0)
    approved = proposal_status(live, kept["id"])
    assert approved["status"] == "approved"
    assert approved["memory"]["version"] == 1
    card = page.locator(f"article#{dropped['id']}")
    card.get_by_role("textbox").fill("not a project fact")
    card.get_by_role("button", name="Reject").click()
    expect(page.locator(f"article#{dropped['id']}")).to_have_count(0)
    rejected = proposal_status(live, dropped["id"])
    assert rejected["status"] == "rejected"
    assert rejected["reason_detail"] == "not a project fact"
    expect(page.locator("#pending-count")).to_have_text("0 pending")


def test_markup_in_a_proposal_is_shown_as_text_and_runs_nothing(page: Page, live: LiveServer) -> None:
    dialogs: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    attack = "<img src=x onerror=alert(1)>"
    created = propose(
        live,
        proposal_body(
            attack + " zero\u200bwidth",
            justification="<script>alert(2)</script> \u202eevil",
        ),
        **{"Lucy-Client-Name": "%3Cb%3Eagent%3C%2Fb%3E"},
    )
    card = page.locator(f"article#{created['id']}")
    expect(card.locator(".content")).to_have_text(attack + " zero⟨U+200B⟩width")
    expect(card.locator(".why")).to_contain_text("<script>alert(2)</script> ⟨U+202E⟩evil")
    expect(card).to_contain_text("<b>agent</b>")
    assert card.locator("img, script, b").count() == 0
    page.reload()  # and on a full page load as well
    expect(page.locator(f"article#{created['id']} .content")).to_have_text(attack + " zero⟨U+200B⟩width")
    page.remove_listener("dialog", dismiss)
    assert dialogs == []


def test_logout_ends_the_session_on_the_server(
    context: BrowserContext, form_login: Page, live: LiveServer
) -> None:
    page = form_login
    (cookie,) = context.cookies()
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_label("Admin token")).to_be_visible()
    page.goto(CONSOLE + "/proposals")
    expect(page.get_by_label("Admin token")).to_be_visible()
    # the old cookie, replayed by hand, is no session any more
    with httpx.Client(base_url=live.base_url, cookies={cookie["name"]: cookie["value"]}) as http:
        response = http.get(CONSOLE + "/")
    assert response.status_code == 303
    assert response.headers["location"] == CONSOLE + "/login"


def test_a_forged_cross_origin_post_is_refused_and_changes_nothing(
    context: BrowserContext, page: Page, live: LiveServer
) -> None:
    created = propose(live)
    page.reload()
    csrf = page.locator("input[name=csrf_token]").first.get_attribute("value")
    target = f"{live.base_url}{CONSOLE}/proposals/{created['id']}/approve"
    evil = context.new_page()
    evil.route(
        "http://attacker.test/**",
        lambda route: route.fulfill(
            content_type="text/html",
            body=(
                f'<form id="f" method="post" action="{target}">'
                f'<input name="csrf_token" value="{csrf}"></form>'
                '<script>document.getElementById("f").submit()</script>'
            ),
        ),
    )
    with evil.expect_response(target) as forged:
        evil.goto("http://attacker.test/")
    assert forged.value.status == 403  # SameSite=Strict: no cookie from another site, so no session
    # the session's own cookie and CSRF token, but an Origin of another site: still 403
    answer = context.request.post(
        target, form={"csrf_token": csrf or ""}, headers={"Origin": "http://attacker.test"}
    )
    assert answer.status == 403
    # the right Origin but no CSRF token: 403 as well
    answer = context.request.post(target, form={"next": CONSOLE + "/"}, headers={"Origin": live.base_url})
    assert answer.status == 403
    assert proposal_status(live, created["id"])["status"] == "pending"


def test_the_queue_shows_a_replacement_as_a_difference_and_requests_as_retry_chains(
    page: Page, live: LiveServer
) -> None:
    first = propose(live, proposal_body("Staging runs PostgreSQL 15 on one node.", topic="staging-db"))
    propose(live, proposal_body("Backups run nightly at 02:00 UTC."))
    with control(live) as http:
        assert http.post(f"/_fake/proposals/{first['id']}/approve").status_code == 200
        assert http.post("/_fake/faults", json={"operation": "propose", "status": 503}).status_code == 201
    replacement = proposal_body("Staging runs PostgreSQL 16 on two nodes.", topic="staging-db")
    key = uuid.uuid4().hex
    with v1(live) as http:  # a retry chain: 503 (the fault), then 201 with the same key
        for attempt, status in ((0, 503), (1, 201)):
            response = http.post(
                V1 + "/proposals",
                json=replacement,
                headers={"Idempotency-Key": key, "Lucy-Retry-Attempt": str(attempt)},
            )
            assert response.status_code == status
    proposal_id = response.json()["proposal"]["id"]
    page.reload()
    card = page.locator(f"article#{proposal_id}")
    expect(card.locator(".diff del")).to_have_text(["15", "one", "node."])
    expect(card.locator(".diff ins")).to_have_text(["16", "two", "nodes."])
    _screenshot(page, "queue.png")
    page.get_by_role("link", name="Requests").click()
    chain = page.locator("table.requests tbody tr", has_text=key[:13])
    expect(chain).to_have_count(1)
    expect(chain).to_contain_text("503 → 201")
    expect(chain).to_contain_text("fault flt_")
    _screenshot(page, "requests.png")


@contextlib.contextmanager
def mcp_host(server: LiveServer) -> Iterator[Callable[[str, dict[str, Any]], dict[str, Any]]]:
    """A real ``lucy-memory-mcp`` stdio process held open as a host holds it, for one tool call
    after another (its event loop runs in a thread of its own: Playwright's sync API holds this one)."""
    parameters = lucy_mcp_parameters(server, token=server.dev_token, permissions="memory:read,memory:propose")
    host = Client(parameters, client_info=Implementation(name="browser-test", version="1"))
    with (
        anyio.from_thread.start_blocking_portal() as portal,
        portal.wrap_async_context_manager(host) as client,
    ):

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            with anyio.fail_after(120):
                result = await client.call_tool(tool, arguments)
            assert result.is_error is False, result
            content: dict[str, Any] = result.structured_content
            return content

        yield lambda tool, arguments: portal.call(call, tool, arguments)


def test_an_agents_proposal_appears_within_a_second_and_approving_it_makes_it_recallable(
    page: Page, live: LiveServer
) -> None:
    """Issue 14, must-hold 1: lucy-memory-mcp proposes, the open queue shows it, Approve, recall finds it."""
    expect(page.locator("#live-status")).to_have_text("live")
    with mcp_host(live) as call_tool:
        proposed = call_tool(
            "memory_propose",
            {
                "kind": "decision",
                "content": "Feature flags live in LaunchDarkly.",
                "scope": {"kind": "project", "id": "project_example"},
            },
        )
        proposal_id = proposed["proposal"]["id"]
        card = page.locator(f"article#{proposal_id}")
        expect(card).to_contain_text("Feature flags live in LaunchDarkly.", timeout=1_000)
        card.get_by_role("button", name="Approve").click()
        expect(card).to_have_count(0)
        assert proposal_status(live, proposal_id)["status"] == "approved"
        recalled = call_tool("memory_recall", {"query": "Where do feature flags live?", "limit": 3})
    assert [m["content"] for m in recalled["memories"]] == ["Feature flags live in LaunchDarkly."]


def _screenshot(page: Page, name: str) -> None:
    folder = os.environ.get("FAKE_LUCY_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=True)


def test_the_page_is_never_swapped_under_the_pointer_or_what_the_reviewer_typed(
    page: Page, live: LiveServer
) -> None:
    """A live update waits while the pointer is over the list (the Approve under it would move, and
    the click land on another proposal's) or while a reason is typed; it comes once they are gone."""
    first = propose(live, proposal_body("The first plan."))
    page.reload()
    expect(page.locator("#live-status")).to_have_text("live")
    card = page.locator(f"article#{first['id']}")
    card.get_by_role("button", name="Approve").hover()
    later = propose(live, proposal_body("A later plan."))
    expect(page.locator("#live-status")).to_have_text("live · changes wait while you use the page")
    expect(page.locator(f"article#{later['id']}")).to_have_count(0)
    page.mouse.move(0, 0)  # off the list: the update comes
    expect(page.locator(f"article#{later['id']}")).to_have_count(1)
    reason = card.locator("input[name='reason']")
    reason.fill("Not ours to decide.")
    page.mouse.move(0, 0)
    page.locator("h1").click()  # the focus leaves the field; what was typed stays
    third = propose(live, proposal_body("A third plan."))
    expect(page.locator("#live-status")).to_have_text("live · changes wait while you use the page")
    assert reason.input_value() == "Not ours to decide."
    expect(page.locator(f"article#{third['id']}")).to_have_count(0)


def test_a_page_whose_session_ended_goes_to_the_login_page(page: Page, live: LiveServer) -> None:
    expect(page.locator("#live-status")).to_have_text("live")
    with server_database(live) as conn:
        conn.execute("DELETE FROM console_sessions")  # as a logout in another tab, or 12 h unused
    propose(live, proposal_body("Seen by nobody."))  # the stream's next look finds no session
    expect(page.get_by_label("Admin token")).to_be_visible(timeout=10_000)


def test_deleting_a_memory_asks_first_and_each_action_button_names_its_object(
    page: Page, live: LiveServer
) -> None:
    created = propose(live, proposal_body("Staging runs on Fridays."))
    with control(live) as http:
        memory = http.post(f"/_fake/proposals/{created['id']}/approve").json()["proposal"]["memory"]
    pending = propose(live, proposal_body("Another plan."))
    page.reload()
    expect(page.get_by_role("button", name=f"Approve {pending['id']}")).to_be_visible()
    page.goto(f"{live.base_url}{CONSOLE}/memories")
    delete = page.get_by_role("button", name=f"Delete {memory['id']}")
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.dismiss()))
    delete.click()
    [question] = asked
    assert memory["id"] in question
    with control(live) as http:
        listed = http.get("/_fake/memories").json()["items"]
    assert [m["status"] for m in listed if m["id"] == memory["id"]] == ["active"]  # declined: kept
    page.once("dialog", lambda dialog: dialog.accept())
    delete.click()
    expect(page.get_by_role("button", name=f"Restore {memory['id']}")).to_be_visible()


def test_a_refused_form_says_why_beside_it_and_keeps_what_was_typed(page: Page, live: LiveServer) -> None:
    page.goto(f"{live.base_url}{CONSOLE}/settings")
    by = page.get_by_role("textbox", name="Advance by")
    by.fill("two weeks")
    page.get_by_role("button", name="Advance").click()
    expect(page.get_by_role("alert")).to_have_text(
        "Bad request: a duration is a number with s, m, h or d (90s, 2h, 7d)"
    )
    expect(page.get_by_role("heading", name="Clock, faults and policy")).to_be_visible()  # still here
    expect(by).to_have_value("two weeks")  # what was typed is kept, to be corrected
    policy = page.get_by_role("textbox", name="auto-approve for tenant_dev")
    policy.fill("preference,gossip")
    policy.press("Enter")
    expect(page.get_by_role("alert")).to_have_count(2)
    expect(page.get_by_role("alert").nth(1)).to_contain_text(
        "Bad request: auto-approve: gossip is not off, all or a kind (preference, identity"
    )
    expect(policy).to_have_value("preference,gossip")
    with control(live) as http:
        before = http.get("/_fake/clock").json()
    by.fill("2h")
    page.get_by_role("button", name="Advance").click()
    expect(page.get_by_role("alert")).to_have_count(0)  # the page the action leads to, afresh
    with control(live) as http:
        after = http.get("/_fake/clock").json()
    assert parse_timestamp(after["now"]) - parse_timestamp(before["now"]) >= 7_200_000_000


def test_a_refusal_stays_on_the_page_when_a_live_update_removes_its_form(
    page: Page, live: LiveServer
) -> None:
    """Approve on a proposal decided meanwhile in another tab: the refusal says why, and the live
    update that then takes the card away keeps it, naming the button it answered."""
    created = propose(live, proposal_body("Decided twice."))
    page.reload()
    expect(page.locator("#live-status")).to_have_text("live")
    card = page.locator(f"article#{created['id']}")
    approve = card.get_by_role("button", name="Approve")
    approve.hover()  # the update waits while the pointer is over the list
    with control(live) as http:
        assert http.post(f"/_fake/proposals/{created['id']}/reject").status_code == 200
    expect(page.locator("#live-status")).to_have_text("live · changes wait while you use the page")
    approve.click()
    refusal = page.get_by_role("alert")
    expect(refusal).to_contain_text("the proposal is rejected already: a proposal in a final state")
    # below the card's row of buttons, not between them (where it pushed the reason box aside)
    expect(card.locator(".actions + p.refusal")).to_have_count(1)
    said = refusal.inner_text()
    expect(approve).to_be_focused()  # the focus stays on the button pressed, beside what it says
    page.locator("h1").click()
    page.mouse.move(0, 0)  # focus and pointer leave the list: the update comes
    expect(card).to_have_count(0)
    expect(refusal).to_have_text(f"Approve {created['id']}: {said}")
    assert proposal_status(live, created["id"])["status"] == "rejected"


def test_an_action_whose_answer_is_lost_is_not_sent_again(page: Page, live: LiveServer) -> None:
    """The fake may have done it: the page says so and leaves the choice to the reviewer."""
    page.goto(f"{live.base_url}{CONSOLE}/settings")
    with control(live) as http:
        http.put("/_fake/clock", json={"frozen": True})
        before = parse_timestamp(http.get("/_fake/clock").json()["now"])
    page.reload()

    def done_then_lost(route: Route) -> None:
        route.fetch()  # the fake does it …
        route.abort("connectionreset")  # … and the answer never arrives

    page.route("**/clock/advance", done_then_lost)
    page.get_by_role("textbox", name="Advance by").fill("2h")
    page.get_by_role("button", name="Advance").click()
    expect(page.get_by_role("alert")).to_contain_text("may or may not have been done")
    with control(live) as http:
        after = parse_timestamp(http.get("/_fake/clock").json()["now"])
    assert after - before == 7_200_000_000  # once, not twice


def test_an_action_after_the_session_ended_leads_to_the_login_page(page: Page, live: LiveServer) -> None:
    created = propose(live, proposal_body("Decided by nobody."))
    page.route("**/events*", lambda route: route.abort())  # no live updates: the page stays as it is
    page.reload()
    with server_database(live) as conn:
        conn.execute("DELETE FROM console_sessions")  # a logout in another tab
    page.get_by_role("button", name=f"Approve {created['id']}").click()
    expect(page.get_by_label("Admin token")).to_be_visible()
    assert proposal_status(live, created["id"])["status"] == "pending"


def test_a_reason_typed_when_the_session_ended_stays_on_the_page_with_the_way_to_log_in(
    page: Page, live: LiveServer
) -> None:
    """Reject with a typed reason after a logout in another tab: the page does not go to the login
    page and take the reason with it; it says the session ended, keeps the text, links to log in."""
    created = propose(live, proposal_body("Rejected by nobody."))
    page.route("**/events*", lambda route: route.abort())  # no live updates: the page stays as it is
    page.reload()
    with server_database(live) as conn:
        conn.execute("DELETE FROM console_sessions")  # a logout in another tab
    card = page.locator(f"article#{created['id']}")
    card.get_by_role("textbox").fill("duplicate of a memory we already hold, see the wiki page")
    card.get_by_role("button", name="Reject").click()
    expect(page.get_by_role("alert")).to_contain_text("Your session has ended: what you typed is still")
    expect(card.get_by_role("textbox")).to_have_value(
        "duplicate of a memory we already hold, see the wiki page"
    )
    assert page.url == f"{live.base_url}{CONSOLE}/"
    page.get_by_role("link", name="log in again").click()
    expect(page.get_by_label("Admin token")).to_be_visible()
    assert proposal_status(live, created["id"])["status"] == "pending"


def test_a_proposal_that_expires_while_the_queue_is_open_leaves_it_without_a_reload(
    page: Page, live: LiveServer
) -> None:
    """An expiry by the clock sends no event: the page asks for itself again when the first listed
    proposal is due (the server names when). The clock is set, running, to 1.5 s before it."""
    with control(live) as http:
        http.put("/_fake/tenants/tenant_dev/policy", json={"proposal_ttl_seconds": 60}).raise_for_status()
    created = propose(live, proposal_body("Only good for a minute."))
    due = parse_timestamp(created["expires_at"]) - 1_500_000
    with control(live) as http:
        http.put("/_fake/clock", json={"now": format_us(due), "frozen": False}).raise_for_status()
    page.reload()
    expect(page.locator("#live-status")).to_have_text("live")
    page.evaluate("window.loadedOnce = true")
    card = page.locator(f"article#{created['id']}")
    expect(card).to_be_visible()
    expect(card).to_have_count(0, timeout=6_000)
    expect(page.locator("#pending-count")).to_have_text("0 pending")
    assert page.evaluate("window.loadedOnce") is True  # the same document: no reload
    assert proposal_status(live, created["id"])["status"] == "expired"


def test_long_words_wrap_inside_the_window_on_the_queue_and_the_proposals_page(
    page: Page, live: LiveServer
) -> None:
    """A 200-character topic and a long URL in the justification (both allowed) stay inside a
    1280 px window and a 375 px one: no page wider than its window."""
    propose(
        live,
        proposal_body(
            "Where the runbook lives.",
            topic="runbook-" + "x" * 192,
            justification="See https://example.com/" + "a" * 300 + "\nand the next line.",
        ),
    )
    for width in (1280, 375):
        page.set_viewport_size({"width": width, "height": 900})
        for path in ("/", "/proposals"):
            page.goto(CONSOLE + path)
            expect(page.locator("main")).to_contain_text("Where the runbook lives.")
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, f"{path} at {width} px is {wide} px wide"
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(CONSOLE + "/")
    why = page.locator("p.why")
    assert why.evaluate("e => getComputedStyle(e).whiteSpace") == "pre-wrap"  # its lines are kept


def test_after_a_keyboard_approval_the_focus_is_on_the_next_card_and_the_status_says_it(
    page: Page, live: LiveServer
) -> None:
    """The page loads again after an action: the focus goes to the card now in the acted one's
    place, not back to the top (ten Tabs from the next Approve), and the status line says what
    was done, for a screen reader (it is aria-live)."""
    first = propose(live, proposal_body("First in line."))
    second = propose(live, proposal_body("Second in line."))
    page.reload()
    cards = page.get_by_role("article")
    expect(cards).to_have_count(2)
    expect(page.get_by_role("article", name=f"decision proposal {first['id']}")).to_be_visible()
    page.locator(f"article#{first['id']}").get_by_role("button", name="Approve").focus()
    page.keyboard.press("Enter")
    expect(page.locator(f"article#{first['id']}")).to_have_count(0)
    expect(page.locator(f"article#{second['id']}").get_by_role("button", name="Approve")).to_be_focused()
    expect(page.locator("#live-status")).to_contain_text(f"Approve {first['id']}: done")
    assert proposal_status(live, first["id"])["status"] == "approved"
    page.keyboard.press("Enter")  # the next one, without a Tab
    expect(page.locator(f"article#{second['id']}")).to_have_count(0)
    expect(page.get_by_role("heading", name="Review queue")).to_be_focused()
    assert proposal_status(live, second["id"])["status"] == "approved"


def test_the_focus_the_page_gave_after_an_action_does_not_stop_the_live_updates(
    page: Page, live: LiveServer
) -> None:
    """After an approval the page puts the focus on the next card (or on the heading of an empty
    queue): that is not the reviewer using the page, so new proposals still appear at once, and the
    focus stays on the same card's button (never moves to another proposal's)."""
    first = propose(live, proposal_body("First in line."))
    second = propose(live, proposal_body("Second in line."))
    page.reload()
    page.locator(f"article#{first['id']}").get_by_role("button", name="Approve").focus()
    page.keyboard.press("Enter")
    next_approve = page.locator(f"article#{second['id']}").get_by_role("button", name="Approve")
    expect(next_approve).to_be_focused()
    third = propose(live, proposal_body("Third, while the focus is on the second."))
    expect(page.locator(f"article#{third['id']}")).to_be_visible(timeout=1_000)
    expect(next_approve).to_be_focused()
    page.keyboard.press("Enter")  # the second, as the focus says: not the third
    expect(page.locator(f"article#{second['id']}")).to_have_count(0)
    assert proposal_status(live, second["id"])["status"] == "approved"
    assert proposal_status(live, third["id"])["status"] == "pending"
    third_approve = page.locator(f"article#{third['id']}").get_by_role("button", name="Approve")
    expect(third_approve).to_be_focused()
    # once the reviewer moves the focus, even back onto the button the page chose, it is theirs
    page.keyboard.press("Tab")
    page.keyboard.press("Shift+Tab")
    expect(third_approve).to_be_focused()
    fourth = propose(live, proposal_body("Fourth, while the reviewer holds the focus."))
    expect(page.locator("#live-status")).to_contain_text("changes wait while you use the page")
    expect(page.locator(f"article#{fourth['id']}")).to_have_count(0)
    page.keyboard.press("Enter")
    expect(page.locator(f"article#{third['id']}")).to_have_count(0)
    fourth_approve = page.locator(f"article#{fourth['id']}").get_by_role("button", name="Approve")
    expect(fourth_approve).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Review queue")).to_be_focused()
    fifth = propose(live, proposal_body("Fifth, into the empty queue."))
    expect(page.locator(f"article#{fifth['id']}")).to_be_visible(timeout=1_000)


def test_without_its_script_deleting_a_memory_asks_on_a_page_of_its_own(page: Page, live: LiveServer) -> None:
    """The question is the script's (window.confirm); without it (scripts off, or not loaded) the
    delete is not done at once: the answer is a page that asks, with Delete and Cancel."""
    created = propose(live, proposal_body("Staging runs on Fridays."))
    with control(live) as http:
        memory = http.post(f"/_fake/proposals/{created['id']}/approve").json()["proposal"]["memory"]
    page.route("**/static/console.js", lambda route: route.abort())
    page.goto(f"{live.base_url}{CONSOLE}/memories")
    page.get_by_role("button", name=f"Delete {memory['id']}").click()
    expect(page.get_by_role("heading", name="Confirm")).to_be_visible()
    expect(page.get_by_text(f"Delete memory {memory['id']}? It is no longer recalled")).to_be_visible()
    with control(live) as http:
        assert [m["status"] for m in http.get("/_fake/memories").json()["items"]] == ["active"]
    page.get_by_role("link", name="Cancel").click()
    expect(page.get_by_role("button", name=f"Delete {memory['id']}")).to_be_visible()  # the memories page
    page.get_by_role("button", name=f"Delete {memory['id']}").click()
    page.get_by_role("button", name=f"Delete {memory['id']}").click()  # the confirmation page's
    expect(page.get_by_role("button", name=f"Restore {memory['id']}")).to_be_visible()


def test_text_that_opens_with_a_right_to_left_mark_is_laid_out_right_to_left(
    page: Page, live: LiveServer
) -> None:
    """The mark is shown as ⟨U+200F⟩, whose letters would otherwise decide dir="auto"; a rejection's
    reason keeps its own direction beside the left-to-right reason code."""
    created = propose(live, proposal_body("\u200fשלום עולם, גרסה 2!", justification="\u200fכי ככה!"))
    other = propose(live, proposal_body("Rejected in Hebrew."))
    with control(live) as http:
        http.post(f"/_fake/proposals/{other['id']}/reject", json={"reason_detail": "לא עכשיו, תודה"})
    page.reload()
    content = page.locator(f"article#{created['id']} .content")
    expect(content).to_contain_text("⟨U+200F⟩")
    assert content.evaluate("element => getComputedStyle(element).direction") == "rtl"
    page.goto(f"{live.base_url}{CONSOLE}/proposals")
    reason = page.locator("td bdi", has_text="לא עכשיו")
    assert reason.evaluate("element => getComputedStyle(element).direction") == "rtl"


def test_a_live_update_waits_while_a_menu_holds_an_unsent_choice(page: Page, live: LiveServer) -> None:
    page.goto(f"{live.base_url}{CONSOLE}/settings")
    expect(page.locator("#live-status")).to_have_text("live")
    operation = page.get_by_label("Operation")
    operation.select_option("recall")
    page.locator("h1").click()
    page.mouse.move(0, 0)  # focus and pointer away: only the menu's choice holds the update
    with control(live) as http:
        assert http.post("/_fake/clock/advance", json={"seconds": 60}).status_code == 200
    expect(page.locator("#live-status")).to_have_text("live · changes wait while you use the page")
    expect(operation).to_have_value("recall")


def test_an_action_outside_the_queue_says_what_was_done_and_the_focus_goes_to_the_heading(
    page: Page, live: LiveServer
) -> None:
    page.goto(f"{live.base_url}{CONSOLE}/settings")
    page.get_by_role("textbox", name="Advance by").fill("2h")
    page.get_by_role("textbox", name="Advance by").press("Enter")
    expect(page.locator("#live-status")).to_contain_text("Advance: done")
    expect(page.get_by_role("heading", name="Clock, faults and policy")).to_be_focused()
    expect(page.get_by_role("button", name="Set the auto-approve of tenant_dev")).to_be_visible()


def test_console_pages_load_with_no_failed_request_or_console_error_and_name_their_icon(
    page: Page, live: LiveServer
) -> None:
    """No 4xx, no CSP report or script error on the pages; and they name an icon the console serves
    (without one, a browser asks the fake's root for /favicon.ico: a 404 in its console)."""
    failed: list[str] = []
    errors: list[str] = []

    def on_response(response: Any) -> None:
        if response.status >= 400:
            failed.append(f"{response.status} {response.url}")

    def on_console(message: Any) -> None:
        if message.type == "error":
            errors.append(message.text)

    page.on("response", on_response)
    page.on("console", on_console)
    try:
        for path in ("/", "/memories", "/settings"):
            page.goto(CONSOLE + path)
            expect(page.locator("#live-status")).to_have_text("live")
    finally:
        page.remove_listener("response", on_response)
        page.remove_listener("console", on_console)
    assert (failed, errors) == ([], [])
    icon = page.evaluate(
        "fetch(document.querySelector('link[rel=icon]').href)"
        ".then(r => r.status + ' ' + r.headers.get('content-type'))"
    )
    assert icon == "200 image/svg+xml"


@pytest.mark.parametrize("path", ["/proposals", "/settings"])
def test_an_untouched_page_with_menus_follows_the_live_updates(
    page: Page, live: LiveServer, path: str
) -> None:
    """A menu none of whose options the page marks selected shows its first: that is no choice of
    the reviewer's, and the page goes on updating (it held every update, for ever)."""
    page.goto(CONSOLE + path)
    expect(page.locator("#live-status")).to_have_text("live")
    if path == "/proposals":
        created = propose(live, proposal_body("Listed live."))
        expect(page.get_by_text(created["id"])).to_be_visible()
    else:
        with control(live) as http:
            assert http.post("/_fake/clock/advance", json={"seconds": 60}).status_code == 200
    expect(page.locator("#live-status")).to_contain_text("live · updated")
