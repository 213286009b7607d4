"""What the local model actually read and wrote, so the next turn's prompt repeats it exactly.

llama.cpp reuses its cache only for the tokens a new prompt shares, from the start, with the
previous one. The session stores a turn as plain text (the person's words, the reply), but the
model read the person's message with that turn's context block in front of it and wrote its
reply as a JSON object. Rendering history from the plain text therefore breaks the shared prefix
at the previous message, and every continued turn read its last exchange again.

`Renderings` remembers, for each message a turn rendered or generated, the exact text, under a
key made of the role, the plain text and a digest of everything rendered before it in the
conversation; `profile` looks each history message up there and renders it as the model saw it.
A key that is not there (another process, an evicted entry, a reply the session edited) falls
back to the plain text: a cache miss, never a wrong answer. No Ray.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

SIZE = 2048


def _plain(text: str) -> str:
    return " ".join(text.split())


def chain(before: str, role: str, rendered: str) -> str:
    """The digest of the rendering so far, after one more message."""
    return hashlib.sha1(f"{before}\x00{role}\x00{rendered}".encode()).hexdigest()


def key(role: str, plain: str, before: str) -> str:
    return f"{role}:{before}:{hashlib.sha1(_plain(plain).encode()).hexdigest()}"


class Renderings:
    """A bounded map from (role, plain text, what came before) to the text the model saw."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self._map: OrderedDict[str, str] = OrderedDict()

    def get(self, k: str) -> str | None:
        value = self._map.get(k)
        if value is not None:
            self._map.move_to_end(k)
        return value

    def put(self, k: str, rendered: str) -> None:
        self._map[k] = rendered
        self._map.move_to_end(k)
        while len(self._map) > self.size:
            self._map.popitem(last=False)

    def __len__(self) -> int:
        return len(self._map)
