"""MCP server "core": the clock, calendar arithmetic and a calculator.

Run over stdio: ``python -m actors.tools.servers.core``. The owner's time zone comes from
``IRIIS_TIMEZONE`` (an IANA name such as ``Europe/Paris``; UTC when unset), so "today",
"tomorrow" and weekday names mean the owner's day, not the server's.
"""

from __future__ import annotations

import calendar
import datetime as dt
import logging
import os
import re
from collections.abc import Mapping
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from actors.common.arith import CalcError, evaluate, format_number
from actors.common.when import natural_moment

log = logging.getLogger(__name__)

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)

_WEEKDAYS: dict[str, int] = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_WEEKDAYS.update({name.lower(): i for i, name in enumerate(calendar.day_abbr)})
# Bounds the arithmetic well inside what datetime can represent, so a silly argument gets a
# sentence back rather than an OverflowError.
_MAX_SPAN_DAYS = 365 * 200


def owner_zone(env: Mapping[str, str] | None = None) -> ZoneInfo:
    name = (env if env is not None else os.environ).get("IRIIS_TIMEZONE", "").strip() or "UTC"
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        log.warning("IRIIS_TIMEZONE=%r is not a known time zone; using UTC", name)
        return ZoneInfo("UTC")


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown time zone {name!r}; use an IANA name such as Europe/Paris") from None


def _offset(moment: dt.datetime) -> str:
    offset = moment.utcoffset() or dt.timedelta(0)
    sign = "-" if offset < dt.timedelta(0) else "+"
    minutes = abs(int(offset.total_seconds())) // 60
    return f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def describe_moment(moment: dt.datetime, zone_name: str) -> str:
    return (f"{moment.strftime('%A %d %B %Y, %H:%M')} ({zone_name}, {_offset(moment)}); "
            f"ISO {moment.isoformat(timespec='seconds')}")


def _describe(value: dt.date | dt.datetime) -> str:
    if isinstance(value, dt.datetime):
        return f"{value.isoformat(timespec='minutes')} ({value.strftime('%A %d %B %Y, %H:%M')})"
    return f"{value.isoformat()} ({value.strftime('%A %d %B %Y')})"


_RELATIVE = re.compile(r"^(?:(next|last|this|coming|previous)\s+)?([a-z]+)$")


def parse_moment(text: str, zone: ZoneInfo, now: dt.datetime | None = None) -> dt.date | dt.datetime:
    """A date or date-time from ISO text, 'now', 'today', 'tomorrow', 'yesterday' or a weekday.

    A bare weekday means the next one on or after today; 'next' means strictly after today and
    'last' strictly before it, which is how people use them in speech.
    """
    now = now or dt.datetime.now(zone)
    today = now.date()
    cleaned = " ".join(text.strip().lower().split())
    if cleaned == "now":
        return now.replace(microsecond=0)
    named = {"today": today, "tomorrow": today + dt.timedelta(days=1),
             "yesterday": today - dt.timedelta(days=1)}
    if cleaned in named:
        return named[cleaned]
    match = _RELATIVE.match(cleaned)
    if match and match.group(2) in _WEEKDAYS:
        qualifier, target = match.group(1), _WEEKDAYS[match.group(2)]
        if qualifier in ("last", "previous"):
            back = (today.weekday() - target) % 7 or 7
            return today - dt.timedelta(days=back)
        ahead = (target - today.weekday()) % 7
        if qualifier in ("next", "coming") and ahead == 0:
            ahead = 7
        return today + dt.timedelta(days=ahead)
    try:
        if len(cleaned) == 10:
            return dt.date.fromisoformat(cleaned)
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        found = natural_moment(cleaned, now, zone)
        if found is None:
            raise ToolError(f"could not read the date {text!r}: use YYYY-MM-DD, YYYY-MM-DDTHH:MM, now, today, "
                            "tomorrow, a weekday name, '24 December 2026' or 'in 30 days'") from None
        return found
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)


def _add_months(value: dt.date | dt.datetime, months: int) -> dt.date | dt.datetime:
    index = value.year * 12 + (value.month - 1) + months
    year, month = divmod(index, 12)
    if not dt.MINYEAR <= year <= dt.MAXYEAR:
        raise ToolError("the result is outside the calendar")
    # 31 January + 1 month is the last day of February, as people expect.
    day = min(value.day, calendar.monthrange(year, month + 1)[1])
    return value.replace(year=year, month=month + 1, day=day)


