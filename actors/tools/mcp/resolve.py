"""An `mcp.yaml` server entry made ready to connect, and the scrubber for its secrets.

`${VAR}`s are expanded from the environment, header values cleaned of pasted whitespace, a bare
base URL completed with the conventional `/mcp` path. The values of headers and env variables
named like credentials are collected so that every message about the server can mask them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, Field

from actors.logmask import mask_secrets
from actors.tools.config import ServerConfig

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_WHITESPACE = re.compile(r"\s+")
# Env and header names whose values are credentials; those values are scrubbed from messages
# verbatim (Authorization matches through "auth").
_SECRET_NAME = re.compile(r"(?i)(key|token|secret|passw|auth|credential|cookie|session)")
# Shorter values ("1", "true", "Bearer") would garble messages without protecting anything.
_MIN_SECRET_LEN = 6


def expand_vars(text: str, environ: Mapping[str, str]) -> str:
    """`${VAR}` and `${VAR:-default}` from `environ`; the default applies when unset or empty.

    An unset variable without a default becomes empty, as in a shell; `requires_env` is the place
    to insist that one is set.
    """
    def one(match: re.Match[str]) -> str:
        value = environ.get(match.group(1), "")
        default = match.group(2)
        return default if default is not None and not value else value

    return _VAR.sub(one, text)


def normalise_header(value: str) -> str:
    """A key pasted with a trailing newline (or a tab inside) is an invalid header value; keep the
    words, one space between them."""
    return _WHITESPACE.sub(" ", value).strip()


def mcp_url(url: str) -> str:
    """A bare base URL (`https://host` or `https://host/`) means the conventional `/mcp` endpoint;
    any explicit path, `/mcp` included, is kept as written."""
    parts = urlsplit(url.strip())
    if parts.path in ("", "/"):
        parts = parts._replace(path="/mcp")
    return urlunsplit(parts)


class ResolvedServer(BaseModel):
    """A server entry with `${VAR}`s expanded, headers cleaned and the URL completed."""

    name: str
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)

    def secrets(self) -> list[str]:
        """Values to scrub from any message: the values of headers and env variables named like
        credentials, and a header's last word on its own (the token after "Bearer")."""
        found: list[str] = []
        for key, value in self.headers.items():
            if _SECRET_NAME.search(key):
                found.append(value)
                found.append(value.rsplit(" ", 1)[-1])
        for key, value in self.env.items():
            if _SECRET_NAME.search(key):
                found.append(value.strip())
        # Longest first, so a whole header value goes before its tail is looked for.
        return sorted({s for s in found if len(s) >= _MIN_SECRET_LEN}, key=len, reverse=True)


def resolve_server(name: str, config: ServerConfig, environ: Mapping[str, str]) -> ResolvedServer:
    def x(text: str) -> str:
        return expand_vars(text, environ)

    url = mcp_url(x(config.url)) if config.url else None
    return ResolvedServer(
        name=name,
        transport=config.transport,
        command=x(config.command) if config.command else None,
        args=[x(a) for a in config.args],
        env={k: x(v) for k, v in config.env.items()},
        url=url,
        headers={normalise_header(k): normalise_header(x(v)) for k, v in config.headers.items()},
    )


class Scrubber:
    """Masks the usual token shapes and this server's own secret values."""

    def __init__(self, secrets: list[str]) -> None:
        self._secrets = secrets

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return mask_secrets(text)
