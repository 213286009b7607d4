"""Voice: from the end of the person's utterance to the first audio frame out, through the real
server's /v1/voice/ws, with the offline speech models and the scripted chat model.

A question spoken by piper is streamed as PCM16 at 16 kHz in real time, then `end`; we time, at the
client, `end` sent -> first audio frame received, and take the server's split from the turn's
`spoken` event: speech to text, the model's first sentence (turn start to its first sentence,
which includes the scripted provider's time to first token), text to speech of that sentence,
and our overhead (everything else). Prints one JSON line.

As the page does, the client then sends the trailing quiet in real time: `pause` after
PAUSE_MS of it (speech to text starts early, on what was said so far) and `end` at
SILENCE_MS. `--no-pause` sends the same audio without `pause` (the path before early speech
to text). The person hears the first word SILENCE_MS plus the figure measured here after
they stop talking: `speech_end_to_first_audio_p50_ms` says so.
Usage: python benchmarks/voice.py [--turns 20] [--ttft 0.0] [--no-pause] [--burst]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from websockets.asyncio.client import connect  # noqa: E402

from actors.voice import protocol as p  # noqa: E402
from actors.voice.audio import resample_pcm  # noqa: E402
from actors.voice.engines import SpeechService  # noqa: E402
from tests import scripted_openai as so  # noqa: E402
from tests.server_proc import ServerProcess  # noqa: E402

KEY = "bench-owner-key"
QUESTION = "What time is my dentist appointment tomorrow?"
REPLY = "Your appointment is at three in the afternoon. Shall I remind you an hour before?"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


PAUSE_MS = 200     # web/js/voice.js
SILENCE_MS = 700   # web/js/voice.js
PIECE = 640        # 20 ms of PCM16 at 16 kHz, what the page's microphone sends


async def one_turn(ws, pcm: bytes, pause: bool, burst: bool) -> dict[str, float]:
    # The question in real time, 20 ms a message as the page's microphone sends it (or, with
    # --burst, all at once: the server then starts speech to text while the conversation's
    # actor is still being set up, which no microphone can make it do).
    step = 3200 if burst else PIECE
    for i in range(0, len(pcm), step):
        await ws.send(pcm[i:i + step])
        if not burst:
            await asyncio.sleep(0.02)
    quiet_started = time.perf_counter()
    paused = False
    while (elapsed := time.perf_counter() - quiet_started) < SILENCE_MS / 1000:
        if pause and not paused and elapsed >= PAUSE_MS / 1000:
            await ws.send(json.dumps({"type": "pause"}))
            paused = True
        await ws.send(bytes(PIECE))
        await asyncio.sleep(0.02)
    sent = time.perf_counter()
    await ws.send(json.dumps({"type": "end"}))
    first_frame = None
    while True:
        message = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(message, bytes):
            if first_frame is None:
                first_frame = time.perf_counter() - sent
            continue
        event = json.loads(message)
        if event["type"] == "error":
            raise RuntimeError(event)
        if event["type"] == "spoken":
            t = event["timings"]
            assert first_frame is not None
            server_total = t["end_to_first_audio_s"]
            # Speech to text as far as the person waited for it: all of it without a pause,
            # what was left of it at `end` when it started early.
            stt = t["stt_wait_s"] if t.get("stt_early") else t["stt_s"]
            parts = stt + t["model_first_sentence_s"] + t["tts_first_s"]
            return {"client_end_to_first_audio": first_frame, "server_end_to_first_audio": server_total,
                    "stt": t["stt_s"], "stt_wait": t["stt_wait_s"], "early": bool(t.get("stt_early")),
                    "model_first_sentence": t["model_first_sentence_s"],
                    "tts_first_sentence": t["tts_first_s"],
                    # Everything that is not a model: socket, actors, queues, framing.
                    "overhead": first_frame - parts}


async def run(url: str, pcm: bytes, turns: int, pause: bool, burst: bool) -> list[dict[str, float]]:
    """Each turn on a fresh socket (a new conversation, its actor started before `end`); two
    warm-up turns first so the speech models are loaded."""
    results = []
    for i in range(turns + 2):
        async with connect(url, additional_headers={"Authorization": f"Bearer {KEY}"}, max_size=None) as ws:
            json.loads(await ws.recv())
            result = await one_turn(ws, pcm, pause, burst)
        if i >= 2:
            results.append(result)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--ttft", type=float, default=0.0, help="the scripted model's time to first token")
    parser.add_argument("--no-pause", action="store_true", help="never send `pause` (no early speech to text)")
    parser.add_argument("--burst", action="store_true", help="send the question at once, not in real time")
    args = parser.parse_args()
    speech = SpeechService(environ={})
    said = asyncio.run(speech.synthesize(QUESTION))
    pcm = resample_pcm(said.pcm, p.OUTPUT_RATE, p.INPUT_RATE)
    provider = so.ScriptedOpenAI().start()
    provider.default_reply = so.text(REPLY, ttft=args.ttft)
    with tempfile.TemporaryDirectory() as home:
        server = ServerProcess(Path(home), {
            "OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "bench", "IRIIS_CHAT_MODEL": "scripted-model",
            "IRIIS_OWNER_KEYS": KEY, "DATABASE_URL": "", "IRIIS_PROVIDERS": "",
        }).start()
        try:
            url = server.url.replace("http://", "ws://") + "/v1/voice/ws"
            results = asyncio.run(run(url, pcm, args.turns, not args.no_pause, args.burst))
        finally:
            server.stop()
            provider.stop()

    def p50(key: str) -> float:
        return round(statistics.median(r[key] for r in results) * 1000, 1)

    print(json.dumps({
        "benchmark": "voice", "turns": args.turns, "scripted_ttft_ms": args.ttft * 1000,
        "pause": not args.no_pause, "question": "burst" if args.burst else "real time", "early_stt_used": sum(r["early"] for r in results),
        "utterance_s": round(len(pcm) / 2 / p.INPUT_RATE, 2),
        "end_to_first_audio_p50_ms": p50("client_end_to_first_audio"),
        "end_to_first_audio_p95_ms": round(percentile([r["client_end_to_first_audio"] for r in results], 0.95) * 1000, 1),
        "server_end_to_first_audio_p50_ms": p50("server_end_to_first_audio"),
        "speech_end_to_first_audio_p50_ms": round(SILENCE_MS + p50("client_end_to_first_audio"), 1),
        "stt_p50_ms": p50("stt"), "stt_wait_p50_ms": p50("stt_wait"), "model_first_sentence_p50_ms": p50("model_first_sentence"),
        "tts_first_sentence_p50_ms": p50("tts_first_sentence"), "overhead_p50_ms": p50("overhead"),
        "goals": {"overhead_p50_ms": 100, "end_to_first_audio_p50_ms": 800},
        "engines": {"stt": "faster-whisper tiny.en int8", "tts": "piper en_US-joe-medium"},
    }))


if __name__ == "__main__":
    main()
