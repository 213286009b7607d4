"""Integers a client sends as text (ids, cursors, ports, declared lengths): the largest row id
the store holds, and reading plain ASCII digits without ever raising.

`str.isdigit()` alone is not enough: it accepts `²` and other Unicode digits that `int()`
refuses, and `int()` refuses strings of more than 4300 digits. A Python int past 2^63 - 1 makes
the SQLite driver raise OverflowError, so every id that reaches a query is bounded first.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

# SQLite's INTEGER and PostgreSQL's BIGINT: the largest id (or cursor) a query can compare.
MAX_ROW_ID = 2**63 - 1
# A model field that is a stored row's id (the routes' path and query forms: serve_apps.http.ids).
RowIdField = Annotated[int, Field(ge=1, le=MAX_ROW_ID)]


def ascii_digits(text: str | None) -> bool:
    """True for a non-empty string of ASCII digits only (no sign, space, underscore or `²`)."""
    return text is not None and text.isascii() and text.isdigit()


def ascii_int(text: str | None, maximum: int = MAX_ROW_ID) -> int | None:
    """`text` as an int when it is ASCII digits only and at most `maximum`; None otherwise."""
    if text is None or not ascii_digits(text):
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(maximum)):
        return None
    value = int(digits)
    return value if value <= maximum else None


def over_cap(declared: str | None, cap: int) -> bool:
    """Whether a declared Content-Length is a plain number over `cap`. Anything that is not
    plain digits is left to the byte count, which refuses a body past `cap` as it streams."""
    return ascii_digits(declared) and ascii_int(declared, cap) is None
