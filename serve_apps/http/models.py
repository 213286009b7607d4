"""What the API answers, one family per resource: `XPublic` for one item and `XList{data,
count}` for a list (built by `page`, never by hand). The JSON is exactly what the routes sent
before these models: payloads that are open-ended allow their extra fields.

No `from __future__ import annotations`: FastAPI builds response schemas from these types.
"""

from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from actors.devices.repository import Device
from actors.memory.model import MindItem
from actors.recent_errors import ErrorEntry
from actors.store.models import AuditEntry, OutboxItem
from actors.tools.catalogue import ServerStatus

T = TypeVar("T")


class Open(BaseModel):
    """A payload whose fields belong to someone else (an actor, a tool server): kept as sent."""

    model_config = ConfigDict(extra="allow")


class Page(BaseModel, Generic[T]):
    data: list[T]
    count: int


P = TypeVar("P", bound=Page[Any])


def page(model: type[P], items: Iterable[Any], **fields: Any) -> P:
    """`model(data=items, count=len(items))`, plus any other fields the list carries."""
    data = [item.model_dump() if isinstance(item, BaseModel) else item for item in items]
    return model(data=data, count=len(data), **fields)


# -- general -------------------------------------------------------------------------------

class Health(BaseModel):
    status: str


class AuthCheck(BaseModel):
    ok: bool


class OwnerKeyPublic(BaseModel):
    """An owner key as listed: its label and last use, never the key or its hash."""

    id: int
    label: str
    created: float | None = None
    last_used: float | None = None
    current: bool = False
    revocable: bool = True


class OwnerKeyList(Page[OwnerKeyPublic]):
    # Keys from IRIIS_OWNER_KEYS: accepted, but changed only in the environment.
    from_environment: int = 0


class OwnerKeyCreated(OwnerKeyPublic):
    key: str


class Deleted(BaseModel):
    id: int | str
    deleted: bool


# -- sessions and messages ---------------------------------------------------------------------

class SessionPublic(BaseModel):
    """A conversation as listed (its summary bookkeeping left out)."""

    id: str
    title: str
    channel: str
    summary: str
    created: float
    updated: float


class SessionList(Page[SessionPublic]):
    pass


class SessionRenamed(BaseModel):
    id: str
    title: str


class MessagePublic(Open):
    id: str
    seq: int
    role: str
    content: Any = None
    meta: Any = None
    created: float


class MessageList(Page[MessagePublic]):
    session_id: str


class SessionState(Open):
    """What the session actor reports about itself (running turn, pending confirmations...)."""


class Cancelled(BaseModel):
    session_id: str
    cancelled: bool


class SetAside(BaseModel):
    """POST /v1/sessions/{id}/set-aside: how many earlier messages carrying outside content
    (and a summary folded from it, counted as one) no longer reach the model."""
    session_id: str
    set_aside: int


class MessageDeleted(BaseModel):
    id: str
    deleted: bool


class ConfirmationResult(Open):
    id: str
    status: str


# -- files -------------------------------------------------------------------------------------

class FileUploaded(BaseModel):
    id: int
    name: str
    mime: str
    size: int
    attachment: str


# -- the owner's views: audit, outbox, errors, providers, tools, link previews -------------------

class AuditPublic(AuditEntry):
    pass


class AuditList(Page[AuditPublic]):
    pass


class OutboxPublic(OutboxItem):
    pass


class OutboxList(Page[OutboxPublic]):
    pass


class ErrorPublic(ErrorEntry):
    pass


class ErrorList(Page[ErrorPublic]):
    pass


class ProviderPublic(Open):
    """A provider's health as the router keeps it."""


class ProviderList(Page[ProviderPublic]):
    pass


class ToolPublic(ServerStatus, Open):
    """A tool server: on, off (with the missing variable, or switched off by the owner), down
    (with the error) or starting; when a call on it last succeeded and the last call's error."""


class ToolList(Page[ToolPublic]):
    pass


class SessionPoolPublic(BaseModel):
    """The conversation actors: live ones, warm spares, starts under way and new conversations
    queued for one; how long a start takes lately and what a newcomer would wait now (past
    `start_wait_seconds` it gets 503 with Retry-After); the cap on live ones (`max_live`)."""

    live: int
    spare: int
    starting: int
    queued: int
    cold_starts: int
    start_seconds: float
    start_wait_seconds: float
    wait_seconds_now: float
    # The cap on conversation processes alive at once (spares and starts included), and how
    # many idle conversations were let go to stay under it since the registry started.
    max_live: int
    released: int
    waiting_for_room: int   # background newcomers waiting at the cap for a conversation to end
    streams: int = 0        # camera streams and connected devices holding places under the cap
    releasing: int = 0      # idle conversations asked to go for room, not gone yet


class LinkPreview(Open):
    url: str
    final_url: str
    status: int


# -- memory ------------------------------------------------------------------------------------

class MemoryPublic(MindItem):
    pass


class MemoryList(Page[MemoryPublic]):
    pass


class MemoryAdded(MemoryPublic):
    """The item remembered; `created` is whether it is new (false: an existing one reinforced)."""

    created: bool  # type: ignore[assignment]


class MemoryEventPublic(Open):
    pass


class MemoryEventList(Page[MemoryEventPublic]):
    pass


class PersonaPublic(Open):
    pass


class PersonaWritten(BaseModel):
    result: str
    persona: Any = None


# -- people ------------------------------------------------------------------------------------

class PersonPublic(Open):
    """A person (id, email, role, created); just id and role when there is no row."""

    id: int
    role: str


class PersonList(Page[PersonPublic]):
    pass


class SignedIn(BaseModel):
    token: str
    person: PersonPublic


class PersonRemoved(BaseModel):
    id: int
    removed: bool
    devices_revoked: int


# -- devices -----------------------------------------------------------------------------------

class DevicePublic(Device, Open):
    """A device's labels, kinds and skills (`off`: reported but switched off; `online` when asked)."""

    off: list[str]


class DeviceList(Page[DevicePublic]):
    pass


class PairingCode(BaseModel):
    code: str
    link: str
    expires: float
    kind: str
    label: str
    skills: list[str]
    qr_png: str


class Paired(BaseModel):
    device_id: int
    token: str
    kind: str
    label: str
    skills: list[str]
    name: str
    websocket: str


class DeviceRevoked(BaseModel):
    id: int
    revoked: bool
    closed: bool


class DeviceSkills(BaseModel):
    id: int
    skills: list[str]


class AskReply(Open):
    """One turn's reply (`reply`) or its `error`, for the conversation `session_id`."""

    session_id: str


class DeviceEventPublic(BaseModel):
    id: int
    device_id: int | None
    event: str | None
    title: str | None
    text: str | None
    data: Any
    ts: float | None


class DeviceEventList(Page[DeviceEventPublic]):
    pass


# -- memory search and import (issue 20) -------------------------------------------------------

class MemoryWhy(BaseModel):
    """The terms of a search score: they add up to `score` (recency + importance + words + meaning)."""

    recency: float
    importance: float
    words: float
    meaning: float
    shared_words: list[str]


class MemorySearchHit(BaseModel):
    id: int
    kind: str
    text: str
    importance: float
    score: float
    why: MemoryWhy


class MemorySearchList(Page[MemorySearchHit]):
    pass


class MemoryImported(BaseModel):
    """What an import did: items inserted, and those skipped as already present (same kind and text)."""

    inserted: int
    skipped: int