def date_add_text(date: str, zone: ZoneInfo, days: int = 0, weeks: int = 0, months: int = 0,
                  hours: int = 0, minutes: int = 0, now: dt.datetime | None = None) -> str:
    start = parse_moment(date, zone, now)
    span_days = abs(days) + abs(weeks) * 7 + abs(months) * 31 + (abs(hours) + abs(minutes) // 60) // 24
    if span_days > _MAX_SPAN_DAYS or abs(months) > 12 * 200:
        raise ToolError("that span is too large (limit 200 years)")
    result: dt.date | dt.datetime = _add_months(start, months) if months else start
    if (hours or minutes) and not isinstance(result, dt.datetime):
        result = dt.datetime.combine(result, dt.time(0, 0), tzinfo=zone)
    try:
        result = result + dt.timedelta(days=days, weeks=weeks, hours=hours, minutes=minutes)
    except OverflowError:
        raise ToolError("the result is outside the calendar") from None
    span = ", ".join(_count(n, name) for n, name in ((months, "month"), (weeks, "week"), (days, "day"),
                                                    (hours, "hour"), (minutes, "minute")) if n)
    return f"{_describe(start)} + {span or 'nothing'} = {_describe(result)}"


def _count(value: float, unit: str) -> str:
    shown = format_number(round(value, 2))
    return f"{shown} {unit if shown in ('1', '-1') else unit + 's'}"


def date_diff_text(start: str, end: str, zone: ZoneInfo,
                   unit: Literal["days", "weeks", "hours"] = "days", now: dt.datetime | None = None) -> str:
    now = now or dt.datetime.now(zone)
    a, b = parse_moment(start, zone, now), parse_moment(end, zone, now)
    if isinstance(a, dt.datetime) or isinstance(b, dt.datetime):
        a_dt = a if isinstance(a, dt.datetime) else dt.datetime.combine(a, dt.time(0, 0), tzinfo=zone)
        b_dt = b if isinstance(b, dt.datetime) else dt.datetime.combine(b, dt.time(0, 0), tzinfo=zone)
        seconds = (b_dt - a_dt).total_seconds()
    else:
        seconds = float((b - a).days * 86400)
    # Magnitudes are described unsigned; the direction is said in words, since
    # "-8 weeks and 4 days" reads ambiguously.
    days = abs(seconds) / 86400
    if unit == "hours":
        amount = _count(abs(seconds) / 3600, "hour")
    elif unit == "weeks":
        whole_weeks, rest = divmod(days, 7)
        amount = _count(whole_weeks, "week")
        if round(rest, 2):
            amount += f" and {_count(rest, 'day')}"
        amount += f" ({_count(days, 'day')})"
    else:
        amount = _count(days, "day")
    direction = ", the end being before the start" if seconds < 0 else ""
    return f"From {_describe(a)} to {_describe(b)}: {amount}{direction}"


def create_server(env: Mapping[str, str] | None = None) -> MCPServer:
    zone = owner_zone(env)
    zone_name = str(zone.key)
    server = MCPServer(
        "core",
        instructions=(f"Clock, calendar arithmetic and a calculator. The owner's time zone is "
                      f"{zone_name}; 'today' and weekday names are in that zone."),
    )

    @server.tool(annotations=READ_ONLY)
    def current_time(
        timezone: Annotated[str | None, Field(description="IANA time zone; the owner's when omitted")] = None,
    ) -> str:
        """The current date and time, in the owner's time zone unless another is asked for."""
        tz = _zone(timezone) if timezone else zone
        return describe_moment(dt.datetime.now(tz), str(tz.key))

    @server.tool(annotations=READ_ONLY)
    def date_add(
        date: Annotated[str, Field(description="YYYY-MM-DD, YYYY-MM-DDTHH:MM, now, today, tomorrow or a weekday")],
        days: int = 0, weeks: int = 0, months: int = 0, hours: int = 0, minutes: int = 0,
    ) -> str:
        """Add (or, with negative numbers, subtract) a span to a date; months keep the day of the
        month where it exists and otherwise land on the month's last day."""
        return date_add_text(date, zone, days=days, weeks=weeks, months=months,
                             hours=hours, minutes=minutes)

    @server.tool(annotations=READ_ONLY)
    def date_diff(
        start: Annotated[str, Field(description="YYYY-MM-DD, date-time, today, or a weekday such as 'next friday'")],
        end: Annotated[str, Field(description="same forms as start")],
        unit: Literal["days", "weeks", "hours"] = "days",
    ) -> str:
        """How long from start to end, in days, weeks or hours."""
        return date_diff_text(start, end, zone, unit)

    @server.tool(annotations=READ_ONLY)
    def calculate(
        expression: Annotated[str, Field(description="arithmetic such as '(12.5 * 4) / 3' or 'sqrt(2)'")],
    ) -> str:
        """Exact arithmetic: + - * / // % ** and sqrt, round, min, max, log, sin, cos, pi, e."""
        try:
            return format_number(evaluate(expression))
        except CalcError as exc:
            raise ToolError(f"cannot calculate {expression!r}: {exc}") from None

    return server


def main() -> None:
    create_server().run("stdio")


if __name__ == "__main__":
    main()
