"""current_time: zone-aware, with a clear error for a zone that does not exist."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from agents.react.tools import ToolInputError
from agents.tools.builtin.current_time import CurrentTime
from agents.tools.registry import validate_tool_config


def _parsed(text: str) -> datetime:
    """``Sunday 2026-11-22 08:45:12 CET (UTC+01:00, Europe/Paris)`` -> aware datetime."""
    _, day, clock, _, rest = text.split(" ", 4)
    offset = rest.split(",")[0].removeprefix("(UTC")
    return datetime.fromisoformat(f"{day}T{clock}{offset}")


def test_names_the_zone_and_its_offset():
    text = CurrentTime().run(timezone="Asia/Shanghai")
    assert "(UTC+08:00, Asia/Shanghai)" in text
    assert " CST " in text


def test_reports_the_present_moment_in_that_zone():
    before = datetime.now(UTC).replace(microsecond=0)
    moment = _parsed(CurrentTime().run(timezone="America/New_York"))
    after = datetime.now(UTC)
    assert before <= moment <= after
    expected_offset = datetime.now(ZoneInfo("America/New_York")).utcoffset()
    assert moment.utcoffset() == expected_offset
    assert moment.strftime("%A") in CurrentTime().run(timezone="America/New_York")


def test_defaults_to_the_configured_zone_then_utc():
    assert "(UTC+00:00, UTC)" in CurrentTime().run()
    tool = CurrentTime(config={"default_timezone": "Asia/Kolkata"})
    assert "(UTC+05:30, Asia/Kolkata)" in tool.run()
    assert "(UTC+00:00, UTC)" in tool.run(timezone="UTC")


def test_zone_names_are_case_insensitive():
    assert "Europe/Paris" in CurrentTime().run(timezone="europe/paris")


@pytest.mark.parametrize("zone", ["Mars/Olympus_Mons", "../../etc/passwd", "Europe/Pariss"])
def test_unknown_zone_is_a_clear_error(zone):
    with pytest.raises(ToolInputError, match="unknown time zone"):
        CurrentTime().run(timezone=zone)


def test_unknown_zone_suggests_close_names():
    with pytest.raises(ToolInputError, match="Did you mean Europe/Paris"):
        CurrentTime().run(timezone="Europe/Pariss")


def test_config_with_unknown_default_zone_is_a_field_error():
    errors = validate_tool_config("current_time", {"default_timezone": "Nowhere/Else"})
    assert set(errors) == {"default_timezone"}
    assert "unknown time zone" in errors["default_timezone"]
    assert validate_tool_config("current_time", {"default_timezone": "Europe/Berlin"}) == {}


def test_timestamps_near_now_do_not_drift_by_a_day():
    moment = _parsed(CurrentTime().run(timezone="Pacific/Kiritimati"))
    assert abs(moment - datetime.now(UTC)) < timedelta(minutes=5)
