"""Who is calling: a person signed in (owner key or web session), or a device by its token.

Owner keys sign in as the owner (person 1), so every existing integration keeps working.
Device tokens (`irad_`) are refused with 403 wherever a signed-in person is needed.
"""

from typing import Any

from fastapi import Request
from pydantic import BaseModel

from actors.devices import people
from actors.devices import repository as repo
from actors.devices.tokens import DEVICE_TOKEN_PREFIX, SESSION_TOKEN_PREFIX
from serve_apps.http.errors import ApiError, gateway_of
from serve_apps.http.auth import key_matches, presented_key

DEVICE_FORBIDDEN = "A device token cannot use this route; sign in as the person instead."


class Principal(BaseModel):
    person_id: int
    role: str
    device_id: int | None = None


async def signed_in(request: Request) -> tuple[Any, Principal]:
    """The gateway and the signed-in person; 403 for a device token, 401 for anything else."""
    gw = gateway_of(request)
    key = presented_key(request)
    if key and key.startswith(DEVICE_TOKEN_PREFIX):
        raise ApiError(403, "forbidden", DEVICE_FORBIDDEN)
    if key_matches(key, gw.hashes):
        return gw, Principal(person_id=people.OWNER_ID, role="owner")
    if key and key.startswith(SESSION_TOKEN_PREFIX):
        person = await people.session_person(gw.store, key)
        if person is not None:
            return gw, Principal(person_id=person.id, role=person.role)
    raise ApiError(401, "unauthorized", "Sign in first (Authorization: Bearer <key or session token>).")


async def person_or_device(request: Request) -> tuple[Any, Principal]:
    """For the routes a device may also use (ask, confirmations): either kind of caller."""
    gw = gateway_of(request)
    key = presented_key(request)
    if key and key.startswith(DEVICE_TOKEN_PREFIX):
        device = await repo.device_by_token(gw.store, key)
        if device is None:
            raise ApiError(401, "unauthorized", "That device token is not valid (revoked or unknown).")
        person = await people.get_person(gw.store, device.person_id)
        return gw, Principal(person_id=device.person_id, role=person.role if person else "member",
                             device_id=device.id)
    return await signed_in(request)


def require_manager(principal: Principal) -> None:
    if principal.role not in ("owner", "admin"):
        raise ApiError(403, "forbidden", "Only an owner or an admin can do that.")
