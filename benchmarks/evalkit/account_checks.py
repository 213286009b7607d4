"""Checking the owner's mail and calendar after a turn: what the runner read back from the test
servers (`AccountsSeen`: every folder's messages over IMAP, what the SMTP server received, the
calendar's events over CalDAV) against a scenario's `mail`, `no_mail`, `no_mail_sent`, `event`
and `no_event`. Pure, no server: each check says what it looked for and what it saw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from benchmarks.evalkit.matching import any_of, has, when_matches
from benchmarks.evalkit.scenario import EventWanted, Expect, MailWanted


@dataclass
class AccountsSeen:
    """The test accounts as a plain mail and calendar client sees them after a turn."""

    # folder name -> its messages: {sender, to, subject, text, flags}
    mail: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # what the SMTP server received since the scenario began: {sender, to, subject}
    sent: list[dict[str, Any]] = field(default_factory=list)
    # the calendar's events (repeats expanded): {title, start, end} in epoch seconds
    events: list[dict[str, Any]] = field(default_factory=list)


def _contains(text: str, wanted: str) -> bool:
    return not wanted or has(text, wanted)


def mail_matches(m: MailWanted, message: dict[str, Any]) -> tuple[bool, str]:
    """Whether one message is what `m` describes (its folder aside); and if not, why."""
    for label, value, wanted in (("To", message.get("to", ""), m.to), ("From", message.get("sender", ""), m.sender),
                                 ("Subject", message.get("subject", ""), m.subject)):
        if not _contains(value, wanted):
            return False, f"{label} {value[:60]!r} lacks {wanted!r}"
    if not any_of(message.get("text", ""), m.contains):
        return False, f"its text {message.get('text', '')[:60]!r} has none of {m.contains!r}"
    return True, "as expected"


def _folder(m: MailWanted, seen: AccountsSeen) -> list[dict[str, Any]] | None:
    wanted = m.folder.lower()
    return next((msgs for name, msgs in seen.mail.items() if name.lower() == wanted), None)


def check_mail(m: MailWanted, seen: AccountsSeen, present: bool) -> tuple[bool, str]:
    messages = _folder(m, seen)
    if messages is None:
        folders = sorted(seen.mail)
        return (False, f"there is no folder {m.folder!r} (folders: {folders})") if present else (
            True, f"there is no folder {m.folder!r}, so no such message")
    verdicts = [(msg, *mail_matches(m, msg)) for msg in messages]
    hits = [msg for msg, ok, _ in verdicts if ok]
    if present:
        if hits:
            return True, f"{m.folder} holds {hits[0].get('subject', '')[:60]!r} to {hits[0].get('to', '')[:60]!r}"
        reasons = [f"{msg.get('subject', '')[:40]!r}: {why}" for msg, _, why in verdicts[-5:]]
        return False, f"no message in {m.folder} (of {len(messages)}) is as expected: {'; '.join(reasons) or 'empty'}"
    if hits:
        return False, f"{m.folder} holds {hits[0].get('subject', '')[:60]!r}, which it should not"
    return True, f"no such message in {m.folder} (of {len(messages)})"


def check_nothing_sent(seen: AccountsSeen) -> tuple[bool, str]:
    if not seen.sent:
        return True, "the SMTP server received nothing"
    shown = [(s.get("to"), s.get("subject", "")[:40]) for s in seen.sent]
    return False, f"the SMTP server received {len(seen.sent)} message(s): {shown}"


def event_matches(e: EventWanted, event: dict[str, Any], sent_at: float, tz: str) -> tuple[bool, str]:
    """Whether one calendar event is what `e` describes; and if not, why."""
    if not any_of(event.get("title", ""), e.title):
        return False, "title not as expected"
    if e.minutes is not None:
        minutes = round((event["end"] - event["start"]) / 60)
        if minutes != e.minutes:
            return False, f"lasts {minutes} min, not {e.minutes}"
    return when_matches(e.at, e.day, event["start"], sent_at, tz, "starts")


def _shown(event: dict[str, Any], tz: str) -> str:
    return f"{event.get('title', '')[:40]!r} {datetime.fromtimestamp(event['start'], ZoneInfo(tz)):%a %Y-%m-%d %H:%M}"


def check_event(e: EventWanted, events: list[dict[str, Any]], sent_at: float, tz: str,
                present: bool) -> tuple[bool, str]:
    verdicts = [(ev, *event_matches(e, ev, sent_at, tz)) for ev in events]
    hits = [ev for ev, ok, _ in verdicts if ok]
    if not present:
        return (True, f"no such event (of {len(events)})") if not hits else (
            False, f"the calendar still has {_shown(hits[0], tz)}")
    if hits:
        return True, f"the calendar has {_shown(hits[0], tz)}"
    titled = [(ev, why) for ev, _, why in verdicts if why != "title not as expected"]
    if not titled:
        return False, f"no event titled like {e.title!r}; events: {[_shown(ev, tz) for ev in events][:8]}"
    return False, "; ".join(f"{_shown(ev, tz)}: {why}" for ev, why in titled[:5])


def check_accounts(expect: Expect, seen: AccountsSeen | None, sent_at: float, tz: str) -> tuple[bool, str]:
    """One mail or calendar expectation; it fails when the accounts were not read (a run
    without the test accounts, as with `--url`)."""
    if seen is None:
        return False, "the owner's test accounts were not read back (the scenario ran without them)"
    if expect.mail is not None:
        return check_mail(expect.mail, seen, present=True)
    if expect.no_mail is not None:
        return check_mail(expect.no_mail, seen, present=False)
    if expect.no_mail_sent is not None:
        ok, why = check_nothing_sent(seen)
        return (ok, why) if expect.no_mail_sent else (not ok, why)
    if expect.event is not None:
        return check_event(expect.event, seen.events, sent_at, tz, present=True)
    if expect.no_event is not None:
        return check_event(expect.no_event, seen.events, sent_at, tz, present=False)
    raise ValueError(f"{expect.kind} is not a mail or calendar expectation")
