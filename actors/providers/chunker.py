"""Split a streamed model reply into sentences so speech can start early.

Text-to-speech wants whole sentences (prosody is planned per sentence), but
waiting for the full reply adds the whole generation time to the first audible
word. ``SentenceChunker`` sits between the token stream and the speech engine
and hands over each sentence as soon as it is certainly finished.

The central rule is that a boundary is only decided once the character *after*
the boundary whitespace has arrived. A ``.`` at the very end of the buffer is
ambiguous ("3." may become "3.14", "Dr." may be followed by a name), so the
chunker waits for more input instead of guessing. Because every decision looks
at a bounded window that must be fully present, feeding a reply token by token
yields exactly the same sentences as feeding it whole.

Pure Python on purpose: it runs inside Ray actors but must be testable, and
cheap to call per token, without any of them.
"""

from __future__ import annotations

import re
from typing import Literal

# Characters that can end a sentence; runs such as "?!" or "..." are one mark.
_TERMINATORS = ".!?…"
# Closing quotes/brackets/emphasis directly after the mark still belong to the
# sentence ('He said "stop."' or '**Done.**').
_CLOSERS = "\"')]}»”’*_"
_QUOTES = "\"'»”’"
# Stripped from the front of the word before a dot, so "(e.g." is still "e.g".
_OPENERS = "\"'([{«“‘*_`"
_BULLETS = "-*+•"
_FENCE = "```"

# Words that are followed by a dot yet almost never end a sentence. Lower-case,
# without the final dot. Dotted forms ("e.g", "u.s") are also covered by
# _DOTTED, but are listed so the intent is explicit.
_ABBREVIATIONS = frozenset(
    {
        "e.g", "i.e", "dr", "mr", "mrs", "ms", "vs", "st", "approx",
        "a.m", "p.m", "u.s", "u.k", "prof", "fig", "cf", "jr", "sr", "mt",
        "ca", "dept", "est", "min", "max",
    }
)
# Letter-dot-letter chains: "U.S", "J.R.R", "e.g". Speaking them as a sentence
# end would put a pause in the middle of a name or an acronym.
_DOTTED = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")

_LineKind = Literal["wait", "blank", "fence", "list", "plain"]


