"""When background looks speak: coach mode and noticing writing.

Both are decisions about time and repetition, so both take an injectable clock (seconds,
monotonic) and hold no threads or timers of their own; the camera actor calls them.

* Coach mode: a periodic look told to stay silent unless something matters. Whatever it says
  still passes :class:`LineSuppressor`, so the same warning is not repeated every look.
* Noticing writing: :class:`NoticeWatcher` fires when OCR shows new text of at least three
  words, mostly unseen before, unchanged for two seconds, and at least 15 seconds after the
  previous trigger.
"""

from __future__ import annotations

import difflib
import re
import time
from collections import deque
from collections.abc import Callable, Iterable

from vision.procedure import Instrument
from vision.vlm import VlmAnswer

Clock = Callable[[], float]

_WORD = re.compile(r"[^\W_]+(?:[.,'][^\W_]+)*", re.UNICODE)


def words(text: str) -> list[str]:
    """Lower-cased words and numbers (``42.5`` and ``don't`` stay whole)."""
    return [w.lower() for w in _WORD.findall(text)]


def _normal_line(text: str) -> str:
    return " ".join(words(text))


class LineSuppressor:
    """Remembers recent spoken lines and refuses near-repeats within ``window`` seconds."""

    def __init__(
        self, *, window: float = 120.0, similarity: float = 0.85, memory: int = 20, clock: Clock = time.monotonic
    ) -> None:
        self.window = window
        self.similarity = similarity
        self._clock = clock
        self._recent: deque[tuple[float, str]] = deque(maxlen=memory)

    def is_repeat(self, line: str) -> bool:
        now = self._clock()
        norm = _normal_line(line)
        for when, seen in self._recent:
            if now - when > self.window:
                continue
            if norm == seen or difflib.SequenceMatcher(None, norm, seen).ratio() >= self.similarity:
                return True
        return False

    def remember(self, line: str) -> None:
        self._recent.append((self._clock(), _normal_line(line)))

    def allow(self, line: str) -> bool:
        """True (and remembered) when ``line`` is not a recent repeat."""
        if not line.strip() or self.is_repeat(line):
            return False
        self.remember(line)
        return True


def coach_should_speak(answer: VlmAnswer, instrument: Instrument | None = None) -> bool:
    """Whether a coach look's answer is worth interrupting for.

    The model is told to stay silent otherwise, but models chat anyway: only a mistake or safety
    issue (warning/danger), an out-of-range reading, or a finished step gets through.
    """
    if not answer.say.strip():
        return False
    if answer.status in ("warning", "danger") or answer.step_complete:
        return True
    reading = answer.reading
    return bool(instrument and reading and not instrument.in_safe_range(reading.value))


class CoachGate:
    """Coach-mode timing and filtering for one camera stream."""

    def __init__(
        self,
        *,
        interval: float = 10.0,
        suppressor: LineSuppressor | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.interval = interval
        self._clock = clock
        self.suppressor = suppressor or LineSuppressor(clock=clock)
        self._last_look: float | None = None

    def due(self) -> bool:
        """True when a coach look should be taken now; taking it is recorded by ``looked``."""
        return self._last_look is None or self._clock() - self._last_look >= self.interval

    def looked(self) -> None:
        # Recorded even when the look was dropped because the model was busy: a dropped look
        # is not retried early, or coach calls would crowd out questions.
        self._last_look = self._clock()

    def line_to_say(self, answer: VlmAnswer, instrument: Instrument | None = None) -> str | None:
        """The line to push as a coach event, or None to stay silent."""
        if not coach_should_speak(answer, instrument):
            return None
        return answer.say.strip() if self.suppressor.allow(answer.say) else None


class NoticeWatcher:
    """Decides when new writing in view should be shown to the model."""

    def __init__(
        self,
        *,
        min_words: int = 3,
        unseen_fraction: float = 0.5,
        stable_seconds: float = 2.0,
        spacing_seconds: float = 15.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self.min_words = min_words
        self.unseen_fraction = unseen_fraction
        self.stable_seconds = stable_seconds
        self.spacing_seconds = spacing_seconds
        self._clock = clock
        self._seen: set[str] = set()
        self._candidate: frozenset[str] | None = None
        self._candidate_text = ""
        self._since = 0.0
        self._last_trigger: float | None = None

    def mark_seen(self, texts: Iterable[str]) -> None:
        """Words that are not news (e.g. labels printed on the equipment)."""
        for text in texts:
            self._seen.update(words(text))

    def _is_new(self, tokens: set[str]) -> bool:
        if len(tokens) < self.min_words:
            return False
        unseen = len(tokens - self._seen)
        return unseen / len(tokens) > self.unseen_fraction

    @staticmethod
    def _same(a: frozenset[str], b: frozenset[str]) -> bool:
        # OCR flickers on a word between frames: sharing three quarters of the longer text's
        # words still counts as unchanged (so a 3-word text must match exactly).
        return bool(a and b) and len(a & b) / max(len(a), len(b)) >= 0.75

    def observe(self, ocr_text: str) -> str | None:
        """Feed the OCR text of one frame; returns the text to ask about when a notice fires."""
        now = self._clock()
        tokens = set(words(ocr_text))
        if not self._is_new(tokens):
            self._candidate = None
            return None
        current = frozenset(tokens)
        if self._candidate is None or not self._same(self._candidate, current):
            self._candidate = current
            self._candidate_text = ocr_text
            self._since = now
            return None
        self._candidate_text = ocr_text
        if now - self._since < self.stable_seconds:
            return None
        if self._last_trigger is not None and now - self._last_trigger < self.spacing_seconds:
            return None
        self._last_trigger = now
        self._seen.update(current)
        self._candidate = None
        return " ".join(self._candidate_text.split())
