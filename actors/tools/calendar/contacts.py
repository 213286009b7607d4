"""Contacts from vCards, and finding them by name, address or phone number: pure, no network.

Names match without regard to case or accents ("zoe" finds "Zoé Martin"), every word of the
query somewhere in the name, nickname or organisation; an address matches as a substring; a
phone number by its digits alone, so "06 12 34 56 78" finds "+33 6 12 34 56 78" (the last nine
digits, the national number without its trunk or country prefix, are compared).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import vobject
from vobject.base import ParseError, VObjectError

from actors.common.errors import IriisError
from actors.tools.calendar.events import valid_email

MAX_RESULTS = 20
# The national part of a phone number: enough digits to tell numbers apart, few enough to skip
# the country code ("+33 6 ...") or trunk prefix ("06 ...") the other side may have written.
PHONE_TAIL = 9
MIN_PHONE_DIGITS = 4
_PHONE_QUERY = re.compile(r"^[\d\s().+\-/]+$")


class ContactError(IriisError, ValueError):
    """A name that finds no contact, or several; the message says what to give instead."""

    code = "contact_not_found"


@dataclass(frozen=True)
class Contact:
    uid: str
    name: str
    emails: tuple[str, ...] = ()
    phones: tuple[str, ...] = ()
    org: str | None = None
    nickname: str | None = None

    def line(self) -> str:
        """``Zoé Martin · zoe@example.test · +33 6 12 34 56 78 · Acme``."""
        parts = [self.name, *self.emails, *self.phones]
        if self.org:
            parts.append(self.org)
        return " · ".join(parts)

    @property
    def source(self) -> str:
        return f"contacts:{self.uid}"


def fold(text: str) -> str:
    """Lower case without accents or repeated spaces: what names are compared as."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(bare.casefold().split())


def digits(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _values(card: Any, name: str) -> list[Any]:
    return [item.value for item in card.contents.get(name, [])]


def _text(value: Any) -> str:
    """A vCard value as one line: structured ones (ORG, N) joined by spaces."""
    if isinstance(value, (list, tuple)):
        return " ".join(_text(v) for v in value if v).strip()
    if hasattr(value, "given"):  # vobject's Name (N)
        return " ".join(p for p in (_text(value.prefix), _text(value.given), _text(value.additional),
                                    _text(value.family), _text(value.suffix)) if p)
    return " ".join(str(value or "").split())


def parse_vcard(text: str, fallback_uid: str = "") -> Contact | None:
    """The contact in one vCard; None when the text is not a vCard or names nobody."""
    try:
        card = vobject.readOne(text)
    except (ParseError, VObjectError, ValueError, StopIteration):
        return None
    if getattr(card, "name", "").upper() != "VCARD":
        return None
    names = [_text(v) for v in _values(card, "fn")] + [_text(v) for v in _values(card, "n")]
    name = next((n for n in names if n), "")
    emails = tuple(dict.fromkeys(e for e in (_text(v) for v in _values(card, "email")) if e))
    phones = tuple(dict.fromkeys(p for p in (_text(v) for v in _values(card, "tel")) if p))
    org = next((o for o in (_text(v) for v in _values(card, "org")) if o), None)
    nickname = next((n for n in (_text(v) for v in _values(card, "nickname")) if n), None)
    if not name:
        name = org or (emails[0] if emails else "")
    if not name:
        return None
    uid = next((u for u in (_text(v) for v in _values(card, "uid")) if u), fallback_uid) or name
    return Contact(uid=uid, name=name, emails=emails, phones=phones, org=org, nickname=nickname)


def is_phone_query(query: str) -> bool:
    return bool(_PHONE_QUERY.match(query.strip())) and len(digits(query)) >= MIN_PHONE_DIGITS


def phone_matches(query: str, phone: str) -> bool:
    """Digits only: the query within the number, or both ending in the same national number."""
    wanted, have = digits(query), digits(phone)
    if not wanted or not have:
        return False
    if wanted in have:
        return True
    return min(len(wanted), len(have)) >= PHONE_TAIL and wanted[-PHONE_TAIL:] == have[-PHONE_TAIL:]


def matches(contact: Contact, query: str) -> bool:
    """Whether `contact` is what `query` (a name, an address or a phone number) asks for."""
    if is_phone_query(query):
        return any(phone_matches(query, p) for p in contact.phones)
    wanted = fold(query)
    if not wanted:
        return False
    if "@" in wanted:
        return any(wanted in fold(e) for e in contact.emails)
    haystack = fold(" ".join([contact.name, contact.nickname or "", contact.org or "", *contact.emails]))
    return all(word in haystack for word in wanted.split())


def find(contacts: Iterable[Contact], query: str, limit: int = MAX_RESULTS) -> list[Contact]:
    """The contacts `query` finds, the closest first (exact name, then name start, then the rest)."""
    wanted = fold(query)
    found = [c for c in contacts if matches(c, query)]

    def rank(c: Contact) -> tuple[int, str]:
        name = fold(c.name)
        return (0 if name == wanted else 1 if name.startswith(wanted) else 2, name)

    return sorted(found, key=rank)[:limit]


def resolve(people: Sequence[str], contacts: Sequence[Contact]) -> tuple[list[tuple[str, str | None]], list[str]]:
    """Attendees as (address, name): an address is taken as it is, a name is looked up in
    `contacts` and must find one person with an address. Also the contact sources used.
    Raises ContactError saying which entry failed and what to give instead."""
    out: list[tuple[str, str | None]] = []
    used: list[str] = []
    for raw in people:
        entry = raw.strip()
        email = valid_email(entry)
        if email is not None:
            if all(email.lower() != known.lower() for known, _ in out):
                out.append((email, None))
            continue
        if "@" in entry or not fold(entry):
            raise ContactError(f"{entry!r} is not a valid email address")
        named = find(contacts, entry)
        found = [c for c in named if c.emails and valid_email(c.emails[0])]
        exact = [c for c in found if fold(c.name) == fold(entry)]
        if len(exact) == 1:
            found = exact
        if not found and named:
            raise ContactError(f"{named[0].name} has no email address in the contacts: give their email address")
        if not found:
            raise ContactError(f"no contact with an email address matches {entry!r}: give their email address")
        if len(found) > 1:
            names = "; ".join(f"{c.name} <{c.emails[0]}>" for c in found[:5])
            raise ContactError(f"{entry!r} matches several contacts ({names}): give the email address")
        person = found[0]
        address = valid_email(person.emails[0]) or person.emails[0]
        out = [(known, name) for known, name in out if known.lower() != address.lower()]
        out.append((address, person.name))
        if person.source not in used:
            used.append(person.source)
    return out, used
