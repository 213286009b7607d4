"""Sentences to audio, one by one, while the model is still writing.

`SpeechQueue` takes the turn's sentences as they arrive, synthesises them in order on one
worker task and sends each sentence's frames as soon as its audio is ready, so the first
sentence is heard while later ones are still being written or synthesised. A barge-in
`stop`s it: what is queued is dropped and nothing more is sent. Pure asyncio: the synthesiser
and the sender are callables (the speech actor and the socket in the server, fakes in tests).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from actors.voice.audio import frames_of
from actors.voice.heard import PlayLog

# (text) -> PCM16 mono at the socket's output rate
Synthesize = Callable[[str], Awaitable[bytes]]
# (seq, sentence position, PCM) -> sent
SendFrame = Callable[[int, int, bytes], Awaitable[None]]


@dataclass
class SpeechTimings:
    """When the first sentence arrived, was synthesised and went out (monotonic seconds)."""

    first_sentence: float | None = None
    first_tts_started: float | None = None
    first_tts_done: float | None = None
    first_frame: float | None = None
    tts_seconds: list[float] = field(default_factory=list)


class SpeechQueue:
    def __init__(self, synthesize: Synthesize, send: SendFrame, log: PlayLog, frame_samples: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._synthesize = synthesize
        self._send = send
        self.log = log
        self.frame_samples = frame_samples
        self._clock = clock
        self._queue: asyncio.Queue[tuple[int, str] | None] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self.stopped = False
        self.frames = 0
        self.last_seq: int | None = None
        self.timings = SpeechTimings()
        self.failures: list[BaseException] = []

    def add(self, text: str) -> int:
        """A sentence of the turn, in order; returns its position. Starts the worker."""
        position = self.log.sentence(text)
        if self.timings.first_sentence is None:
            self.timings.first_sentence = self._clock()
        if not self.stopped:
            self._queue.put_nowait((position, text))
            if self._worker is None:
                self._worker = asyncio.get_running_loop().create_task(self._run())
        return position

    def finish(self) -> None:
        """No more sentences will come this turn."""
        self._queue.put_nowait(None)
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run())

    async def drained(self) -> None:
        """Wait until every sentence added before `finish` is sent (or the queue stopped)."""
        if self._worker is not None:
            await asyncio.gather(self._worker, return_exceptions=True)

    def stop(self) -> None:
        """Barge-in: drop what is queued, stop the worker, send nothing more."""
        self.stopped = True
        if self._worker is not None:
            self._worker.cancel()

    async def _run(self) -> None:
        while not self.stopped:
            item = await self._queue.get()
            if item is None:
                return
            position, text = item
            first = self.timings.first_tts_started is None
            started = self._clock()
            if first:
                self.timings.first_tts_started = started
            try:
                pcm = await self._synthesize(text)
            except Exception as exc:  # noqa: BLE001 - one sentence unspoken, the rest still go
                self.failures.append(exc)
                continue
            done = self._clock()
            self.timings.tts_seconds.append(done - started)
            if first:
                self.timings.first_tts_done = done
            pieces = frames_of(pcm, self.frame_samples)
            total = len(pcm) // 2
            end = 0
            for piece in pieces:
                if self.stopped:
                    return
                end += len(piece) // 2
                seq = self.log.frame(position, end, total)
                await self._send(seq, position, piece)
                self.frames += 1
                self.last_seq = seq
                if self.timings.first_frame is None:
                    self.timings.first_frame = self._clock()
