"""What the owner's camera client sends as text: one small class per kind, discriminated on
`type`. Each field carries its own limit, so a valid message is a bounded one."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from actors.common.errors import ErrorInfo
from actors.common.ids import RowIdField

MAX_AUDIO_B64 = 4_000_000  # about 3 MB of audio: a spoken question, not a recording


class Ask(BaseModel):
    type: Literal["ask"]
    text: str = Field(min_length=1, max_length=2000)


class Goal(BaseModel):
    type: Literal["goal"]
    text: str = Field(max_length=300)


class UseProcedure(BaseModel):
    type: Literal["procedure"]
    id: RowIdField | None = None


class Coach(BaseModel):
    type: Literal["coach"]
    on: bool
    interval: float | None = Field(default=None, ge=2, le=600)


class Review(BaseModel):
    type: Literal["review"]
    seconds: float = Field(default=90, gt=0, le=90)
    question: str = Field(default="", max_length=500)
    file_id: RowIdField | None = None


class Confirm(BaseModel):
    type: Literal["confirm"]
    id: str = Field(min_length=1, max_length=200)
    approve: bool
    pin: str | None = Field(default=None, max_length=32)


class Signal(BaseModel):
    """WebRTC signalling (offer, answer, ICE candidate); a viewer sends only these."""

    model_config = {"extra": "allow"}
    type: Literal["webrtc"]
    to: str | None = Field(default=None, max_length=64)


class Ping(BaseModel):
    type: Literal["ping"]


class Audio(BaseModel):
    """A spoken question: base64 audio (webm, ogg, wav, mp3, m4a...), transcribed server-side."""

    type: Literal["audio"]
    data: str = Field(min_length=1, max_length=MAX_AUDIO_B64)
    mime: str = Field(default="audio/webm", max_length=60)


ClientMessage = Annotated[Ask | Goal | UseProcedure | Coach | Review | Confirm | Signal | Ping | Audio,
                          Field(discriminator="type")]
_MESSAGES: TypeAdapter[Any] = TypeAdapter(ClientMessage)


def parse_message(text: str) -> ClientMessage | ErrorInfo:
    """The message, or a `bad_message` error naming the first field that is wrong."""
    try:
        return _MESSAGES.validate_json(text)
    except ValidationError as exc:
        err = exc.errors()[0]
        return ErrorInfo(code="bad_message", message=f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}")
