"""The question the owner is asked before a confirm-tier call whose arguments read badly as a
call: a mail that goes out in their name, invitations sent from their calendar.

Pure and light (the session actor imports it): no mail or calendar library, only the standard
library's address parser. Keyed by (server, tool); a tool with no preview gets the generic
"Allow tool(arguments)?" question.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from email.utils import getaddresses
from typing import Any

PREVIEW_CHARS = 120
Preview = Callable[[Mapping[str, Any]], str]


def _addresses(value: Any) -> str:
    """Recipients as the owner should read them back: addresses only, whatever shape they came in."""
    items = value if isinstance(value, list) else [value] if value else []
    found = [a for _, a in getaddresses([str(i) for i in items]) if a]
    return ", ".join(found) if found else ", ".join(str(i) for i in items)


def _flat(text: Any) -> str:
    return " ".join(str(text or "").split())


def send_preview(arguments: Mapping[str, Any]) -> str:
    """"Send mail to ana@x, bob@y — subject 'Re: Trip' — 'Yes, count me in…'". Never raises."""
    head = f"Send mail to {_addresses(arguments.get('to')) or '(no recipient)'}"
    if arguments.get("cc"):
        head += f" (cc {_addresses(arguments.get('cc'))})"
    if arguments.get("reply_to_uid") is not None:
        head += f", replying to message #{arguments.get('reply_to_uid')}"
    parts = [head, f"subject {(_flat(arguments.get('subject')) or '(none)')!r}"]
    body = _flat(arguments.get("body"))
    if body:
        parts.append(repr(body if len(body) <= PREVIEW_CHARS else body[:PREVIEW_CHARS].rstrip() + "…"))
    return " — ".join(parts)


def invite_preview(arguments: Mapping[str, Any]) -> str:
    """"Invite zoe@x, Carl to event #1a2b3c4d: the calendar sends each an invitation from you"."""
    who = _addresses(arguments.get("attendees")) or "(nobody)"
    return (f"Invite {who} to event #{_flat(arguments.get('event_id')) or '?'}: the calendar sends "
            "each an invitation from you")


PREVIEWS: Mapping[tuple[str, str], Preview] = {
    ("mail", "send_mail"): send_preview,
    ("calendar", "invite"): invite_preview,
}


def preview(server: str, tool: str, arguments: Mapping[str, Any]) -> str | None:
    """The question for this call, or None for the generic one. `tool` may carry the
    catalogue's `<server>__` prefix."""
    own = tool.removeprefix(f"{server}__")
    make = PREVIEWS.get((server, own))
    return make(arguments) if make else None
