"""The agent's built-in tools, until the MCP catalogue arrives: the clock, arithmetic, notes,
reading stored files and a shell on the server.

Tiers here are defaults; mcp.yaml may override them per tool (actors/tools/config.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from actors.common.attachments import extract_text
from actors.common.names import live_actors_async
from actors.common.provenance import Provenance
from actors.store.models import OutboxItem
from actors.store.store import Store
from actors.common.arith import CalcError, evaluate, format_number
from actors.common.toolspec import ToolError, ToolOutput, ToolSpec
from actors.tools.spec import ToolBox

SHELL_TIMEOUT = 30.0
SHELL_OUTPUT_CAP = 8000


async def _current_time(args: dict[str, Any]) -> str:
    tz_name = str(args.get("timezone") or "UTC")
    try:
        tz = ZoneInfo(tz_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(f"unknown time zone {tz_name!r}") from None
    now = dt.datetime.now(tz)
    return json.dumps({"iso": now.isoformat(timespec="seconds"), "timezone": tz_name,
                       "weekday": now.strftime("%A"), "human": now.strftime("%H:%M on %A %d %B %Y")})


async def _calculate(args: dict[str, Any]) -> str:
    try:
        return format_number(evaluate(str(args.get("expression", ""))))
    except CalcError as exc:
        raise ToolError(str(exc)) from None


def _save_note(store: Store | None):
    async def save_note(args: dict[str, Any]) -> ToolOutput:
        if store is None:
            raise ToolError("notes need the store, which is not available here")
        title = str(args.get("title") or "note").strip()[:80] or "note"
        text = str(args.get("text") or "")
        if not text.strip():
            raise ToolError("the note is empty")
        safe = "".join(c if c.isalnum() or c in "-_ " else "_" for c in title).strip().replace(" ", "_")
        record = await store.add_file(f"{safe or 'note'}.md", "text/markdown",
                                      f"# {title}\n\n{text}\n".encode())
        return ToolOutput(text=f"saved as file {record.id} ({record.name})", files=[record.id])
    return save_note


def _read_file(store: Store | None):
    async def read_file(args: dict[str, Any]) -> ToolOutput:
        if store is None:
            raise ToolError("files need the store, which is not available here")
        try:
            file_id = int(args.get("file_id"))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ToolError("file_id must be a number") from None
        found = await store.get_file(file_id)
        if found is None:
            raise ToolError(f"there is no file {file_id}")
        meta, data = found
        text = await asyncio.to_thread(extract_text, data, meta.mime, meta.name)
        return ToolOutput(text=text, sources=[str(Provenance.file(file_id, meta.name))])
    return read_file


def _notify_owner(store: Store | None):
    async def notify_owner(args: dict[str, Any]) -> str:
        if store is None:
            raise ToolError("notifications need the store, which is not available here")
        title = str(args.get("title") or "Iriis").strip()[:120]
        body = str(args.get("body") or "").strip()[:2000]
        if not body:
            raise ToolError("the notification body is empty")
        item_id = await store.add_outbox(OutboxItem(kind="agent_message", title=title, body=body))
        return f"queued notification {item_id} for the owner"
    return notify_owner


async def _look_at_camera(args: dict[str, Any]) -> str:
    """Ask the live camera assistant about its current frame (the newest open stream)."""
    question = str(args.get("question") or "").strip()[:500]
    if not question:
        raise ToolError("the question is empty")
    # The newest open stream; found by name, so the tools need not import the camera package.
    streams = list((await live_actors_async("camera")).values())
    camera = streams[-1] if streams else None
    if camera is None:
        raise ToolError("no camera stream is open; ask the owner to open the camera page first")
    answer = await camera.ask.remote(question, "agent")
    reading = answer.get("reading")
    shown = f" Reading: {reading['value']:g} {reading['unit']}." if reading else ""
    return f"[{answer.get('status')}] {answer.get('say')}{shown}"


def _run_shell(workspace: Path | None):
    async def run_shell(args: dict[str, Any]) -> str:
        command = str(args.get("command") or "").strip()
        if not command:
            raise ToolError("command is empty")
        cwd = workspace or Path.cwd()
        cwd.mkdir(parents=True, exist_ok=True)
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL, env={**os.environ, "PAGER": "cat"},
        )
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), SHELL_TIMEOUT)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise ToolError(f"the command ran past {SHELL_TIMEOUT:g}s and was stopped") from None
        text = out.decode("utf-8", "replace")[-SHELL_OUTPUT_CAP:]
        return f"exit code {proc.returncode}\n{text}"
    return run_shell


def builtin_toolbox(store: Store | None = None, workspace: Path | None = None,
                    tiers: dict[str, int] | None = None, exclude: set[str] | None = None) -> ToolBox:
    """The built-in tools with their default tiers, then the configured overrides."""
    box = ToolBox()
    tools = [
        (ToolSpec(name="current_time", tier=0, untrusted_output=False,
                  description="The current date and time, optionally in an IANA time zone such as Europe/Paris.",
                  parameters={"type": "object", "properties": {"timezone": {"type": "string"}}}),
         _current_time),
        (ToolSpec(name="calculate", tier=0, untrusted_output=False,
                  description="Evaluate an arithmetic expression exactly (+ - * / ** % sqrt, log, sin...).",
                  parameters={"type": "object", "properties": {"expression": {"type": "string"}},
                              "required": ["expression"]}),
         _calculate),
        (ToolSpec(name="save_note", tier=1, untrusted_output=False,
                  description="Save a note for the owner as a Markdown file; returns its file handle.",
                  parameters={"type": "object", "properties": {"title": {"type": "string"},
                                                               "text": {"type": "string"}},
                              "required": ["text"]}),
         _save_note(store)),
        (ToolSpec(name="read_file", tier=0,
                  description="Read a stored or uploaded file's text by its number (file N).",
                  parameters={"type": "object", "properties": {"file_id": {"type": "integer"}},
                              "required": ["file_id"]}),
         _read_file(store)),
        (ToolSpec(name="notify_owner", tier=1, untrusted_output=False,
                  description="Send the owner a notification (it reaches their phone when a channel is set up).",
                  parameters={"type": "object", "properties": {"title": {"type": "string"},
                                                               "body": {"type": "string"}},
                              "required": ["body"]}),
         _notify_owner(store)),
        (ToolSpec(name="look_at_camera", tier=0,
                  description=("Look at the owner's live camera (the frame showing now) and answer a question "
                               "about it. Only works while the camera page is open."),
                  parameters={"type": "object", "properties": {"question": {"type": "string"}},
                              "required": ["question"]}),
         _look_at_camera),
        (ToolSpec(name="run_shell", tier=2, purpose_required=True,
                  description=("Run a shell command on the Iriis server (in its workspace folder). "
                               "Always give `purpose`: one plain sentence saying what it does, for the owner."),
                  parameters={"type": "object", "properties": {"command": {"type": "string"},
                                                               "purpose": {"type": "string"}},
                              "required": ["command", "purpose"]}),
         _run_shell(workspace)),
    ]
    for spec, handler in tools:
        if exclude and spec.name in exclude:
            continue
        if tiers and spec.name in tiers:
            spec = spec.model_copy(update={"tier": tiers[spec.name]})
        box.add(spec, handler)
    return box
