"""Mail messages without a network: summaries, readable text, attachments, new messages and replies,
search criteria and the confirmation preview of a send.

Messages are the standard library's `EmailMessage` parsed with `policy.default`. A message's text
is untrusted content: it is returned as data (HTML reduced to its readable words, scripts and
styles left out), never acted upon here.
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timezone
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import format_datetime, getaddresses, make_msgid, parsedate_to_datetime
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel

from actors.common.errors import IriisError
from actors.common.html import readable_text
from actors.common.when import natural_moment

MAX_UID = 2**32 - 1  # IMAP uids are 32-bit (RFC 3501)
MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024
DEFAULT_BODY_CHARS = 20_000
MAX_RECIPIENTS = 50
MAX_SUBJECT_CHARS = 998  # the longest line RFC 5322 allows
MAX_BODY_BYTES = 1_000_000
MAX_SEARCH_CHARS = 200
QUOTE_LINES = 20

_ADDRESS = re.compile(r"^[^\s@<>()\[\],;:\"\\]+@[^\s@<>()\[\],;:\"\\.]+(?:\.[^\s@<>()\[\],;:\"\\.]+)+$")
_REPLY_PREFIX = re.compile(r"^\s*(?:(?:re|aw|sv)(?:\[\d+\])?\s*:\s*)+", re.I)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class MessageError(IriisError, ValueError):
    """An argument a message cannot be built or searched with; the text says what to change."""

    code = "bad_mail_argument"


class Summary(BaseModel):
    """One message as a list shows it."""

    uid: int
    sender: str
    sender_name: str = ""
    to: list[str] = []
    subject: str = ""
    date: str | None = None
    unread: bool = False
    flagged: bool = False
    has_attachments: bool = False

    def line(self) -> str:
        """`#12 · Ana Lopes <ana@example.test> · Trip to Lisbon · 2026-12-06 09:30 · unread`."""
        parts = [f"#{self.uid}", who(self.sender_name, self.sender), self.subject or "(no subject)",
                 self.date or "(no date)"]
        parts += [word for word, on in (("unread", self.unread), ("flagged", self.flagged),
                                        ("attachment", self.has_attachments)) if on]
        return " · ".join(parts)


@dataclass(frozen=True)
class Attachment:
    """A file carried by a message; `data` is None when it was larger than the cap and not kept."""

    name: str
    mime: str
    size: int
    data: bytes | None


def parse(raw: bytes) -> EmailMessage:
    message = BytesParser(policy=policy.default).parsebytes(raw)
    assert isinstance(message, EmailMessage)
    return message


def who(name: str, address: str) -> str:
    return f"{name} <{address}>" if name and name != address else address or "(unknown sender)"


def header(message: EmailMessage, name: str) -> str:
    """A header as plain one-line text ('' when absent or unreadable)."""
    try:
        value = message.get(name)
    except (ValueError, IndexError, TypeError):  # a malformed header the parser could not model
        value = ""
    return " ".join(_CONTROL.sub(" ", str(value or "")).split())


def addresses(message: EmailMessage, name: str) -> list[tuple[str, str]]:
    return [(n, a) for n, a in getaddresses([header(message, name)]) if a]


def message_date(message: EmailMessage, fallback: datetime | None = None) -> datetime | None:
    """The Date header as an aware datetime (UTC when it names no zone), else `fallback`."""
    try:
        when = parsedate_to_datetime(header(message, "Date"))
    except (TypeError, ValueError, IndexError):
        when = fallback
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when


def summarize(uid: int, message: EmailMessage, flags: Iterable[bytes | str], zone: ZoneInfo,
              internal_date: datetime | None = None, has_attachments: bool | None = None) -> Summary:
    """The summary row of message `uid` (its headers are enough when `has_attachments` is given)."""
    marks = {(f.decode() if isinstance(f, bytes) else f).lower() for f in flags}
    senders = addresses(message, "From")
    name, sender = senders[0] if senders else ("", "")
    when = message_date(message, internal_date)
    if has_attachments is None:
        has_attachments = any(True for _ in message.iter_attachments())
    return Summary(uid=uid, sender=sender, sender_name=name, to=[a for _, a in addresses(message, "To")],
                   subject=header(message, "Subject"),
                   date=f"{when.astimezone(zone):%Y-%m-%d %H:%M}" if when else None,
                   unread="\\seen" not in marks, flagged="\\flagged" in marks, has_attachments=has_attachments)


def structure_has_attachment(structure: Any) -> bool:
    """Whether an IMAP BODYSTRUCTURE (as imapclient parses it) has a part disposed as attachment."""
    if isinstance(structure, (tuple, list)):
        head = structure[0] if structure else None
        if isinstance(head, bytes) and head.lower() == b"attachment":
            return True
        return any(structure_has_attachment(item) for item in structure)
    return False


def _text_of(part: EmailMessage) -> str:
    try:
        content = part.get_content()
    except (LookupError, ValueError):  # an unknown charset or a broken transfer encoding
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    return content if isinstance(content, str) else ""


def body_text(message: EmailMessage) -> str:
    """The message's readable text: its text/plain part, else its HTML reduced to the words."""
    part = message.get_body(preferencelist=("plain", "html"))
    if not isinstance(part, EmailMessage):
        return ""
    text = _text_of(part)
    if part.get_content_type() == "text/html":
        return readable_text(text)
    return text.replace("\r\n", "\n").strip()


