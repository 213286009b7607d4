"""Which tool servers to offer the model on a turn.

Hundreds of tools do not fit in one request, and a model offered all of them chooses worse.
Each turn offers the core servers, then the servers whose words best overlap the current (and,
more weakly, the previous) user message, whole, up to a tool cap; the `more_tools` meta-tool
lets the model pull in one more server mid-turn when what it was offered cannot do the job.

Pure logic: no I/O, no actors, deterministic for a given catalogue and message.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from pydantic import BaseModel, Field

from actors.common.text import STOP_WORDS as GRAMMAR_WORDS
from actors.common.text import Tokenizer, stem
from actors.common.toolspec import ToolSpec

CORE_SERVERS: tuple[str, ...] = ("core", "memory", "web", "tasks", "self")
MAX_TOOLS = 64
MORE_TOOLS_NAME = "more_tools"

# Keywords are chosen by whoever configures a server, so they say more than words that merely
# occur in its tool names, which say more than words in free-text descriptions.
KEYWORD_WEIGHT = 3.0
TOOL_NAME_WEIGHT = 1.5
DESCRIPTION_WEIGHT = 1.0
# The previous message often carries the subject ("what's on tomorrow?" -> "move the first one"),
# but the current one says what is wanted now.
PREVIOUS_WEIGHT = 0.5
# A server scoring below this share of the best one matched on incidental words only; offering
# it costs schema space and distracts the model more than it helps.
RELATIVE_FLOOR = 0.1
# A misspelt or singular name ("calender", "photo") still reaches its server through more_tools.
NAME_CLOSENESS = 0.8

_NAME_WORD = re.compile(r"[a-z0-9]+")

# Words that say nothing about which server is wanted: memory's grammar words, plus politeness
# and the generic verbs every request and every tool description shares.
STOP_WORDS: frozenset[str] = GRAMMAR_WORDS | frozenset("""
please thanks thank hey okay yes yeah may might must shall maybe let
want wants need needs like get got gets getting make makes know tell give help
thing things something anything everything stuff one ones new via etc lot lots bit kind sort
use used using way going gonna wanna sure think see look quick quickly
""".split())

_TOKENIZER = Tokenizer(STOP_WORDS)
_tokens = _TOKENIZER.tokens
tokenize = _TOKENIZER.tokenize


def _phrases(words: Sequence[str]) -> list[str]:
    """Adjacent word pairs: a keyword phrase ("send back", "heart rate") says more than its
    words apart, and stop-words being gone lets "send it back" meet it too."""
    return [f"{a} {b}" for a, b in zip(words, words[1:])]


class ServerEntry(BaseModel):
    name: str
    keywords: list[str] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)


class RouteResult(BaseModel):
    servers: list[str]
    tools: list[str]
    scores: dict[str, float] = Field(default_factory=dict)


def _profile(server: ServerEntry) -> dict[str, float]:
    """Each word the server is known by, with the weight of its strongest source."""
    return dict(_profile_cached(server.name, tuple(server.keywords),
                                tuple((t.name, t.description) for t in server.tools)))


@lru_cache(maxsize=4096)
def _profile_cached(name: str, keywords: tuple[str, ...],
                    tools: tuple[tuple[str, str], ...]) -> tuple[tuple[str, float], ...]:
    weights: dict[str, float] = {}

    def add(words: Iterable[str], weight: float) -> None:
        for word in words:
            if weights.get(word, 0.0) < weight:
                weights[word] = weight

    for tool_name, description in tools:
        add(_tokens(description), DESCRIPTION_WEIGHT)
        add(_tokens(tool_name), TOOL_NAME_WEIGHT)
    add(_tokens(name), KEYWORD_WEIGHT)
    for keyword in keywords:
        words = _tokens(keyword)
        add(words, KEYWORD_WEIGHT)
        add(_phrases(words), KEYWORD_WEIGHT)
    return tuple(sorted(weights.items()))


class _Index:
    """Server profiles plus how rare each word is across servers: a word every server has
    ("list", "create", "search") must not decide between them."""

    def __init__(self, servers: Sequence[ServerEntry]) -> None:
        self.profiles = {s.name: _profile(s) for s in servers}
        df: dict[str, int] = {}
        for profile in self.profiles.values():
            for word in profile:
                df[word] = df.get(word, 0) + 1
        n = max(len(self.profiles), 1)
        self.idf = {word: math.log(1.0 + n / count) for word, count in df.items()}

    def score(self, name: str, query: dict[str, float]) -> float:
        profile = self.profiles[name]
        return sum(weight * profile[word] * self.idf[word]
                   for word, weight in query.items() if word in profile)


def _query(message: str, previous: str | None) -> dict[str, float]:
    query: dict[str, float] = {}
    for text, weight in ((previous or "", PREVIOUS_WEIGHT), (message, 1.0)):
        words = _tokens(text)
        for term in (*words, *_phrases(words)):
            query[term] = weight
    return query


def _ranked(index: _Index, names: Iterable[str], query: dict[str, float]) -> list[tuple[str, float]]:
    scored = [(name, index.score(name, query)) for name in names]
    # Ties go to the alphabetically first name so the same turn always gets the same tools.
    return sorted(((n, s) for n, s in scored if s > 0.0), key=lambda item: (-item[1], item[0]))


def route(servers: list[ServerEntry], message: str, previous: str | None = None,
          max_tools: int = MAX_TOOLS, with_more_tools: bool = True) -> RouteResult:
    """The servers and tools to offer for `message`, in order.

    Core servers are always offered (even past the cap: without them the agent cannot keep
    time, remember or act on itself). Other servers are added whole, best score first, while
    the tool count stays within `max_tools`; one that does not fit is skipped so that a smaller,
    lower-scoring one can still come in. With `with_more_tools` the meta-tool takes a slot and
    is the last tool listed.
    """
    by_name = {s.name: s for s in servers}
    chosen: list[str] = [name for name in CORE_SERVERS if name in by_name]
    tools: list[str] = [t.name for name in chosen for t in by_name[name].tools]
    budget = max_tools - len(tools) - (1 if with_more_tools else 0)

    index = _Index(servers)
    ranked = _ranked(index, (s.name for s in servers if s.name not in chosen), _query(message, previous))
    best = ranked[0][1] if ranked else 0.0
    for name, score in ranked:
        if score < RELATIVE_FLOOR * best:
            break
        size = len(by_name[name].tools)
        if size <= budget:
            chosen.append(name)
            tools.extend(t.name for t in by_name[name].tools)
            budget -= size
    if with_more_tools:
        tools.append(MORE_TOOLS_NAME)
    return RouteResult(servers=chosen, tools=tools, scores={n: round(s, 4) for n, s in ranked})


def offered_specs(servers: list[ServerEntry], result: RouteResult) -> list[ToolSpec]:
    """The ToolSpecs behind a RouteResult, meta-tool included when it was offered."""
    by_name = {s.name: s for s in servers}
    specs = [t for name in result.servers for t in by_name[name].tools]
    if MORE_TOOLS_NAME in result.tools:
        specs.append(MORE_TOOLS_SPEC)
    return specs


_MORE_TOOLS_DESCRIPTION = (
    "Ask for more tools when none of the tools you were offered can do what the owner asked. "
    "Give `need`: the name of a tool server if you know it, otherwise a short description of "
    "what you need to do (for example 'book a hotel' or 'read my bank transactions'). The best "
    "matching server's tools are added for the rest of this turn.")

MORE_TOOLS_SPEC = ToolSpec(
    name=MORE_TOOLS_NAME,
    description=_MORE_TOOLS_DESCRIPTION,
    parameters={"type": "object",
                "properties": {"need": {"type": "string",
                                        "description": "A server name, or what the tools must be able to do."}},
                "required": ["need"]},
    tier=0,
    source="builtin",
    untrusted_output=False,
)


def more_tools_spec(server_names: Iterable[str]) -> ToolSpec:
    """MORE_TOOLS_SPEC with the available server names listed, so the model can name one."""
    names = ", ".join(sorted(server_names))
    if not names:
        return MORE_TOOLS_SPEC
    return MORE_TOOLS_SPEC.model_copy(
        update={"description": f"{_MORE_TOOLS_DESCRIPTION} Servers: {names}."})


# Words around a server's name when the model asks for it by name ("the calendar server").
_NAMING_FILLER = frozenset({"the", "a", "an", "my", "server", "servers", "tool", "tools", "use", "please", "add"})


def _named(servers: Sequence[ServerEntry], need: str) -> list[str]:
    """Servers the need names: the name as a word in it, or the need being (nearly) just a
    name ("calender", "spreadsheet", "the github tools"). Near-misses only count for a bare
    name, so a sentence's "book" does not summon the books server."""
    words = _NAME_WORD.findall(need.lower())
    bare = " ".join(w for w in words if w not in _NAMING_FILLER)
    padded = f" {' '.join(words)} "
    named: list[str] = []
    for server in servers:
        name = " ".join(_NAME_WORD.findall(server.name.lower()))
        if not name:
            continue
        if (f" {name} " in padded or stem(bare) == stem(name)
                or difflib.SequenceMatcher(None, name, bare).ratio() >= NAME_CLOSENESS):
            named.append(server.name)
    return named


