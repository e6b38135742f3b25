"""``current_time``: the date and time now, in a named IANA time zone."""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from agents.react.tools import ToolInputError
from agents.tools.base import ConfiguredTool

CONFIG_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "default_timezone": {"type": "string", "minLength": 1, "default": "UTC"},
    },
    "additionalProperties": False,
}


class CurrentTime(ConfiguredTool):
    """Tells the current date and time in a time zone."""

    read_only = True

    name = "current_time"
    description = (
        "Returns the current date, weekday and time. Optional input: an IANA time zone "
        "such as Europe/Paris or Asia/Shanghai (default UTC)."
    )

    @classmethod
    def check_config(cls, config: Mapping[str, Any]) -> dict[str, str]:
        try:
            resolve_zone(config["default_timezone"])
        except ToolInputError as exc:
            return {"default_timezone": str(exc)}
        return {}

    def run(self, timezone: str = "") -> str:
        zone = resolve_zone(timezone.strip() or self.config.get("default_timezone", "UTC"))
        return describe(datetime.now(UTC).astimezone(zone), zone)


def describe(moment: datetime, zone: ZoneInfo) -> str:
    """``Sunday 2026-11-22 08:45:12 CET (UTC+01:00, Europe/Paris)``."""
    offset = moment.strftime("%z")
    return (
        f"{moment:%A %Y-%m-%d %H:%M:%S} {moment.tzname()} "
        f"(UTC{offset[:3]}:{offset[3:]}, {zone.key})"
    )


def resolve_zone(name: str) -> ZoneInfo:
    """The zone for an IANA name, accepting any letter case; a clear error otherwise."""
    canonical = _zones_by_lowercase().get(name.strip().lower(), name.strip())
    try:
        return ZoneInfo(canonical)
    except (ZoneInfoNotFoundError, ValueError):
        close = difflib.get_close_matches(canonical, sorted(available_timezones()), n=3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ToolInputError(
            f"unknown time zone {name!r}; use an IANA name such as Europe/Paris or UTC.{hint}"
        ) from None


@functools.cache
def _zones_by_lowercase() -> dict[str, str]:
    return {zone.lower(): zone for zone in available_timezones()}
