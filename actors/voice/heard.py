"""Which audio frame carried which sentence, and what the person heard when they cut in.

Each frame sent is recorded with the sentence it belongs to (its position among the turn's
sentences) and where in that sentence's audio it ends. When the client reports the last frame
it played, `heard` turns that into the session's barge-in control (`Cancel`): every sentence
whose audio played to its end, plus the words of the sentence it was in, in proportion to how
much of that sentence's audio had played. No Ray, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from actors.session.events import Cancel


@dataclass(frozen=True)
class FrameMark:
    position: int      # the sentence's position in the turn (0, 1, ...)
    end_sample: int    # where this frame ends within that sentence's audio
    total_samples: int  # that sentence's whole audio


@dataclass
class PlayLog:
    """One socket's frames: sequence numbers go on across turns; marks are per turn."""

    next_seq: int = 0
    marks: dict[int, FrameMark] = field(default_factory=dict)
    sentences: list[str] = field(default_factory=list)
    played: int | None = None   # the last frame the client said it played, this turn

    def new_turn(self) -> None:
        self.marks.clear()
        self.sentences.clear()
        self.played = None

    def sentence(self, text: str) -> int:
        """A sentence of the running turn, in the order the turn sent them; its position."""
        self.sentences.append(text)
        return len(self.sentences) - 1

    def frame(self, position: int, end_sample: int, total_samples: int) -> int:
        """Record one frame about to be sent; its sequence number."""
        seq = self.next_seq
        self.next_seq += 1
        self.marks[seq] = FrameMark(position, end_sample, total_samples)
        return seq

    def report(self, seq: int) -> None:
        """The client played up to `seq` (reports only move forward, within this turn)."""
        if seq in self.marks and (self.played is None or seq > self.played):
            self.played = seq

    def heard(self, last_seq: int | None) -> Cancel:
        """What to keep of the reply when the person cut in after frame `last_seq`."""
        if last_seq is not None:
            self.report(last_seq)
        mark = self.marks.get(self.played) if self.played is not None else None
        if mark is None:
            return Cancel(heard_index=-1)  # nothing of this turn was played
        if mark.end_sample >= mark.total_samples:
            return Cancel(heard_index=mark.position)
        text = self.sentences[mark.position] if mark.position < len(self.sentences) else ""
        fragment = words_for(text, mark.end_sample / max(1, mark.total_samples))
        later = self.sentences[mark.position + 1:]
        # The session finds the fragment from the last sentence back: it must not occur later.
        if not fragment or any(fragment in s for s in later):
            return Cancel(heard_index=mark.position - 1)
        return Cancel(heard=fragment)


    def heard_text(self, cancel: Cancel) -> str:
        """The words `cancel` (from `heard`) keeps, spelled out: for a reply that was already
        written in full when the person cut in, so the stored reply can be cut to them."""
        if cancel.heard is not None and self.played is not None and self.played in self.marks:
            position = self.marks[self.played].position
            return " ".join([*self.sentences[:position], cancel.heard])
        index = cancel.heard_index if cancel.heard_index is not None else -1
        return " ".join(self.sentences[:index + 1])


def words_for(text: str, fraction: float) -> str:
    """The start of `text` spoken in `fraction` of its audio: whole words only, by length,
    cut from `text` itself (so the session finds it there)."""
    budget = len(text) * min(1.0, max(0.0, fraction))
    end = 0
    for match in re.finditer(r"\S+", text):
        if match.end() > budget:
            break
        end = match.end()
    return text[:end].strip()
