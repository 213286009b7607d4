"""Memory's learning calls on the local model: which JSON each one must come back as.

The purpose travels in a context variable (set by the AgentLoop around `complete`), so the
router and failover code between them need not know about it. A schema keeps a small model's
answer parseable; the fields are a subset of what memory's parsers read (they fill the rest
with defaults). No Ray.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

PURPOSE: contextvars.ContextVar[str | None] = contextvars.ContextVar("iriis_learning_purpose", default=None)
# A small model reads prompts at ~70 tokens/s and a chat turn waits behind one that is being
# read, so learning prompts are cut shorter for it than for a hosted model.
PROMPT_CHARS = 2_500

# Bounds keep a small model from rambling until its token cap cuts the JSON off.
_TEXT = {"type": "string", "maxLength": 200}
_NOTE = {"type": "object", "properties": {"text": _TEXT, "importance": {"type": "integer"}},
         "required": ["text", "importance"]}
_STRINGS = {"type": "array", "items": _TEXT, "maxItems": 3}

SCHEMAS: dict[str, dict[str, Any]] = {
    "reflection": {"type": "object", "properties": {
        "observations": {"type": "array", "items": _NOTE, "maxItems": 4},
        "people": {"type": "array", "items": _NOTE, "maxItems": 3},
        "lesson": _TEXT,
        "open_loops": _STRINGS,
    }, "required": ["observations", "people", "lesson", "open_loops"]},
}


@contextmanager
def purpose(name: str) -> Iterator[None]:
    token = PURPOSE.set(name)
    try:
        yield
    finally:
        PURPOSE.reset(token)


def response_format(wants_json: bool) -> dict[str, Any] | None:
    schema = SCHEMAS.get(PURPOSE.get() or "")
    if schema is not None:
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"} if wants_json else None


def cut(messages: list[dict[str, Any]], chars: int = PROMPT_CHARS) -> list[dict[str, Any]]:
    """The longest contents shortened until the whole fits `chars` (the first kept when it can)."""
    out = [dict(m) for m in messages]
    total = sum(len(str(m.get("content") or "")) for m in out)
    for m in sorted(out[1:], key=lambda m: -len(str(m.get("content") or ""))) + out[:1]:
        if total <= chars:
            break
        content = str(m.get("content") or "")
        keep = max(0, len(content) - (total - chars))
        m["content"] = content[:keep]
        total -= len(content) - keep
    return out
