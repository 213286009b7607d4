"""Remove secrets from tool output before the model or the audit log sees it.

A tool that reads a config file, an env dump or an HTTP response can return
credentials verbatim; once in the model context they can be echoed back or
sent to a provider, and once in the audit log they are stored forever. This
module replaces the secret *values* with ``[redacted]`` and keeps labels and
surrounding text, so the output still reads sensibly ("password: [redacted]").

Unlike ``actors.logmask`` (which masks our own tokens in log lines), this
works on arbitrary third-party text, so it knows more key shapes and labelled
``name: value`` forms.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"

# PEM private keys: the whole body goes, the BEGIN/END lines stay so the model
# still knows a key was there. A block cut off by a size cap has no END line;
# then everything to the end of the text goes.
_PEM = re.compile(
    r"(-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----)(.*?)(?:(-----END \2PRIVATE KEY-----)|\Z)",
    re.DOTALL,
)

# The whole header value goes (up to the end of the line or a closing quote),
# since the scheme alone ("Basic", "Bearer") says little and the rest is the
# credential.
_AUTH_HEADER = re.compile(
    r"""(?i)(\b(?:proxy-)?authorization(["']?)\s*[:=]\s*)("[^"\r\n]*"|'[^'\r\n]*'|[^\r\n,}"']+)"""
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)(?!\[redacted\])[A-Za-z0-9\-._~+/]+=*")

# Labels whose value is a secret. Compound names ("db_password",
# "x-api-key", "client_secret") are allowed through a prefix ending in "_" or
# "-"; suffixes are not, so "tokens: 1200" or "key_count=3" stay readable.
_LABELS = r"(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|key|pin)"
_LABEL_PREFIX = r"(?:[A-Za-z0-9]+[_-])*"
_LABELLED = re.compile(
    rf"""(?ix)
    (?<![\w-])                              # "monkey", "spin" are not labels
    (["']?){_LABEL_PREFIX}{_LABELS}\1       # the label, quoted like JSON or not
    \s*[:=]\s*
    (?!\[redacted\])                        # already done: keep idempotent
    (?P<value>"(?:[^"\\\r\n]|\\.)*"|'[^'\r\n]*'|[^\s,;&'"}}\]\)]+)
    """
)

# Key shapes issued by well-known services. Each is anchored so that it
# cannot start inside a longer word ("task-..." is not "sk-...").
_EDGE = r"(?<![A-Za-z0-9_-])"
_PREFIXED_KEY = re.compile(
    _EDGE
    + r"(?:sk-ant-|sk-|ghp_|gho_|ghu_|ghs_|ghr_|github_pat_|glpat-|xox[bpas]-|irad_|iriis_)"
    + r"[A-Za-z0-9_-]{12,}"
)
_FIXED_SHAPES = re.compile(
    _EDGE + r"(?:AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35})(?![A-Za-z0-9_-])"
)
_JWT = re.compile(_EDGE + r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]+")

# Identifiers such as "iriis_session_idle_seconds" or "sk-learn-wrapper" share
# a prefix with keys; issued keys are random, so they all but always hold a
# digit or a capital letter, and plain identifiers do not.
_IDENTIFIER_LIKE = re.compile(r"[a-z_-]+")

# Dict keys (tool arguments) whose values are secrets. "key" alone is not one:
# tools use it for ordinary names ({"key": "favourite_colour"}).
_SECRET_FIELD = re.compile(
    r"(?i)^(?:[a-z0-9]+[_-])*(?:password|passwd|pwd|secret|token|pin|authorization|cookie|credentials?|"
    r"api[_-]?key|apikey|(?:private|secret|access|signing|encryption|client)[_-]?key)$"
)


# Placeholders that say a field is unset; hiding them would only hide that.
_NOT_A_SECRET: frozenset[str] = frozenset({"", "null", "none", "true", "false"})


def _redact_pem(match: re.Match[str]) -> str:
    end = match.group(4) or ""
    return f"{match.group(1)}\n{REDACTED}\n{end}" if end else f"{match.group(1)}\n{REDACTED}"


def _redact_auth(match: re.Match[str]) -> str:
    value = match.group(3)
    if REDACTED in value:
        return match.group(0)
    quote = value[0] if value[0] in "\"'" else ""
    return f"{match.group(1)}{quote}{REDACTED}{quote}"


def _redact_labelled(match: re.Match[str]) -> str:
    value = match.group("value")
    if value.strip("\"'").lower() in _NOT_A_SECRET:
        return match.group(0)
    # A bare value after a quoted label is a JSON number or literal; quoting
    # the placeholder keeps the document parseable.
    quote = value[0] if value[0] in "\"'" else match.group(1)
    start = match.start("value") - match.start()
    return f"{match.group(0)[:start]}{quote}{REDACTED}{quote}"


def _redact_prefixed(match: re.Match[str]) -> str:
    token = match.group(0)
    return token if _IDENTIFIER_LIKE.fullmatch(token) else REDACTED


def redact_secrets(text: str) -> str:
    """``text`` with secret values replaced by ``[redacted]``; idempotent."""
    if not text:
        return text
    # Order matters: multi-line keys first, whole header values before the
    # "Bearer" inside them, labelled values before bare shapes so that
    # "api_key=sk-..." becomes one "[redacted]".
    text = _PEM.sub(_redact_pem, text)
    text = _AUTH_HEADER.sub(_redact_auth, text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    text = _LABELLED.sub(_redact_labelled, text)
    text = _JWT.sub(REDACTED, text)
    text = _FIXED_SHAPES.sub(REDACTED, text)
    return _PREFIXED_KEY.sub(_redact_prefixed, text)


def is_secret_field(name: str) -> bool:
    """True when a dict key names a secret ("password", "x-api-key", "access_token")."""
    return bool(_SECRET_FIELD.match(name.strip()))


def redact_value(obj: Any) -> Any:
    """A copy of ``obj`` with secrets removed from every string inside it.

    Values under secret-looking keys are replaced whole (whatever their type,
    so a numeric PIN goes too); other strings go through ``redact_secrets``.
    ``None`` and empty strings stay, since they reveal nothing and show the
    field was blank.
    """
    if isinstance(obj, str):
        return redact_secrets(obj)
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if isinstance(key, str) and is_secret_field(key) and value not in (None, ""):
                out[key] = REDACTED
            else:
                out[key] = redact_value(value)
        return out
    if isinstance(obj, list):
        return [redact_value(item) for item in obj]
    if isinstance(obj, tuple):
        return tuple(redact_value(item) for item in obj)
    return obj