def cap_text(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[cut: showing {max_chars} of {len(text)} characters of this message]"


def safe_name(name: str | None, mime: str, n: int) -> str:
    """A file name for an attachment: no folders, no control characters, at most 200 characters."""
    base = _CONTROL.sub("", re.split(r"[\\/]", name or "")[-1]).strip().strip(".")
    if not base:
        base = f"attachment-{n}{mimetypes.guess_extension(mime) or '.bin'}"
    if len(base) > 200:
        stem, dot, ext = base.rpartition(".")
        base = (stem[:190] + dot + ext[:9]) if dot and len(ext) < 10 else base[:200]
    return base


def attachments(message: EmailMessage, max_bytes: int = MAX_ATTACHMENT_BYTES) -> list[Attachment]:
    """The message's attached files, in order; one over `max_bytes` keeps its name and size only."""
    found: list[Attachment] = []
    for n, part in enumerate(message.iter_attachments(), 1):
        mime = part.get_content_type()
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):  # message/rfc822 and other containers
            inner = part.get_payload()
            payload = bytes(inner[0]) if isinstance(inner, list) and inner else b""
        name = safe_name(part.get_filename(), mime, n)
        if mime == "message/rfc822" and not name.lower().endswith(".eml"):
            name += ".eml"
        keep = len(payload) <= max_bytes
        found.append(Attachment(name=name, mime=mime, size=len(payload), data=payload if keep else None))
    return found


