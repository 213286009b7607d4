"""The offline speech models alone, outside the server: speech to text of a few piper-spoken
questions (faster-whisper tiny.en, with the default 30 s window and with `chunk_length` 10 and
5) and text to speech of a first sentence. Shows what the voice pipeline's two models cost
before anything else shares the cores. Prints one JSON line.

Usage: python benchmarks/speech_engines.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from actors.voice.audio import resample_pcm  # noqa: E402
from actors.voice.engines import PiperOffline, WhisperOffline  # noqa: E402
from actors.voice.protocol import INPUT_RATE, OUTPUT_RATE  # noqa: E402

QUESTIONS = ["What is the weather like in London today?", "Remind me to call my sister at six tonight.",
             "How many minutes are there in three and a half hours?", "Turn off the lights in the kitchen please."]
SENTENCE = "Your appointment is at three in the afternoon."


def median_ms(run, times: int) -> float:
    took = []
    for _ in range(times):
        started = time.perf_counter()
        run()
        took.append(time.perf_counter() - started)
    return round(statistics.median(took) * 1000, 1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    stt, tts = WhisperOffline(), PiperOffline()
    windows: dict[str, list[float]] = {"30": [], "10": [], "5": []}
    seconds = []
    for question in QUESTIONS:
        pcm = resample_pcm(tts.synthesize(question), OUTPUT_RATE, INPUT_RATE)
        seconds.append(len(pcm) / 2 / INPUT_RATE)
        for window in windows:
            chunk = None if window == "30" else int(window)
            windows[window].append(median_ms(lambda: stt.transcribe(pcm, INPUT_RATE, chunk), args.runs))
    print(json.dumps({
        "benchmark": "speech_engines", "questions": len(QUESTIONS),
        "question_seconds": [round(s, 2) for s in seconds],
        "stt_p50_ms_by_window_s": {w: statistics.median(v) for w, v in windows.items()},
        "tts_first_sentence_ms": median_ms(lambda: tts.synthesize(SENTENCE), args.runs),
        "engines": {"stt": "faster-whisper tiny.en int8, 2 threads", "tts": "piper en_US-joe-medium"},
    }))


if __name__ == "__main__":
    main()
