"""The reset time of a codex usage limit, read from codex's message (its local time, which is ours)."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator

import pytest

from workflow_mcp.providers.codex import _reset_time

PLAN = (
    "You’ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit "
    "https://chatgpt.com/settings/usage to purchase more credits or try again at {when}."
)


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    def use(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield use
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(
    ("tz", "when", "expected"),
    [
        ("UTC", "Dec 2nd, 2026 8:26 AM", "2026-12-02T08:27:00Z"),
        ("UTC", "Jan 1st, 2027 12:05 AM", "2027-01-01T00:06:00Z"),
        ("UTC", "Mar 23rd, 2027 12:59 PM", "2027-03-23T13:00:00Z"),
        ("Asia/Tokyo", "Dec 2nd, 2026 5:26 PM", "2026-12-02T08:27:00Z"),
    ],
)
def test_the_named_time_is_read_in_the_local_zone_and_rounded_up_to_the_next_minute(
    zone: object, tz: str, when: str, expected: str
) -> None:
    zone(tz)  # type: ignore[operator]
    assert _reset_time(PLAN.format(when=when)) == expected


def test_a_time_without_a_date_is_today(zone: object) -> None:
    zone("UTC")  # type: ignore[operator]
    now = datetime.datetime(2026, 12, 1, 6, 0)
    assert _reset_time(PLAN.format(when="11:59 PM"), now) == "2026-12-02T00:00:00Z"


@pytest.mark.parametrize(
    "detail",
    [
        "try again later.",
        "Quota exceeded. Check your plan and billing details.",
        PLAN.format(when="Foo 31st, 2026 8:26 AM"),
    ],
)
def test_a_message_naming_no_readable_time_gives_none(detail: str) -> None:
    assert _reset_time(detail) is None
