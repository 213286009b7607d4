"""One turn of the agent: model steps, tool calls, sentences out as soon as they are complete.

The checks that keep side effects honest live here, outside the model: tiers and
confirmations, the taint rule after untrusted output, the action-claim check, the audit log.
Pure asyncio: the AgentLoop deployment wraps it, tests drive it with the scripted server.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from actors.common.budget import compact_tool_messages
from actors.common.provenance import (
    Provenance,
    taint_reason,
    tool_provenance,
    untrusted,
)
from actors.common.redact import redact_value
from actors.common.toolspec import CONFIRM, PIN, ToolResult, ToolSpec
from actors.common.untrusted import wrap_untrusted
from actors.providers.types import Delta, TextDelta, ToolCall

# The step caps are defined with the turn request; re-exported here where callers look for them.
from actors.session.events import (  # noqa: F401
    MAX_BACKGROUND_STEPS,
    MAX_CHAT_STEPS,
    ConfirmRequest,
    Sentence,
    ToolActivity,
    TurnEvent,
    TurnResult,
    to_wire,
)
from actors.session.speaker import Speaker
from actors.store.models import AuditEntry
from actors.tools.previews import preview
from actors.tools.spec import ToolBox

STEP_CAP_SENTENCE = (
    "I stopped here because this request needed more than {n} steps; "
    "ask me to continue if you want me to keep going."
)
EMPTY_RETRY_INSTRUCTION = (
    "Your previous reply was empty. Answer the user's last message now in plain text, without tools."
)
APOLOGY = "Sorry, I could not come up with an answer to that. Could you rephrase it?"
CLAIM_CORRECTION = (
    "Your reply says an action was done, but no tool performed it in this turn, so nothing was done. "
    "Either call the tool that does it now, or tell the owner plainly that you have not done it."
)
NO_ACTION_NOTE = "To be clear: I have not carried out any action in this turn."
DECLINED_UNATTENDED = (
    "declined: nobody can confirm actions in this context, so `{name}` was not run. "
    "Tell the owner what you wanted to do; they can ask for it directly."
)
DECLINED_BY_OWNER = "declined: the owner said no, so `{name}` was not run. Do not try it again this turn."
NEEDS_PURPOSE = (
    "error: `{name}` needs a `purpose` argument: one plain sentence telling the owner what the "
    "command does. Call it again with one."
)

ModelFn = Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], AsyncIterator[Delta]]


@dataclass
class TurnContext:
    """What the turn may reach outside itself. No `confirm` means an unattended context."""

    confirm: Callable[[ConfirmRequest], Awaitable[bool]] | None = None
    audit: Callable[[AuditEntry], Awaitable[None]] | None = None
    on_failure: Callable[[str, str], None] | None = None
    session_id: str | None = None
    # Untrusted sources already in the prompt when the turn starts, beside those its messages
    # name (a caller that turned its TurnMessages into plain dicts passes them here).
    sources: list[Provenance] = field(default_factory=list)
    # Off only in the injection suite's self-check, which proves the rule is what holds.
    taint_rule: bool = True


def question_for(spec: ToolSpec, arguments: dict[str, Any]) -> str:
    """What the owner is asked: the model's stated purpose for shell-like tools, a read-back for
    tools that act in the owner's name (a mail's recipients, subject and first words), else the call."""
    if spec.purpose_required:
        return f"Allow this? {str(arguments.get('purpose', '')).strip()}"
    if read_back := preview(spec.source, spec.name, arguments):
        return f"{read_back}?"
    shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)[:80]}"
                      for k, v in redact_value(arguments).items() if k != "purpose")
    return f"Allow {spec.name}({shown})? {spec.description}"


@dataclass(frozen=True)
class CallDecision:
    """What became of one tool call: the tier it ran at (None: no such tool), whether the owner
    said yes (None: nobody was asked; False: declined, by the owner or because nobody could be
    asked), and the turn's taint as it stood when the call was decided (the audit's record)."""

    tier: int | None
    confirmed: bool | None = None
    tainted: bool = False
    sources: tuple[str, ...] = ()

    @property
    def declined(self) -> bool:
        return self.confirmed is False


def _assistant_message(text: str, calls: list[ToolCall]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in calls
        ],
    }


class _Turn:
    def __init__(self, toolbox: ToolBox, ctx: TurnContext, sources: list[Provenance] | None = None) -> None:
        self.toolbox = toolbox
        self.ctx = ctx
        # An action (tier 1 and up) actually ran and succeeded: only that can back a claim.
        self.acted = False
        # What entered the turn that is not the person's own words, by provenance.
        self.sources: list[Provenance] = untrusted([*(sources or []), *ctx.sources])
        self.trace: list[dict[str, Any]] = []
        self.files: list[int] = []

    @property
    def tainted(self) -> bool:
        """Anything untrusted entered the turn: from then on every action needs a yes."""
        return bool(self.sources) and self.ctx.taint_rule

    def read(self, source: Provenance) -> None:
        self.sources = untrusted([*self.sources, source])

    def effective_tier(self, spec: ToolSpec) -> tuple[int, str]:
        if self.tainted and spec.tier >= 1:
            why = taint_reason(self.sources)
            if spec.tier < CONFIRM:
                return CONFIRM, why
            return spec.tier, f"{spec.name} is a confirm-tier tool; {why}"
        return spec.tier, f"{spec.name} is a confirm-tier tool" if spec.tier >= CONFIRM else ""

    async def run_call(self, call: ToolCall) -> tuple[ToolResult, CallDecision]:
        spec = self.toolbox.specs.get(call.name)
        started = time.perf_counter()
        # The taint and its sources as they stood when the call was decided: the audit's record.
        decision = CallDecision(tier=spec.tier if spec else None, tainted=bool(self.sources),
                                sources=tuple(str(p) for p in self.sources))
        if spec is None:
            result = await self.toolbox.execute(call.name, call.arguments)
        elif spec.purpose_required and not str(call.arguments.get("purpose", "")).strip():
            result = ToolResult(name=call.name, ok=False, content=NEEDS_PURPOSE.format(name=call.name))
        else:
            tier, reason = self.effective_tier(spec)
            decision = replace(decision, tier=tier)
            if tier < CONFIRM:
                result = await self.toolbox.execute(call.name, call.arguments)
            elif self.ctx.confirm is None:
                decision = replace(decision, confirmed=False)
                result = ToolResult(name=call.name, ok=False, content=DECLINED_UNATTENDED.format(name=call.name))
            else:
                approved = await self.ctx.confirm(ConfirmRequest(
                    tool=call.name, arguments=redact_value(call.arguments),
                    question=question_for(spec, call.arguments), needs_pin=tier >= PIN, reason=reason,
                    sources=[str(p) for p in self.sources] if self.tainted else []))
                decision = replace(decision, confirmed=approved)
                result = (await self.toolbox.execute(call.name, call.arguments) if approved else
                          ToolResult(name=call.name, ok=False, content=DECLINED_BY_OWNER.format(name=call.name)))
            if not decision.declined:
                for source in self.output_sources(spec, call, result):
                    self.read(source)
        if spec is not None and not decision.declined and spec.tier >= 1 and result.ok:
            self.acted = True
        await self._audit(call, result, decision, (time.perf_counter() - started) * 1000)
        self.files += result.files
        return result, decision

    def provenance(self, call: ToolCall) -> Provenance:
        spec = self.toolbox.specs.get(call.name)
        return tool_provenance(spec.source if spec else "", call.name, call.arguments)

    def output_sources(self, spec: ToolSpec, call: ToolCall, result: ToolResult) -> list[Provenance]:
        """What a call's output brought into the turn. A trusted tool's output is the owner's
        data, except what the tool itself names as outside content (`recall` returning an item
        learned from a web page: `memory:12`). An untrusted tool's output is outside content
        named by its server (`web:host`, `device:3.read_sensor`); a name the tool gives can
        only make that more precise (`file:12 notes.txt` for `file:12`, `mail:ana@example.org`
        for `mail`), never name another."""
        named = untrusted(result.sources) if result.ok else []
        if not spec.untrusted_output:
            return named
        own = self.provenance(call)
        precise = [p for p in named if p.source == own.source or p.source.startswith(own.source + " ")
                   or (":" not in own.source and p.source.startswith(own.source + ":"))]
        return precise or [own]

    async def run_calls(self, calls: list[ToolCall], messages: list[dict[str, Any]]) -> AsyncIterator[TurnEvent]:
        """Run one step's calls in order: tool events out, wrapped results into the prompt."""
        for call in calls:
            arguments = redact_value(call.arguments)
            yield ToolActivity(name=call.name, status="start", arguments=arguments)
            result, decision = await self.run_call(call)
            status = "declined" if decision.declined else ("done" if result.ok else "error")
            spec = self.toolbox.specs.get(call.name)
            self.trace.append({"name": call.name, "arguments": arguments, "status": status,
                               "result": result.content[:500], "source": spec.source if spec else None})
            yield ToolActivity(name=call.name, status=status, result=result.content[:500], files=result.files,
                               sources=[str(p) for p in self.sources] or None)
            spec = self.toolbox.specs.get(call.name)
            source = f"{spec.source}.{call.name}" if spec else call.name
            messages.append({"role": "tool", "tool_call_id": call.id,
                             "content": wrap_untrusted(source, result.content)})

    async def _audit(self, call: ToolCall, result: ToolResult, decision: CallDecision, ms: float) -> None:
        tier_names = {0: "read", 1: "auto", 2: "confirm", 3: "pin"}
        entry = AuditEntry(
            session_id=self.ctx.session_id, tool=call.name, arguments=redact_value(call.arguments),
            tier=tier_names.get(decision.tier, "unknown"), confirmed=decision.confirmed,
            result=result.content[:4000] if result.ok else None,
            error=None if result.ok else result.content[:2000], duration_ms=round(ms, 2),
            tainted=decision.tainted, sources=list(decision.sources) or None,
        )
        if self.ctx.audit:
            await self.ctx.audit(entry)
        if not result.ok and not decision.declined and self.ctx.on_failure:
            self.ctx.on_failure(call.name, result.content)


