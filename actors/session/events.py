"""The typed messages of a chat turn: what the AgentLoop is asked (`TurnRequest`), the events a
turn streams (`TurnEvent`, one small class per kind, discriminated on `type`), and the control
message that stops a turn (`Cancel`, which travels on its own lane: the actor's `cancel`
method, never behind the turn's events).

On the wire (SSE) an event is `event: <type>` and `data: <its fields but type, as JSON>`; the
bytes are those the dict events made before these classes existed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from actors.common.errors import ErrorInfo
from actors.common.provenance import OWNER_WORDS, SYSTEM_TEXT, Provenance, untrusted

MAX_CHAT_STEPS = 10
MAX_BACKGROUND_STEPS = 20


class _Event(BaseModel):
    """Fields are the wire's data fields, in wire order; `type` names the kind."""

    type: str
    # Fields left out of the wire when unset (None): a tool start has no result, and a reader
    # who is not the conversation's person sees neither arguments nor results.
    omit_if_none: ClassVar[tuple[str, ...]] = ()

    @property
    def data(self) -> dict[str, Any]:
        """The event's data fields as they go on the wire."""
        out = self.model_dump(exclude={"type"})
        for key in self.omit_if_none:
            if out.get(key, 0) is None:
                del out[key]
        return out

    def sse(self) -> str:
        return sse(self)


class SessionStarted(_Event):
    """First on the wire: which conversation and turn the stream is (the gateway says it)."""

    type: Literal["session"] = "session"
    session_id: str
    turn_id: str


class TurnStarted(_Event):
    """First from the session actor: the turn's id."""

    type: Literal["turn"] = "turn"
    turn_id: str


class Sentence(_Event):
    type: Literal["sentence"] = "sentence"
    text: str
    index: int


class ToolActivity(_Event):
    """A tool call starting (`arguments`) or ending (`result`, `files`)."""

    type: Literal["tool"] = "tool"
    name: str
    status: str
    arguments: dict[str, Any] | None = None
    result: str | None = None
    files: list[int] | None = None
    # On a call's end: the untrusted sources the turn has read so far, this call's output
    # included (`web:host`, `file:12 notes.txt`); left out while the turn read none.
    sources: list[str] | None = None
    omit_if_none: ClassVar[tuple[str, ...]] = ("arguments", "result", "files", "sources")


class ConfirmAsked(_Event):
    """The owner (or the conversation's person) is asked before an action runs."""

    type: Literal["confirm"] = "confirm"
    id: str
    question: str
    tool: str
    arguments: dict[str, Any] | None = None
    needs_pin: bool
    reason: str = ""
    expires_in: float
    # What this turn read that is not the person's own words (`file:12 notes.txt`, ...): why
    # an auto action is put to them at all. Left out (None) in a clean turn.
    sources: list[str] | None = None
    omit_if_none: ClassVar[tuple[str, ...]] = ("arguments", "sources")


class Done(_Event):
    """The turn ended: the saved reply (or, cancelled, what the owner heard)."""

    type: Literal["done"] = "done"
    session_id: str
    message_id: str | None
    text: str
    cancelled: bool = False


class TurnError(_Event):
    """The turn ended with an error; on the wire its data is the `ErrorInfo`."""

    type: Literal["error"] = "error"
    error: ErrorInfo

    @classmethod
    def of(cls, code: str, message: str) -> TurnError:
        return cls(error=ErrorInfo(code=code, message=message))

    @property
    def data(self) -> dict[str, Any]:
        return self.error.model_dump()


class TurnResult(_Event):
    """The AgentLoop's last event: the reply and the tools' trace (never sent to a client)."""

    type: Literal["result"] = "result"
    text: str
    tools: list[dict[str, Any]] = Field(default_factory=list)
    files: list[int] = Field(default_factory=list)
    # What the turn read that was not the person's own words: reflection and the summary
    # must not learn instructions from it.
    sources: list[str] = Field(default_factory=list)


TurnEvent = Annotated[
    SessionStarted | TurnStarted | Sentence | ToolActivity | ConfirmAsked | Done | TurnError | TurnResult,
    Field(discriminator="type"),
]
# The events after which a turn sends nothing more (`isinstance(event, ENDS_TURN)`).
ENDS_TURN = (Done, TurnError)
_EVENTS: TypeAdapter[Any] = TypeAdapter(TurnEvent)


