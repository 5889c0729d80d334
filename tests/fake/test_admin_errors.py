"""Issue 17, point 7: an ``AdminError`` says everything its problem says, so a failing test's output
is enough to fix the call."""

from __future__ import annotations

import pytest

from fake_lucy.testing import AdminError
from tests.helpers import propose

pytestmark = pytest.mark.anyio


async def test_an_admin_error_lists_each_schema_error_with_its_pointer_and_rule(admin) -> None:
    with pytest.raises(AdminError) as caught:
        await admin.call("POST", "/faults", {"operation": "propose", "status": 201, "count": 0})
    assert str(caught.value) == (
        "422 invalid_request: the request does not match the schema: /count must be at least 1; "
        "/status must be one of: 429, 500, 502, 503, 504; /status must be at least 429"
    )
    assert caught.value.problem["details"]["errors"][0] == {
        "pointer": "/count",
        "detail": "must be at least 1",
    }


async def test_an_admin_error_shows_the_other_details_its_problem_carries(api, admin) -> None:
    proposal = (await propose(api)).json()["proposal"]
    await admin.reject(proposal["id"])
    with pytest.raises(AdminError) as caught:
        await admin.approve(proposal["id"])
    assert caught.value.code == "invalid_transition"
    assert str(caught.value).endswith(" (status=rejected)")


def test_an_admin_error_without_details_is_status_code_and_detail() -> None:
    error = AdminError(404, {"code": "not_found", "detail": "no such proposal"})
    assert str(error) == "404 not_found: no such proposal"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("yes", "must be one of: off, all (or a list)"),  # the word form refused: the list form is named
        (5, "must be one of: off, all (or a list)"),  # neither form: both named, the words as words
        (None, "must be one of: off, all (or a list)"),
        (["fact", "fact"], "must not contain duplicate items (or one of: off, all)"),
        (
            ["gossip"],
            "must be one of: preference, identity, fact, decision, rule, brand_note, editorial_decision",
        ),
    ],
)
async def test_a_value_of_one_allowed_form_is_refused_naming_the_other_forms(admin, value, said) -> None:
    """``auto_approve`` is "off", "all" or a list of kinds: a refused word must not hide the list."""
    with pytest.raises(AdminError) as caught:
        await admin.call("PUT", "/tenants/tenant_dev/policy", {"auto_approve": value})
    [error] = caught.value.problem["details"]["errors"]
    pointer = "/auto_approve/0" if value == ["gossip"] else "/auto_approve"
    assert error == {"pointer": pointer, "detail": said}


def test_a_nullable_field_of_another_type_is_refused_naming_both_types() -> None:
    from lucy_memory._contract import schema_validator

    body = {"kind": "fact", "content": "x", "scope": {"kind": "project", "id": "p"}, "topic": 5}
    [error] = schema_validator("propose-request.schema.json").errors(body)
    assert error.as_dict() == {"pointer": "/topic", "detail": "must be a string or null"}
