"""The owner's test mail and calendar for the agent evaluation: tests/accounts.py's Dovecot (with
the SMTP server that delivers into it) and Radicale, seeded as the e2e tests seed them
(tests/mail_servers.py `seed`, tests/calendar_servers.py `seed`), put back to that state before
each scenario that uses them, and read back after its turns as a plain client would: every
folder over IMAP (imapclient), what the SMTP server received, the calendar's events over CalDAV
(caldav).

The server is started once with `env()`: the mail user, the ports and URLs never change, so a
scenario's fresh accounts are the same accounts wiped and seeded again (Dovecot is stopped, the
owner's maildir removed, Dovecot started on the same port; every calendar event is deleted over
CalDAV and the seed put back, so the calendar server's open connection stays good).
"""

from __future__ import annotations

import shutil
from datetime import date, datetime, time, timedelta
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any

import icalendar

from benchmarks.evalkit.account_checks import AccountsSeen
from tests.accounts import OwnerAccounts
from tests.calendar_servers import ZONE
from tests.calendar_servers import seed as seed_calendar
from tests.mail_servers import seed as seed_mail

# The days around today whose events are read back (the seed and the scenarios stay inside).
WINDOW_BEFORE, WINDOW_AFTER = timedelta(days=8), timedelta(days=16)
_parse = BytesParser(policy=policy.default).parsebytes


def _text(message: EmailMessage) -> str:
    body = message.get_body(preferencelist=("plain", "html"))
    try:
        return body.get_content() if body is not None else ""
    except (LookupError, ValueError):   # an unknown charset or a broken part: what could be read
        return str(body.get_payload(decode=False))


def _message(raw: bytes, flags: tuple[bytes, ...]) -> dict[str, Any]:
    message = _parse(raw)
    return {"sender": str(message.get("from", "")), "to": str(message.get("to", "")),
            "subject": str(message.get("subject", "")), "text": _text(message),
            "flags": [f.decode(errors="replace") if isinstance(f, bytes) else str(f) for f in flags]}


def _moment(value: datetime | date) -> float:
    """Epoch seconds of an event's start or end: a day at midnight, a floating time, in the
    owner's zone."""
    if not isinstance(value, datetime):
        value = datetime.combine(value, time(0))
    if value.tzinfo is None:
        value = value.replace(tzinfo=ZONE)
    return value.timestamp()


def _event(component: icalendar.cal.Component) -> dict[str, Any]:
    start = component.decoded("dtstart")
    if "dtend" in component:
        end = component.decoded("dtend")
    elif "duration" in component:
        end = start + component.decoded("duration")
    else:
        end = start
    return {"title": str(component.get("summary", "")), "start": _moment(start), "end": _moment(end)}


class EvalAccounts:
    """Start, reset to the seed, read back, close. The owner's zone is the seed's (Paris)."""

    zone = ZONE.key

    def __init__(self) -> None:
        self.owner = OwnerAccounts()

    def start(self) -> EvalAccounts:
        self.owner.start()
        return self

    def env(self) -> dict[str, str]:
        """For `iriis serve`: the accounts, and the owner's zone (the seed's 'today')."""
        return {**self.owner.env(), "IRIIS_TIMEZONE": self.zone}

    def close(self) -> None:
        self.owner.close()

    # -- back to the seed ----------------------------------------------------------------------

    def reset(self) -> None:
        """The seeded mailbox and calendar again, nothing received by the SMTP server."""
        owner = self.owner
        assert owner.sink is not None, "start() first"
        owner.dovecot.stop()
        shutil.rmtree(owner.dovecot.mail / owner.address, ignore_errors=True)
        owner.dovecot.start()
        owner.uids = seed_mail(owner.dovecot, owner.address)
        with owner.sink.lock:
            owner.sink.received.clear()
        for calendar in owner.radicale.client().principal().calendars():
            for found in calendar.events():
                found.delete()
        seed_calendar(owner.radicale, datetime.now(ZONE).date())

    # -- reading back --------------------------------------------------------------------------

    def _mail(self) -> dict[str, list[dict[str, Any]]]:
        client = self.owner.dovecot.login(self.owner.address)
        try:
            folders: dict[str, list[dict[str, Any]]] = {}
            for _, _, name in client.list_folders():
                client.select_folder(name, readonly=True)
                fetched = client.fetch(client.search(), ["BODY.PEEK[]", "FLAGS"])
                folders[str(name)] = [_message(item[b"BODY[]"], item[b"FLAGS"]) for _, item in sorted(fetched.items())]
            return folders
        finally:
            client.logout()

    def _sent(self) -> list[dict[str, Any]]:
        assert self.owner.sink is not None, "start() first"
        with self.owner.sink.lock:
            received = list(self.owner.sink.received)
        return [{"sender": r.mail_from, "to": r.rcpt_tos, "subject": str(_parse(r.raw).get("subject", ""))}
                for r in received]

    def _events(self) -> list[dict[str, Any]]:
        today = datetime.combine(datetime.now(ZONE).date(), time(0), tzinfo=ZONE)
        events = []
        for calendar in self.owner.radicale.client().principal().calendars():
            for found in calendar.search(start=today - WINDOW_BEFORE, end=today + WINDOW_AFTER, event=True,
                                         expand=True):
                events += [_event(c) for c in found.icalendar_instance.walk("VEVENT")]
        return sorted(events, key=lambda e: e["start"])

    def read(self) -> AccountsSeen:
        """Every folder's messages, what was sent since the reset, the calendar's events."""
        return AccountsSeen(mail=self._mail(), sent=self._sent(), events=self._events())