def parse_event(type_: str, data: dict[str, Any]) -> TurnEvent:
    """A typed event from its wire form (`event:` and the `data:` object)."""
    if type_ == "error":
        return TurnError(error=ErrorInfo(**data))
    return _EVENTS.validate_python({"type": type_, **data})


def sse(event: _Event) -> str:
    """One server-sent event: `event: <type>`, then the data fields as JSON."""
    return f"event: {event.type}\ndata: {json.dumps(event.data, ensure_ascii=False)}\n\n"


# -- control ---------------------------------------------------------------------------------


class Cancel(BaseModel):
    """Stop the running turn (barge-in): what the owner says they heard of the reply."""

    heard: str | None = None
    heard_index: int | None = None


# -- the request -----------------------------------------------------------------------------


class ConfirmRequest(BaseModel):
    """The AgentLoop asks the session actor to confirm an action before it runs."""

    tool: str
    arguments: dict[str, Any]
    question: str
    needs_pin: bool
    reason: str = ""
    sources: list[str] = Field(default_factory=list)


class TurnMessage(BaseModel):
    """One message of the turn's prompt, with where its content came from.

    On the wire to the model it is the plain OpenAI-style dict (`wire()`); `provenance` never
    leaves the loop. A user message is the owner's words unless said otherwise; a message that
    holds an attachment's text, a memory item or summary learned from outside content, or a
    task's result also names those sources, and the taint rule keys on them."""

    model_config = ConfigDict(extra="allow")

    role: str
    content: Any = None
    provenance: list[Provenance] = Field(default_factory=list)

    def sources(self) -> list[Provenance]:
        """Its provenance, or the default for its role (the owner for `user`, else system)."""
        if self.provenance:
            return list(self.provenance)
        return [OWNER_WORDS if self.role == "user" else SYSTEM_TEXT]

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        out.update(self.model_extra or {})
        return out

    def __getitem__(self, key: str) -> Any:
        return self.wire()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.wire().get(key, default)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, dict):
            return self.wire() == other
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]


def said_by(role: str, sources: Iterable[Provenance | str] | None = None) -> list[Provenance]:
    """The provenance of a stored message as the next prompt carries it: its role's default
    (the owner's words for `user`, the system's text otherwise) and the untrusted sources it
    was saved with: those a caller named for a user message (a relay wake-up, a task's run),
    and those a turn read for the reply written in it. A user message that is a relay peer's
    own words is not labelled as the owner's."""
    named = untrusted(sources or [])
    if role != "user":
        return [SYSTEM_TEXT, *named]
    stranger = any(p.kind == "relay" for p in named)
    return [*([] if stranger else [OWNER_WORDS]), *named]


def message_sources(messages: list[Any]) -> list[Provenance]:
    """The untrusted provenance of a prompt's messages: TurnMessages' `provenance`, and a
    plain dict's `provenance` key (a list of sources) where a caller put one."""
    found: list[Provenance] = []
    for m in messages:
        if isinstance(m, TurnMessage):
            found += m.sources()
        elif isinstance(m, dict) and m.get("provenance"):
            found += [Provenance.parse(p) for p in m["provenance"]]
    return untrusted(found)


def to_wire(messages: list[Any]) -> list[Provenance]:
    """Turn `messages` into the model's plain dicts, in place; returns their untrusted sources."""
    sources = message_sources(messages)
    for i, m in enumerate(messages):
        if isinstance(m, TurnMessage):
            messages[i] = m.wire()
        elif isinstance(m, dict) and "provenance" in m:
            messages[i] = {k: v for k, v in m.items() if k != "provenance"}
    return sources


class TurnScope(BaseModel):
    """Whose turn it is: the AgentLoop offers that person's device tools."""

    person: int
    device: int | None = None


class TurnRequest(BaseModel):
    """What the session actor asks the AgentLoop to run."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # Typed, each with its provenance; a plain dict is read as a TurnMessage.
    messages: list[TurnMessage]
    session_id: str | None = None
    turn_id: str | None = None
    # The SessionActor's handle, for confirmations; None means nobody can be asked.
    session: Any = None
    attended: bool = True
    max_steps: int = MAX_CHAT_STEPS
    # Read once by the session actor; None makes the AgentLoop look it up.
    scope: TurnScope | None = None
    # Background work the owner did not ask for in their own words (the autonomy loop's
    # tasks): only the owner-only work tools are offered (actors/scheduler/owner_tools.py).
    work_only: bool = False
