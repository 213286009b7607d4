"""Which tools a message gives a small local model a reason to call.

A 1.5B model offered `calculate` for "What is the largest planet?" calls it with a made-up
expression, and offered `date_add` for "And why is that?" calls that (both measured). So the
local adapter offers a tool only when the message gives a reason for it:

* the core tools (arithmetic, time, dates, memory, reminders) by cue words and shapes, listed
  below, in the message or, for a short follow-up ("and in Tokyo?"), in the one before it;
* any other tool when the message names it (a word of its name that is not a generic verb,
  "chart", "pdf", "slides") or shares two content words with its description.

With nothing offered, the step is a plain answer: no choice to get wrong, and fewer tokens to
write before the first sentence. The cues only open the offer; the model still chooses. No Ray.
"""

from __future__ import annotations

import re
from typing import Any

from actors.common.text import word_set

_NUMBER = r"(\d|\b(two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|" \
          r"hundred|thousand|million|half|quarter|dozen)\b)"
CUES: dict[str, re.Pattern[str]] = {name: re.compile(pattern, re.IGNORECASE) for name, pattern in {
    "calculate": _NUMBER + r"|%|\b(percent|plus|minus|times|multipl\w*|divid\w*|sum|total|average|squared?|"
                           r"root|power|calculat\w*|comput\w*|convert|split|how much)\b",
    "current_time": r"\b(time|clock|o'clock|date|day of the week|what day|which day|today's|"
                    r"morning|afternoon|evening|midnight|noon)\b",
    "date_add": r"\b(days|weeks?|months?|years?|fortnight|tomorrow|yesterday|from (now|today)|"
                r"later|ago|after|before|until|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b",
    "remember": r"\b(remember|memori[sz]e|note|keep in mind|don'?t forget|do not forget|save|store)\b",
    "recall": r"\b(remember|recall|remind me what|know about|told you|tell you|what do you know|"
              r"what('s| is| are) my|who('s| is) my|do you know)\b",
    "remind": r"\b(remind|reminder|alarm|nudge me|ping me|don'?t let me forget)\b",
}.items()}
# Short messages that continue the one before: they inherit its cues ("and in Tokyo?").
_FOLLOW_UP = re.compile(r"^\s*(and|what about|how about|same|also|then|now|in|ok(ay)?,? and)\b", re.IGNORECASE)
FOLLOW_UP_WORDS = 6
# Words of a tool's name that say nothing about what it is for.
_GENERIC = word_set("make get set read list add run new use file tool more")
# Words a description shares with everyday questions ("in one sentence"): no sign of the tool.
_PLAIN = word_set("one sentence plain word words give always say saying does question answer")


def _name(tool: dict[str, Any]) -> str:
    return str((tool.get("function") or {}).get("name", ""))


def cued(message: str, previous: str = "") -> set[str]:
    """The core tools `message` gives a reason for (with `previous` for a short follow-up)."""
    found = {name for name, cue in CUES.items() if cue.search(message)}
    if previous and len(message.split()) <= FOLLOW_UP_WORDS and _FOLLOW_UP.match(message):
        found |= {name for name, cue in CUES.items() if cue.search(previous)}
    return found


def named(tool: dict[str, Any], message: str) -> bool:
    """Whether `message` names a non-core tool or shares two content words with its description."""
    said = word_set(message)
    parts = {w for w in word_set(_name(tool).replace("_", " ")) if w not in _GENERIC}
    if said & parts:
        return True
    return len((said - _PLAIN) & word_set(str((tool.get("function") or {}).get("description", "")))) >= 2


def gate(tools: list[dict[str, Any]], core: tuple[str, ...], message: str, previous: str = "") -> list[dict[str, Any]]:
    """The tools of `tools` (already ordered) that `message` gives a reason to offer."""
    reasons = cued(message, previous)
    return [t for t in tools if (_name(t) in reasons if _name(t) in core else named(t, message))]
