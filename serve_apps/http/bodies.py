"""Request bodies and ids more than one resource accepts."""

import re

from pydantic import BaseModel, Field


class ConfirmationAnswer(BaseModel):
    """Yes or no to a proposed action; `pin` when the action needs the person's PIN."""

    approve: bool
    pin: str | None = Field(default=None, max_length=32)


SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

