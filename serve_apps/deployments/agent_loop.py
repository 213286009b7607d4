"""AgentLoop: the Serve deployment that runs model steps and tool calls for a turn.

Stateless, so Serve can scale it; conversation state (and pending confirmations) stay in the
SessionActor, provider health in the ProviderRouter actor.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, Field
from ray import serve
from ray.exceptions import RayActorError

from actors.common.restart import through_restart
from actors.common.trace import mark
from actors.devices.turns import private_device_audit, turn_scope
from actors.logmask import install_log_masking
from actors.memory import jobs
from actors.memory.reflect_prompt import Exchange
from actors.providers.failover import complete_text, stream_with_failover
from actors.providers.local.actor import LocalConfig
from actors.providers.local.learning import purpose as learning_purpose
from actors.providers.local.wiring import LocalWiring
from actors.providers.offline import OfflineModel
from actors.providers.openai_compat import OpenAICompatProvider
from actors.providers.router_actor import RemoteRouter, router_actor
from actors.providers.types import AllProvidersFailed, Delta, ProviderError
from actors.recent_errors import ErrorEntry, error_log, report
from actors.scheduler.owner_tools import OwnerOnlyTools
from actors.session.events import ConfirmRequest, Sentence, TurnError, TurnEvent, TurnRequest, to_wire
from actors.session.loop import TurnContext, run_turn
from actors.session.summary import fallback_summary, summary_prompt
from actors.settings import ProviderConfig
from actors.store.models import AuditEntry
from actors.store.store import Store
from actors.tools.builtin import builtin_toolbox
from actors.tools.config import McpConfig
from actors.tools.hub import tool_hub
from actors.tools.listing_cache import ListingCache
from actors.tools.offer import TurnTools

log = logging.getLogger(__name__)
# One memory call must not eat a free tier's tokens-per-minute: about 3k tokens in, 2k out.
LEARN_PROMPT_CAP = 12_000
LEARN_OUTPUT_CAP = 8_000


def cap_messages(messages: list[dict[str, str]], cap: int) -> list[dict[str, str]]:
    """The messages with the longest contents cut until the total fits `cap` characters;
    the instruction (first message) is kept whole when it can be."""
    out = [dict(m) for m in messages]
    total = sum(len(m.get("content") or "") for m in out)
    for m in sorted(out[1:], key=lambda m: -len(m.get("content") or "")) + out[:1]:
        if total <= cap:
            break
        content = m.get("content") or ""
        keep = max(0, len(content) - (total - cap))
        m["content"] = content[:keep]
        total -= len(content) - keep
    return out


class AgentLoopConfig(BaseModel):
    """What every AgentLoop replica is built with: `AgentLoop.bind(config)`."""

    providers: list[ProviderConfig] = Field(default_factory=list)   # hosted chat models, in order
    timeout: float                                                    # seconds per provider call
    database_url: str
    workspace: str                                                    # the file tools' folder
    mcp: McpConfig
    # Memory's own model calls; empty: the chat providers do them.
    learning: list[ProviderConfig] = Field(default_factory=list)
    local: LocalConfig | None = None                                  # None: no local model


@serve.deployment(
    ray_actor_options={"num_cpus": 0},
    max_ongoing_requests=64,
    max_queued_requests=256,
    # Past the queue a caller gets BackPressureError (503 with Retry-After over HTTP).
    backpressure_config={"retry_after_s": 2},
    autoscaling_config={"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 16},
)
class AgentLoop:
    def __init__(self, config: AgentLoopConfig) -> None:
        install_log_masking()
        configs = config.providers
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=64))
        self.providers = {p.name: OpenAICompatProvider(p.name, p.base_url, p.api_key, self.client)
                          for p in configs}
        self.router = RemoteRouter(router_actor("chat", configs)) if configs else None
        # Memory's own calls go through a router of their own when a learning model is set,
        # so their health (and a free tier's rate limits) never slows the chat.
        self.learning_router = (RemoteRouter(router_actor("learning", config.learning))
                                if config.learning else self.router)
        self.timeout = config.timeout
        self.offline = OfflineModel()
        # The local model (actors/providers/local/): one more provider, tried after the hosted
        # ones; memory's calls reach it on a learning lane that chat turns preempt.
        self.local = LocalWiring.attach(config.local, self.client)
        self.learning_providers = dict(self.providers)
        if self.local is not None:
            self.router = self.router or RemoteRouter(router_actor("chat", configs))
            self.learning_router = self.learning_router or self.router
            for router in {id(r): r for r in (self.router, self.learning_router)}.values():
                router.handle.add_entries.remote([self.local.entry])
            self.providers["local"] = self.local.chat
            self.learning_providers["local"] = self.local.learning
        self.store = Store.open(config.database_url)
        names = list(builtin_toolbox().specs)
        self.toolbox = builtin_toolbox(self.store, Path(config.workspace), config.mcp.builtin_tiers(names),
                                       config.mcp.builtin_exclude())
        # The hub owns the MCP servers and the paired devices' tools, so it exists even when
        # mcp.yaml declares no server.
        self.hub = tool_hub()
        self.tools = TurnTools(self.toolbox, self._hub_call)
        self._listings: ListingCache[tuple[dict[str, Any], dict[str, list[str]]]] = ListingCache()
        self._watch: asyncio.Task[None] | None = None

    async def _hub_call(self, name: str, arguments: dict[str, Any], scope: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            return await self.hub.call.remote(name, arguments, scope=scope)
        except RayActorError:
            # Not made again: the tool may have run before the hub died (an action twice is worse).
            return {"error": f"the tool hub restarted during this call, so `{name}` may or may not have run; "
                             "check before trying it again"}

    async def _hub(self, method: str, *args: Any) -> Any:
        """A read-only ToolHub call; one that met the hub's death is made once more (the hub
        restarts in place, so the second call waits for it to be back)."""
        try:
            return await getattr(self.hub, method).remote(*args)
        except RayActorError:
            log.warning("the tool hub died under a %s call; trying again once it is back", method)
            return await through_restart(lambda: getattr(self.hub, method).remote(*args))

    async def _listing(self, person: int | None) -> tuple[dict[str, Any], dict[str, list[str]]]:
        """The tools on offer in `person`'s turns (device tools go only to their own person's),
        from this replica's copy while the hub's change watch says it is current. A copy a
        moment stale is safe: a call to a server that has just gone gets the hub's
        "unavailable" answer."""
        if self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(self._watch_listing(),
                                                                 context=contextvars.Context())
        listing = self._listings.get(person, time.monotonic())
        if listing is None:
            stamp = self._listings.stamp
            listing = await self._hub("listing", person)
            self._listings.put(person, listing, time.monotonic(), stamp)
        return listing

    async def _watch_listing(self) -> None:
        """Park on the hub until what it lists changes, for as long as this replica lives."""
        while True:
            try:
                self._listings.heard(await self.hub.listing_changed.remote(self._listings.stamp or ""))
            except Exception as exc:  # noqa: BLE001 - the hub died or restarts: short-lived copies meanwhile
                self._listings.lost()
                log.info("tool listing watch: %s; trying again", type(exc).__name__)
                await asyncio.sleep(1.0)

    async def _turn_toolbox(self, messages: list[dict[str, Any]], scope: dict[str, Any] | None = None,
                            work_only: bool = False):
        if work_only:
            # Work the owner did not ask for in their own words: the owner-only work tools
            # alone, from the listing with no person (so no device's tools either).
            specs, _keywords = await self._listing(None)
            return OwnerOnlyTools(self.toolbox, self._hub_call).toolbox(specs)
        specs, keywords = await self._listing((scope or {}).get("person"))
        return self.tools.build(messages, specs, keywords, scope)

    def _model(self, person_waiting: bool):
        async def model(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> AsyncIterator[Delta]:
            if self.router is None:
                async for delta in self.offline.stream(messages, tools):
                    yield delta
                return
            try:
                async for delta in stream_with_failover(self.router, self.providers, messages, tools,
                                                        self.timeout, person_waiting=person_waiting):
                    yield delta
            except AllProvidersFailed:
                # Nothing was said yet. With no hosted model, the stand-in answers while the
                # local model is getting ready (or failed), and says so.
                note = await self.local.note() if self.local and not self.local.config.hosted else None
                if note is None:
                    raise
                async for delta in self.offline.stream(messages, tools, local_note=note):
                    yield delta
        return model

    def _context(self, request: TurnRequest, sources: list[Any] | None = None) -> TurnContext:
        session, turn_id, session_id = request.session, request.turn_id, request.session_id

        async def confirm(req: ConfirmRequest) -> bool:
            return await session.request_confirmation.remote(turn_id, req)

        async def audit(entry: AuditEntry) -> None:
            try:
                await self.store.add_audit(entry)
            except Exception as exc:
                log.exception("audit write failed")
                report("audit", exc, request={"session": session_id, "tool": entry.tool})

        def on_failure(tool: str, message: str) -> None:
            error_log().record.remote(ErrorEntry(source=f"tool:{tool}", error=message[:500],
                                                 request={"session": session_id}))

        attended = request.attended and session is not None
        return TurnContext(confirm=confirm if attended else None, audit=audit, on_failure=on_failure,
                           session_id=session_id, sources=list(sources or []))

    async def ready(self) -> bool:
        """A new SessionActor calls it once so its handle's router is set up before a
        conversation needs it (actors/session/warm.py). The local model, if it answers here,
        reads its prompts' stable head meanwhile."""
        if self.local:
            self.local.prime_head_soon(self._offline_tools)
        return True

    async def _offline_tools(self) -> list[dict[str, Any]]:
        """The tools a plain owner turn offers (the local model's head lists the core ones)."""
        toolbox = await self._turn_toolbox([{"role": "user", "content": "hello"}], None)
        return toolbox.schemas()

    async def run(self, request: TurnRequest) -> AsyncIterator[TurnEvent]:
        """One turn's typed events: sentences, tools, then a `TurnResult` (or a `TurnError`)."""
        # The model's plain messages; what the typed ones said was not the owner's words stays
        # with the turn (the taint rule keys on it).
        mark("loop.in", request.session_id)
        messages: list[Any] = list(request.messages)
        sources = to_wire(messages)
        try:
            scope = (request.scope.model_dump() if request.scope
                     else await turn_scope(self.store, request.session_id))
            toolbox = await self._turn_toolbox(messages, scope, request.work_only)
            mark("loop.tools", request.session_id)
            async for event in run_turn(self._model(True), messages, toolbox, request.max_steps,
                                        private_device_audit(self._context(request, sources), toolbox)):
                if isinstance(event, Sentence):
                    mark("loop.sentence", request.session_id)
                yield event
        except AllProvidersFailed as exc:
            yield _error("provider_unavailable",
                         f"{exc} No configured model answered; please try again in a minute.")
        except ProviderError as exc:
            yield _error("provider_error", f"{exc.plain()} The answer was cut short; please ask again.")
        except Exception as exc:
            log.exception("agent loop failed")
            report("agent_loop", exc, request={"session": request.session_id})
            yield _error("internal_error", "Something went wrong while answering. Please try again.")

    async def summarize(self, previous: str, messages: list[dict[str, Any]]) -> str:
        """Fold messages that left the verbatim window into the rolling summary."""
        if self.router is None:
            return fallback_summary(previous, messages)
        prompt = summary_prompt(previous, messages)
        try:
            text = (await complete_text(self.router, self.learning_providers, prompt, self.timeout,
                                        person_waiting=False)).strip()
        except (AllProvidersFailed, ProviderError) as exc:
            log.warning("summary call failed (%s); using the extractive fallback", exc)
            return fallback_summary(previous, messages)
        return text or fallback_summary(previous, messages)

    # -- memory's learning calls -----------------------------------------------------------

    async def complete(self, messages: list[dict[str, str]], purpose: str) -> str | None:
        """One background model call for memory; None when no model is configured (the
        offline stand-in cannot reflect). Input and output are capped in characters."""
        if self.learning_router is None:
            return None
        if self.local and not self.local.config.hosted and await self.local.note() is not None:
            return None  # the local model is not ready: learning waits, like with no model
        with learning_purpose(purpose):  # the local model picks the JSON schema by it
            return await complete_text(self.learning_router, self.learning_providers,
                                       cap_messages(messages, LEARN_PROMPT_CAP), self.timeout,
                                       person_waiting=False, max_chars=LEARN_OUTPUT_CAP)

    async def _safe_complete(self, messages: list[dict[str, str]], purpose: str) -> str | None:
        try:
            return await self.complete(messages, purpose)
        except (AllProvidersFailed, ProviderError) as exc:
            log.warning("%s call failed: %s", purpose, exc)
            report(f"memory.{purpose}", exc)
            return None

    async def reflect(self, exchange: dict[str, Any]) -> dict[str, Any]:
        outcome = await jobs.reflect_exchange(self.store, self._safe_complete, Exchange(**exchange))
        return outcome.model_dump()

    async def distill(self, work: str, session_id: str | None = None) -> dict[str, Any]:
        return (await jobs.distill_playbook(self.store, self._safe_complete, work, session_id)).model_dump()

    async def consolidate(self) -> AsyncIterator[dict[str, Any]]:
        """The nightly consolidation, streaming progress steps and then the report."""
        steps: list[str] = []

        async def progress(step: str) -> None:
            steps.append(step)

        # Progress is collected and replayed: the job is one model call, and a generator
        # cannot yield from inside the callback.
        # Its own context: the job finishes even if the owner closes the page meanwhile.
        task = asyncio.get_running_loop().create_task(
            jobs.consolidate(self.store, self._safe_complete, progress=progress), context=contextvars.Context())
        sent = 0
        while not task.done():
            await asyncio.wait({task}, timeout=0.2)
            while sent < len(steps):
                yield {"type": "progress", "step": steps[sent]}
                sent += 1
        while sent < len(steps):
            yield {"type": "progress", "step": steps[sent]}
            sent += 1
        yield {"type": "report", **task.result().model_dump()}

    async def author_persona(self, revise: bool = False) -> str:
        return await jobs.author_persona(self.store, self._safe_complete, revise=revise)

    async def tools_status(self) -> list[dict[str, Any]]:
        builtin = {"name": "builtin", "state": "on", "reason": "", "tools": len(self.toolbox.specs),
                   "side": "cloud", "restarts": 0}
        return [builtin] + await self._hub("status")

    async def providers_status(self) -> list[dict[str, Any]]:
        if self.router is None:
            return [{"key": "offline/offline", "ema": None, "retired": False}]
        snapshot = await self.router.handle.snapshot.remote()
        return await self.local.row(snapshot) if self.local else snapshot


def _error(code: str, message: str) -> TurnError:
    return TurnError.of(code, message)
