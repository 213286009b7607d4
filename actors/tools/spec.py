"""ToolBox: a registry of tools with their handlers, executing a call into a capped, redacted
result. The tool data types themselves live in actors/common/toolspec.py."""

from __future__ import annotations

from typing import Any

from actors.common.budget import cap_result
from actors.common.redact import redact_secrets
from actors.common.toolspec import Handler, ToolError, ToolOutput, ToolResult, ToolSpec


class ToolBox:
    """A registry: schemas for the model, execution with a capped, redacted result."""

    def __init__(self) -> None:
        self.specs: dict[str, ToolSpec] = {}
        self.handlers: dict[str, Handler] = {}

    def add(self, spec: ToolSpec, handler: Handler) -> None:
        self.specs[spec.name] = spec
        self.handlers[spec.name] = handler

    def schemas(self) -> list[dict[str, Any]]:
        return [s.schema_for_model() for s in self.specs.values()]

    async def execute(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        handler = self.handlers.get(name)
        if handler is None:
            return ToolResult(name=name, ok=False, content=f"error: there is no tool named {name!r}")
        try:
            out = await handler(arguments)
        except (ToolError, ValueError, TypeError, KeyError, OSError) as exc:
            return ToolResult(name=name, ok=False, content=f"error: {exc}")
        output = out if isinstance(out, ToolOutput) else ToolOutput(text=str(out))
        return ToolResult(name=name, ok=True, content=cap_result(redact_secrets(output.text)),
                          files=output.files, sources=output.sources)
