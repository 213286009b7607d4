"""Keep secrets out of log output.

Tokens reach logs through access lines (``/ws?token=...``), client debug
output (``Authorization`` headers) and exception messages that echo a URL or
key. Masking at the logging layer covers all of them without trusting every
call site.
"""

from __future__ import annotations

import logging
import re

# Loggers that own handlers of their own (uvicorn sets propagate=False), so a
# filter on the root handlers alone would never see their records.
MASKED_LOGGERS: tuple[str, ...] = ("uvicorn", "uvicorn.access", "uvicorn.error", "ray.serve", "httpx")

# uvicorn's AccessFormatter unpacks record.args itself, so for these records
# the args must survive; each string argument is masked in place instead.
_KEEP_ARGS_LOGGERS: frozenset[str] = frozenset({"uvicorn.access"})

_MASK = "***"
_EXC_FORMATTER = logging.Formatter()
_PREFIX_KEEP = 4

# Header value up to the end of the line or the closing quote of a dict/JSON
# repr; the whole value goes, since the scheme alone says little.
_AUTH_HEADER = re.compile(r"""(?i)(\bauthorization['"]?\s*[:=]\s*['"]?)([^'"\r\n,}]+)""")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9\-._~+/]+=*")
_PARAM_NAMES = r"(?:api[_-]?key|access[_-]?token|refresh[_-]?token|token|key|secret|password)"
# The look-behind keeps "monkey=" or "tokens_used=" from matching.
_QUERY_PARAM = re.compile(rf"(?i)(?<![\w-])({_PARAM_NAMES}=)([^&\s'\"#,;)]+)")
# The same names as quoted JSON / dict keys: "api_key": "value".
_QUOTED_FIELD = re.compile(rf"""(?i)(['"]{_PARAM_NAMES}['"]\s*:\s*['"])([^'"]+)""")
# Bare keys by their well-known prefixes; the look-behind stops "task-..."
# from being read as "sk-...".
_API_KEY = re.compile(r"(?<![A-Za-z0-9_-])(?:sk-|irad_|iriis_)[A-Za-z0-9_-]{16,}")


def _mask_keep_prefix(match: re.Match[str]) -> str:
    return match.group(0)[:_PREFIX_KEEP] + _MASK


def mask_secrets(text: str) -> str:
    # Order matters: whole header values first, so "Authorization: Bearer x"
    # becomes one mask, and prefixed keys last, so a key already replaced by
    # "***" is not masked a second time.
    text = _AUTH_HEADER.sub(lambda m: m.group(1) + _MASK, text)
    text = _BEARER.sub(lambda m: m.group(1) + _MASK, text)
    text = _QUERY_PARAM.sub(lambda m: m.group(1) + _MASK, text)
    text = _QUOTED_FIELD.sub(lambda m: m.group(1) + _MASK, text)
    text = _API_KEY.sub(_mask_keep_prefix, text)
    return text


class MaskingFilter(logging.Filter):
    """Mask secrets in a record before any handler formats it."""

    def filter(self, record: logging.LogRecord) -> bool:
        # A record can pass several filters (logger and handler); skipping a
        # second pass keeps the cost to one regex sweep per record.
        if getattr(record, "_iriis_masked", False):
            return True
        if record.name in _KEEP_ARGS_LOGGERS and isinstance(record.args, tuple):
            record.msg = mask_secrets(str(record.msg))
            record.args = tuple(mask_secrets(a) if isinstance(a, str) else a for a in record.args)
        else:
            try:
                message = record.getMessage()
            except Exception:
                # A broken format string: mask what we can and let logging
                # report the formatting error as it normally would.
                record.msg = mask_secrets(str(record.msg))
            else:
                # Objects in args (headers dicts, URLs) only reveal secrets
                # once formatted, so format once and keep the masked text.
                record.msg = mask_secrets(message)
                record.args = None
        if record.exc_info and not record.exc_text:
            # Formatter reuses exc_text when present, so filling it here makes
            # the masked traceback the one that is printed.
            record.exc_text = _EXC_FORMATTER.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_secrets(record.exc_text)
        if record.stack_info:
            record.stack_info = mask_secrets(record.stack_info)
        setattr(record, "_iriis_masked", True)
        return True


def _add_filter(target: logging.Logger | logging.Handler) -> None:
    if not any(isinstance(f, MaskingFilter) for f in target.filters):
        target.addFilter(MaskingFilter())


def install_log_masking() -> None:
    """Attach MaskingFilter where records are emitted; safe to call again.

    Handlers added after this call are not covered, so call it once logging
    is configured (and again after reconfiguring; repeats add nothing).
    """
    root = logging.getLogger()
    loggers: list[logging.Logger] = [root, *(logging.getLogger(name) for name in MASKED_LOGGERS)]
    for logger in loggers:
        _add_filter(logger)
        for handler in logger.handlers:
            _add_filter(handler)
