"""The owner key as the page's cookie (setting it, dropping it, checking a key), the owner's
keys (listed by label and last use, added, revoked, all without a restart) and the PIN.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import time

from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from actors.common.hashing import hash_pin, verify_pin
from actors.devices import people
from actors.devices.people import OWNER_PIN_KV
from serve_apps.http.auth import (
    COOKIE_NAME,
    KEY_LAST_USED_KV,
    MAX_LABEL,
    create_key,
    load_key_records,
    presented_key,
    public_key_record,
    revoke_key,
)
from serve_apps.http.deps import GatewayDep, Owner, StoreDep
from serve_apps.http.errors import ApiError, error_responses
from serve_apps.http.ids import RowId
from serve_apps.http.models import AuthCheck, Deleted, OwnerKeyCreated, OwnerKeyList, page

router = APIRouter()
COOKIE_SECONDS = 30 * 24 * 3600


class NewKey(BaseModel):
    label: str = Field(default="", max_length=MAX_LABEL)


class PinChange(BaseModel):
    pin: str = Field(min_length=4, max_length=12, pattern=r"^[0-9]+$")
    # The PIN in use, when one is set.
    current: str | None = Field(default=None, max_length=32)


@router.post("/auth/cookie", status_code=204, response_model=None, responses=error_responses(401))
async def set_cookie(request: Request, gw: GatewayDep) -> Response:
    key = presented_key(request)
    await gw.refresh_keys()
    if not gw.owner_key(key):
        raise ApiError(401, "unauthorized", "That key was not accepted.")
    response = Response(status_code=204)
    response.set_cookie(COOKIE_NAME, key or "", httponly=True, samesite="strict",
                        max_age=COOKIE_SECONDS, path="/", secure=request.url.scheme == "https")
    return response


@router.post("/auth/logout", status_code=204, response_model=None)
async def logout(request: Request, store: StoreDep) -> Response:
    """Signs out: the page's owner cookie is dropped, and a person's sign-in token presented
    here (POST /v1/auth/login's) stops working at once, on every replica."""
    token = presented_key(request, cookie=False)
    if token:
        await people.sign_out(store, token)
    response = Response(status_code=204)
    response.delete_cookie(COOKIE_NAME, path="/")
    return response


@router.get("/auth/check")
async def auth_check(_owner: Owner) -> AuthCheck:
    return AuthCheck(ok=True)


@router.get("/keys")
async def list_keys(request: Request, _owner: Owner, gw: GatewayDep) -> OwnerKeyList:
    await gw.refresh_keys(force=True)
    records = await load_key_records(gw.store)
    used = {**(await gw.store.get_kv(KEY_LAST_USED_KV, {}) or {}), **gw.keys.used}
    current = presented_key(request)
    stored = {r["hash"] for r in records}
    # The fixed ones minus this run's internal key: what IRIIS_OWNER_KEYS holds.
    environment = max(0, len(gw.keys.fixed - stored) - 1)
    return page(OwnerKeyList, (public_key_record(r, used, current) for r in records), from_environment=environment)


@router.post("/keys", status_code=201)
async def new_key(body: NewKey, _owner: Owner, gw: GatewayDep) -> OwnerKeyCreated:
    """A new owner key, shown this once; it works at once."""
    key, record = await create_key(gw.store, body.label, time.time())
    await gw.refresh_keys(force=True)
    return OwnerKeyCreated(key=key, **public_key_record(record, {}, None))


@router.delete("/keys/{key_id}")
async def delete_key(key_id: RowId, request: Request, _owner: Owner, gw: GatewayDep) -> Deleted:
    """Revoke a stored key; it stops working within a few seconds on every replica."""
    if not await revoke_key(gw.store, key_id):
        raise ApiError(404, "not_found", "No stored key with that id.")
    await gw.refresh_keys(force=True)
    return Deleted(id=key_id, deleted=True)


@router.post("/auth/pin", status_code=204, response_model=None)
async def change_pin(body: PinChange, _owner: Owner, gw: GatewayDep) -> Response:
    """Set or change the owner's action PIN; changing one needs the one in use."""
    stored = await gw.store.get_kv(OWNER_PIN_KV)
    if stored and not (body.current and verify_pin(body.current, stored)):
        raise ApiError(403, "wrong_pin", "The current PIN is not right.")
    await gw.store.set_kv(OWNER_PIN_KV, hash_pin(body.pin))
    return Response(status_code=204)