class SentenceChunker:
    """Incrementally cut a streamed reply into speakable sentences.

    ``feed`` returns the sentences a delta completed; ``flush`` returns the rest
    once the stream has ended. A chunker can be reused after ``flush``.
    """

    def __init__(self, max_chars: int = 400) -> None:
        # Below ~20 characters the "cut at the last comma" fallback would make
        # choppy speech out of perfectly normal sentences.
        if max_chars < 20:
            raise ValueError("max_chars must be at least 20")
        self._max_chars = max_chars
        self._reset()

    def _reset(self) -> None:
        self._buf = ""
        # Every index below _pos has already been ruled out as a boundary, so a
        # new delta resumes there instead of rescanning the whole sentence.
        self._pos = 0
        self._in_fence = False
        # Until something has been emitted, the buffer start is the start of a
        # line, which matters for recognising an opening code fence.
        self._started = False

    def feed(self, delta: str) -> list[str]:
        """Add a piece of the stream; return the sentences it completed."""
        if not delta:
            return []
        self._buf += delta
        out: list[str] = []
        while (end := self._next_boundary()) is not None:
            chunk = self._buf[:end].strip()
            self._buf = self._buf[end:]
            self._pos -= end
            self._started = True
            if chunk:
                out.append(chunk)
        return out

    def flush(self) -> list[str]:
        """End of stream: return what is left (at most one item) and reset."""
        # Every confirmed boundary was already emitted by feed(); what remains
        # can only have an undecided boundary at its very end, so it is one
        # sentence (possibly a short one, which there is nothing left to merge
        # into).
        rest = self._buf.strip()
        self._reset()
        return [rest] if rest else []

    # -- scanning -----------------------------------------------------------

    def _next_boundary(self) -> int | None:
        """Return the end index of the first finished sentence, or None.

        Leaves ``self._pos`` where scanning must resume (relative to the
        current buffer, before the caller removes the emitted prefix).
        """
        buf = self._buf
        n = len(buf)
        i = self._pos

        if i == 0 and not self._started and not self._in_fence:
            kind, m = self._line_kind(0)
            if kind == "wait":
                return None
            if kind == "fence":
                self._in_fence = True
                i = m + len(_FENCE)

        while True:
            if self._in_fence:
                close = buf.find(_FENCE, i)
                if close < 0:
                    # Keep the last two characters unscanned: they may be the
                    # first backticks of the closing fence.
                    self._pos = max(i, n - (len(_FENCE) - 1))
                    return None
                self._in_fence = False
                end = close + len(_FENCE)
                self._pos = end
                return end

            if i >= self._max_chars:
                end = self._cut_point(i)
                self._pos = end
                return end

            if i >= n:
                self._pos = i
                return None

            c = buf[i]
            if c in _TERMINATORS:
                result = self._after_terminator(i)
                if result is None:
                    self._pos = i
                    return None
                is_end, q = result
                if is_end:
                    self._pos = q
                    return q
                i = q
                continue

            if c == "\n":
                kind, m = self._line_kind(i + 1)
                if kind == "wait":
                    self._pos = i
                    return None
                if kind == "fence":
                    # A code block is spoken (or skipped) as one unit, so the
                    # text before it is closed off even without punctuation.
                    self._in_fence = True
                    if self._has_words(i):
                        self._pos = m + len(_FENCE)
                        return i
                    i = m + len(_FENCE)
                    continue
                if kind in ("blank", "list") and self._has_words(i):
                    self._pos = i
                    return i
            i += 1

    def _line_kind(self, k: int) -> tuple[_LineKind, int]:
        """Classify the line starting at ``k``; also return its first non-blank index."""
        buf = self._buf
        n = len(buf)
        m = k
        while m < n and buf[m] in " \t\r":
            m += 1
        if m == n:
            return "wait", m
        c = buf[m]
        if c == "\n":
            return "blank", m
        if c == "`":
            head = buf[m : m + len(_FENCE)]
            if head == _FENCE:
                return "fence", m
            if len(head) < len(_FENCE) and _FENCE.startswith(head):
                return "wait", m
            return "plain", m
        if c in _BULLETS:
            if m + 1 == n:
                return "wait", m
            return ("list" if buf[m + 1] in " \t" else "plain"), m
        if c.isdigit():
            q = m
            while q < n and buf[q].isdigit():
                q += 1
            if q == n:
                return "wait", m
            if buf[q] not in ".)":
                return "plain", m
            if q + 1 == n:
                return "wait", m
            return ("list" if buf[q + 1] in " \t" else "plain"), m
        return "plain", m

    def _after_terminator(self, i: int) -> tuple[bool, int] | None:
        """Decide the mark run starting at ``i``.

        Returns None when more input is needed, otherwise ``(is_end, q)``: if
        ``is_end`` the sentence ends at ``q``; if not, scanning resumes at ``q``.
        """
        buf = self._buf
        n = len(buf)
        j = i
        while j < n and buf[j] in _TERMINATORS:
            j += 1
        q = j
        while q < n and buf[q] in _CLOSERS:
            q += 1
        if q == n:
            return None
        if not buf[q].isspace():
            # "3.14", "e.g.,", "example.com": a mark glued to more text.
            return False, q
        k = q
        while k < n and buf[k].isspace():
            k += 1
        if k == n:
            return None
        if self._continues(i, buf[i:j], buf[j:q], buf[k]):
            # Resume at q, not k, so a newline in the gap is still examined
            # (it may introduce a list item or a code fence).
            return False, q
        if not self._has_words(q):
            # "1." or "A." alone is not worth a separate utterance; let it
            # ride along with the next sentence.
            return False, q
        return True, q

    def _continues(self, i: int, run: str, closers: str, nxt: str) -> bool:
        """True when the mark at ``i`` does not end the sentence after all."""
        ellipsis = "…" in run or run.startswith("..")
        if ellipsis and "?" not in run and "!" not in run:
            # "Well... maybe" trails on; "Well... Maybe" starts anew.
            return nxt.islower()
        if any(ch in _QUOTES for ch in closers) and nxt.islower():
            # '"Really?" she asked.' is one sentence.
            return True
        if run != ".":
            return False
        token = self._token_before(i)
        low = token.lower()
        if low == "etc":
            # "etc." usually closes a sentence when a capital follows.
            return not nxt.isupper()
        if low == "no":
            # "No. 5" is an abbreviation; "No. I won't." is an answer.
            return nxt.isdigit()
        if low in _ABBREVIATIONS or _DOTTED.fullmatch(token):
            return True
        # A single capital is an initial: "J. Smith".
        return len(token) == 1 and token.isalpha() and token.isupper()

    def _token_before(self, i: int) -> str:
        buf = self._buf
        s = i
        while s > 0 and not buf[s - 1].isspace():
            s -= 1
        return buf[s:i].lstrip(_OPENERS)

    def _has_words(self, end: int) -> bool:
        """Whether ``buf[:end]`` holds at least two letters."""
        # Letters rather than any word character, so list numbers such as
        # "10." are merged like "1." is.
        seen = 0
        for ch in self._buf[:end]:
            if ch.isalpha():
                seen += 1
                if seen >= 2:
                    return True
        return False

    def _cut_point(self, i: int) -> int:
        """Where to cut an overlong sentence that has no boundary before ``i``."""
        buf = self._buf
        # Cutting very early would just move the problem to the next chunk.
        floor = self._max_chars // 4
        # Only look inside buf[:i] so the choice does not depend on how much
        # text happened to arrive after the scan position.
        for p in range(i - 2, floor - 1, -1):
            if buf[p] in ",;:" and buf[p + 1].isspace():
                return p + 1
        for p in range(i - 1, floor - 1, -1):
            if buf[p].isspace():
                return p
        return i
