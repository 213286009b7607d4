"""Request bodies and ids more than one resource accepts."""

import re

from pydantic import BaseModel, Field

from serve_apps.http.errors import ApiError


class ConfirmationAnswer(BaseModel):
    """Yes or no to a proposed action; `pin` when the action needs the person's PIN."""

    approve: bool
    pin: str | None = Field(default=None, max_length=32)


SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_session_id(session_id: str) -> None:
    """Raises ApiError 404 `session_not_found` for anything that cannot be a session id."""
    if not SESSION_ID.match(session_id):
        raise ApiError(404, "session_not_found", "No such session.")
