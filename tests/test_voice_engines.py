"""The speech engines with the real offline models (no network, no hub): a sentence spoken by
piper comes back as its words from faster-whisper, through the speech service and through the
cluster's one speech actor; hosted text to speech follows the router's rules and falls back
to the offline voice."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from actors.providers.failover import LocalRouter
from actors.providers.router_state import RouterState
from actors.providers.speech import synthesize_any
from actors.providers.types import ProviderError
from actors.providers.vision_http import route_entries
from actors.settings import ProviderConfig
from actors.voice.audio import pcm_to_float, resample_pcm, seconds, wav_bytes
from actors.voice.engines import OFFLINE_STT, OFFLINE_TTS, SpeechService
from actors.voice.protocol import INPUT_RATE, OUTPUT_RATE
from tests.server_proc import free_port
from tests.speech_check import heard_as, words

SENTENCE = "Please remind me to water the plants tomorrow morning."


@pytest.fixture(scope="module")
def service() -> SpeechService:
    return SpeechService(environ={})


async def test_piper_speech_transcribes_back_to_its_words(service: SpeechService) -> None:
    said = await service.synthesize(SENTENCE)
    assert said.engine == OFFLINE_TTS
    audio = pcm_to_float(said.pcm)
    assert 1.5 < seconds(said.pcm, OUTPUT_RATE) < 8 and float(np.abs(audio).max()) > 0.1
    heard = await service.transcribe(resample_pcm(said.pcm, OUTPUT_RATE, INPUT_RATE), INPUT_RATE)
    assert heard.engine == OFFLINE_STT
    assert heard_as(heard.text, SENTENCE), heard.text


async def test_silence_transcribes_to_no_words(service: SpeechService) -> None:
    heard = await service.transcribe(b"\x00\x00" * INPUT_RATE, INPUT_RATE)
    assert words(heard.text) == [] or len(words(heard.text)) <= 2  # Whisper may say "you" to silence


# -- hosted text to speech -----------------------------------------------------------------------

class HostedTTS:
    """An OpenAI-compatible /audio/speech on a real socket: per-model answers."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[int, dict[str, str]]] = {}
        self.calls: list[dict] = []
        self.port = free_port()

    async def speech(self, request: Request) -> Response:
        body = await request.json()
        self.calls.append(body)
        status, headers = self.answers.get(body["model"], (200, {}))
        if status != 200:
            return JSONResponse({"error": {"message": "scripted"}}, status_code=status, headers=headers)
        tone = (np.sin(np.linspace(0, 2 * np.pi * 300, 24_000)) * 8000).astype("<i2").tobytes()
        return Response(wav_bytes(tone, 24_000), media_type="audio/wav")

    def __enter__(self) -> "HostedTTS":
        app = Starlette(routes=[Route("/v1/audio/speech", self.speech, methods=["POST"])])
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(5)

    def provider(self, *models: str) -> ProviderConfig:
        return ProviderConfig(name="hosted", base_url=f"http://127.0.0.1:{self.port}/v1", models=list(models),
                              kinds=["tts"])


async def test_hosted_speech_follows_the_router_retiring_and_resting() -> None:
    with HostedTTS() as hosted:
        hosted.answers = {"retired": (404, {}), "limited": (429, {"Retry-After": "120"})}
        provider = hosted.provider("retired", "limited", "good")
        state = RouterState(route_entries([provider]))
        _p, model, wav = await synthesize_any([provider], "Hello there.", 5, router=LocalRouter(state))
        assert model == "good" and wav[:4] == b"RIFF"
        snap = {e["key"]: e for e in state.snapshot()}
        assert snap["hosted/retired"]["retired"]
        assert snap["hosted/limited"]["resting_s"] > 100
        assert [c["model"] for c in hosted.calls] == ["retired", "limited", "good"]
        # Next time only the good one is tried, and it leads on its measured latency.
        await synthesize_any([provider], "Again.", 5, router=LocalRouter(state))
        assert [c["model"] for c in hosted.calls][3:] == ["good"]


async def test_hosted_speech_is_used_first_and_the_offline_voice_covers_its_failure() -> None:
    with HostedTTS() as hosted:
        env = {"IRIIS_PROVIDERS": json.dumps([hosted.provider("voice-1").model_dump(exclude={"api_key"})])}
        service = SpeechService(environ=env)
        said = await service.synthesize("Hello there.")
        assert said.engine == "hosted/voice-1"
        assert abs(seconds(said.pcm, OUTPUT_RATE) - 1.0) < 0.01  # 24 kHz resampled to the socket's rate
        hosted.answers = {"voice-1": (503, {})}
        fallback = SpeechService(environ=env)
        said = await fallback.synthesize("Hello there.")
        assert said.engine == OFFLINE_TTS and len(said.pcm) > 0


async def test_nothing_configured_and_offline_off_is_a_clear_failure() -> None:
    from actors.voice.engines import EngineMissing

    with pytest.raises(EngineMissing):
        await SpeechService(environ={}, offline=False).synthesize("Hi.")
    with pytest.raises(ProviderError):
        await synthesize_any([], "Hi.", 1)


# -- the cluster's speech actor --------------------------------------------------------------------

@pytest.mark.ray
async def test_the_speech_actor_is_one_per_cluster_and_round_trips(ray_session) -> None:
    from actors.voice.speech_actor import speech_actor

    first = await speech_actor({})
    second = await speech_actor({})
    assert first._actor_id == second._actor_id
    available = await first.warm.remote()
    assert OFFLINE_STT in available["stt"] and OFFLINE_TTS in available["tts"]
    said = await second.synthesize.remote(SENTENCE)
    heard = await first.transcribe.remote(resample_pcm(said.pcm, OUTPUT_RATE, INPUT_RATE), INPUT_RATE)
    assert words(heard.text) == words(SENTENCE)
