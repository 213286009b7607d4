"""Perception: the Serve deployment that runs detection, OCR and the dial on camera frames.

Replicas scale with load (and take a GPU each where the cluster has one); each loads its
detector and OCR engine once. A frame arrives as an object ref inside a list, so Ray passes the
reference rather than resolving it in the caller, and the bytes are read here, once.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from ray import serve

from vision.detect import make_detector
from vision.frames import FrameError, decode_jpeg
from vision.ocr import make_ocr
from vision.perception import PerceptionConfig, perceive
from vision.procedure import Instrument

log = logging.getLogger(__name__)


@serve.deployment(
    ray_actor_options={"num_cpus": 0},
    max_ongoing_requests=8,
    max_queued_requests=64,
    # Past the queue a caller gets BackPressureError (503 with Retry-After over HTTP).
    backpressure_config={"retry_after_s": 2},
    autoscaling_config={"min_replicas": 1, "max_replicas": 4, "target_ongoing_requests": 2},
)
class Perception:
    def __init__(self) -> None:
        self.detector = make_detector(os.environ)
        self.ocr = make_ocr(os.environ)

    async def perceive(self, frame: list[Any], frame_index: int, *, detect: bool = True, ocr: bool = True,
                       dial: bool = True, instrument: dict[str, Any] | None = None) -> dict[str, Any]:
        """Perception of one JPEG frame as a dict, or {"error": code, "message"} for a bad one.
        The camera socket asks for detection and the dial on every frame and for OCR (the
        slow part) in a lane of its own, so reading text never holds up the next frame."""
        data: bytes = await frame[0]
        try:
            image = await asyncio.to_thread(decode_jpeg, data)
        except FrameError as exc:
            return {"error": exc.code, "message": str(exc)}
        result = await asyncio.to_thread(
            perceive, image, frame_index=frame_index, detector=self.detector, ocr=self.ocr if ocr else None,
            config=PerceptionConfig(detect=detect, ocr_every=1, dial=dial),
            instrument=Instrument.model_validate(instrument) if instrument else None)
        return result.model_dump()


def perception_app(gpus: float = 0.0) -> Any:
    options: dict[str, Any] = {"num_cpus": 0}
    if gpus > 0:
        options["num_gpus"] = gpus
    return Perception.options(ray_actor_options=options).bind()
