"""Pending confirmations of one conversation, and the PIN rule for answering them. No Ray.

A confirmation id is "<session>.<random>", so any gateway replica finds the conversation it
belongs to. A confirmation waits at most `timeout` seconds; an answer resolves it once; a turn
that finishes declines whatever it left pending.

Refusals are one exception family (`SessionRefusal`, an `IriisError`); the actor turns them
into `ErrorInfo` values at its Ray boundary, since plain data crosses Ray more predictably
than custom exceptions.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from actors.common.errors import ErrorInfo, IriisError
from actors.common.pins import PIN_PROBLEMS, pin_problem
from actors.devices.people import check_pin
from actors.devices.repository import conversation_person
from actors.session.events import ConfirmAsked, ConfirmRequest
from actors.store.store import Store

CONFIRM_TIMEOUT = 600.0
NOT_FOUND = "No pending confirmation with that id (answered, expired or unknown)."

# Checks a person's PIN: None when right, else a code of `PIN_PROBLEMS`.
PinCheck = Callable[[int, "str | None"], Awaitable["str | None"]]


class SessionRefusal(IriisError):
    """The session actor will not do what was asked; `code` says why."""

    code = "refused"


class ConfirmationNotFound(SessionRefusal):
    code = "not_found"

    def __init__(self, message: str = NOT_FOUND) -> None:
        super().__init__(message)


class PinRefused(SessionRefusal):
    """The action needs a PIN that was missing, not set, or wrong (`actors.common.pins`)."""

    def __init__(self, code: str) -> None:
        super().__init__(pin_problem(code).message, code)


REFUSAL_STATUS: dict[str, int] = {"not_found": 404, **{c: p.status for c, p in PIN_PROBLEMS.items()}}


def refusal_status(info: ErrorInfo) -> int:
    """The HTTP status a refusal maps to."""
    return REFUSAL_STATUS.get(info.code, 400)


class ConfirmationAnswer(BaseModel):
    id: str
    status: Literal["approved", "declined"]


@dataclass
class Pending:
    id: str
    turn_id: str
    ask: ConfirmRequest
    future: asyncio.Future[bool] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def public(self) -> dict[str, Any]:
        """As the session's state lists it."""
        out = {"id": self.id, "turn_id": self.turn_id, "tool": self.ask.tool,
               "question": self.ask.question, "needs_pin": self.ask.needs_pin}
        if self.ask.sources:
            out.update(reason=self.ask.reason, sources=self.ask.sources)
        return out


def pin_needed(ask: ConfirmRequest, approve: bool) -> bool:
    """Only a yes to a PIN-tier action needs a PIN; a no never does."""
    return approve and ask.needs_pin


async def require_pin(person: int, pin: str | None, check: PinCheck) -> None:
    """The PIN rule: the PIN is the conversation's own person's. A member approves with
    theirs, and nobody else's PIN (the owner's included) approves an action in their name.

    Raises PinRefused with the problem `check` found."""
    problem = await check(person, pin)
    if problem:
        raise PinRefused(problem)


class ConfirmationBook:
    def __init__(self, session_id: str, timeout: float = CONFIRM_TIMEOUT,
                 token: Callable[[], str] = lambda: secrets.token_hex(6)) -> None:
        self.session_id = session_id
        self.timeout = timeout
        self.token = token
        self.pending: dict[str, Pending] = {}

    def __len__(self) -> int:
        return len(self.pending)

    def open(self, turn_id: str, ask: ConfirmRequest) -> Pending:
        pending = Pending(f"{self.session_id}.{self.token()}", turn_id, ask)
        self.pending[pending.id] = pending
        return pending

    def event(self, pending: Pending) -> ConfirmAsked:
        ask = pending.ask
        return ConfirmAsked(id=pending.id, question=ask.question, tool=ask.tool, arguments=ask.arguments,
                            needs_pin=ask.needs_pin, reason=ask.reason, expires_in=self.timeout,
                            sources=ask.sources or None)

    async def wait(self, pending: Pending) -> bool:
        """The answer; False once `timeout` passes unanswered. The confirmation is gone after."""
        try:
            return await asyncio.wait_for(asyncio.shield(pending.future), self.timeout)
        except TimeoutError:
            return False
        finally:
            self.pending.pop(pending.id, None)

    def find(self, confirmation_id: str) -> Pending:
        """The open confirmation; raises ConfirmationNotFound if answered, expired or unknown."""
        pending = self.pending.get(confirmation_id)
        if pending is None or pending.future.done():
            raise ConfirmationNotFound()
        return pending

    def resolve(self, confirmation_id: str, approve: bool) -> ConfirmationAnswer:
        """Answer it once; raises ConfirmationNotFound if it was answered meanwhile."""
        pending = self.find(confirmation_id)
        pending.future.set_result(approve)
        return ConfirmationAnswer(id=confirmation_id, status="approved" if approve else "declined")

    def decline_turn(self, turn_id: str) -> int:
        """A finished turn's pending confirmations are declined; how many were."""
        declined = 0
        for pending in list(self.pending.values()):
            if pending.turn_id == turn_id and not pending.future.done():
                pending.future.set_result(False)
                declined += 1
        return declined

    def listing(self) -> list[dict[str, Any]]:
        return [p.public() for p in self.pending.values()]


def store_pins(store: Store, session_id: str) -> tuple[Callable[[], Awaitable[int]], PinCheck]:
    """The PIN rule's two questions answered from the store: whose conversation it is, and
    whether a PIN is that person's."""
    async def person() -> int:
        return (await conversation_person(store, session_id))[0]

    async def check(person_id: int, pin: str | None) -> str | None:
        return await check_pin(store, person_id, pin)

    return person, check


async def answer(book: ConfirmationBook, confirmation_id: str, approve: bool, pin: str | None,
                 person_of: Callable[[], Awaitable[int]], check: PinCheck) -> ConfirmationAnswer:
    """Resolve a confirmation under the PIN rule. Raises SessionRefusal (not found, PIN)."""
    pending = book.find(confirmation_id)
    if pin_needed(pending.ask, approve):
        await require_pin(await person_of(), pin, check)
    return book.resolve(confirmation_id, approve)
