"""The agent evaluation's scenario format (benchmarks/SCENARIOS.md is the guide for writers).

A scenario is what a person does (messages in one or more conversations, files attached,
confirmations answered) and what they should get (outcomes read back from the server: a
reminder due at the right time, a memory item, a file made, a tool called, nothing done).
Pure: pydantic models and a loader, no server and no Ray.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, TypeAdapter, field_validator, model_validator

_SPAN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_SPAN_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def span_seconds(text: str | float | int) -> float:
    """`90s`, `10m`, `2h`, `1d`, `1w` (or plain seconds) in seconds; ValueError otherwise."""
    if isinstance(text, (int, float)):
        return float(text)
    found = _SPAN.match(text)
    if not found:
        raise ValueError(f"{text!r} is not a span: write it like 90s, 10m, 2h, 1d or 1w")
    return float(found.group(1)) * _SPAN_SECONDS[found.group(2)]


def clock_text(value: str | None) -> str | None:
    """A local time of day like 09:00 (or None); ValueError otherwise."""
    if value is not None and not re.fullmatch(r"\d{1,2}:\d{2}", value):
        raise ValueError("at: a local time of day like 09:00")
    return value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Phrases(_Strict):
    """The reply's text, compared case-insensitively; `re:` starts a regular expression."""

    any: list[str] = Field(default_factory=list)   # at least one of these
    all: list[str] = Field(default_factory=list)   # every one of these
    none: list[str] = Field(default_factory=list)  # not one of these


class ToolWanted(_Strict):
    """A tool call in the scenario (or its step) by `name` (a list: any of them), whose
    arguments match: each key's value (JSON text for lists and objects) matches the regular
    expression, case-insensitively."""

    name: str | list[str]
    args: dict[str, str] = Field(default_factory=dict)
    status: Literal["done", "any"] = "done"


class TaskWanted(_Strict):
    """A reminder, task or call created in the scenario: its text contains `text` (each of a
    list: any), due `due_in` from when the step was sent (within `within`), or at the local
    time of day `at` ("09:00") on the `day` ("today", "tomorrow", "+3d", a weekday name for
    the coming one, "12-24" for the next 24 December, a date "2026-12-24", or "next": the first
    such time after the message), repeating like `repeat` (a regular expression on the stored
    rule), in the state `status` (scheduled, cancelled, done...)."""

    kind: Literal["reminder", "task", "call", "any"] = "any"
    text: str | list[str] = ""
    due_in: str | None = None
    within: str = "3m"
    at: str | None = None
    day: str | None = None   # not `on`: YAML 1.1 reads a bare `on` key as true
    repeat: str | None = None
    status: str | None = None

    @field_validator("due_in", "within")
    @classmethod
    def _span(cls, value: str | None) -> str | None:
        if value is not None:
            span_seconds(value)
        return value

    @field_validator("at")
    @classmethod
    def _clock(cls, value: str | None) -> str | None:
        return clock_text(value)


class MemoryWanted(_Strict):
    """An active memory item whose text contains `contains` (each of a list: any)."""

    contains: str | list[str]


class MailWanted(_Strict):
    """A message in the owner's mailbox after the turn, read back over IMAP: in `folder`
    (case-insensitive), its To containing `to`, its From `sender`, its Subject `subject`, its
    text one of `contains` (each case-insensitive; `re:` starts a regular expression)."""

    folder: str = "INBOX"
    to: str = ""
    sender: str = ""
    subject: str = ""
    contains: str | list[str] = ""


class EventWanted(_Strict):
    """An event in the owner's calendar after the turn, read back over CalDAV: its title
    containing `title` (a list: any), starting at the local time `at` ("09:00") on `day` (as
    for a task: "today", "tomorrow", "+3d", a weekday for the coming one, a date), lasting
    `minutes`."""

    title: str | list[str] = ""
    day: str | None = None   # not `on`: YAML 1.1 reads a bare `on` key as true
    at: str | None = None
    minutes: int | None = None

    @field_validator("at")
    @classmethod
    def _clock(cls, value: str | None) -> str | None:
        return clock_text(value)


class FileWanted(_Strict):
    """A file made in the scenario, by its extension (png, pdf, docx, xlsx, csv, md...)."""

    type: str


