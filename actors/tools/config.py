"""mcp.yaml: the tool servers and their permission tiers, validated at start-up.

The `builtin` entry sets tiers and exclusions for the built-in tools; every other entry is an MCP
server that the catalogue (actors/tools/catalogue.py) starts, lists and restarts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from actors.common.errors import IriisError
from actors.common.toolspec import tier_from


class ServerConfig(BaseModel):
    model_config = {"extra": "forbid"}

    transport: Literal["stdio", "http"] = "stdio"
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    url: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    tier: int | None = None
    tools: dict[str, int] = Field(default_factory=dict)
    exclude: list[str] = Field(default_factory=list)
    requires_env: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    # Output of a trusted server is the owner's own data (their notes, their calendar) and is not
    # wrapped as untrusted; everything else is, since it may carry instructions from strangers.
    trusted: bool = False
    # The file ids a server reports (`file_id`, `files`) become the reply's `[file:N]` markers.
    # A trusted server's are taken; an untrusted one's only with `reports_files`, for a server of
    # ours whose content is outside but whose files it saved itself (mail attachments): any
    # other could name one of the owner's files and have it shown as its own.
    reports_files: bool = False

    @field_validator("tier", mode="before")
    @classmethod
    def _tier(cls, value: Any) -> int | None:
        return None if value is None else tier_from(value)

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> dict[str, int]:
        return {str(k): tier_from(v) for k, v in (value or {}).items()}


class RestartPolicy(BaseModel):
    """How soon a server that died is started again: `initial_s`, doubling up to `max_s`."""

    model_config = {"extra": "forbid"}

    initial_s: float = Field(default=1.0, gt=0)
    max_s: float = Field(default=60.0, gt=0)

    @model_validator(mode="after")
    def _order(self) -> "RestartPolicy":
        if self.max_s < self.initial_s:
            raise ValueError("max_s must not be below initial_s")
        return self


class McpConfig(BaseModel):
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    restart: RestartPolicy = Field(default_factory=RestartPolicy)

    @model_validator(mode="after")
    def _transports(self) -> "McpConfig":
        for name, server in self.servers.items():
            if name == "builtin":
                continue
            if server.transport == "stdio" and not server.command:
                raise ValueError(f"server {name!r}: stdio needs a command")
            if server.transport == "http" and not server.url:
                raise ValueError(f"server {name!r}: http needs a url")
        return self

    def builtin_tiers(self, tool_names: list[str]) -> dict[str, int]:
        entry = self.servers.get("builtin")
        if entry is None:
            return {}
        tiers = {name: entry.tier for name in tool_names} if entry.tier is not None else {}
        tiers.update(entry.tools)
        return tiers

    def builtin_exclude(self) -> set[str]:
        entry = self.servers.get("builtin")
        return set(entry.exclude) if entry else set()


class McpConfigError(IriisError):
    """One line: the file, where, and what is wrong."""

    code = "invalid_mcp_config"


def load_mcp_config(path: Path) -> McpConfig:
    if not path.exists():
        return McpConfig()
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "somewhere"
        raise McpConfigError(f"{path}: {where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    try:
        return McpConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "top level"
        raise McpConfigError(f"{path}: {where}: {err['msg']}") from None
