"""Which tools a message gives a small local model a reason to call.

A 1.5B model offered `calculate` for "What is the largest planet?" calls it with a made-up
expression, and offered `date_add` for "And why is that?" calls that (both measured). So the
local adapter offers a tool only when the message gives a reason for it:

* the core tools (arithmetic, time, dates, memory, reminders) by cue words and shapes, listed
  below, in the message or, for a short follow-up ("and in Tokyo?"), in the one before it;
* any other tool when the message names it (a word of its name that is not a generic verb,
  "chart", "pdf", "slides") or shares two content words with its description.

With nothing offered, the step is a plain answer: no choice to get wrong, and fewer tokens to
write before the first sentence. The cues only open the offer; the model still chooses, with one
exception (`owed`): a message that asks two things ("What is 15% of 80, and what day is it?")
whose second request has a cued tool nobody called yet. After its first tool's result a small
model answers the first request and forgets the second, so that step must call one of the
tools the open request is cued for. No Ray.
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


# The shipped accounts' tools (mcp.yaml's `mail` and `calendar`) by the words people ask for
# them with: "what did Ana write", "am I free tomorrow", "Zoé's phone number" name no tool.
# Only tools a turn was already routed are gated, so these never bring a server in.
_ALIASES: dict[str, frozenset[str]] = {name: word_set(said) for name, said in {
    "list_mail": "mail email inbox unread message",
    "read_mail": "mail email attach attachment message",
    "draft_mail": "draft reply",
    "agenda": "calendar agenda diary meeting appointment event schedule",
    "free_time": "free busy available",
    "create_event": "book calendar diary appointment meeting lunch dinner event",
    "move_event": "move reschedule postpone appointment meeting",
    "cancel_event": "cancel appointment meeting",
    "find_contact": "email address phone number contact",
}.items()}
# "What did Ana write?", "has Bob replied?": someone's words, asked of the mailbox ("write a
# poem" alone is not).
_ASKED_OF_MAIL = re.compile(r"\b(?:did|has|have)\s+\S+\s+(?:write|written|send|sent|say|said|reply|replied|"
                            r"mail|mailed|email|emailed|answer|answered)\b", re.IGNORECASE)
_MAIL_READERS = ("list_mail", "read_mail")


def named(tool: dict[str, Any], message: str) -> bool:
    """Whether `message` names a non-core tool (or says what it is known by, `_ALIASES`) or
    shares two content words with its description."""
    said = word_set(message)
    parts = {w for w in word_set(_name(tool).replace("_", " ")) if w not in _GENERIC}
    if said & (parts | _ALIASES.get(_name(tool), frozenset())):
        return True
    if _name(tool) in _MAIL_READERS and _ASKED_OF_MAIL.search(message):
        return True
    return len((said - _PLAIN) & word_set(str((tool.get("function") or {}).get("description", "")))) >= 2


def gate(tools: list[dict[str, Any]], core: tuple[str, ...], message: str, previous: str = "") -> list[dict[str, Any]]:
    """The tools of `tools` (already ordered) that `message` gives a reason to offer."""
    reasons = cued(message, previous)
    return [t for t in tools if (_name(t) in reasons if _name(t) in core else named(t, message))]


# Where a message asks its next thing: after a sentence's end, or at ", and" / ", then".
_CLAUSE_BREAK = re.compile(r"(?<=[.?!;])\s+|,\s*(?:and|also|then|plus)\s+", re.IGNORECASE)
# A clause that asks something: a question, or one that opens with a question word or a request.
_REQUEST_START = re.compile(
    r"^(?:(?:and|also|then|plus|please|now)\s+)*(?:what|what's|whats|when|which|who|how|is|are|can|could|"
    r"do|does|remind|remember|note|save|make|set|calculate|compute|convert|tell|give|add|schedule|"
    r"create|draw|plot|put|find|show)\b", re.IGNORECASE)


def requests(message: str) -> list[str]:
    """The requests in `message`, in order: its clauses that ask something (a statement beside
    a question, "I'm flying there tomorrow.", is not one)."""
    clauses = [c.strip() for c in _CLAUSE_BREAK.split(message) if c and c.strip()]
    return [c for c in clauses if c.endswith("?") or _REQUEST_START.match(c)]


# When a request is cued for several core tools, the one it most likely asks for: a verb the
# person used ("remind me") over a word for time, over a date word, over a bare number.
_STRONGEST_FIRST = ("remind", "remember", "recall", "current_time", "date_add", "calculate")


def owed(message: str, called: set[str], tools: list[dict[str, Any]]) -> tuple[str, str] | None:
    """The core tool a later request of `message` still asks for, and that request, once an
    earlier request's tool has answered (`called`: the tools that answered this turn). Each
    called tool answers the first request it was cued or named for; the first request left
    without one is owed its strongest cued tool. None for a message with one request, and once
    every request had its tool."""
    asked = requests(message)
    if len(asked) < 2 or not called:
        return None
    by_name = {_name(t): t for t in tools}
    open_requests = list(asked)
    for name in sorted(called):
        for clause in open_requests:
            if name in cued(clause) or (name in by_name and named(by_name[name], clause)):
                open_requests.remove(clause)
                break
    for clause in open_requests:
        reasons = cued(clause) - called
        strongest = next((name for name in _STRONGEST_FIRST if name in reasons), None)
        if strongest is not None:
            return strongest, clause
    return None