def human_size(size: int) -> str:
    for unit, scale in (("MB", 1024 * 1024), ("KB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{size} bytes"


# -- writing -----------------------------------------------------------------------------------


def parse_recipients(value: Any) -> list[tuple[str, str]]:
    """(name, address) pairs from a list or a comma-separated string; refuses what is no address."""
    if value is None:
        return []
    if isinstance(value, str):
        items = [value]
    elif isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        items = [str(value)]
    found: list[tuple[str, str]] = []
    for item in items:
        if _CONTROL.search(item):
            raise MessageError(f"{item!r} is not an email address (it has a line break or control character)")
        for entry in (e for e in re.split(r"[;]", item) if e.strip()):
            pairs = getaddresses([entry])
            if not pairs or any(not _ADDRESS.match(a) for _, a in pairs):
                raise MessageError(f"{entry.strip()!r} is not an email address: write it as name@example.com")
            found += [(n, a) for n, a in pairs]
    return found


def check_send(to: list[tuple[str, str]], cc: list[tuple[str, str]], subject: str, body: str) -> None:
    """The limits of one outgoing message; MessageError says which one was passed."""
    if not to:
        raise MessageError("there is no recipient: give at least one address in 'to'")
    if len(to) + len(cc) > MAX_RECIPIENTS:
        raise MessageError(f"too many recipients ({len(to) + len(cc)}); at most {MAX_RECIPIENTS} in to and cc together")
    if len(subject) > MAX_SUBJECT_CHARS:
        raise MessageError(f"the subject is {len(subject)} characters; at most {MAX_SUBJECT_CHARS}")
    if "\n" in subject or "\r" in subject:
        raise MessageError("the subject must be one line")
    if len(body.encode("utf-8")) > MAX_BODY_BYTES:
        raise MessageError(f"the body is larger than {MAX_BODY_BYTES // 1_000_000} MB; shorten it")


def reply_subject(subject: str, original: str) -> str:
    """`Re: <subject>` with exactly one `Re: ` (the original's subject when `subject` is empty)."""
    rest = _REPLY_PREFIX.sub("", subject.strip() or original.strip())
    return f"Re: {rest}".strip()


def quoted(original: EmailMessage, zone: ZoneInfo, lines: int = QUOTE_LINES) -> str:
    """The first `lines` lines of `original`, quoted under 'On <date>, <sender> wrote:'."""
    senders = addresses(original, "From")
    sender = who(*senders[0]) if senders else "someone"
    when = message_date(original)
    said = f"On {when.astimezone(zone):%Y-%m-%d %H:%M}, {sender} wrote:" if when else f"{sender} wrote:"
    text = body_text(original).splitlines()
    quote = [f"> {line}".rstrip() for line in text[:lines]]
    if len(text) > lines:
        quote.append("> [...]")
    return "\n".join([said, *quote])


def _references(original: EmailMessage) -> tuple[str, str]:
    """In-Reply-To and References for a reply to `original` (the last 20 ids kept)."""
    parent = header(original, "Message-ID")
    chain = header(original, "References").split() or header(original, "In-Reply-To").split()
    ids = [*chain, parent] if parent else chain
    return parent, " ".join(ids[-20:])


def _header_addresses(pairs: list[tuple[str, str]]) -> tuple[Address, ...]:
    """Addresses for a header, names quoted and encoded as the header needs ("Lopes, Ana")."""
    try:
        return tuple(Address(display_name=name, addr_spec=address) for name, address in pairs)
    except (ValueError, IndexError) as exc:
        raise MessageError(f"one of the addresses cannot be written in a header ({exc})") from None


def compose(sender: str, to: list[tuple[str, str]], subject: str, body: str, cc: list[tuple[str, str]] | None = None,
            original: EmailMessage | None = None, zone: ZoneInfo | None = None,
            now: datetime | None = None) -> EmailMessage:
    """A new message, or with `original` a reply to it: threaded by In-Reply-To and References,
    `Re: ` once in the subject, and the original's first lines quoted under the text."""
    zone = zone or ZoneInfo("UTC")
    message = EmailMessage(policy=policy.SMTP)
    message["From"] = sender
    message["To"] = _header_addresses(to)
    if cc:
        message["Cc"] = _header_addresses(cc)
    text = body.replace("\r\n", "\n").rstrip("\n")
    if original is not None:
        subject = reply_subject(subject, header(original, "Subject"))
        parent, references = _references(original)
        if parent:
            message["In-Reply-To"] = parent
            message["References"] = references
        text = f"{text}\n\n{quoted(original, zone)}"
    message["Subject"] = subject
    message["Date"] = format_datetime(now or datetime.now(timezone.utc))
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or None)
    message.set_content(text + "\n")
    return message


# -- searching ---------------------------------------------------------------------------------


def since_date(text: str, now: datetime, zone: ZoneInfo) -> date:
    """The day `text` names: ISO `2026-12-01`, or words such as 'yesterday', '3 days ago'."""
    cleaned = text.strip()
    try:
        return date.fromisoformat(cleaned[:10]) if re.match(r"\d{4}-\d\d-\d\d", cleaned) else _natural_day(cleaned, now, zone)
    except ValueError:
        raise MessageError(f"could not read the date {text!r}: use YYYY-MM-DD, 'today', 'yesterday', "
                           "'3 days ago' or 'last Monday'") from None


def _natural_day(text: str, now: datetime, zone: ZoneInfo) -> date:
    found = natural_moment(text, now.astimezone(zone), zone)
    if found is None:
        raise ValueError(text)
    return found.date() if isinstance(found, datetime) else found


def _search_text(value: str, what: str) -> str:
    text = " ".join(_CONTROL.sub(" ", value).split())
    if not text:
        raise MessageError(f"the {what} to search for is empty")
    if len(text) > MAX_SEARCH_CHARS:
        raise MessageError(f"the {what} to search for is longer than {MAX_SEARCH_CHARS} characters")
    return text


def search_criteria(unread: bool | None = None, sender: str | None = None, subject: str | None = None,
                    since: str | None = None, now: datetime | None = None,
                    zone: ZoneInfo | None = None) -> list[Any]:
    """IMAP SEARCH criteria (as imapclient takes them) from friendly arguments; ['ALL'] for none."""
    zone = zone or ZoneInfo("UTC")
    criteria: list[Any] = []
    if unread is not None:
        criteria.append("UNSEEN" if unread else "SEEN")
    if sender is not None:
        criteria += ["FROM", _search_text(sender, "sender")]
    if subject is not None:
        criteria += ["SUBJECT", _search_text(subject, "subject")]
    if since is not None:
        criteria += ["SINCE", since_date(since, now or datetime.now(zone), zone)]
    return criteria or ["ALL"]


def needs_utf8(criteria: list[Any]) -> bool:
    return any(isinstance(c, str) and not c.isascii() for c in criteria)
