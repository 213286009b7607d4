"""The voice socket's wire: what a client sends, what the server sends back, close codes,
limits, and the binary audio frame.

Upstream: binary frames are PCM16 little-endian mono at 16 kHz (the client's microphone, in
pieces of at most MAX_UPSTREAM_FRAME bytes); text frames are JSON messages, one of `ClientMessage`.
Downstream: JSON events (`VoiceReady`, `Transcript`, the turn's own events `sentence`, `tool`,
`confirm`, `done`, then `Spoken` when its audio is all out, `error` in the one error shape)
interleaved with binary audio frames: an 8-byte header (sequence number, then the sentence's
position in the turn, both uint32 little-endian) followed by PCM16 little-endian mono at
`OUTPUT_RATE`. Sequence numbers increase by one per frame for the life of the socket.
"""

from __future__ import annotations

import struct
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from actors.common.errors import IriisError

INPUT_RATE = 16_000
OUTPUT_RATE = 22_050
FRAME_SECONDS = 0.2
FRAME_SAMPLES = int(OUTPUT_RATE * FRAME_SECONDS)
HEADER = struct.Struct("<II")
MAX_UPSTREAM_FRAME = 64 * 1024          # one binary message from the microphone
MAX_TEXT_FRAME = 16 * 1024              # one JSON message
MAX_UTTERANCE_SECONDS = 30.0            # longer speech is refused, not cut
MIN_UTTERANCE_SECONDS = 0.2             # shorter is a click, not words
MAX_TURN_TEXT = 10_000
IDLE_SECONDS = 120.0
QUIET_RMS = 0.02                        # a 20 ms piece at most this loud is not speech (the page's SPEECH_RMS)

CLOSE_UNAUTHORIZED = 4401   # no key, a bad one, or a revoked device
CLOSE_FORBIDDEN = 4403      # a caller that may not use voice
CLOSE_PROTOCOL = 4400       # a message that breaks this protocol
CLOSE_NO_SESSION = 4404     # session_id that is not the caller's conversation
CLOSE_IDLE = 4408           # nothing received for IDLE_SECONDS
CLOSE_TOO_BIG = 1009        # a message over its limit
CLOSE_BUSY = 1013           # try again later: too many new conversations waiting for a process


# -- upstream --------------------------------------------------------------------------------

class EndOfUtterance(BaseModel):
    """The client's voice activity detection says the person stopped talking."""
    type: Literal["end"]


class Pause(BaseModel):
    """The client's voice detection hears quiet after speech: the utterance may be ending, so
    speech to text may start on what came so far. Only `end` ends it; speech after the pause
    (louder than QUIET_RMS) makes the server transcribe the whole utterance again at `end`."""
    type: Literal["pause"]


class SayText(BaseModel):
    """A turn from text instead of speech (a typed line, or `[call answered] <reason>`)."""
    type: Literal["text"]
    text: str = Field(min_length=1, max_length=MAX_TURN_TEXT)


class Interrupt(BaseModel):
    """Barge-in: stop the reply; `heard_seq` is the last audio frame played (None: none)."""
    type: Literal["interrupt"]
    heard_seq: int | None = Field(default=None, ge=0)


class Played(BaseModel):
    """Progress: the last audio frame played so far (what counts if the socket drops)."""
    type: Literal["played"]
    seq: int = Field(ge=0)


class ConfirmAnswer(BaseModel):
    """Yes or no to a `confirm` event, with the PIN when it asked for one."""
    type: Literal["confirm"]
    id: str = Field(min_length=1, max_length=200)
    approve: bool
    pin: str | None = Field(default=None, max_length=64)


class Ping(BaseModel):
    type: Literal["ping"]


ClientMessage = Annotated[EndOfUtterance | Pause | SayText | Interrupt | Played | ConfirmAnswer | Ping,
                          Field(discriminator="type")]
_CLIENT: TypeAdapter[Any] = TypeAdapter(ClientMessage)


class BadMessage(IriisError, ValueError):
    code = "bad_message"
    pass


def parse_client(text: str) -> EndOfUtterance | SayText | Interrupt | Played | ConfirmAnswer | Ping:
    """One client text frame as its message. Raises BadMessage (a short reason)."""
    try:
        return _CLIENT.validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("function-after",))
        raise BadMessage(f"not a voice message ({where or 'type'}: {first.get('msg', 'invalid')})") from None


# -- downstream ------------------------------------------------------------------------------

class _Event(BaseModel):
    type: str

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class AudioFormat(BaseModel):
    encoding: Literal["pcm16le"] = "pcm16le"
    rate: int = OUTPUT_RATE
    channels: int = 1
    header_bytes: int = HEADER.size
    frame_seconds: float = FRAME_SECONDS


class VoiceReady(_Event):
    """First on the socket: the conversation, and the audio both ways."""
    type: Literal["ready"] = "ready"
    session_id: str
    input_rate: int = INPUT_RATE
    audio: AudioFormat = Field(default_factory=AudioFormat)
    max_utterance_seconds: float = MAX_UTTERANCE_SECONDS


class Transcript(_Event):
    """What the person said, as the speech to text heard it."""
    type: Literal["transcript"] = "transcript"
    text: str
    engine: str


class Spoken(_Event):
    """The turn's audio is all sent: `last_seq` is its last frame (None: it said nothing)."""
    type: Literal["spoken"] = "spoken"
    last_seq: int | None
    frames: int
    # Where the time went (seconds): speech to text, the model's first sentence, its speech,
    # and from the end of the utterance to the first frame sent.
    timings: dict[str, float | bool | None] = Field(default_factory=dict)


class Pong(_Event):
    type: Literal["pong"] = "pong"


class VoiceError(_Event):
    """The one error shape: a stable code and one sentence for a person."""
    type: Literal["error"] = "error"
    code: str
    message: str


def turn_event_wire(event: Any) -> dict[str, Any]:
    """A turn event (actors.session.events) as this socket sends it: its type and data."""
    return {"type": event.type, **event.data}


def audio_frame(seq: int, position: int, pcm: bytes) -> bytes:
    """One downstream audio frame: the header, then the samples."""
    return HEADER.pack(seq, position) + pcm


def read_audio_frame(frame: bytes) -> tuple[int, int, bytes]:
    """(seq, sentence position, PCM) of a downstream frame (clients and tests)."""
    seq, position = HEADER.unpack_from(frame)
    return seq, position, frame[HEADER.size:]
