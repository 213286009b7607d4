"""What the autonomy loop knows of the owner's accounts: how many unread mails, and when today's
events are. Counts and times only, never a subject, a sender or a title: those were written by
other people (outside content), and nothing outside may steer a loop that acts on its own.

`AccountsGlance` is plain data; `glance_from_tools` reads it through any tool caller (the tool
hub in production: `list_mail` and `agenda` when the owner's mail and calendar are connected),
and a server that is off or failing leaves its part out. No Ray here.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field

log = logging.getLogger(__name__)

ToolCaller = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
Glance = Callable[[], Awaitable["AccountsGlance"]]
MAX_EVENTS = 12

_TOTAL = re.compile(r"\b(\d+) of (\d+) messages\b")
_NONE_MATCH = re.compile(r"^No messages in .+ match\.|^.+ is empty\.", re.MULTILINE)
_EVENT_LINE = re.compile(r"^#\S+ · [^·]*?(\d{2}:\d{2})(?:\s*[-–]\s*(\d{2}:\d{2}))?", re.MULTILINE)
_ALL_DAY = re.compile(r"^#\S+ · [^·]*all day", re.MULTILINE | re.IGNORECASE)


class AccountsGlance(BaseModel):
    """None: that account is not connected (or did not answer)."""

    unread: int | None = None
    events_today: list[str] = Field(default_factory=list)  # "09:00-09:30", "all day"
    calendar: bool = False

    def line(self) -> str:
        parts = []
        if self.unread is not None:
            parts.append(f"{self.unread} unread mail" + ("" if self.unread == 1 else "s"))
        if self.calendar:
            parts.append(f"today's calendar: {len(self.events_today)} event"
                         + ("" if len(self.events_today) == 1 else "s")
                         + (f" ({', '.join(self.events_today)})" if self.events_today else ""))
        return "; ".join(parts)

    def fingerprint(self) -> list[Any]:
        return [self.unread, self.events_today]


def unread_count(text: str) -> int | None:
    """The unread total from `list_mail(unread=True)`'s answer ("INBOX: 1 of 5 messages, ...")."""
    if _NONE_MATCH.search(text):
        return 0
    found = _TOTAL.search(text)
    return int(found.group(2)) if found else None


def event_times(text: str) -> list[str]:
    """The start-end times of the events in `agenda`'s answer, in order ("all day" for those)."""
    times = [f"{a}-{b}" if b else a for a, b in _EVENT_LINE.findall(text)]
    times += ["all day"] * len(_ALL_DAY.findall(text))
    return times[:MAX_EVENTS]


async def glance_from_tools(call: ToolCaller) -> AccountsGlance:
    """Unread mail and today's event times, through `call(tool, arguments)` (answers as the tool
    hub gives them: {"text"} or {"error"}); a part whose tool fails or is absent is left out."""
    glance = AccountsGlance()
    mail = await call("list_mail", {"unread": True, "limit": 1})
    if "text" in mail:
        glance.unread = unread_count(str(mail["text"]))
    agenda = await call("agenda", {"start": "today"})
    if "text" in agenda:
        glance.calendar = True
        glance.events_today = event_times(str(agenda["text"]))
    return glance
