"""Per-frame perception latency on 640x480 frames this script draws (a labelled gauge).

Measures, in-process and on the CPU: JPEG decode, object detection (the bundled yolov3-tiny
through OpenCV DNN, or IRIIS_YOLO_WEIGHTS), OCR (RapidOCR, whole frame), the dial reading, and
all of them together through ``vision.perception.perceive`` with OCR on every frame (the worst
case) and with the default every-3rd-frame OCR. Reports p50/p95 in milliseconds and what that
means in frames per second for one perception worker.

Then, through the real server (`iriis serve` on SQLite with a procedure naming the gauge, so
the dial runs too): frames per second through the ack-gated camera socket (the client sends a
frame only after the previous one's frame_ack; perception on, OCR every 3rd frame by default),
and the question-to-answer time above the scripted vision model's fixed latency (goal: under
150 ms). `--no-socket` skips the server part.

Prints one JSON line. Usage: python benchmarks/perception.py [--frames 30] [--socket-frames 60]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.vision_draw import dial_frame, jpeg, text_frame  # noqa: E402
from vision.detect import make_detector  # noqa: E402
from vision.dial import read_dial  # noqa: E402
from vision.frames import decode_jpeg  # noqa: E402
from vision.ocr import make_ocr  # noqa: E402
from vision.perception import PerceptionConfig, perceive  # noqa: E402
from vision.procedure import Instrument  # noqa: E402

GAUGE = Instrument(name="boiler", unit="bar", min_value=0, max_value=4)


def _frames(count: int) -> list[bytes]:
    """Distinct frames: the needle sweeps and the label changes, so nothing is cached by accident."""
    out = []
    for i in range(count):
        needle = -135 + (270 * i / max(1, count - 1))
        base = dial_frame(needle, center=(320, 290), radius=150, clutter=True)
        out.append(jpeg(text_frame([f"BOILER PRESSURE {i:03d}"], origin=(150, 20), base=base), quality=85))
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return round(ordered[index], 2)


def _time(fn: Callable[[], Any], runs: int) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": _pct(samples, 0.5), "p95_ms": _pct(samples, 0.95), "mean_ms": round(statistics.fmean(samples), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--socket-frames", type=int, default=60)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--no-socket", action="store_true")
    args = parser.parse_args()

    jpegs = _frames(args.frames)
    images = [decode_jpeg(data) for data in jpegs]
    detector = make_detector()
    small = make_detector({**os.environ, "IRIIS_DETECT_INPUT": "320"})
    small.detect(images[0])
    ocr = make_ocr()
    # Warm-up: the first DNN forward and the first OCR call build their graphs.
    detector.detect(images[0])
    ocr.read(images[0])

    def cycling(fn: Callable[[int], Any]) -> Callable[[], Any]:
        counter = iter(range(10**9))
        return lambda: fn(next(counter) % len(images))

    read_ok = sum(read_dial(img, GAUGE) is not None for img in images)
    every = PerceptionConfig(ocr_every=1)
    third = PerceptionConfig(ocr_every=3)
    result = {
        "benchmark": "perception",
        "frame": "640x480 JPEG, drawn gauge + label",
        "frames": args.frames,
        "detector": detector.name,
        "ocr": ocr.name,
        "decode": _time(cycling(lambda i: decode_jpeg(jpegs[i])), args.frames),
        "detect": _time(cycling(lambda i: detector.detect(images[i])), args.frames),
        "detect_input_320": _time(cycling(lambda i: small.detect(images[i])), args.frames),
        "ocr_full_frame": _time(cycling(lambda i: ocr.read(images[i])), args.frames),
        "dial": _time(cycling(lambda i: read_dial(images[i], GAUGE)), args.frames),
        "dial_found": f"{read_ok}/{len(images)}",
        "all_ocr_every_frame": _time(
            cycling(lambda i: perceive(decode_jpeg(jpegs[i]), frame_index=i, detector=detector, ocr=ocr, config=every, instrument=GAUGE)),
            args.frames,
        ),
        "all_ocr_every_3rd": _time(
            cycling(lambda i: perceive(decode_jpeg(jpegs[i]), frame_index=i, detector=detector, ocr=ocr, config=third, instrument=GAUGE)),
            args.frames,
        ),
    }
    per_frame = result["all_ocr_every_3rd"]["mean_ms"]  # type: ignore[index]
    result["fps_one_worker_ocr_every_3rd"] = round(1000 / per_frame, 2) if per_frame else None
    if not args.no_socket:
        result.update(_through_the_socket(jpegs, args.socket_frames, args.questions))
    print(json.dumps(result))


VLM_LATENCY = 0.3
KEY = "bench-camera-key"
PROCEDURE = {"name": "Boiler", "goal": "Check the boiler", "steps": [{"title": "Read the gauge", "instrument": "boiler"}],
             "instruments": [GAUGE.model_dump()]}


def _through_the_socket(jpegs: list[bytes], frames: int, questions: int) -> dict[str, Any]:
    import tempfile

    import httpx
    from websockets.sync.client import connect

    from tests import scripted_openai as so
    from tests.server_proc import ServerProcess

    provider = so.ScriptedOpenAI().start()
    answer = json.dumps({"say": "About 2 bar.", "status": "ok", "reading": None, "step_complete": False})
    provider.side_responder = lambda body: so.text(answer, ttft=VLM_LATENCY)
    provider.default_reply = so.text("NOTHING")
    with tempfile.TemporaryDirectory() as home:
        server = ServerProcess(Path(home), {
            "OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "bench", "IRIIS_CHAT_MODEL": "scripted-model",
            "IRIIS_VISION_MODEL": so.VISION, "IRIIS_OWNER_KEYS": KEY, "DATABASE_URL": "",
        }).start()
        try:
            procedure = httpx.post(f"{server.url}/v1/procedures", json=PROCEDURE,
                                   headers={"Authorization": f"Bearer {KEY}"}, timeout=30).json()["id"]
            url = f"{server.url.replace('http', 'ws')}/v1/camera/ws?token={KEY}&procedure={procedure}"
            with connect(url, max_size=None, open_timeout=60) as ws:
                def until(kind: str) -> dict[str, Any]:
                    while True:
                        event = json.loads(ws.recv(timeout=60))
                        if event["type"] == kind:
                            return event

                until("hello")
                for data in jpegs[:5]:  # warm-up: replica start, first DNN and OCR graphs
                    ws.send(data)
                    until("frame_ack")
                started = time.perf_counter()
                for i in range(frames):
                    ws.send(jpegs[i % len(jpegs)])
                    until("frame_ack")
                fps = frames / (time.perf_counter() - started)
                overheads = []
                for i in range(questions + 2):
                    asked = time.perf_counter()
                    ws.send(json.dumps({"type": "ask", "text": f"What does the gauge read? ({i})"}))
                    until("answer")
                    if i >= 2:  # the first two warm the context path
                        overheads.append((time.perf_counter() - asked - VLM_LATENCY) * 1000)
        finally:
            server.stop()
            provider.stop()
    return {"ack_gated_fps": round(fps, 2), "socket_frames": frames, "fps_goal": 3,
            "answer_overhead_p50_ms": round(statistics.median(overheads), 1),
            "answer_overhead_p95_ms": round(_pct(overheads, 0.95), 1), "answer_overhead_goal_ms": 150,
            "vlm_fixed_latency_ms": VLM_LATENCY * 1000}


if __name__ == "__main__":
    main()
