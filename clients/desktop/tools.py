"""The desktop's tools: what each offers the agent (name, skill, tier, schema) and the code that
runs it. Arguments were written by a model, so each is checked before anything runs."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_READ = 100_000
MAX_WRITE = 100_000
MAX_ARGUMENT = 4096
MAX_FOUND = 50
SHELL_SECONDS = 20.0


class ToolRefused(Exception):
    """Bad arguments or a refusal; the message goes back as the result's error."""


Run = Callable[[dict[str, Any]], Awaitable[Any]]


@dataclass
class DesktopTool:
    name: str
    description: str
    parameters: dict[str, Any]
    skill: str
    tier: int
    run: Run

    def offer(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters,
                "skill": self.skill, "tier": self.tier}


def check_arguments(schema: dict[str, Any], args: Any) -> dict[str, Any]:
    """The small part of JSON Schema our tools use: an object, required keys, string/integer
    types, no unknown keys."""
    if not isinstance(args, dict):
        raise ToolRefused("arguments must be an object")
    properties: dict[str, Any] = schema.get("properties", {})
    for key in schema.get("required", []):
        if key not in args:
            raise ToolRefused(f"missing argument {key!r}")
    for key, value in args.items():
        if key not in properties:
            raise ToolRefused(f"unknown argument {key!r}")
        want = properties[key].get("type")
        if want == "string" and not isinstance(value, str):
            raise ToolRefused(f"{key} must be a string")
        if want == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
            raise ToolRefused(f"{key} must be an integer")
        if isinstance(value, str) and len(value) > properties[key].get("maxLength", MAX_ARGUMENT):
            raise ToolRefused(f"{key} is too long")
    return args


def _inside(root: Path, path: str) -> Path:
    target = (root / Path(path).expanduser()).resolve() if not Path(path).expanduser().is_absolute() \
        else Path(path).expanduser().resolve()
    if target != root and root not in target.parents:
        raise ToolRefused(f"only files under {root} can be reached")
    return target


def desktop_tools(root: Path, allow_shell: bool = True, allow_write: bool = True) -> list[DesktopTool]:
    root = root.expanduser().resolve()

    async def file_read(args: dict[str, Any]) -> dict[str, Any]:
        path = _inside(root, args["path"])
        if not path.is_file():
            raise ToolRefused("there is no file at that path")
        data = path.read_bytes()[:MAX_READ]
        text = data.decode("utf-8", errors="replace")
        return {"summary": f"Read {path.name} ({len(data)} bytes).", "text": text}

    async def file_find(args: dict[str, Any]) -> dict[str, Any]:
        pattern = args["pattern"]
        if ".." in Path(pattern).parts:
            raise ToolRefused("the pattern must stay inside the folder")
        found = [str(p.relative_to(root)) for p in sorted(root.rglob(pattern))[:MAX_FOUND]]
        return {"summary": f"Found {len(found)} files matching {pattern}.", "files": found}

    async def file_write(args: dict[str, Any]) -> dict[str, Any]:
        path = _inside(root, args["path"])
        if path == root or path.is_dir():
            raise ToolRefused("that path is a folder; name a file")
        data = args["text"].encode("utf-8")
        if len(data) > MAX_WRITE:
            raise ToolRefused(f"at most {MAX_WRITE} bytes can be written at once")
        existed = path.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        # Write beside the target and rename, so a crash never leaves half a file in its place.
        partial = path.with_name(f".{path.name}.iriis-partial")
        partial.write_bytes(data)
        partial.replace(path)
        verb = "Replaced" if existed else "Wrote"
        return {"summary": f"{verb} {path.relative_to(root)} ({len(data)} bytes)."}

    async def clipboard_read(_args: dict[str, Any]) -> dict[str, Any]:
        command = _clipboard_command()
        if command is None:
            raise ToolRefused("no clipboard is available here")
        out = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=5)
        return {"summary": "Read the clipboard.", "text": out.stdout[:MAX_READ]}

    async def shell_run(args: dict[str, Any]) -> dict[str, Any]:
        if not args["purpose"].strip():
            raise ToolRefused("say what the command is for (purpose)")
        proc = await asyncio.create_subprocess_shell(args["command"], cwd=root, stdout=asyncio.subprocess.PIPE,
                                                     stderr=asyncio.subprocess.STDOUT)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), SHELL_SECONDS)
        except asyncio.TimeoutError:
            proc.kill()
            raise ToolRefused(f"the command ran past {SHELL_SECONDS:g} s and was stopped") from None
        return {"summary": f"Exit code {proc.returncode}.", "text": out.decode(errors="replace")[:MAX_READ]}

    tools = [
        DesktopTool("file_read", "Read the text of one file on this computer.",
                    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
                    "files", 0, file_read),
        DesktopTool("file_find", "Find files on this computer by a glob pattern such as '*.pdf'.",
                    {"type": "object", "properties": {"pattern": {"type": "string"}}, "required": ["pattern"]},
                    "files", 0, file_find),
    ]
    if allow_write:
        # Tier 2: changing a file is proposed to the person and runs only after their yes.
        tools.append(DesktopTool(
            "file_write", "Write a text file on this computer (creates or replaces it). Asks the person first.",
            {"type": "object", "properties": {"path": {"type": "string"},
                                              "text": {"type": "string", "maxLength": MAX_WRITE}},
             "required": ["path", "text"]}, "files", 2, file_write))
    if _clipboard_command() is not None:
        tools.append(DesktopTool("clipboard_read", "Read the text on this computer's clipboard.",
                                 {"type": "object", "properties": {}}, "clipboard", 0, clipboard_read))
    if allow_shell:
        tools.append(DesktopTool(
            "shell_run", "Run a shell command on this computer. Needs the person's PIN.",
            {"type": "object", "properties": {"command": {"type": "string"}, "purpose": {
                "type": "string", "description": "One plain sentence: what the command does."}},
             "required": ["command", "purpose"]}, "shell", 3, shell_run))
    return tools


def _clipboard_command() -> list[str] | None:
    if sys.platform == "darwin" and shutil.which("pbpaste"):
        return ["pbpaste"]
    if shutil.which("wl-paste"):
        return ["wl-paste", "--no-newline"]
    if shutil.which("xclip"):
        return ["xclip", "-selection", "clipboard", "-o"]
    return None


async def run_tool(tool: DesktopTool, args: Any, seconds: float) -> dict[str, Any]:
    """A result frame's body: ok and content, or ok false and an error."""
    try:
        checked = check_arguments(tool.parameters, args)
        content = await asyncio.wait_for(tool.run(checked), seconds)
    except ToolRefused as exc:
        return {"ok": False, "error": str(exc)}
    except asyncio.TimeoutError:
        return {"ok": False, "error": f"the tool took longer than {seconds:g} s"}
    except OSError as exc:
        return {"ok": False, "error": f"could not do that: {exc.strerror or exc}"}
    return {"ok": True, "content": content}
