"""Answering a proposed action: the owner's route here, and `answer_confirmation`, which the
devices' ask route shares.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

from fastapi import APIRouter

from actors.common.errors import ErrorInfo
from actors.session.confirmations import refusal_status
from serve_apps.http.bodies import SESSION_ID, ConfirmationAnswer
from serve_apps.http.context import GatewayContext
from serve_apps.http.deps import GatewayDep, Owner
from serve_apps.http.errors import ApiError, error_responses
from serve_apps.http.models import ConfirmationResult

router = APIRouter()


def confirmation_session(confirmation_id: str) -> str:
    """The conversation a confirmation id belongs to (ids are "<session>.<random>").
    Raises ApiError 404 `not_found` for an id of any other shape."""
    session_id = confirmation_id.rsplit(".", 1)[0]
    if "." not in confirmation_id or not SESSION_ID.match(session_id):
        raise ApiError(404, "not_found", "No pending confirmation with that id.")
    return session_id


async def answer_confirmation(gw: GatewayContext, confirmation_id: str, approve: bool,
                              pin: str | None) -> ConfirmationResult:
    """Yes or no to a pending confirmation; the session actor's refusals become API errors
    (404 `not_found`, or the PIN problem's own status and message)."""
    handle = await gw.conversations.open(confirmation_session(confirmation_id), create=False)
    answer = await handle.answer_confirmation.remote(confirmation_id, approve, pin)
    if isinstance(answer, ErrorInfo):
        raise ApiError(refusal_status(answer), answer.code, answer.message)
    return ConfirmationResult.model_validate(answer.model_dump())


@router.post("/confirmations/{confirmation_id}", responses=error_responses(409))
async def confirm(confirmation_id: str, body: ConfirmationAnswer, _owner: Owner, gw: GatewayDep) -> ConfirmationResult:
    return await answer_confirmation(gw, confirmation_id, body.approve, body.pin)
