"""When a schedule fires: an RFC 5545 RRULE stepped by dateutil, and the same rule in words.

A rule is stepped on the wall clock of the schedule's time zone (naive local times), and each
occurrence is then placed in that zone: "daily at 08:00" stays at 08:00 across a change of
daylight-saving time. The schedule form offers a few shapes (once, daily, weekdays, weekly on
a day, monthly on the nth weekday); ``describe`` words those in the active language and
shows any other rule as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from dateutil.rrule import rrulestr
from django.utils import formats
from django.utils.translation import gettext as _
from django.utils.translation import pgettext

WEEKDAY_CODES = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
FREQUENCIES = ("once", "daily", "weekdays", "weekly", "monthly")
# How far ahead an occurrence is looked for: a rule with none within this many is "ended".
_SEARCH_YEARS = 10


class RecurrenceError(ValueError):
    """The rule or its parts cannot make a schedule; the message says why, for its author."""


@dataclass(frozen=True)
class Shape:
    """A schedule's timing as the form has it."""

    frequency: str
    day: date
    at: time
    weekday: int = 0  # 0 = Monday (weekly and monthly)
    nth: int = 1  # 1..4, or -1 for the last (monthly)


def zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise RecurrenceError(_("Unknown time zone: %(zone)s.") % {"zone": name}) from None


def known_zone(name: str) -> bool:
    return name in available_timezones()


def rule_of(shape: Shape) -> str:
    """The RRULE for ``shape`` (empty for once)."""
    if shape.frequency not in FREQUENCIES:
        raise RecurrenceError(_("Choose how often it runs."))
    if shape.frequency == "once":
        return ""
    if shape.frequency == "daily":
        return "FREQ=DAILY"
    if shape.frequency == "weekdays":
        return "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR"
    if not 0 <= shape.weekday <= 6:
        raise RecurrenceError(_("Choose a day of the week."))
    day = WEEKDAY_CODES[shape.weekday]
    if shape.frequency == "weekly":
        return f"FREQ=WEEKLY;BYDAY={day}"
    if shape.nth not in (1, 2, 3, 4, -1):
        raise RecurrenceError(_("Choose which week of the month."))
    return f"FREQ=MONTHLY;BYDAY={shape.nth}{day}"


def first_local(shape: Shape) -> datetime:
    """DTSTART: the form's date and time, on the schedule's wall clock (naive)."""
    return datetime.combine(shape.day, shape.at)


def next_occurrence(
    *, rule: str, starts_at: datetime, time_zone: str, after: datetime, inclusive: bool = False
) -> datetime | None:
    """The first occurrence after ``after`` (aware), or None if there is none.

    ``starts_at`` is aware; it is read on the wall clock of ``time_zone``, where the rule
    steps. With ``inclusive``, an occurrence at ``after`` itself counts.
    """
    local = zone(time_zone)
    start = starts_at.astimezone(local).replace(tzinfo=None)
    after_local = after.astimezone(local).replace(tzinfo=None)
    if not rule:
        hit = start >= after_local if inclusive else start > after_local
        return starts_at if hit else None
    try:
        steps = rrulestr(rule, dtstart=start)
    except (ValueError, TypeError):
        raise RecurrenceError(_("The recurrence rule is not valid.")) from None
    found = steps.after(after_local, inc=inclusive)
    if found is None or found.year - after_local.year > _SEARCH_YEARS:
        return None
    return found.replace(tzinfo=local)


def latest_due(
    *, rule: str, starts_at: datetime, time_zone: str, due: datetime, now: datetime
) -> datetime:
    """The latest occurrence from ``due`` (itself one) up to ``now``: what a beat that was
    down fires, once, for every occurrence it missed."""
    latest = due
    while True:
        following = next_occurrence(
            rule=rule, starts_at=starts_at, time_zone=time_zone, after=latest
        )
        if following is None or following > now:
            return latest
        latest = following


def check_rule(rule: str) -> None:
    """Refuse a rule dateutil cannot read, or one that never stops firing more often than
    hourly (a schedule is not a loop)."""
    if not rule:
        return
    parts = _parts(rule)
    if parts.get("FREQ") in ("SECONDLY", "MINUTELY"):
        raise RecurrenceError(_("A schedule runs at most once an hour."))
    try:
        rrulestr(rule, dtstart=datetime(2000, 1, 1))
    except (ValueError, TypeError):
        raise RecurrenceError(_("The recurrence rule is not valid.")) from None


def describe(*, rule: str, starts_at: datetime, time_zone: str) -> str:
    """The rule in words, in the active language, with its time on ``time_zone``'s clock."""
    local = starts_at.astimezone(zone(time_zone))
    at = formats.time_format(local.time(), "H:i")
    if not rule:
        return _("Once, on %(date)s at %(time)s (%(zone)s)") % {
            "date": formats.date_format(local.date(), "DATE_FORMAT"),
            "time": at,
            "zone": time_zone,
        }
    parts = _parts(rule)
    words = _shape_words(parts)
    if words is None:
        return _("By the rule %(rule)s, from %(time)s (%(zone)s)") % {
            "rule": rule,
            "time": at,
            "zone": time_zone,
        }
    return _("%(when)s at %(time)s (%(zone)s)") % {"when": words, "time": at, "zone": time_zone}


def _shape_words(parts: dict[str, str]) -> str | None:
    frequency = parts.get("FREQ")
    extra = set(parts) - {"FREQ", "BYDAY"}
    if extra:
        return None
    days = [d for d in parts.get("BYDAY", "").split(",") if d]
    if frequency == "DAILY" and not days:
        return _("Every day")
    if frequency == "WEEKLY" and days == ["MO", "TU", "WE", "TH", "FR"]:
        return _("Every weekday")
    if frequency == "WEEKLY" and len(days) == 1 and days[0] in WEEKDAY_CODES:
        return _("Every %(weekday)s") % {"weekday": _weekday_name(days[0])}
    if frequency == "MONTHLY" and len(days) == 1 and days[0][-2:] in WEEKDAY_CODES:
        try:
            nth = int(days[0][:-2])
        except ValueError:
            return None
        ordinal = _ordinal(nth)
        if ordinal is None:
            return None
        # "%(nth)s" is the whole ordinal ("first", "last"): languages place it differently.
        return _("Every %(nth)s %(weekday)s of the month") % {
            "nth": ordinal,
            "weekday": _weekday_name(days[0][-2:]),
        }
    return None


def _parts(rule: str) -> dict[str, str]:
    parts = {}
    for part in rule.upper().removeprefix("RRULE:").split(";"):
        name, _sep, value = part.partition("=")
        if name:
            parts[name.strip()] = value.strip()
    return parts


def _weekday_name(code: str) -> str:
    return {
        "MO": _("Monday"),
        "TU": _("Tuesday"),
        "WE": _("Wednesday"),
        "TH": _("Thursday"),
        "FR": _("Friday"),
        "SA": _("Saturday"),
        "SU": _("Sunday"),
    }[code]


def _ordinal(nth: int) -> str | None:
    return {
        1: pgettext("week of the month", "first"),
        2: pgettext("week of the month", "second"),
        3: pgettext("week of the month", "third"),
        4: pgettext("week of the month", "fourth"),
        -1: pgettext("week of the month", "last"),
    }.get(nth)
