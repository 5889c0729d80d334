"""``PUT /_fake/clock`` takes any RFC 3339 date-time and answers in the fake's fixed form."""

from __future__ import annotations

import pytest

from fake_lucy.testing import AdminError

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("sent", "answered"),
    [
        ("2030-01-01T00:00:00Z", "2030-01-01T00:00:00.000000Z"),
        ("2030-01-01T00:00:00.000000Z", "2030-01-01T00:00:00.000000Z"),
        ("2030-01-01T02:00:00+02:00", "2030-01-01T00:00:00.000000Z"),
        ("2029-12-31T19:30:00.5-04:30", "2030-01-01T00:00:00.500000Z"),
        ("2030-01-01T00:00:00.123456789Z", "2030-01-01T00:00:00.123456Z"),
        ("2030-01-01T00:00:00.1+00:00", "2030-01-01T00:00:00.100000Z"),
        ("2030-01-01t00:00:00z", "2030-01-01T00:00:00.000000Z"),
    ],
)
async def test_the_clock_takes_any_rfc3339_date_time_and_answers_in_the_fixed_form(
    admin, sent, answered
) -> None:
    result = await admin.set_clock(now=sent, frozen=True)
    assert result == {"now": answered, "frozen": True}
    assert (await admin.clock())["now"] == answered


@pytest.mark.parametrize(
    "sent",
    [
        "2030-02-30T00:00:00Z",  # no such day
        "2030-01-01T00:00:60Z",  # a leap second the fake cannot hold
        "2030-01-01T00:00:00+24:00",  # no such offset
        "2030-01-01T00:00:00",  # no zone: a local time is not an instant
        "2030-01-01 00:00:00Z",
        "2030-01-01T00:00Z",
        "2030-01-01T00:00:00.Z",
        "tomorrow",
    ],
)
async def test_a_time_that_is_not_an_rfc3339_instant_is_422_at_now(admin, sent) -> None:
    before = await admin.clock()
    with pytest.raises(AdminError) as caught:
        await admin.set_clock(now=sent, frozen=True)
    assert (caught.value.status, caught.value.code) == (422, "invalid_request")
    assert [error["pointer"] for error in caught.value.problem["details"]["errors"]] == ["/now"]
    assert (await admin.clock())["frozen"] == before["frozen"]  # nothing written


async def test_an_offset_that_puts_the_instant_in_the_past_is_a_clock_regression(admin) -> None:
    await admin.set_clock(now="2030-01-01T00:00:00Z", frozen=True)
    with pytest.raises(AdminError) as caught:
        await admin.set_clock(now="2030-01-01T00:30:00+01:00")  # 2029-12-31T23:30:00Z
    assert (caught.value.status, caught.value.code) == (409, "clock_regression")
    assert caught.value.problem["details"] == {"now": "2030-01-01T00:00:00.000000Z"}
