"""Where a piece of a turn came from, and the rule that keys on it.

Every piece of content that enters a turn (the owner's message, an attachment's text, a tool's
result, a memory item, the rolling summary, a relay message, a task's result) carries a
`Provenance`: the person's own words in this conversation (`owner`), the system's own text
(`system`), or an untrusted source named precisely (`file:12 notes.txt`, `camera:ocr`,
`relay:<uid> from <name>`, `device:<id>.<tool>`, `web:<host>`, `mcp:<server>.<tool>`,
`memory:<item id>`, `summary`, `task:<id>`, `mail:<sender>`, `calendar:<organizer>`,
`contacts:<card>`).

The taint rule: once anything untrusted entered a turn, every action (tier 1 and up) needs the
person's own yes; where nobody can say it, the action is declined. Only `owner` and `system`
are trusted; anything else, whatever it claims, is not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

OWNER = "owner"
SYSTEM = "system"
TRUSTED = frozenset({OWNER, SYSTEM})
# Untrusted kinds, as the prefix of a source (the part before the first ':').
UNTRUSTED_KINDS = frozenset({"file", "camera", "relay", "device", "web", "mcp", "memory", "summary", "task",
                             "mail", "calendar", "contacts"})

_DEVICE_SERVER = re.compile(r"^device(\d+)_")
_UNSAFE = re.compile(r"[\x00-\x1f<>\"]")
MAX_SOURCE = 160


def _clean(text: Any) -> str:
    return _UNSAFE.sub(" ", str(text)).strip()[:MAX_SOURCE]


class Provenance(BaseModel):
    """Where one piece of content came from; `source` is `owner`, `system` or a named source."""

    model_config = ConfigDict(frozen=True)

    source: str = Field(min_length=1, max_length=MAX_SOURCE)

    @field_validator("source", mode="before")
    @classmethod
    def _tidy(cls, value: Any) -> str:
        return _clean(value) or SYSTEM

    # -- reading it -----------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """`owner`, `system`, or the untrusted kind (`file`, `web`, ...); unknown ones are `mcp`."""
        if self.source in TRUSTED:
            return self.source
        head = self.source.split(":", 1)[0]
        return head if head in UNTRUSTED_KINDS else "mcp"

    @property
    def trusted(self) -> bool:
        return self.source in TRUSTED

    @property
    def label(self) -> str:
        """How the owner is told about it: `notes.txt`, `text the camera read`, ..."""
        kind, _, rest = self.source.partition(":")
        if kind == "file":
            _, _, name = rest.partition(" ")
            return name.strip() or f"file {rest.strip()}"
        if kind == "camera":
            return "text the camera read" if rest == "ocr" else "the camera"
        if kind == "relay":
            uid, _, who = rest.partition(" from ")
            return f"a relay message from {who.strip()}" if who.strip() else f"relay session {uid.strip()}"
        if kind == "device":
            return f"output of device {rest}"
        if kind == "web":
            return rest or "the web"
        if kind == "memory":
            return f"memory item #{rest} (learned from outside content)"
        if kind == "summary":
            return "the conversation summary (made from outside content)"
        if kind == "task":
            return f"the result of task {rest}"
        if kind == "mail":
            return f"mail from {rest}" if rest else "your mail"
        if kind == "calendar":
            return f"a calendar entry from {rest}" if rest else "your calendar"
        if kind == "contacts":
            return "a contact card"
        return self.source

    def __str__(self) -> str:
        return self.source

    # -- naming it --------------------------------------------------------------------------

    @classmethod
    def owner(cls) -> Provenance:
        return cls(source=OWNER)

    @classmethod
    def system(cls) -> Provenance:
        return cls(source=SYSTEM)

    @classmethod
    def file(cls, file_id: int | str, name: str | None = None) -> Provenance:
        return cls(source=f"file:{file_id}" + (f" {_clean(name)}" if name else ""))

    @classmethod
    def camera_ocr(cls) -> Provenance:
        return cls(source="camera:ocr")

    @classmethod
    def relay(cls, uid: str, name: str | None = None) -> Provenance:
        return cls(source=f"relay:{_clean(uid)}" + (f" from {_clean(name)}" if name else ""))

    @classmethod
    def device(cls, device_id: int | str, tool: str) -> Provenance:
        return cls(source=f"device:{device_id}.{_clean(tool)}")

    @classmethod
    def web(cls, host: str) -> Provenance:
        return cls(source=f"web:{_clean(host) or 'unknown'}")

    @classmethod
    def mcp(cls, server: str, tool: str) -> Provenance:
        return cls(source=f"mcp:{_clean(server)}.{_clean(tool)}")

    @classmethod
    def account(cls, kind: str, who: str | None = None) -> Provenance:
        """Content read from one of the owner's accounts (`mail`, `calendar`, `contacts`), named
        by who wrote it where that is known (`mail:ana@example.org`)."""
        return cls(source=kind + (f":{_clean(who)}" if who and _clean(who) else ""))

    @classmethod
    def memory(cls, item_id: int | str) -> Provenance:
        return cls(source=f"memory:{item_id}")

    @classmethod
    def summary(cls) -> Provenance:
        return cls(source="summary")

    @classmethod
    def task(cls, task_id: int | str) -> Provenance:
        return cls(source=f"task:{_clean(task_id)}")

    @classmethod
    def parse(cls, value: str | Provenance | dict[str, Any]) -> Provenance:
        if isinstance(value, Provenance):
            return value
        if isinstance(value, dict):
            return cls(**value)
        return cls(source=value)


OWNER_WORDS = Provenance.owner()
SYSTEM_TEXT = Provenance.system()


def untrusted(sources: Iterable[Provenance | str]) -> list[Provenance]:
    """The untrusted ones among `sources`, each once, in order."""
    out: list[Provenance] = []
    for s in sources:
        p = Provenance.parse(s)
        if not p.trusted and p not in out:
            out.append(p)
    return out


def taint_reason(sources: Iterable[Provenance | str]) -> str:
    """Why an action needs the person's own yes: "this turn read notes.txt, which is not your
    own words, so actions after reading outside content need your own yes" ("" when nothing
    untrusted was read)."""
    labels = list(dict.fromkeys(p.label for p in untrusted(sources)))
    if not labels:
        return ""
    shown = labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]
    if len(labels) > 4:
        shown = ", ".join(labels[:4]) + f" and {len(labels) - 4} more"
    which = "which is" if len(labels) == 1 else "which are"
    return f"this turn read {shown}, {which} not your own words, so actions after reading outside content need your own yes"


def _host(value: Any) -> str:
    text = str(value or "").strip()
    if "://" not in text:
        text = "http://" + text
    try:
        return urlsplit(text).hostname or ""
    except ValueError:
        return ""


def tool_provenance(server: str, tool: str, arguments: dict[str, Any] | None = None) -> Provenance:
    """Where a tool's output comes from, named as precisely as the call allows."""
    args = arguments or {}
    device = _DEVICE_SERVER.match(server or "")
    if device:
        return Provenance.device(device.group(1), tool)
    if server == "web" or tool in ("fetch_url", "fetch_page", "link_preview", "web_search", "search_web"):
        url = args.get("url")
        if url:
            return Provenance.web(_host(url))
        return Provenance.web("search" if "search" in tool else "unknown")
    if tool in ("inspect_file", "read_file", "read_document") or server == "files":
        file_id = args.get("file_id", args.get("id", args.get("path", "")))
        return Provenance.file(file_id, args.get("name")) if file_id != "" else Provenance.mcp(server, tool)
    if server == "relay" or tool.startswith("relay_"):
        return Provenance.relay(str(args.get("uid") or "session"))
    if server == "tasks" or tool.startswith("task_"):
        # A task's result (the server the scheduler brings): `task:<id>`.
        task_id = args.get("task_id", args.get("id"))
        return Provenance.task(task_id) if task_id not in (None, "") else Provenance.mcp(server, tool)
    if server in ("mail", "calendar"):
        # Everything an account holds was written by someone: the server names each sender
        # (`mail:ana@example.org`) in its result, which only makes this more precise.
        return Provenance.account("contacts" if tool == "find_contact" else server)
    if tool == "look_at_camera":
        return Provenance.camera_ocr()
    if server == "memory" and tool == "recall":
        return Provenance(source="memory:recall")
    return Provenance.mcp(server or "builtin", tool)
