"""MCP server "memory": the agent's own remember / recall / forget
(`python -m actors.tools.servers.memory`).

Recall ranks with the same score the system prompt uses (recency + importance + the fused
word and meaning relevance), through the same function as GET /v1/memory/search
(`repository.search`), so what the agent finds by asking matches what it would have been shown. The store
comes from IRIIS_DATABASE_URL, as for the files server.
"""

from __future__ import annotations

from typing import Annotated, get_args

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from actors.common.provenance import Provenance
from actors.memory import repository
from actors.memory.events import record_event
from actors.memory.model import Kind
from actors.memory.index import Why
from actors.store.store import Store
from actors.tools.servers.files import store_lifespan

mcp: MCPServer[Store] = MCPServer(
    "memory",
    instructions=("Your long-term memory of the owner. remember stores a durable fact, person, lesson or "
                  "open loop (never secrets); recall finds what you know about a topic; forget retires "
                  "an item by id when the owner says it is wrong or asks you to forget it."),
    lifespan=store_lifespan,
)

_READS = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
_FORGETS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)
MAX_RECALL = 20
KINDS = ", ".join(get_args(Kind))


class Recalled(BaseModel):
    id: int
    kind: str
    text: str
    importance: float
    score: float
    why: Why
    # `memory:<id>` when the item was learned from content outside the owner's control (a
    # web page, a file, a relay message...): a turn that reads it is tainted, as when the same
    # item is quoted in the prompt's memory block. Absent for the owner's own words.
    source: str | None = None
    learned_from: str | None = None


def _store(ctx: Context) -> Store:
    return ctx.request_context.lifespan_context


@mcp.tool(annotations=_WRITES)
async def remember(
    text: Annotated[str, Field(min_length=1, max_length=1000, description="one self-contained sentence")],
    ctx: Context,
    kind: Annotated[Kind, Field(description=f"one of: {KINDS}")] = "fact",
    importance: Annotated[float, Field(ge=1, le=10, description="1 trivial .. 10 vital")] = 5.0,
) -> str:
    """Store something worth knowing next time. Saying it again reinforces it instead of
    duplicating it."""
    try:
        item, created = await repository.remember(_store(ctx), kind, text, importance, source="agent")
    except repository.MemoryRefused as exc:
        raise ToolError(str(exc)) from None
    return f"{'remembered' if created else 'already known, reinforced'} as #{item.id} ({item.kind})"


@mcp.tool(annotations=_READS)
async def recall(
    query: Annotated[str, Field(min_length=1, max_length=500, description="what to look for")],
    ctx: Context,
    kind: Annotated[Kind | None, Field(description="only this kind")] = None,
    limit: Annotated[int, Field(ge=1, le=MAX_RECALL)] = 8,
) -> list[Recalled]:
    """What memory holds about a topic, best first."""
    # Paraphrase-aware when the sentence encoder is installed; word overlap alone otherwise.
    # Only related items: recall answers a question, and a strong but unrelated fact is not
    # an answer to it.
    found = await repository.search(_store(ctx), query, limit, kind)
    return [Recalled(id=f.item.id, kind=f.item.kind, text=f.item.text, importance=f.item.importance,
                     score=round(f.score, 4), why=f.why,
                     source=str(Provenance.memory(f.item.id)) if f.item.provenance else None,
                     learned_from=f.item.provenance or None) for f in found]


@mcp.tool(annotations=_FORGETS)
async def forget(
    item_id: Annotated[int, Field(ge=1, description="the #id recall or the prompt showed")],
    ctx: Context,
    reason: Annotated[str, Field(max_length=300)] = "",
) -> str:
    """Retire an item: it stops being shown or recalled (the owner can still see it)."""
    store = _store(ctx)
    item = await repository.get_item(store, item_id)
    if item is None or not item.active:
        raise ToolError(f"no active memory item #{item_id}; use recall to find the right id")
    await repository.deactivate(store, item_id)
    await record_event(store, "deactivate", item_id, data={"source": "forget", "reason": reason[:300]})
    return f"forgot #{item_id}"


def main() -> None:
    mcp.run("stdio")


if __name__ == "__main__":
    main()
