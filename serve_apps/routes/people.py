"""People: web sign-in with email and password, a person's own conversations, and the
admin's list of people.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

from fastapi import APIRouter
from pydantic import BaseModel, Field

from actors.devices import people
from actors.devices import repository as repo
from serve_apps.http.deps import GatewayDep, Manager, Person, StoreDep
from serve_apps.http.errors import ApiError, error_responses
from serve_apps.http.ids import RowId, SessionId
from serve_apps.http.models import (
    MessageList,
    PersonList,
    PersonPublic,
    PersonRemoved,
    SessionList,
    SignedIn,
    page,
)
from serve_apps.routes.chat import stored_messages
from serve_apps.routes.device_calls import close_device

router = APIRouter()


class SignIn(BaseModel):
    email: str = Field(min_length=3, max_length=254)
    password: str = Field(min_length=1, max_length=200)


@router.post("/auth/login", responses=error_responses(401))
async def login(body: SignIn, store: StoreDep) -> SignedIn:
    found = await people.sign_in(store, body.email, body.password)
    if found is None:
        raise ApiError(401, "unauthorized", "That email and password do not match.")
    person, token = found
    return SignedIn(token=token, person=PersonPublic.model_validate(person.public()))


@router.get("/me")
async def me(who: Person, store: StoreDep) -> PersonPublic:
    person = await people.get_person(store, who.person_id)
    return PersonPublic.model_validate(person.public() if person else {"id": who.person_id, "role": who.role})


@router.get("/me/sessions")
async def my_sessions(who: Person, store: StoreDep) -> SessionList:
    """The signed-in person's own conversations (never anyone else's)."""
    return page(SessionList, (c.model_dump(exclude={"summary_upto"})
                              for c in await repo.person_conversations(store, who.person_id)))


@router.get("/me/sessions/{session_id}/messages")
async def my_messages(who: Person, session_id: SessionId, gw: GatewayDep) -> MessageList:
    """One of the person's own conversations, whole (their device's output included: it is theirs)."""
    person, _device = await repo.conversation_person(gw.store, session_id)
    if person != who.person_id:
        # Someone else's conversation looks exactly like one that does not exist.
        raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
    return await stored_messages(gw, session_id, reader_is_person=True)


@router.get("/admin/people")
async def list_people(_manager: Manager, store: StoreDep) -> PersonList:
    return page(PersonList, (p.public() for p in await people.list_people(store)))


@router.delete("/admin/people/{person_id}", responses=error_responses(409))
async def remove_person(person_id: RowId, manager: Manager, store: StoreDep) -> PersonRemoved:
    """Removing a person revokes every device of theirs and closes it (4403)."""
    devices = await repo.list_devices(store, person_id)
    try:
        removed = await people.remove_person(store, person_id, actor=f"person:{manager.person_id}")
    except ValueError as exc:
        raise ApiError(409, "conflict", str(exc)) from None
    if not removed:
        raise ApiError(404, "not_found", "No person with that id.")
    for device in devices:
        await close_device(device.id, revoked=True)
    return PersonRemoved(id=person_id, removed=True, devices_revoked=len(devices))