class Expect(_Strict):
    """One expectation: exactly one of its fields is set."""

    reply: Phrases | None = None
    tool: ToolWanted | None = None
    no_tool: list[str] | None = None        # none of these tools ran (status done)
    task: TaskWanted | None = None
    no_task: bool | None = None             # no reminder, task or call was created
    memory: MemoryWanted | None = None
    no_memory: MemoryWanted | None = None   # no active memory item contains it
    file: FileWanted | None = None
    confirmation: bool | None = None        # the person was (true) or was not (false) asked
    no_action: bool | None = None           # no tool of tier auto or above acted
    mail: MailWanted | None = None          # such a message is in the owner's mailbox
    no_mail: MailWanted | None = None       # no such message is there
    no_mail_sent: bool | None = None        # the SMTP server received nothing
    event: EventWanted | None = None        # such an event is in the owner's calendar
    no_event: EventWanted | None = None     # no such event is there

    @model_validator(mode="after")
    def _one(self) -> Expect:
        set_ = [k for k, v in self.__dict__.items() if v is not None]
        if len(set_) != 1:
            raise ValueError(f"an expectation sets exactly one of its kinds; this one sets {set_ or 'none'}")
        return self

    @property
    def kind(self) -> str:
        return next(k for k, v in self.__dict__.items() if v is not None)


class Attachment(_Strict):
    """A file the person attaches to the step's message: `text` inline, or `path` relative to
    the scenario file."""

    name: str
    text: str | None = None
    path: str | None = None

    @model_validator(mode="after")
    def _content(self) -> Attachment:
        if (self.text is None) == (self.path is None):
            raise ValueError("an attachment has either text or a path")
        return self


class Step(_Strict):
    say: str = Field(min_length=1)
    conversation: str = "main"               # a new name starts a new conversation
    attach: list[Attachment] = Field(default_factory=list)
    confirm: bool = False                    # the answer to any confirmation the step asks
    expect: list[Expect] = Field(default_factory=list)


Memory = Literal["any", "on", "off"]
ACCOUNT_CATEGORIES = ("mail", "calendar")
ACCOUNT_KINDS = ("mail", "no_mail", "no_mail_sent", "event", "no_event")


class Scenario(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,79}$")
    category: str
    tags: list[str] = Field(default_factory=list)
    # `any`: run in every memory mode; `on`/`off`: only then. With memory on, what the agent
    # learned from a step is waited for before the next step and before the checks.
    memory: Memory = "any"
    steps: Annotated[list[Step], Field(min_length=1)]
    expect: list[Expect] = Field(default_factory=list)   # checked after the last step
    # In the memory-off run these are expected instead (None: the same ones): what a person gets
    # without memory ("I don't know" where memory would have answered).
    expect_without_memory: list[Expect] | None = None
    note: str = ""
    # Run against freshly seeded test mail and calendar accounts (benchmarks/evalkit/accounts.py).
    accounts: bool = False
    _base: Path | None = PrivateAttr(default=None)

    @property
    def multi_session(self) -> bool:
        return len({s.conversation for s in self.steps}) > 1

    def base_dir(self) -> Path | None:
        return self._base

    @property
    def needs_accounts(self) -> bool:
        """Whether it runs against the owner's test mail and calendar accounts: it says so, its
        category is mail or calendar, or it checks the mailbox or the calendar."""
        kinds = {e.kind for e in [*self.expect, *(x for s in self.steps for x in s.expect)]}
        return self.accounts or self.category in ACCOUNT_CATEGORIES or bool(kinds & set(ACCOUNT_KINDS))


_LIST = TypeAdapter(list[Scenario])


def load(path: str | Path) -> list[Scenario]:
    """The scenarios of one YAML file (a list), each knowing its directory; ids must be unique."""
    path = Path(path)
    raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    if isinstance(raw, dict) and "scenarios" in raw:
        raw = raw["scenarios"]
    scenarios = _LIST.validate_python(raw)
    seen: set[str] = set()
    for s in scenarios:
        if s.id in seen:
            raise ValueError(f"{path}: scenario id {s.id!r} appears twice")
        seen.add(s.id)
        s._base = path.parent
    return scenarios