@dataclass
class _Reply:
    """What the turn's steps have said so far, and the one-time retries already spent."""

    parts: list[str] = field(default_factory=list)
    index: int = 0
    retried_empty: bool = False
    claim_checked: bool = False
    offer_tools: bool = True
    done: bool = False


async def _model_step(model: ModelFn, messages: list[dict[str, Any]], schemas: list[dict[str, Any]] | None,
                      speaker: Speaker, calls: list[ToolCall]) -> AsyncIterator[TurnEvent]:
    """Stream one model step through the speaker; its tool calls, recovered ones too, go to `calls`."""
    async for delta in model(messages, schemas):
        if isinstance(delta, TextDelta):
            for event in speaker.feed(delta.text):
                yield event
        elif isinstance(delta, ToolCall):
            calls.append(delta)
    events, recovered = speaker.finish()
    for event in events:
        yield event
    calls += recovered


def _withhold_claims(speaker: Speaker, messages: list[dict[str, Any]], reply: _Reply) -> None:
    """Claims an action that no tool performed this turn: withhold it once and ask again."""
    reply.claim_checked = True
    reply.index = speaker.index
    if speaker.spoken:
        reply.parts.append(" ".join(speaker.spoken))
    messages.append({"role": "assistant", "content": speaker.text.strip()})
    messages.append({"role": "system", "content": CLAIM_CORRECTION})


