"""A thin synchronous client for the owner's calendar (CalDAV) and address book (CardDAV).

Everything goes through the `caldav` library's DAVClient: its calendars, searches (with repeating
events expanded), saves and deletes for CalDAV, and its PROPFIND/REPORT primitives for CardDAV
(an addressbook-query REPORT for every card, parsed with vobject in `contacts`).

Every failure is a `CalendarError` whose message says what happened and what to do next, never
a traceback and never the password. The calls block: the MCP server runs them with
`asyncio.to_thread` under a timeout, one at a time (a lock guards the connection).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urljoin

import icalendar
from caldav import Calendar, DAVClient
from caldav.lib.http_sync import requests as http  # caldav's HTTP library: requests here (see the Makefile)
from caldav.calendarobjectresource import CalendarObjectResource
from caldav.elements import dav
from caldav.elements.base import BaseElement
from caldav.lib.error import AuthorizationError, DAVError, NotFoundError

from actors.common.errors import IriisError
from actors.tools.calendar.contacts import Contact, parse_vcard
from actors.tools.calendar.events import EventView, short_id, view_of, wrap
from actors.tools.calendar.settings import CalendarSettings, shown_url

T = TypeVar("T")
CARDDAV = "urn:ietf:params:xml:ns:carddav"
MAX_ID = 255
_SHORT = re.compile(r"^[0-9a-f]{8}$")


class CalendarError(IriisError):
    """A calendar or address book operation that failed; the message is for the model."""

    code = "calendar_error"


class AddressbookHomeSet(BaseElement):
    tag = f"{{{CARDDAV}}}addressbook-home-set"


class AddressData(BaseElement):
    tag = f"{{{CARDDAV}}}address-data"


class AddressbookQuery(BaseElement):
    tag = f"{{{CARDDAV}}}addressbook-query"


ADDRESSBOOK = f"{{{CARDDAV}}}addressbook"


def event_key(text: str) -> str:
    """An event id as given ("#1a2b3c4d", or a full UID), checked; CalendarError when it cannot be one."""
    key = text.strip().lstrip("#").strip()
    if not key or len(key) > MAX_ID or any(ord(ch) < 32 for ch in key):
        shown = key[:40] + ("..." if len(key) > 40 else "")
        raise CalendarError(f"{shown!r} is not an event id: use the #id that agenda or create_event showed "
                            "(8 characters, such as #1a2b3c4d)")
    return key.lower() if _SHORT.match(key.lower()) else key


def _reason(exc: BaseException, timeout: float) -> str:
    """Why the server could not be reached, in a few words (no URL with credentials, no traceback)."""
    text = str(exc).lower()
    if isinstance(exc, (http.exceptions.Timeout, TimeoutError)) or "timed out" in text:
        return f"no answer within {timeout:g} s"
    if "refused" in text:
        return "the connection was refused (is the server running?)"
    if "name or service not known" in text or "nodename" in text or "getaddrinfo" in text:
        return "the host name is unknown"
    if "ssl" in text or "certificate" in text:
        return "the TLS connection failed (check the certificate)"
    return type(exc).__name__


def _uid(obj: CalendarObjectResource) -> str:
    return str(obj.icalendar_component.get("uid", ""))


def master(cal: icalendar.Calendar) -> icalendar.Component:
    """The VEVENT that is the event itself (not an override of one occurrence)."""
    found = [c for c in cal.walk("VEVENT")]
    if not found:
        raise CalendarError("that calendar object holds no event")
    return next((c for c in found if "recurrence-id" not in c), found[0])


class CalendarClient:
    """The owner's account; the connection is made on first use and again after a failure."""

    def __init__(self, settings: CalendarSettings) -> None:
        self.settings = settings
        self.zone = settings.zone()
        self._lock = threading.Lock()
        self._dav: DAVClient | None = None
        self._calendars: list[tuple[Calendar, str]] | None = None
        self._cards: DAVClient | None = None
        self._books: list[str] | None = None
        self._seen: dict[str, str] = {}  # short id -> UID, for every event shown or made

    # -- the connection ----------------------------------------------------------------------

    def _client(self, url: str) -> DAVClient:
        return DAVClient(url=url, username=self.settings.user, password=self.settings.password.get_secret_value(),
                         timeout=int(max(1, self.settings.timeout)), enable_rfc6764=False)

    def _forget(self) -> None:
        self._dav, self._calendars, self._cards, self._books = None, None, None, None

    @contextmanager
    def _talking(self, doing: str, url: str | None = None) -> Iterator[None]:
        """Turn the library's failures into CalendarErrors a model can act on."""
        where = shown_url(url or self.settings.url)
        try:
            yield
        except AuthorizationError:
            self._forget()
            raise CalendarError(f"the calendar server refused the login for {self.settings.user}: check "
                                "IRIIS_CALDAV_USER and IRIIS_CALDAV_PASSWORD") from None
        except (http.exceptions.RequestException, OSError) as exc:
            self._forget()
            raise CalendarError(f"could not reach the calendar server at {where}: "
                                f"{_reason(exc, self.settings.timeout)}") from None
        except DAVError as exc:
            self._forget()
            reason = getattr(exc, "reason", "") or type(exc).__name__
            raise CalendarError(f"the calendar server would not {doing}: {str(reason)[:200]}") from None

    def _all(self) -> list[tuple[Calendar, str]]:
        """The owner's calendars and their names (looked up once per connection)."""
        if self._calendars is None:
            self._dav = self._dav or self._client(self.settings.url)
            found = []
            for cal in self._dav.principal().calendars():
                name = cal.get_display_name() or str(cal.url).rstrip("/").rsplit("/", 1)[-1]
                found.append((cal, str(name)))
            if not found:
                raise CalendarError("the account has no calendar: create one in your calendar app first")
            self._calendars = found
        return self._calendars

    def _target(self) -> tuple[Calendar, str]:
        """The calendar new events go to: IRIIS_CALDAV_CALENDAR, or the first."""
        calendars = self._all()
        wanted = (self.settings.calendar or "").strip().lower()
        if not wanted:
            return calendars[0]
        for cal, name in calendars:
            if wanted in (name.lower(), str(cal.url).rstrip("/").rsplit("/", 1)[-1].lower()):
                return cal, name
        names = ", ".join(name for _, name in calendars)
        raise CalendarError(f"the account has no calendar named {self.settings.calendar!r} (it has: {names}); "
                            "set IRIIS_CALDAV_CALENDAR to one of them")

    # -- events ------------------------------------------------------------------------------

    def _remember(self, views: list[EventView]) -> None:
        for view in views:
            self._seen[view.short] = view.uid

    def events(self, start: datetime, end: datetime) -> list[EventView]:
        """Every event between `start` and `end` in all the owner's calendars, repeats expanded."""
        with self._lock, self._talking("search the calendar"):
            views: list[EventView] = []
            for cal, name in self._all():
                for obj in cal.search(start=start, end=end, event=True, expand=True):
                    views.extend(view_of(c, self.zone, name) for c in obj.icalendar_instance.walk("VEVENT"))
            views.sort(key=lambda v: (v.start, v.end, v.title))
            self._remember(views)
            return views

    def create(self, event: icalendar.Event) -> EventView:
        """Save a new event in the owner's calendar."""
        with self._lock, self._talking("save the event"):
            cal, name = self._target()
            cal.add_event(wrap(event).to_ical().decode("utf-8"), increase_seqno=False)
            view = view_of(event, self.zone, name)
            self._remember([view])
            return view

    def _by_uid(self, uid: str) -> tuple[CalendarObjectResource, str] | None:
        for cal, name in self._all():
            try:
                return cal.get_event_by_uid(uid), name
            except NotFoundError:
                continue
        return None

    def _find(self, event_id: str) -> tuple[CalendarObjectResource, str]:
        """The stored event an id names: a short id seen before, a full UID, or (last) a short id
        looked for among every event of every calendar."""
        key = event_key(event_id)
        known = self._seen.get(key)
        found = self._by_uid(known or key)
        if found is None and _SHORT.match(key):
            for cal, name in self._all():
                match = next((o for o in cal.get_events() if short_id(_uid(o)) == key), None)
                if match is not None:
                    found = (match, name)
                    break
        if found is None:
            raise CalendarError(f"there is no event #{key[:40]} in the calendar (it may have been cancelled); "
                                "use agenda to find its id")
        return found

    def change(self, event_id: str, edit: Callable[[icalendar.Calendar], T]) -> tuple[T, EventView]:
        """Apply `edit` to the stored event and save it; what `edit` answered and the event now."""
        with self._lock, self._talking("change the event"):
            obj, name = self._find(event_id)
            with obj.edit_icalendar_instance() as cal:
                result = edit(cal)
                view = view_of(master(cal), self.zone, name)
            obj.save(increase_seqno=False, only_this_recurrence=False)
            self._remember([view])
            return result, view

    def get(self, event_id: str) -> EventView:
        with self._lock, self._talking("read the event"):
            obj, name = self._find(event_id)
            return view_of(master(obj.icalendar_instance), self.zone, name)

    def cancel(self, event_id: str) -> EventView:
        """Delete the event (every occurrence of a repeating one); what it was."""
        with self._lock, self._talking("delete the event"):
            obj, name = self._find(event_id)
            view = view_of(master(obj.icalendar_instance), self.zone, name)
            obj.delete()
            self._seen.pop(view.short, None)
            return view

    # -- contacts ----------------------------------------------------------------------------

    def _books_now(self, dav_client: DAVClient) -> list[str]:
        """The address books at IRIIS_CARDDAV_URL: that URL itself, or those of its principal."""
        url = self.settings.carddav_url
        props = dav.Propfind() + [dav.Prop() + [dav.ResourceType(), dav.CurrentUserPrincipal(), AddressbookHomeSet()]]
        first = dav_client.propfind(url, str(props), depth=0).results
        here = first[0].properties if first else {}
        if ADDRESSBOOK in (here.get(dav.ResourceType.tag) or []):
            return [url]
        home = here.get(AddressbookHomeSet.tag)
        if not home and here.get(dav.CurrentUserPrincipal.tag):
            principal = urljoin(url, here[dav.CurrentUserPrincipal.tag])
            found = dav_client.propfind(principal, str(props), depth=0).results
            home = (found[0].properties.get(AddressbookHomeSet.tag) if found else None) or principal
        home_url = urljoin(url, home if isinstance(home, str) else (home or [url])[0])
        listing = dav_client.propfind(home_url, str(dav.Propfind() + [dav.Prop() + [dav.ResourceType()]]), depth=1)
        books = [urljoin(url, r.href) for r in listing.results
                 if ADDRESSBOOK in (r.properties.get(dav.ResourceType.tag) or [])]
        if not books:
            raise CalendarError(f"no address book was found at {shown_url(url)}: set IRIIS_CARDDAV_URL to your "
                                "address book's URL")
        return books

    def contacts(self) -> list[Contact]:
        """Every card of every address book."""
        with self._lock, self._talking("read the address book", self.settings.carddav_url):
            self._cards = card_client = self._cards or self._client(self.settings.carddav_url)
            self._books = self._books or self._books_now(card_client)
            query = str(AddressbookQuery() + [dav.Prop() + [dav.GetEtag(), AddressData()]])
            found: list[Contact] = []
            for book in self._books:
                for result in card_client.report(book, query, depth=1).parse_propfind():
                    text: Any = result.properties.get(AddressData.tag)
                    contact = parse_vcard(text, result.href) if isinstance(text, str) else None
                    if contact is not None:
                        found.append(contact)
            return found
