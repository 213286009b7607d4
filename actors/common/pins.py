"""The answers a PIN check gives, worded once: the code, the HTTP status it maps to, and what
the person is told. The session actor, the camera and the device routes all speak these."""

from __future__ import annotations

from pydantic import BaseModel


class PinProblem(BaseModel):
    code: str
    status: int
    message: str


PIN_PROBLEMS: dict[str, PinProblem] = {p.code: p for p in (
    PinProblem(code="pin_required", status=422, message="This action needs your PIN."),
    PinProblem(code="pin_not_set", status=409,
               message="No action PIN is set for you; the operator sets one with `iriis pin set` "
                       "(or `iriis pin set --user EMAIL`) on the server."),
    PinProblem(code="wrong_pin", status=403, message="That PIN is not right."),
)}


def pin_problem(code: str) -> PinProblem:
    """The problem for a code `check_pin` returned."""
    return PIN_PROBLEMS[code]
