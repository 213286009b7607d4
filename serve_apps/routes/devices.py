"""Personal devices over HTTP: pairing codes and pairing, the person's devices, revoking,
switching skills on and off, and a device asking the agent for its person.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

import base64
import io
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field
from ray.actor import ActorHandle

from actors.common.pins import pin_problem
from actors.devices import people
from actors.devices import repository as repo
from actors.devices.grants import switch_allowed
from actors.devices.lockout import PairLockout
from actors.devices.protocol import KINDS, SKILL_NAME
from actors.devices.tokens import pair_link
from actors.session.events import Done, TurnError
from actors.store.models import new_id
from actors.store.store import Store
from serve_apps.http.bodies import SESSION_ID, ConfirmationAnswer
from serve_apps.http.context import GatewayContext
from serve_apps.http.deps import GatewayDep, Manager, Person, PersonOrDevice, StoreDep
from serve_apps.http.errors import ApiError, error_responses
from serve_apps.http.ids import RowId
from serve_apps.http.models import (
    AskReply,
    ConfirmationResult,
    DeviceList,
    DeviceRevoked,
    DeviceSkills,
    Paired,
    PairingCode,
    page,
)
from serve_apps.http.openapi import EventStream
from serve_apps.http.people_auth import Principal
from serve_apps.routes.confirmations import answer_confirmation, confirmation_session
from serve_apps.routes.device_calls import (
    close_device,
    device_limits,
    device_settings,
    device_state,
    regrant,
)

router = APIRouter()
ASSISTANT_NAME = "Iriis"

Kind = Literal["mac", "windows", "linux", "android", "ios"]
assert set(KINDS) == {"mac", "windows", "linux", "android", "ios"}


class CodeCreate(BaseModel):
    kind: Kind
    label: str = Field(min_length=1, max_length=100)
    skills: list[str] = Field(default_factory=list, max_length=40)
    pin: str | None = Field(default=None, max_length=32)


class PairRequest(BaseModel):
    code: str = Field(min_length=1, max_length=200)
    kind: Kind


class SkillSwitch(BaseModel):
    on: bool
    pin: str | None = Field(default=None, max_length=32)


class AskRequest(BaseModel):
    message: str = Field(min_length=1, max_length=100_000)
    session_id: str | None = Field(default=None, pattern=SESSION_ID.pattern)


async def _pin_ok(store: Store, person_id: int, pin: str | None) -> None:
    """Raises ApiError with the PIN problem's status, code and message, unless `pin` is right."""
    code = await people.check_pin(store, person_id, pin)
    if code:
        problem = pin_problem(code)
        raise ApiError(problem.status, problem.code, problem.message)


def _skills(values: list[str]) -> list[str]:
    for skill in values:
        if not SKILL_NAME.match(skill):
            raise ApiError(422, "invalid_request", f"skills: {skill!r} is not a skill name")
    return sorted(set(values))


def qr_png(text: str) -> bytes:
    import qrcode  # lazy: qrcode loads Pillow; only a pairing QR needs it

    image = qrcode.make(text)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _base_url(request: Request) -> str:
    configured = device_settings().public_url
    return configured or str(request.base_url).rstrip("/")


# -- pairing ----------------------------------------------------------------------------------------

@router.post("/me/devices/codes", status_code=201, responses=error_responses(409))
async def make_code(body: CodeCreate, request: Request, who: Person, store: StoreDep) -> PairingCode:
    """A one-use code for 10 minutes. A new device is a new grant, so it needs the PIN."""
    await _pin_ok(store, who.person_id, body.pin)
    limits = device_limits()
    code, expires = await repo.make_code(store, who.person_id, body.kind, body.label, _skills(body.skills),
                                         limits.code_seconds, uses=1)
    link = pair_link(_base_url(request), code)
    return PairingCode(code=code, link=link, expires=expires, kind=body.kind, label=body.label,
                       skills=_skills(body.skills), qr_png=base64.b64encode(qr_png(link)).decode())


def _address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


@router.post("/devices/pair", responses=error_responses(410, 429))
async def pair(body: PairRequest, request: Request, store: StoreDep) -> Paired:
    """Spend a code for a device token. Five wrong codes from one address lock it out (429)."""
    limits = device_limits()
    lockout = PairLockout(store, limits.pair_failures, limits.pair_window_seconds)
    address = _address(request)
    retry = await lockout.retry_after(address)
    if retry is not None:
        raise ApiError(429, "too_many_attempts", f"Too many wrong codes from this address; try again in {retry} s.",
                       headers={"Retry-After": str(retry)})
    outcome = await repo.pair(store, body.code, body.kind)
    if outcome.error == "kind":
        raise ApiError(422, "wrong_kind", "That code is for another kind of device.")
    if outcome.error or outcome.device is None or outcome.token is None:
        await lockout.missed(address)
        raise ApiError(410, "code_gone", "That code is used, expired or unknown; make a new one.")
    device = outcome.device
    return Paired(device_id=device.id, token=outcome.token, kind=device.kind, label=device.label,
                  skills=device.skills, name=ASSISTANT_NAME, websocket="/v1/devices/ws")


# -- the person's devices --------------------------------------------------------------------------

