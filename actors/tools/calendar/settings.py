"""The calendar account, from environment variables: pure, no network.

* ``IRIIS_CALDAV_URL``, ``IRIIS_CALDAV_USER``, ``IRIIS_CALDAV_PASSWORD``: required; without all
  three the account is not configured (`calendar_settings` answers None). The URL may be the
  server's root, the user's principal or one calendar: the principal is found from it.
* ``IRIIS_CALDAV_CALENDAR``: the name (display name or last path part) of the calendar new
  events go to; the first calendar when unset.
* ``IRIIS_CARDDAV_URL``: where the address books are (default: ``IRIIS_CALDAV_URL``).
* ``IRIIS_CALDAV_EMAIL``: the owner's own address, the ORGANIZER of the events they invite people
  to (default: the user name when it is an address). Events organised by anyone else are
  outside content.
* ``IRIIS_TIMEZONE``: the owner's zone, an IANA name (default UTC): times are read and shown in it.
* ``IRIIS_WORKING_HOURS``: the hours ``free_time`` looks in, ``HH:MM-HH:MM`` (default 09:00-18:00).
* ``IRIIS_CALDAV_TIMEOUT``: seconds for one server exchange (default 20).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import time
from urllib.parse import urlsplit, urlunsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from actors.common.errors import IriisError

REQUIRED = ("IRIIS_CALDAV_URL", "IRIIS_CALDAV_USER", "IRIIS_CALDAV_PASSWORD")
DEFAULT_HOURS = (time(9, 0), time(18, 0))
_HOURS = re.compile(r"^\s*(\d{1,2}):?(\d{2})?\s*-\s*(\d{1,2}):?(\d{2})?\s*$")


class CalendarConfigError(IriisError, ValueError):
    """The calendar settings are present but wrong; the message says which variable to fix."""

    code = "calendar_config"


class CalendarSettings(BaseModel):
    """One CalDAV/CardDAV account and how the owner's times are read."""

    model_config = ConfigDict(frozen=True)

    url: str = Field(min_length=1)
    user: str = Field(min_length=1)
    password: SecretStr
    calendar: str | None = None
    carddav_url: str = Field(min_length=1)
    email: str | None = None
    timezone: str = "UTC"
    work_start: time = DEFAULT_HOURS[0]
    work_end: time = DEFAULT_HOURS[1]
    timeout: float = Field(default=20.0, gt=0, le=300)

    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def owner_addresses(self) -> frozenset[str]:
        """The owner's own addresses, lower case: an event they organise is theirs."""
        found = {a.strip().lower() for a in (self.email, self.user) if a and "@" in a}
        return frozenset(found)


def shown_url(url: str) -> str:
    """`url` without any user name or password in it, as an error message may show it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "the configured URL"
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def _check_url(key: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise CalendarConfigError(f"{key} must be an http or https URL, got {shown_url(url)!r}")
    return url


def _zone(name: str) -> str:
    try:
        return ZoneInfo(name).key
    except (ZoneInfoNotFoundError, ValueError):
        raise CalendarConfigError(f"IRIIS_TIMEZONE={name!r} is not a known time zone (use an IANA name "
                                  "such as Europe/Paris)") from None


def working_hours(text: str) -> tuple[time, time]:
    """`09:00-18:00` (or `9-18`, `8:30-17`) as two times; CalendarConfigError for anything else."""
    match = _HOURS.match(text)
    if match is None:
        raise CalendarConfigError(f"IRIIS_WORKING_HOURS must read like 09:00-18:00, got {text!r}")
    h1, m1, h2, m2 = (int(g or 0) for g in match.groups())
    if h1 > 23 or h2 > 24 or m1 > 59 or m2 > 59:
        raise CalendarConfigError(f"IRIIS_WORKING_HOURS: {text!r} is not a time of day range")
    end = time(23, 59) if h2 == 24 else time(h2, m2)
    start = time(h1, m1)
    if end <= start:
        raise CalendarConfigError(f"IRIIS_WORKING_HOURS: the end of {text!r} is not after its start")
    return start, end


def _timeout(raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise CalendarConfigError(f"IRIIS_CALDAV_TIMEOUT must be a number of seconds, got {raw!r}") from None


def calendar_settings(env: Mapping[str, str]) -> CalendarSettings | None:
    """The account `env` configures; None when it configures none (a required variable unset).
    Raises CalendarConfigError, naming the variable, when a value is wrong."""
    values = {k: v.strip() for k, v in env.items() if k.startswith("IRIIS_") and v and v.strip()}
    if any(not values.get(key) for key in REQUIRED):
        return None
    url = _check_url("IRIIS_CALDAV_URL", values["IRIIS_CALDAV_URL"])
    carddav = _check_url("IRIIS_CARDDAV_URL", values.get("IRIIS_CARDDAV_URL", url))
    email = values.get("IRIIS_CALDAV_EMAIL")
    if email is not None and "@" not in email:
        raise CalendarConfigError(f"IRIIS_CALDAV_EMAIL must be an email address, got {email!r}")
    start, end = working_hours(values.get("IRIIS_WORKING_HOURS", "09:00-18:00"))
    try:
        return CalendarSettings(
            url=url, user=values["IRIIS_CALDAV_USER"], password=SecretStr(values["IRIIS_CALDAV_PASSWORD"]),
            calendar=values.get("IRIIS_CALDAV_CALENDAR"), carddav_url=carddav, email=email,
            timezone=_zone(values.get("IRIIS_TIMEZONE", "UTC")), work_start=start, work_end=end,
            timeout=_timeout(values.get("IRIIS_CALDAV_TIMEOUT", "20")),
        )
    except ValidationError as exc:
        where = ", ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise CalendarConfigError(f"the calendar settings are not valid ({where})") from None
