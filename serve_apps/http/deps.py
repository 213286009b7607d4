"""Route dependencies that read like prose:

    async def list_sessions(_owner: Owner, store: StoreDep) -> SessionList: ...

`Owner` is the owner key (or the page's cookie); `Person` any signed-in person; `PersonOrDevice`
also a paired device's token. They answer exactly as before: a device token gets 403
`forbidden` where it may not go, anything else unsigned 401 `unauthorized`.

They are coroutines, so FastAPI runs them on the event loop rather than in its thread pool.

No `from __future__ import annotations`: FastAPI reads these types at import time.
"""

from typing import Annotated

from fastapi import Depends, Request
from starlette.requests import HTTPConnection

from actors.devices.people import OWNER_ID
from actors.store.store import Store
from serve_apps.http.context import GatewayContext
from serve_apps.http.people_auth import (
    Principal,
    person_or_device,
    require_manager,
    signed_in,
)


def context_of(connection: HTTPConnection) -> GatewayContext:
    """The context of the Gateway replica serving this request or socket (set in its
    constructor). Routes take `GatewayDep`; sockets call this."""
    return connection.app.state.gateway


async def gateway_context(request: Request) -> GatewayContext:
    return context_of(request)


GatewayDep = Annotated[GatewayContext, Depends(gateway_context)]


async def store_of(gw: GatewayDep) -> Store:
    return gw.store


StoreDep = Annotated[Store, Depends(store_of)]


async def require_owner(gw: GatewayDep, request: Request) -> Principal:
    """Raises ApiError 403 for a device token, 401 for anything but an owner key."""
    await gw.refresh_keys()  # a no-op unless the stored keys are a few seconds old
    gw.owner(request)
    return Principal(person_id=OWNER_ID, role="owner")


async def require_person(gw: GatewayDep, request: Request) -> Principal:
    await gw.refresh_keys()
    return await signed_in(gw, request)


async def require_person_or_device(gw: GatewayDep, request: Request) -> Principal:
    return await person_or_device(gw, request)


async def require_manager_person(who: Annotated[Principal, Depends(require_person)]) -> Principal:
    require_manager(who)
    return who


Owner = Annotated[Principal, Depends(require_owner)]
Person = Annotated[Principal, Depends(require_person)]
PersonOrDevice = Annotated[Principal, Depends(require_person_or_device)]
Manager = Annotated[Principal, Depends(require_manager_person)]
