"""A camera stream or a device connection holds a place under the cap on live processes while
its socket is open (actors/session/admission.py): the registry makes room by letting idle
conversations go, and when everything alive is busy the socket is closed with 1013 (try again
later) and a reason that says when.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from actors.common.errors import IriisError
from actors.session.pool import registry
from actors.session.start_queue import SessionsBusy

log = logging.getLogger(__name__)

CLOSE_TRY_LATER = 1013


class NoRoom(IriisError):
    """No place for this socket now; `reason` fits a WebSocket close frame (123 bytes)."""

    code = "overloaded"

    def __init__(self, retry_after: int) -> None:
        self.retry_after = retry_after
        self.reason = f"server full: every place is busy; retry in {retry_after} s"
        super().__init__(self.reason)


@asynccontextmanager
async def place(gw: Any, key: str) -> AsyncIterator[None]:
    """Hold a place for `key` ("camera:<id>", "device:<id>") for the block; NoRoom if none."""
    pool = await registry(gw.config.session, gw.agent)
    holder = secrets.token_hex(6)
    try:
        await pool.claim.remote(key, holder, gw.config.session.start_wait)
    except SessionsBusy as exc:   # SessionsFull (its text came through Ray inside a traceback)
        raise NoRoom(exc.retry_after) from None
    try:
        yield
    finally:
        try:
            await pool.unclaim.remote(key, holder)
        except Exception:  # noqa: BLE001 - the registry's sweep frees it later
            log.warning("could not give back the place of %s", key)
