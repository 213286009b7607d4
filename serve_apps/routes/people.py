"""People: web sign-in with email and password, a person's own conversations, and the
admin's list of people."""

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from actors.devices import people
from actors.devices import repository as repo
from serve_apps.http.errors import ApiError
from serve_apps.routes.device_calls import close_device
from serve_apps.http.people_auth import require_manager, signed_in

router = APIRouter()


class SignIn(BaseModel):
    email: str = Field(min_length=3, max_length=254)
    password: str = Field(min_length=1, max_length=200)


@router.post("/v1/auth/login")
async def login(body: SignIn, request: Request) -> dict[str, Any]:
    from serve_apps.http.errors import gateway_of

    gw = gateway_of(request)
    found = await people.sign_in(gw.store, body.email, body.password)
    if found is None:
        raise ApiError(401, "unauthorized", "That email and password do not match.")
    person, token = found
    return {"token": token, "person": person.public()}


@router.get("/v1/me")
async def me(request: Request) -> dict[str, Any]:
    gw, who = await signed_in(request)
    person = await people.get_person(gw.store, who.person_id)
    return person.public() if person else {"id": who.person_id, "role": who.role}


@router.get("/v1/me/sessions")
async def my_sessions(request: Request) -> dict[str, Any]:
    """The signed-in person's own conversations (never anyone else's)."""
    gw, who = await signed_in(request)
    data = [c.model_dump(exclude={"summary_upto"}) for c in await repo.person_conversations(gw.store, who.person_id)]
    return {"data": data, "count": len(data)}


@router.get("/v1/me/sessions/{session_id}/messages")
async def my_messages(session_id: str, request: Request) -> dict[str, Any]:
    """One of the person's own conversations, whole (their device's output included: it is theirs)."""
    gw, who = await signed_in(request)
    gw._check_id(session_id)
    person, _device = await repo.conversation_person(gw.store, session_id)
    if person != who.person_id:
        # Someone else's conversation looks exactly like one that does not exist.
        raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
    return await gw.stored_messages(session_id, reader_is_person=True)


@router.get("/v1/admin/people")
async def list_people(request: Request) -> dict[str, Any]:
    gw, who = await signed_in(request)
    require_manager(who)
    data = [p.public() for p in await people.list_people(gw.store)]
    return {"data": data, "count": len(data)}


@router.delete("/v1/admin/people/{person_id}")
async def remove_person(person_id: int, request: Request) -> dict[str, Any]:
    """Removing a person revokes every device of theirs and closes it (4403)."""
    gw, who = await signed_in(request)
    require_manager(who)
    devices = await repo.list_devices(gw.store, person_id)
    try:
        removed = await people.remove_person(gw.store, person_id, actor=f"person:{who.person_id}")
    except ValueError as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    if not removed:
        raise ApiError(404, "not_found", "No person with that id.")
    for device in devices:
        await close_device(device.id, revoked=True)
    return {"id": person_id, "removed": True, "devices_revoked": len(devices)}
