"""Words of a text as the scoring, dedup and tool-routing formulas count them.

One splitter and one stemmer serve memory and tool routing alike; what differs is the stop-word
list. Routing drops verbs such as "like", "need", "want", "know" and "help" (generic in a tool
request, but the substance of "the owner likes jazz" or an open loop "need to call the
plumber"), so it builds its own `Tokenizer` with a longer list (actors.tools.routing), while the
module-level functions here keep memory's grammar-only list. Tuning routing's words therefore
cannot silently change which memories are selected or merged.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

MIN_WORD_LENGTH = 3

# Letters and digits in any script, so names such as "Zoë" or "José" stay whole words.
_WORD = re.compile(r"[^\W_]+")
# "owner's" should count as "owner"; other apostrophes ("don't") just join the word.
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b")
_APOSTROPHE = re.compile(r"['’]")

# Grammar words only: anything that can carry what a memory is about stays in.
STOP_WORDS: frozenset[str] = frozenset("""
a about above after again against all also am an and any are aren arent as at be because been
before being below between both but by can cannot cant could couldn couldnt did didn didnt do does
doesn doesnt doing don dont down during each few for from further had hadn hadnt has hasn hasnt
have haven havent having he hed hell hes her here heres hers herself him himself his how hows i id
ill im ive if in into is isn isnt it its itself lets me more most my myself no nor not of off on
once only or other ought our ours ourselves out over own same shan shant she shed shell shes
should shouldn shouldnt so some such than that thats the their theirs them themselves then there
theres these they theyd theyll theyre theyve this those through to too under until up very was
wasn wasnt we wed well were weren werent weve what whats when whens where wheres which while who
whos whom why whys will with won wont would wouldn wouldnt you youd youll youre youve your yours
yourself yourselves just now then also yet ever really
""".split())

# Forms that suffix stripping cannot reach, mapped to a form it sends to the same stem.
IRREGULAR: dict[str, str] = {
    "wrote": "write", "written": "write", "bought": "buy", "spent": "spend", "paid": "pay",
    "sent": "send", "flew": "fly", "flown": "fly", "slept": "sleep", "ate": "eat", "eaten": "eat",
    "drove": "drive", "driven": "drive", "took": "take", "taken": "take", "lost": "lose",
    "felt": "feel", "kept": "keep", "left": "leave", "met": "meet", "thought": "think",
    "taught": "teach", "caught": "catch", "brought": "bring", "told": "tell", "said": "say",
    "found": "find", "gave": "give", "given": "give", "knew": "know", "known": "know",
    "people": "person", "children": "child", "men": "man", "women": "woman", "feet": "foot",
    "teeth": "tooth", "mice": "mouse", "wives": "wife", "knives": "knife", "lives": "life",
    "better": "good", "best": "good",
}

_MIN_STEM = 3
# (suffix, letters that must remain). "-ly" wants four, so "early", "reply" and "apply" are not
# cut down to "ear", "rep" and "app" and merged with unrelated words.
_DERIVATIONAL: tuple[tuple[str, int], ...] = (("ment", _MIN_STEM), ("ness", _MIN_STEM), ("ly", 4))
_INFLECTIONAL: tuple[tuple[str, int], ...] = (("ing", _MIN_STEM), ("ed", _MIN_STEM), ("er", _MIN_STEM))


def _strip_plural(w: str) -> str:
    if w.endswith("ies") and len(w) > 4:
        return w[:-3] + "y"
    if w.endswith("sses"):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")) and len(w) > 3:
        return w[:-1]
    return w


def _strip_one(w: str, suffixes: tuple[tuple[str, int], ...]) -> str:
    for suffix, keep in suffixes:
        if w.endswith(suffix) and len(w) - len(suffix) >= keep:
            return w[:-len(suffix)]
    return w


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper. It only has to send a word's common forms to one stem
    (write/writes/writing/writer, payment/pay, quickly/quick, parties/party), not produce
    real words; "writ" is a fine stem for all of write's forms."""
    w = IRREGULAR.get(word, word)
    w = _strip_plural(w)
    w = _strip_one(w, _DERIVATIONAL)
    # Two rounds so that "orderings"/"writers" reach the stem their base form reaches.
    for _ in range(2):
        shorter = _strip_one(w, _INFLECTIONAL)
        if shorter == w:
            break
        w = shorter
    if w.endswith("e") and len(w) > _MIN_STEM:
        w = w[:-1]
    if w.endswith("y") and len(w) > _MIN_STEM:
        w = w[:-1] + "i"
    # "planned"/"planning" leave "plann", which must meet "plan".
    if len(w) > _MIN_STEM and w[-1] == w[-2] and w[-1] not in "aeiou":
        w = w[:-1]
    return w


class Tokenizer:
    """Splits, drops words under three characters and the given stop-words, and stems.

    Each instance caches its own results, so two stop-word lists never share an entry."""

    def __init__(self, stop_words: frozenset[str]) -> None:
        self.stop_words = stop_words
        self.tokens = lru_cache(maxsize=65536)(self._tokens)

    def _tokens(self, text: str) -> tuple[str, ...]:
        lowered = _APOSTROPHE.sub("", _POSSESSIVE.sub("", text.casefold()))
        stop_words = self.stop_words
        return tuple(stem(w) for w in _WORD.findall(lowered)
                     if len(w) >= MIN_WORD_LENGTH and w not in stop_words)

    def tokenize(self, text: str) -> list[str]:
        """Stemmed content words of `text`, in order, repeats kept."""
        return list(self.tokens(text))


_MEMORY = Tokenizer(STOP_WORDS)
_tokens = _MEMORY.tokens
tokenize = _MEMORY.tokenize


@lru_cache(maxsize=65536)
def word_set(text: str) -> frozenset[str]:
    """`words(text)` without the copy, for hot loops that only read it."""
    return frozenset(_tokens(text))


def words(text: str) -> set[str]:
    """The distinct stemmed content words of `text` (lower-case, three or more characters,
    stop-words removed)."""
    return set(word_set(text))


def content_text(content: Any) -> str:
    """A chat message's content as plain text (a list of parts counts by its text parts)."""
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


def last_user_messages(messages: list[dict[str, Any]]) -> tuple[str, str | None]:
    """The person's last message and the one before it (None when there is none)."""
    users = [content_text(m.get("content")) for m in messages if m.get("role") == "user"]
    return (users[-1] if users else ""), (users[-2] if len(users) > 1 else None)