async def _answer_step(speaker: Speaker, messages: list[dict[str, Any]],
                       reply: _Reply) -> AsyncIterator[TurnEvent]:
    """A step without calls ends the turn, unless it was empty and the one retry is left."""
    # Asked once already and it claims again with nothing done: say so plainly instead.
    unbacked = bool(speaker.held)
    note = NO_ACTION_NOTE if unbacked else None
    for event in speaker.release(drop_claims=unbacked, note=note):
        yield event
    reply.index, text = speaker.index, speaker.reply_text
    if text:
        reply.parts.append(text)
    if text or reply.parts:
        reply.done = True
        return
    if not reply.retried_empty:
        # Neither text nor calls: once more, without tools and with a plain instruction.
        reply.retried_empty, reply.offer_tools = True, False
        messages.append({"role": "system", "content": EMPTY_RETRY_INSTRUCTION})
        return
    yield Sentence(text=APOLOGY, index=reply.index)
    reply.parts.append(APOLOGY)
    reply.done = True


async def _tool_step(turn: _Turn, speaker: Speaker, calls: list[ToolCall], messages: list[dict[str, Any]],
                     reply: _Reply) -> AsyncIterator[TurnEvent]:
    """Run the step's calls, then let the sentences written beside them go."""
    messages.append(_assistant_message(speaker.text.strip(), calls))
    async for event in turn.run_calls(calls, messages):
        yield event
    # Claims written beside the calls are heard only if one of those calls really acted.
    for event in speaker.release(drop_claims=bool(speaker.held) and not turn.acted):
        yield event
    reply.index = speaker.index
    if speaker.reply_text:
        reply.parts.append(speaker.reply_text)
    compact_tool_messages(messages)


