"""What the listener hears of a model step: sentences as they complete, markup never.

Unbacked action claims are held here until the step shows whether a tool backed them
(actors/session/loop.py decides, and says so plainly when none did).
"""

from __future__ import annotations

from actors.providers.chunker import SentenceChunker
from actors.providers.guard import ToolCallGuard
from actors.providers.types import ToolCall
from actors.session.claims import claim_sentence
from actors.session.events import Sentence, TurnEvent


class Speaker:
    """Guard, then chunker: markup never reaches the listener, sentences leave as they complete.

    While a turn has run no tool, a sentence that claims an action is held back, with
    everything after it, until the step ends: then it is either released (a tool call
    followed) or withheld by the claim check.
    """

    def __init__(self, known_tools: set[str], start_index: int, hold_claims: bool) -> None:
        self.guard = ToolCallGuard(known_tools) if known_tools else ToolCallGuard()
        self.chunker = SentenceChunker()
        self.index = start_index
        self.text = ""
        self.hold_claims = hold_claims
        self.held: list[str] = []
        self.spoken: list[str] = []
        self.dropped_claims = False

    def _sentences(self, sentences: list[str]) -> list[TurnEvent]:
        out = []
        for s in sentences:
            if self.held or (self.hold_claims and claim_sentence(s)):
                self.held.append(s)
                continue
            out.append(self._event(s))
        return out

    def _event(self, sentence: str) -> TurnEvent:
        event = Sentence(text=sentence, index=self.index)
        self.index += 1
        self.spoken.append(sentence)
        return event

    def feed(self, delta: str) -> list[TurnEvent]:
        clean = self.guard.feed(delta)
        self.text += clean
        return self._sentences(self.chunker.feed(clean)) if clean else []

    def finish(self) -> tuple[list[TurnEvent], list[ToolCall]]:
        tail, recovered = self.guard.finish()
        self.text += tail
        events = self._sentences(self.chunker.feed(tail) + self.chunker.flush())
        calls = [ToolCall(id=f"recovered_{i}", name=c.name, arguments=c.arguments)
                 for i, c in enumerate(recovered)]
        return events, calls

    @property
    def reply_text(self) -> str:
        """What goes into the saved reply: the model's text, or only what was spoken when
        unbacked claims were dropped from it."""
        return " ".join(self.spoken) if self.dropped_claims else self.text.strip()

    def release(self, drop_claims: bool = False, note: str | None = None) -> list[TurnEvent]:
        """Let held sentences go; with drop_claims, a claim no tool backs is replaced by a
        plain statement (`note`), since the system must never report an action it did not perform."""
        events = []
        self.dropped_claims = drop_claims
        for s in self.held:
            if drop_claims and claim_sentence(s):
                continue
            events.append(self._event(s))
        if note:
            events.append(self._event(note))
        self.held = []
        return events
