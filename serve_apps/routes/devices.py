"""Personal devices over HTTP: pairing codes and pairing, the person's devices, revoking,
switching skills on and off, and a device asking the agent for its person."""

import base64
import io
import time
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from actors.devices import people
from actors.devices import repository as repo
from actors.devices.grants import switch_allowed
from actors.devices.protocol import KINDS, SKILL_NAME
from actors.devices.tokens import pair_link
from actors.store.models import new_id
from serve_apps.http.errors import ApiError, error_body, gateway_of
from serve_apps.routes.device_calls import close_device, device_limits, device_settings, device_state, regrant
from serve_apps.http.people_auth import person_or_device, require_manager, signed_in

router = APIRouter()
ASSISTANT_NAME = "Iriis"
PIN_ERRORS = {"pin_required": 422, "pin_not_set": 409, "wrong_pin": 403}
PIN_MESSAGES = {"pin_required": "This needs your action PIN.",
                "pin_not_set": "No action PIN is set for you; the operator sets one with `iriis pin set --user`.",
                "wrong_pin": "That PIN is not right."}

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
    session_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]{1,64}$")


class ConfirmAnswer(BaseModel):
    approve: bool
    pin: str | None = Field(default=None, max_length=32)


async def _pin_ok(gw: Any, person_id: int, pin: str | None) -> None:
    problem = await people.check_pin(gw.store, person_id, pin)
    if problem:
        raise ApiError(PIN_ERRORS[problem], problem, PIN_MESSAGES[problem])


def _skills(values: list[str]) -> list[str]:
    for skill in values:
        if not SKILL_NAME.match(skill):
            raise ApiError(422, "invalid_request", f"skills: {skill!r} is not a skill name")
    return sorted(set(values))


def qr_png(text: str) -> bytes:
    import qrcode

    image = qrcode.make(text)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _base_url(request: Request) -> str:
    configured = device_settings().public_url
    return configured or str(request.base_url).rstrip("/")


# -- pairing ----------------------------------------------------------------------------------------

@router.post("/v1/me/devices/codes", status_code=201)
async def make_code(body: CodeCreate, request: Request) -> dict[str, Any]:
    """A one-use code for 10 minutes. A new device is a new grant, so it needs the PIN."""
    gw, who = await signed_in(request)
    await _pin_ok(gw, who.person_id, body.pin)
    limits = device_limits()
    code, expires = await repo.make_code(gw.store, who.person_id, body.kind, body.label, _skills(body.skills),
                                         limits.code_seconds, uses=1)
    link = pair_link(_base_url(request), code)
    return {"code": code, "link": link, "expires": expires, "kind": body.kind, "label": body.label,
            "skills": _skills(body.skills), "qr_png": base64.b64encode(qr_png(link)).decode()}


def _address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


@router.post("/v1/devices/pair")
async def pair(body: PairRequest, request: Request) -> JSONResponse:
    gw = gateway_of(request)
    limits = device_limits()
    address = _address(request)
    blocked, last = await repo.recent_failures(gw.store, "block:" + address, limits.pair_window_seconds)
    if blocked:
        retry = max(1, int(limits.pair_window_seconds - (time.time() - (last or 0))))
        return JSONResponse(error_body("too_many_attempts", "Too many wrong codes from this address; "
                                                            f"try again in {retry} s."),
                            status_code=429, headers={"Retry-After": str(retry)})
    outcome = await repo.pair(gw.store, body.code, body.kind)
    if outcome.error == "kind":
        raise ApiError(422, "wrong_kind", "That code is for another kind of device.")
    if outcome.error or outcome.device is None or outcome.token is None:
        await repo.add_failure(gw.store, address, limits.pair_window_seconds)
        count, _ = await repo.recent_failures(gw.store, address, limits.pair_window_seconds)
        if count >= limits.pair_failures:
            # Five wrong codes: this address waits 15 minutes from now.
            await repo.add_failure(gw.store, "block:" + address, limits.pair_window_seconds)
        raise ApiError(410, "code_gone", "That code is used, expired or unknown; make a new one.")
    device = outcome.device
    return JSONResponse({"device_id": device.id, "token": outcome.token, "kind": device.kind,
                         "label": device.label, "skills": device.skills, "name": ASSISTANT_NAME,
                         "websocket": "/v1/devices/ws"})


# -- the person's devices --------------------------------------------------------------------------

