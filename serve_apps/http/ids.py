"""The integer ids and cursors routes take, bounded to what the store can hold.

A route writes `item_id: RowId` (a path parameter) or `after: Cursor = 0` (a query parameter),
and `session_id: SessionId` for a conversation's id (not an integer: see `SessionId`);
a body field that is an id is `RowIdField` (from `actors.common.ids`, which models outside
the routes share). Out of range (0, negative, past 2^31 - 1) is a 422 in the usual error
shape, rendered by `serve_apps.http.errors`, and the OpenAPI document shows the bounds. Ids
are never negative or zero: the store's rows count from 1.

No `from __future__ import annotations`: FastAPI reads these types at import time.
"""

from typing import Annotated

from fastapi import Depends, Path, Query

from actors.common.ids import MAX_ROW_ID, RowIdField
from serve_apps.http.bodies import SESSION_ID
from serve_apps.http.errors import ApiError

RowId = Annotated[int, Path(ge=1, le=MAX_ROW_ID, description="A stored row's id: 1 to 2^31 - 1.")]
Cursor = Annotated[int, Query(ge=0, le=MAX_ROW_ID,
                              description="Only rows with a larger id: 0 (from the start) to 2^31 - 1.")]


def _session_id(session_id: Annotated[str, Path(
        description="A conversation's id: 1 to 64 letters, digits, `_` or `-`.")]) -> str:
    # Anything else cannot name a conversation: the same 404 as an id nobody has.
    if not SESSION_ID.match(session_id):
        raise ApiError(404, "session_not_found", "No such session.")
    return session_id


# A route writes `session_id: SessionId` after its auth parameter, so a caller without a key
# hears 401 before anything about the id.
SessionId = Annotated[str, Depends(_session_id)]

__all__ = ["MAX_ROW_ID", "Cursor", "RowId", "RowIdField", "SessionId"]
