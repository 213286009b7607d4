"""Which memories go into one prompt (spec section 7, "Selection per prompt").

Each group is ranked by `score` and capped on its own, so a flood of facts cannot push out
the few lessons or open loops that matter most. Playbook rules are the one group that must
also share a word with the query: a rule is advice for a kind of task and is noise anywhere
else, whereas a strong fact or an open loop is worth recalling even off-topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from pydantic import BaseModel, Field, computed_field

from actors.memory.model import Kind, MindItem
from actors.memory.scoring import score
from actors.memory.text import word_set

# Per-group caps; goals have none, as the spec injects all of them.
MEMORY_KINDS: tuple[Kind, ...] = ("fact", "insight", "pattern")
MAX_MEMORIES = 12
MAX_PEOPLE = 5
MAX_LESSONS = 6
MAX_PLAYBOOK = 8
MAX_SKILLS = 3
MAX_OPEN_LOOPS = 8


class Selection(BaseModel):
    """The items chosen for one prompt, each list best first."""

    memories: list[MindItem] = Field(default_factory=list)
    people: list[MindItem] = Field(default_factory=list)
    lessons: list[MindItem] = Field(default_factory=list)
    playbook: list[MindItem] = Field(default_factory=list)
    skills: list[MindItem] = Field(default_factory=list)
    open_loops: list[MindItem] = Field(default_factory=list)
    goals: list[MindItem] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ids(self) -> list[int]:
        """Every selected id once, for the caller to bump `uses` and `last_used`."""
        seen: dict[int, None] = {}
        for group in (self.goals, self.memories, self.people, self.lessons, self.playbook,
                      self.skills, self.open_loops):
            for item in group:
                seen.setdefault(item.id, None)
        return list(seen)


def _ranked(items: Iterable[MindItem], query_words: Set[str], now: float,
            limit: int | None) -> list[MindItem]:
    # Ties go to the older id so the same state always yields the same prompt.
    scored = sorted(((score(item, query_words, now), item) for item in items),
                    key=lambda pair: (-pair[0], pair[1].id))
    chosen = [item for _, item in scored]
    return chosen if limit is None else chosen[:limit]


def select(items: Iterable[MindItem], query: str, now: float) -> Selection:
    """The active items to show for a prompt about `query` at time `now`."""
    query_words = word_set(query)
    by_kind: dict[str, list[MindItem]] = {}
    for item in items:
        if item.active:
            by_kind.setdefault(item.kind, []).append(item)

    def group(kinds: Iterable[Kind], limit: int | None) -> list[MindItem]:
        pool = [item for kind in kinds for item in by_kind.get(kind, [])]
        return _ranked(pool, query_words, now, limit)

    rules = [item for item in by_kind.get("playbook", []) if query_words & word_set(item.text)]
    return Selection(
        memories=group(MEMORY_KINDS, MAX_MEMORIES),
        people=group(("person",), MAX_PEOPLE),
        lessons=group(("lesson",), MAX_LESSONS),
        playbook=_ranked(rules, query_words, now, MAX_PLAYBOOK),
        skills=group(("skill",), MAX_SKILLS),
        open_loops=group(("open_loop",), MAX_OPEN_LOOPS),
        goals=group(("goal",), None),
    )
