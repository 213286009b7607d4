"""The integer ids and cursors routes take, bounded to what the store can hold.

A route writes `item_id: RowId` (a path parameter) or `after: Cursor = 0` (a query parameter);
a body field that is an id is `RowIdField` (from `actors.common.ids`, which models outside
the routes share). Out of range (0, negative, past 2^31 - 1) is a 422 in the usual error
shape, rendered by `serve_apps.http.errors`, and the OpenAPI document shows the bounds. Ids
are never negative or zero: the store's rows count from 1.

No `from __future__ import annotations`: FastAPI reads these types at import time.
"""

from typing import Annotated

from fastapi import Path, Query

from actors.common.ids import MAX_ROW_ID, RowIdField

RowId = Annotated[int, Path(ge=1, le=MAX_ROW_ID, description="A stored row's id: 1 to 2^31 - 1.")]
Cursor = Annotated[int, Query(ge=0, le=MAX_ROW_ID,
                              description="Only rows with a larger id: 0 (from the start) to 2^31 - 1.")]

__all__ = ["MAX_ROW_ID", "Cursor", "RowId", "RowIdField"]