@router.get("/v1/me/devices")
async def my_devices(request: Request) -> dict[str, Any]:
    gw, who = await signed_in(request)
    data = []
    for device in await repo.list_devices(gw.store, who.person_id):
        state = await device_state(device.id)
        data.append(device.public(online=bool(state and state["online"])))
    return {"data": data, "count": len(data)}


async def _revoke(gw: Any, device_id: int, actor: str) -> dict[str, Any]:
    if not await repo.revoke(gw.store, device_id, actor):
        raise ApiError(404, "not_found", "No device with that id.")
    closed = await close_device(device_id, revoked=True)
    return {"id": device_id, "revoked": True, "closed": closed}


@router.delete("/v1/me/devices/{device_id}")
async def revoke_mine(device_id: int, request: Request) -> dict[str, Any]:
    gw, who = await signed_in(request)
    device = await repo.get_device(gw.store, device_id)
    if device is None or device.person_id != who.person_id or device.revoked:
        raise ApiError(404, "not_found", "No device of yours with that id.")
    return await _revoke(gw, device_id, f"person:{who.person_id}")


@router.get("/v1/admin/devices")
async def admin_devices(request: Request) -> dict[str, Any]:
    gw, who = await signed_in(request)
    require_manager(who)
    # Labels, kinds and skills only: what a device returned is never shown here.
    data = [d.public() for d in await repo.list_devices(gw.store)]
    return {"data": data, "count": len(data)}


@router.delete("/v1/admin/devices/{device_id}")
async def admin_revoke(device_id: int, request: Request) -> dict[str, Any]:
    gw, who = await signed_in(request)
    require_manager(who)
    return await _revoke(gw, device_id, f"person:{who.person_id}")


@router.put("/v1/me/devices/{device_id}/skills/{skill}")
async def switch_skill(device_id: int, skill: str, body: SkillSwitch, request: Request) -> dict[str, Any]:
    """On: the device's own person, with their PIN. Off: no PIN; an owner or admin may switch
    off anyone's, never on."""
    gw, who = await signed_in(request)
    device = await repo.get_device(gw.store, device_id)
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
        await _pin_ok(gw, who.person_id, body.pin)
    skills = set(device.skills)
    skills = skills | {skill} if body.on else skills - {skill}
    await repo.set_skills(gw.store, device_id, sorted(skills))
    await regrant(device_id)
    return {"id": device_id, "skills": sorted(skills)}


# -- a device (or a person) asks the agent --------------------------------------------------------

async def _ask_session(gw: Any, who: Any, session_id: str | None) -> tuple[str, Any]:
    if session_id:
        person, _ = await repo.conversation_person(gw.store, session_id)
        if person != who.person_id:
            raise ApiError(404, "session_not_found", f"No session {session_id!r}.")
        sid = session_id
    else:
        sid = new_id()
    await repo.claim_conversation(gw.store, sid, who.person_id, who.device_id)
    return sid, await gw._session(sid, create=session_id is None)


@router.post("/v1/ask/stream")
async def ask_stream(body: AskRequest, request: Request) -> StreamingResponse:
    """The turn as server-sent events, like /v1/chat, for the caller's person."""
    gw, who = await person_or_device(request)
    sid, handle = await _ask_session(gw, who, body.session_id)
    events = handle.chat.options(num_returns="streaming").remote(body.message, attended=True)
    return gw._sse(handle, sid, events)


@router.post("/v1/ask")
async def ask(body: AskRequest, request: Request) -> dict[str, Any]:
    """One turn, the whole reply at once. Nobody can confirm mid-request here, so confirm-tier
    actions are declined; use /v1/ask/stream to be asked."""
    gw, who = await person_or_device(request)
    sid, handle = await _ask_session(gw, who, body.session_id)
    reply: dict[str, Any] = {"session_id": sid}
    async for ref in handle.chat.options(num_returns="streaming").remote(body.message, attended=False):
        event = await ref
        if event["type"] == "done":
            reply["reply"] = event["data"]["text"]
        elif event["type"] == "error":
            reply["error"] = event["data"]
    return reply


@router.post("/v1/ask/confirmations/{confirmation_id}")
async def ask_confirm(confirmation_id: str, body: ConfirmAnswer, request: Request) -> dict[str, Any]:
    """Yes or no to a proposed action in one of the caller's person's conversations."""
    gw, who = await person_or_device(request)
    person, _ = await repo.conversation_person(gw.store, gw.confirmation_session(confirmation_id))
    if person != who.person_id:
        raise ApiError(404, "not_found", "No pending confirmation with that id.")
    return await gw.answer_confirmation(confirmation_id, body.approve, body.pin)