def _fuzzy_query(index: _Index, query: dict[str, float]) -> dict[str, float]:
    """Words close to a known word (shared long prefix) stand in for it at half weight, so a
    need phrased in unusual forms ("photographs", "invoicing") still finds something."""
    vocabulary = index.idf.keys()
    fuzzy: dict[str, float] = {}
    for word, weight in query.items():
        if word in index.idf or len(word) < 5:
            continue
        for known in vocabulary:
            if len(known) >= 5 and (known.startswith(word[:5]) or word.startswith(known)):
                fuzzy[known] = max(fuzzy.get(known, 0.0), weight * 0.5)
    return fuzzy


def more_tools(servers: list[ServerEntry], need: str, offered: set[str]) -> str | None:
    """The server to add for `need`: one it names, else the best match not already offered.

    A named server already on offer is passed over: handing it back would gain the model nothing,
    and the need is better served by the next best match. None when nothing matches at all.
    """
    index = _Index(servers)
    query = _query(need, None)
    candidates = [s.name for s in servers if s.name not in offered]
    named = [n for n in _named(servers, need) if n not in offered]
    if named:
        # Several names in one need: the one the rest of the words support best.
        return sorted(named, key=lambda n: (-index.score(n, query), n))[0]
    ranked = _ranked(index, candidates, query)
    if not ranked:
        ranked = _ranked(index, candidates, _fuzzy_query(index, query))
    return ranked[0][0] if ranked else None


def schema_chars(tools: list[ToolSpec]) -> int:
    """Characters of the tool schemas as sent to an OpenAI-style endpoint (compact JSON)."""
    return len(json.dumps([t.schema_for_model() for t in tools], separators=(",", ":"), ensure_ascii=False))