@router.get("/me/devices")
async def my_devices(who: Person, store: StoreDep) -> DeviceList:
    data = []
    for device in await repo.list_devices(store, who.person_id):
        state = await device_state(device.id)
        data.append(device.public(online=bool(state and state["online"])))
    return page(DeviceList, data)


async def _revoke(store: Store, device_id: int, actor: str) -> DeviceRevoked:
    if not await repo.revoke(store, device_id, actor):
        raise ApiError(404, "not_found", "No device with that id.")
    closed = await close_device(device_id, revoked=True)
    return DeviceRevoked(id=device_id, revoked=True, closed=closed)


@router.delete("/me/devices/{device_id}")
async def revoke_mine(device_id: RowId, who: Person, store: StoreDep) -> DeviceRevoked:
    device = await repo.get_device(store, device_id)
    if device is None or device.person_id != who.person_id or device.revoked:
        raise ApiError(404, "not_found", "No device of yours with that id.")
    return await _revoke(store, device_id, f"person:{who.person_id}")


@router.get("/admin/devices")
async def admin_devices(_manager: Manager, store: StoreDep) -> DeviceList:
    # Labels, kinds and skills only: what a device returned is never shown here.
    return page(DeviceList, (d.public() for d in await repo.list_devices(store)))


@router.delete("/admin/devices/{device_id}")
async def admin_revoke(device_id: RowId, manager: Manager, store: StoreDep) -> DeviceRevoked:
    return await _revoke(store, device_id, f"person:{manager.person_id}")


@router.put("/me/devices/{device_id}/skills/{skill}", responses=error_responses(409))
async def switch_skill(device_id: RowId, skill: str, body: SkillSwitch, who: Person, store: StoreDep) -> DeviceSkills:
    """On: the device's own person, with their PIN. Off: no PIN; an owner or admin may switch
    off anyone's, never on."""
    device = await repo.get_device(store, device_id)
    if device is None or device.revoked:
        raise ApiError(404, "not_found", "No device with that id.")
    if device.person_id != who.person_id and who.role not in ("owner", "admin"):
        raise ApiError(404, "not_found", "No device of yours with that id.")
    if not SKILL_NAME.match(skill):
        raise ApiError(422, "invalid_request", "That is not a skill name.")
    refusal = switch_allowed(who.person_id, who.role, device.person_id, body.on)
    if refusal:
        raise ApiError(403, "forbidden", refusal)
    if body.on:
        await _pin_ok(store, who.person_id, body.pin)
    skills = set(device.skills)
    skills = skills | {skill} if body.on else skills - {skill}
    await repo.set_skills(store, device_id, sorted(skills))
    await regrant(device_id)
    return DeviceSkills(id=device_id, skills=sorted(skills))


# -- a device (or a person) asks the agent --------------------------------------------------------

async def _ask_session(gw: GatewayContext, who: Principal, session_id: str | None) -> tuple[str, Any]:
    if session_id:
        person, _ = await repo.conversation_person(gw.store, session_id)
        if person != who.person_id:
            raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
        sid = session_id
    else:
        sid = new_id()
    await repo.claim_conversation(gw.store, sid, who.person_id, who.device_id)
    return sid, await gw.conversations.open(sid, create=session_id is None)


@router.post("/ask/stream", response_class=EventStream, responses=error_responses(404))
async def ask_stream(body: AskRequest, who: PersonOrDevice, gw: GatewayDep) -> StreamingResponse:
    """The turn as server-sent events, like /v1/chat, for the caller's person."""
    sid, handle = await _ask_session(gw, who, body.session_id)

    def start(actor: ActorHandle) -> Any:
        return actor.chat.options(num_returns="streaming").remote(body.message, attended=True)

    handle, events, first = await gw.conversations.begin(sid, handle, start)
    return gw.conversations.stream(handle, sid, events, first=first)


@router.post("/ask", responses=error_responses(404))
async def ask(body: AskRequest, who: PersonOrDevice, gw: GatewayDep) -> AskReply:
    """One turn, the whole reply at once. Nobody can confirm mid-request here, so confirm-tier
    actions are declined; use /v1/ask/stream to be asked."""
    sid, handle = await _ask_session(gw, who, body.session_id)
    reply: dict[str, Any] = {"session_id": sid}

    def start(actor: ActorHandle) -> Any:
        return actor.chat.options(num_returns="streaming").remote(body.message, attended=False)

    async for event in gw.conversations.whole(sid, handle, start):
        if isinstance(event, Done):
            reply["reply"] = event.text
        elif isinstance(event, TurnError):
            reply["error"] = event.error.model_dump()
    return AskReply.model_validate(reply)


@router.post("/ask/confirmations/{confirmation_id}", responses=error_responses(403, 409))
async def ask_confirm(confirmation_id: str, body: ConfirmationAnswer, who: PersonOrDevice,
                      gw: GatewayDep) -> ConfirmationResult:
    """Yes or no to a proposed action in one of the caller's person's conversations."""
    person, _ = await repo.conversation_person(gw.store, confirmation_session(confirmation_id))
    if person != who.person_id:
        raise ApiError(404, "not_found", "No pending confirmation with that id.")
    return await answer_confirmation(gw, confirmation_id, body.approve, body.pin)
