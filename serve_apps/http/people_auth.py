"""Who is calling: a person signed in (owner key or web session), or a device by its token.

Owner keys sign in as the owner (person 1), so every existing integration keeps working.
Device tokens (`irad_`) are refused with 403 wherever a signed-in person is needed.
"""

from pydantic import BaseModel
from starlette.requests import HTTPConnection

from actors.devices import people
from actors.devices import repository as repo
from actors.devices.tokens import DEVICE_TOKEN_PREFIX, SESSION_TOKEN_PREFIX
from serve_apps.http.auth import presented_key
from serve_apps.http.context import GatewayContext
from serve_apps.http.errors import ApiError

DEVICE_FORBIDDEN = "A device token cannot use this route; sign in as the person instead."


class Principal(BaseModel):
    person_id: int
    role: str
    device_id: int | None = None


async def signed_in(gw: GatewayContext, request: HTTPConnection) -> Principal:
    """The signed-in person. Raises ApiError 403 `forbidden` for a device token, 401
    `unauthorized` for anything else that is not an owner key or a live web session."""
    key = presented_key(request)
    if key and key.startswith(DEVICE_TOKEN_PREFIX):
        raise ApiError(403, "forbidden", DEVICE_FORBIDDEN)
    if gw.owner_key(key):
        return Principal(person_id=people.OWNER_ID, role="owner")
    if key and key.startswith(SESSION_TOKEN_PREFIX):
        person = await people.session_person(gw.store, key)
        if person is not None:
            return Principal(person_id=person.id, role=person.role)
    raise ApiError(401, "unauthorized", "Sign in first (Authorization: Bearer <key or session token>).")


async def person_or_device(gw: GatewayContext, request: HTTPConnection) -> Principal:
    """For the routes a device may also use (ask, confirmations): either kind of caller.
    Raises ApiError 401 for a revoked or unknown device token, else as `signed_in`."""
    key = presented_key(request)
    if key and key.startswith(DEVICE_TOKEN_PREFIX):
        device = await repo.device_by_token(gw.store, key)
        if device is None:
            raise ApiError(401, "unauthorized", "That device token is not valid (revoked or unknown).")
        person = await people.get_person(gw.store, device.person_id)
        return Principal(person_id=device.person_id, role=person.role if person else "member",
                         device_id=device.id)
    return await signed_in(gw, request)


def require_manager(principal: Principal) -> None:
    """Raises ApiError 403 `forbidden` unless an owner or an admin."""
    if principal.role not in ("owner", "admin"):
        raise ApiError(403, "forbidden", "Only an owner or an admin can do that.")
