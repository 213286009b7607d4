"""The typed messages of a chat turn: what the AgentLoop is asked (`TurnRequest`), the events a
turn streams (`TurnEvent`, one small class per kind, discriminated on `type`), and the control
message that stops a turn (`Cancel`, which travels on its own lane: the actor's `cancel`
method, never behind the turn's events).

On the wire (SSE) an event is `event: <type>` and `data: <its fields but type, as JSON>`; the
bytes are those the dict events made before these classes existed.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from actors.common.errors import ErrorInfo

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
    omit_if_none: ClassVar[tuple[str, ...]] = ("arguments", "result", "files")


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
    omit_if_none: ClassVar[tuple[str, ...]] = ("arguments",)


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


TurnEvent = Annotated[
    SessionStarted | TurnStarted | Sentence | ToolActivity | ConfirmAsked | Done | TurnError | TurnResult,
    Field(discriminator="type"),
]
ENDS_TURN = ("done", "error")
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


class TurnScope(BaseModel):
    """Whose turn it is: the AgentLoop offers that person's device tools."""

    person: int
    device: int | None = None


class TurnRequest(BaseModel):
    """What the session actor asks the AgentLoop to run."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    messages: list[dict[str, Any]]
    session_id: str | None = None
    turn_id: str | None = None
    # The SessionActor's handle, for confirmations; None means nobody can be asked.
    session: Any = None
    attended: bool = True
    max_steps: int = MAX_CHAT_STEPS
    # Read once by the session actor; None makes the AgentLoop look it up.
    scope: TurnScope | None = None
