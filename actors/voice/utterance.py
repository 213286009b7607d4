"""The socket's conversation state: listening, transcribing, responding, and what each input
means in each state.

The microphone's PCM collects into the current utterance; the client's end-of-utterance
takes it for speech to text. A `pause` (quiet heard after speech) lets speech to text start
early on what came so far; at `end`, that early transcript stands only if nothing but quiet
came after it (`early_transcript_holds`). The client says when the person cuts in (`interrupt`, with
the last frame it played); an utterance or a typed line that ends while a reply still runs
interrupts it first, so the session never queues a turn behind one the person talked over. No Ray, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from actors.common.errors import IriisError
from actors.voice.audio import is_quiet
from actors.voice.protocol import INPUT_RATE, MAX_UTTERANCE_SECONDS, MIN_UTTERANCE_SECONDS, QUIET_RMS


class Phase(str, Enum):
    LISTENING = "listening"        # waiting for speech (or collecting it)
    TRANSCRIBING = "transcribing"  # speech to text is running on the last utterance
    RESPONDING = "responding"      # a turn runs and/or its audio is going out


class Refusal(IriisError, ValueError):
    """An input that cannot be taken now; `code` is the error event's code."""

    code = "refused"   # each raise names its own

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


MAX_UTTERANCE_BYTES = int(MAX_UTTERANCE_SECONDS * INPUT_RATE) * 2
MIN_UTTERANCE_BYTES = int(MIN_UTTERANCE_SECONDS * INPUT_RATE) * 2


@dataclass
class Utterance:
    phase: Phase = Phase.LISTENING
    buffer: bytearray = field(default_factory=bytearray)
    overflowed: bool = False
    # Bytes of the utterance when the last `pause` came (what an early transcript covers),
    # and that length as it stood when `end` took the utterance.
    paused_at: int | None = None
    ended_paused_at: int | None = None

    def audio(self, pcm: bytes) -> None:
        """Microphone PCM (the client sends it while its voice detection hears speech). Past
        the utterance limit the rest is dropped and `end` refuses it."""
        if len(self.buffer) + len(pcm) > MAX_UTTERANCE_BYTES:
            self.overflowed = True
        elif not self.overflowed:
            self.buffer += pcm

    @property
    def responding(self) -> bool:
        """A reply is running: new input interrupts it first."""
        return self.phase is Phase.RESPONDING

    def pause(self) -> bytes | None:
        """Quiet after speech: the PCM so far, to transcribe before `end` comes (None when
        there is not enough speech yet, it is past the limit, or the last one is still being
        transcribed)."""
        if self.phase is Phase.TRANSCRIBING or self.overflowed or len(self.buffer) < MIN_UTTERANCE_BYTES:
            return None
        self.paused_at = len(self.buffer)
        return bytes(self.buffer)

    def end(self) -> bytes:
        """End of utterance: the PCM to transcribe (the buffer starts afresh). Raises Refusal."""
        pcm, overflowed = bytes(self.buffer), self.overflowed
        self.buffer.clear()
        self.overflowed = False
        self.ended_paused_at, self.paused_at = self.paused_at, None
        if self.phase is Phase.TRANSCRIBING:
            raise Refusal("busy", "Still transcribing what you said before; speak again in a moment.")
        if overflowed:
            raise Refusal("utterance_too_long",
                          f"An utterance is at most {MAX_UTTERANCE_SECONDS:g} seconds; say it in parts.")
        if len(pcm) < MIN_UTTERANCE_BYTES:
            raise Refusal("no_speech", "Nothing to transcribe: the utterance was too short.")
        self.phase = Phase.TRANSCRIBING
        return pcm

    def heard(self) -> None:
        """Speech to text finished: listening, until a turn starts (`text`)."""
        if self.phase is Phase.TRANSCRIBING:
            self.phase = Phase.LISTENING

    def text(self) -> None:
        """A typed turn (interrupt a running reply first). Raises Refusal while transcribing."""
        if self.phase is Phase.TRANSCRIBING:
            raise Refusal("busy", "Still transcribing what you said; send it again in a moment.")
        self.phase = Phase.RESPONDING

    def interrupted(self) -> None:
        """Barge-in handled: listening again, keeping any speech already collected."""
        if self.phase is Phase.RESPONDING:
            self.phase = Phase.LISTENING

    def finished(self) -> None:
        """The reply is done and its audio all sent."""
        if self.phase is Phase.RESPONDING:
            self.phase = Phase.LISTENING


def early_transcript_holds(pcm: bytes, paused_at: int | None) -> bool:
    """Whether a transcript of `pcm[:paused_at]` (made at a pause) is the transcript of the
    whole utterance `pcm`: only quiet came after the pause."""
    if paused_at is None or paused_at > len(pcm):
        return False
    return is_quiet(pcm[paused_at:], INPUT_RATE, QUIET_RMS)