def _result(turn: _Turn, parts: list[str]) -> TurnResult:
    """The reply as saved: every step's text, then the files the turn made."""
    text = "\n\n".join(parts)
    if turn.files:
        # Markers let clients render the artefacts in history.
        text += "\n\n" + " ".join(f"[file:{f}]" for f in dict.fromkeys(turn.files))
    return TurnResult(text=text, tools=turn.trace, files=turn.files, sources=[str(p) for p in turn.sources])


async def run_turn(
    model: ModelFn,
    messages: list[dict[str, Any]],
    toolbox: ToolBox,
    max_steps: int = MAX_CHAT_STEPS,
    ctx: TurnContext | None = None,
) -> AsyncIterator[TurnEvent]:
    """Yield sentence, tool and confirm-related events, then one `result` event with the reply.

    `messages` is the full prompt (system, history, the user's message); it is extended in
    place with this turn's assistant and tool messages.
    """
    ctx = ctx or TurnContext()
    # Typed messages become the model's plain dicts; their provenance stays with the turn.
    turn = _Turn(toolbox, ctx, to_wire(messages))
    reply = _Reply()
    for _step in range(max_steps):
        # Asked each step: `more_tools` may have added a server since the last one.
        schemas = toolbox.schemas() or None
        # A read or a declined action does not back "I've sent it": hold claims until one acted.
        speaker = Speaker(set(toolbox.specs), reply.index, hold_claims=not turn.acted)
        calls: list[ToolCall] = []
        offered = schemas if reply.offer_tools else None
        async for event in _model_step(model, messages, offered, speaker, calls):
            yield event
        if speaker.held and not calls and not reply.claim_checked:
            _withhold_claims(speaker, messages, reply)
        elif not calls:
            async for event in _answer_step(speaker, messages, reply):
                yield event
            if reply.done:
                break
        else:
            async for event in _tool_step(turn, speaker, calls, messages, reply):
                yield event
    else:
        cap = STEP_CAP_SENTENCE.format(n=max_steps)
        yield Sentence(text=cap, index=reply.index)
        reply.parts.append(cap)
    yield _result(turn, reply.parts)
