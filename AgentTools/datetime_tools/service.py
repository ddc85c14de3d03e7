"""The datetime tool: now, parse, format, convert between time zones, add, difference, calendar info.

Time zones are IANA names (`Europe/Paris`) through `zoneinfo`; values are ISO 8601 strings (a trailing `Z`
is UTC) or Unix timestamps. A value without an offset is read in `timezone` (UTC by default).
"""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

OPERATIONS = ("now", "parse", "format", "convert", "add", "diff", "info")
_UNITS = ("weeks", "days", "hours", "minutes", "seconds")


def zone(name: str | None, field: str = "timezone") -> Any:
    """The tzinfo for an IANA name (`UTC` when empty)."""
    if not name or name.upper() in ("UTC", "Z", "GMT"):
        return UTC
    if len(name) > 64:
        raise ValueError(f"{field} {name[:64]!r}... is not a time zone name")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"{field} {name!r} is not a known IANA time zone (e.g. 'Europe/Paris', 'America/New_York')"
        ) from exc


def parse_value(value: Any, tz: Any, fmt: str | None = None, field: str = "value") -> datetime:
    """A timezone-aware datetime from an ISO 8601 string, a Unix timestamp or `fmt` (strptime)."""
    if isinstance(value, bool):
        raise ValueError(f"{field} must be a date/time string or a Unix timestamp, got {value!r}")
    if isinstance(value, (int, float)) or (
        isinstance(value, str)
        and value.strip().lstrip("-").replace(".", "", 1).isdigit()
        and len(value.strip()) >= 9
    ):
        try:
            return datetime.fromtimestamp(float(value), tz=UTC).astimezone(tz)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError(f"{field} {value!r} is not a valid Unix timestamp") from exc
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{field} must be a date/time string or a Unix timestamp, got {value!r}")
    text = value.strip()
    try:
        parsed = datetime.strptime(text, fmt) if fmt else datetime.fromisoformat(text)
    except ValueError as exc:
        hint = f"format {fmt!r}" if fmt else "ISO 8601 (e.g. '2025-03-01T14:30:00+01:00' or '2025-03-01')"
        raise ValueError(f"{field} {value!r} does not match {hint}") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)


def describe(moment: datetime) -> dict[str, Any]:
    """The common fields every operation returns for a moment."""
    offset = moment.utcoffset() or timedelta(0)
    return {
        "iso": moment.isoformat(),
        "unix": moment.timestamp(),
        "timezone": str(moment.tzinfo),
        "utc_offset_minutes": int(offset.total_seconds() // 60),
        "weekday": calendar.day_name[moment.weekday()],
    }


def _human(seconds: float) -> str:
    sign = "-" if seconds < 0 else ""
    remaining = int(abs(seconds))
    parts = []
    for name, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, remaining = divmod(remaining, size)
        if count:
            parts.append(f"{count} {name}{'s' if count != 1 else ''}")
    return sign + (", ".join(parts) if parts else "0 seconds")


class DateTimeService:
    """Date and time arithmetic with real time zones."""

    def run(
        self,
        operation: str,
        value: Any = None,
        end: Any = None,
        timezone: str = "UTC",
        to_timezone: str | None = None,
        format: str | None = None,
        output_format: str | None = None,
        weeks: float = 0,
        days: float = 0,
        hours: float = 0,
        minutes: float = 0,
        seconds: float = 0,
        **_ignored: Any,
    ) -> dict[str, Any]:
        """Run one date/time operation; every result has `operation` and `result` (ISO text or number).

        Raises:
            ValueError: an unknown operation or time zone, a value that does not parse, an overflow.
        """
        if operation not in OPERATIONS:
            raise ValueError(f"operation {operation!r} is unknown; expected one of: {', '.join(OPERATIONS)}")
        tz = zone(timezone)
        if operation == "now":
            moment = datetime.now(tz)
            return {"operation": operation, "result": moment.isoformat(), **describe(moment)}
        if value is None:
            raise ValueError(
                f"operation {operation!r} needs value (an ISO 8601 date/time or a Unix timestamp)"
            )
        moment = parse_value(value, tz, format)
        if operation == "parse":
            return {"operation": operation, "result": moment.isoformat(), **describe(moment)}
        if operation == "format":
            pattern = output_format or "%Y-%m-%d %H:%M:%S %Z"
            if len(pattern) > 200:
                raise ValueError(f"output_format is {len(pattern)} characters long; at most 200 are allowed")
            return {"operation": operation, "result": moment.strftime(pattern), **describe(moment)}
        if operation == "convert":
            converted = moment.astimezone(zone(to_timezone, "to_timezone"))
            return {
                "operation": operation,
                "result": converted.isoformat(),
                "from": moment.isoformat(),
                **describe(converted),
            }
        if operation == "add":
            shifted = _shifted(moment, value, weeks, days, hours, minutes, seconds)
            return {
                "operation": operation,
                "result": shifted.isoformat(),
                "from": moment.isoformat(),
                **describe(shifted),
            }
        if operation == "diff":
            if end is None:
                raise ValueError("operation 'diff' needs end (the second date/time)")
            delta = (parse_value(end, tz, format, "end") - moment).total_seconds()
            return {
                "operation": operation,
                "result": delta,
                "seconds": delta,
                "minutes": delta / 60,
                "hours": delta / 3600,
                "days": delta / 86400,
                "human": _human(delta),
            }
        return {"operation": operation, "result": moment.date().isoformat(), **_calendar_facts(moment)}


def _shifted(
    moment: datetime, value: Any, weeks: float, days: float, hours: float, minutes: float, seconds: float
) -> datetime:
    """`moment` moved by the given amounts (`add`); ValueError when that leaves the supported range."""
    try:
        return moment + timedelta(weeks=weeks, days=days, hours=hours, minutes=minutes, seconds=seconds)
    except OverflowError as exc:
        raise ValueError(
            f"adding {weeks}w {days}d {hours}h {minutes}m {seconds}s to {value!r} leaves the supported date range"
        ) from exc


def _calendar_facts(moment: datetime) -> dict[str, Any]:
    """What `info` answers besides the date: `describe`'s fields and the calendar's (ISO week, quarter)."""
    iso_year, iso_week, _ = moment.isocalendar()
    return {
        **describe(moment),
        "iso_week": iso_week,
        "iso_year": iso_year,
        "day_of_year": moment.timetuple().tm_yday,
        "is_leap_year": calendar.isleap(moment.year),
        "days_in_month": calendar.monthrange(moment.year, moment.month)[1],
        "quarter": (moment.month - 1) // 3 + 1,
    }
