"""One frame's perception: detection, OCR (not necessarily every frame) and the dial.

:func:`perceive` is the single entry the Serve deployment calls per frame. OCR is the costly
part (~0.3 s on two cores), so it runs every Nth frame, and optionally only inside configured
regions; frames in between carry no OCR result and the caller keeps the last one.

:func:`offline_answer` is the vision router's last resort: with no vision model answering, it
turns perception into an honest, unsure answer that says so.
"""

from __future__ import annotations

import time
import numpy as np
from pydantic import BaseModel, Field

from vision.crosscheck import format_value
from vision.detect import Box, Detection, Detector
from vision.dial import DialReading, read_dial
from vision.ocr import OcrEngine, OcrLine
from vision.procedure import Instrument
from vision.vlm import CAP_SAY, Reading, VlmAnswer, cap


class Region(BaseModel):
    """Part of the frame, as fractions of its width and height (so it survives resizing)."""

    x: float = Field(ge=0.0, le=1.0)
    y: float = Field(ge=0.0, le=1.0)
    w: float = Field(gt=0.0, le=1.0)
    h: float = Field(gt=0.0, le=1.0)

    def to_box(self, width: int, height: int) -> Box:
        x0, y0 = int(self.x * width), int(self.y * height)
        x1 = min(width, int(round((self.x + self.w) * width)))
        y1 = min(height, int(round((self.y + self.h) * height)))
        return Box(x=x0, y=y0, w=max(0, x1 - x0), h=max(0, y1 - y0))


class PerceptionConfig(BaseModel):
    detect: bool = True
    ocr_every: int = Field(default=3, ge=1, description="run OCR on every Nth frame (1 = every frame)")
    ocr_regions: list[Region] = Field(default_factory=list, description="OCR only these regions; empty = whole frame")
    dial: bool = True


class Perception(BaseModel):
    width: int
    height: int
    frame_index: int
    detections: list[Detection] = Field(default_factory=list)
    ocr_ran: bool = False
    ocr_lines: list[OcrLine] = Field(default_factory=list)
    dial: DialReading | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)

    @property
    def ocr_text(self) -> str:
        return "\n".join(line.text for line in self.ocr_lines)


def _ocr(image: np.ndarray, ocr: OcrEngine, regions: list[Region]) -> list[OcrLine]:
    if not regions:
        return ocr.read(image)
    height, width = image.shape[:2]
    lines: list[OcrLine] = []
    for region in regions:
        box = region.to_box(width, height)
        if box.w < 8 or box.h < 8:
            continue
        crop = np.ascontiguousarray(image[box.y : box.y + box.h, box.x : box.x + box.w])
        for line in ocr.read(crop):
            # Back into full-frame coordinates so boxes mean the same thing either way.
            moved = line.box.model_copy(update={"x": line.box.x + box.x, "y": line.box.y + box.y})
            lines.append(line.model_copy(update={"box": moved}))
    return lines


def perceive(
    image: np.ndarray,
    *,
    frame_index: int,
    detector: Detector | None,
    ocr: OcrEngine | None,
    config: PerceptionConfig | None = None,
    instrument: Instrument | None = None,
) -> Perception:
    """Run what ``config`` asks for on one BGR frame and time each part."""
    config = config or PerceptionConfig()
    height, width = image.shape[:2]
    timings: dict[str, float] = {}
    detections: list[Detection] = []
    lines: list[OcrLine] = []
    dial: DialReading | None = None
    ocr_ran = False

    if config.detect and detector is not None:
        started = time.perf_counter()
        detections = detector.detect(image)
        timings["detect"] = round((time.perf_counter() - started) * 1000, 2)
    if ocr is not None and frame_index % config.ocr_every == 0:
        started = time.perf_counter()
        lines = _ocr(image, ocr, config.ocr_regions)
        ocr_ran = True
        timings["ocr"] = round((time.perf_counter() - started) * 1000, 2)
    if config.dial and instrument is not None:
        started = time.perf_counter()
        dial = read_dial(image, instrument)
        timings["dial"] = round((time.perf_counter() - started) * 1000, 2)
    return Perception(
        width=width,
        height=height,
        frame_index=frame_index,
        detections=detections,
        ocr_ran=ocr_ran,
        ocr_lines=lines,
        dial=dial,
        timings_ms=timings,
    )


def context_fields(perception: Perception, *, ocr_text: str | None = None) -> dict[str, object]:
    """What perception adds to a VisionContext: detections, OCR text, the dial reading."""
    fields: dict[str, object] = {
        "detections": [f"{d.label} {d.confidence:.2f}" for d in perception.detections[:15]],
        "ocr_text": perception.ocr_text if ocr_text is None else ocr_text,
    }
    if perception.dial is not None:
        dial = perception.dial
        fields["readings"] = [f"gauge by geometry: {dial.value:.4g} {dial.unit} (confidence {dial.confidence:.2f})"]
    return fields


NO_MODEL = "No vision model answered, so this comes only from on-device perception and may be incomplete."


def offline_answer(
    perception: Perception, *, ocr_text: str | None = None, instrument: Instrument | None = None
) -> VlmAnswer:
    """The local fallback: what perception saw, status unsure, saying no vision model answered.

    ``ocr_text`` overrides the frame's own OCR (the caller may hold the latest text from an
    earlier frame when OCR skipped this one).
    """
    parts = [NO_MODEL]
    if perception.detections:
        counts: dict[str, int] = {}
        for det in perception.detections:
            counts[det.label] = counts.get(det.label, 0) + 1
        seen = ", ".join(f"{n} {label}" if n > 1 else f"a {label}" for label, n in counts.items())
        parts.append(f"I can make out {seen}.")
    else:
        parts.append("I don't recognise any objects.")
    text = perception.ocr_text if ocr_text is None else ocr_text
    if text.strip():
        parts.append(f'Text in view: "{cap(text.replace(chr(10), " / "), 200)}".')
    reading: Reading | None = None
    if perception.dial is not None:
        dial = perception.dial
        shown = format_value(dial.value, instrument.span) if instrument else f"{dial.value:.4g}"
        parts.append(f"The gauge needle points to about {shown} {dial.unit}.")
        reading = Reading(value=dial.value, unit=dial.unit, confidence=dial.confidence)
    return VlmAnswer(say=cap(" ".join(parts), CAP_SAY), status="unsure", reading=reading, step_complete=False)
