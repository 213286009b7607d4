"""Integers a client sends as text (ids, cursors, ports, declared lengths): the largest row id
the store holds, and reading plain ASCII digits without ever raising.

`str.isdigit()` alone is not enough: it accepts `²` and other Unicode digits that `int()`
refuses, and `int()` refuses strings of more than 4300 digits. An int past what the id column
holds makes the driver raise (SQLite's OverflowError past 2^63 - 1, asyncpg's past 2^31 - 1 for
PostgreSQL's INTEGER), so every id that reaches a query is bounded first.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

# The id columns are INTEGER (actors/store/schema.py): 32 bits on PostgreSQL, 64 on SQLite. The
# smaller is the largest id (or cursor) a query can compare on either store.
MAX_ROW_ID = 2**31 - 1
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
