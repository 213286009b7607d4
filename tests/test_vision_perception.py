"""One frame through detection, OCR and the dial; and the offline answer built from it."""

from __future__ import annotations

import numpy as np
import pytest

from tests.vision_draw import dial_frame, jpeg, stop_sign_frame, text_frame
from vision.detect import Box, DarknetDetector, NullDetector, make_detector
from vision.frames import decode_jpeg
from vision.ocr import OcrLine, RapidOcrEngine
from vision.perception import (
    NO_MODEL,
    Perception,
    PerceptionConfig,
    Region,
    context_fields,
    offline_answer,
    perceive,
)
from vision.procedure import Instrument

GAUGE = Instrument(name="boiler", unit="bar", min_value=0, max_value=4)


@pytest.fixture(scope="module")
def detector() -> DarknetDetector:
    found = make_detector({})
    assert isinstance(found, DarknetDetector)
    return found


@pytest.fixture(scope="module")
def ocr() -> RapidOcrEngine:
    return RapidOcrEngine()


class CountingOcr:
    """Stands in for OCR where only *when* it runs matters."""

    name = "counting"

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def read(self, image: np.ndarray) -> list[OcrLine]:
        self.calls.append(image.shape[:2])
        return [OcrLine(text="X", confidence=0.9, box=Box(x=1, y=2, w=3, h=4))]


def _gauge_with_label() -> np.ndarray:
    # A 0-4 bar gauge below a printed label, as a camera would see a boiler panel.
    base = dial_frame(45, center=(320, 280), radius=150)
    return text_frame(["BOILER PRESSURE"], origin=(180, 20), base=base)


def test_whole_frame_perception_reads_label_dial_and_runs_detection(detector: DarknetDetector, ocr: RapidOcrEngine) -> None:
    frame = decode_jpeg(jpeg(_gauge_with_label()))
    result = perceive(frame, frame_index=0, detector=detector, ocr=ocr, instrument=GAUGE)
    assert (result.width, result.height) == (640, 480)
    assert result.ocr_ran and result.ocr_lines[0].text == "BOILER PRESSURE"
    assert result.dial is not None
    assert result.dial.value == pytest.approx((45 + 135) / 270 * 4, abs=0.06)
    assert all(d.label != "person" for d in result.detections)
    assert set(result.timings_ms) == {"detect", "ocr", "dial"}
    # The result crosses process boundaries as JSON.
    again = Perception.model_validate_json(result.model_dump_json())
    assert again.ocr_text == result.ocr_text and again.dial == result.dial


def test_ocr_runs_only_inside_configured_regions(ocr: RapidOcrEngine) -> None:
    frame = _gauge_with_label()
    top = PerceptionConfig(detect=False, dial=False, ocr_every=1, ocr_regions=[Region(x=0.0, y=0.0, w=1.0, h=0.15)])
    result = perceive(frame, frame_index=0, detector=None, ocr=ocr, config=top)
    assert result.ocr_text == "BOILER PRESSURE"
    # Boxes come back in whole-frame coordinates.
    assert 150 < result.ocr_lines[0].box.x < 220 and result.ocr_lines[0].box.y < 40
    bottom = top.model_copy(update={"ocr_regions": [Region(x=0.0, y=0.9, w=1.0, h=0.1)]})
    assert perceive(frame, frame_index=0, detector=None, ocr=ocr, config=bottom).ocr_lines == []


def test_ocr_runs_every_nth_frame() -> None:
    counting = CountingOcr()
    config = PerceptionConfig(detect=False, dial=False, ocr_every=3)
    frame = np.zeros((48, 64, 3), np.uint8)
    ran = [perceive(frame, frame_index=i, detector=None, ocr=counting, config=config).ocr_ran for i in range(7)]
    assert ran == [True, False, False, True, False, False, True]
    assert len(counting.calls) == 3


def test_tiny_regions_are_skipped_and_regions_are_clipped_to_the_frame() -> None:
    counting = CountingOcr()
    config = PerceptionConfig(
        detect=False, dial=False, ocr_every=1,
        ocr_regions=[Region(x=0.5, y=0.5, w=0.01, h=0.01), Region(x=0.8, y=0.8, w=0.5, h=0.5)],
    )
    perceive(np.zeros((100, 200, 3), np.uint8), frame_index=0, detector=None, ocr=counting, config=config)
    assert counting.calls == [(20, 40)]


def test_no_instrument_means_no_dial_reading(detector: DarknetDetector) -> None:
    result = perceive(dial_frame(0), frame_index=1, detector=detector, ocr=None)
    assert result.dial is None and "dial" not in result.timings_ms
    assert not result.ocr_ran


def test_offline_answer_is_unsure_and_says_no_vision_model_answered(detector: DarknetDetector) -> None:
    result = perceive(stop_sign_frame(), frame_index=1, detector=detector, ocr=None)
    answer = offline_answer(result, ocr_text="STOP")
    assert answer.status == "unsure"
    assert answer.say.startswith(NO_MODEL)
    assert "a stop sign" in answer.say and '"STOP"' in answer.say
    assert answer.reading is None and answer.step_complete is False


def test_offline_answer_passes_the_geometric_reading_on() -> None:
    result = perceive(dial_frame(45), frame_index=1, detector=NullDetector("test"), ocr=None, instrument=GAUGE)
    answer = offline_answer(result, instrument=GAUGE)
    assert answer.reading is not None
    assert answer.reading.unit == "bar" and answer.reading.value == pytest.approx(2.667, abs=0.06)
    assert "about 2.6" in answer.say or "about 2.7" in answer.say
    assert "don't recognise any objects" in answer.say
    assert answer.status == "unsure"


def test_perception_fills_the_vlm_context() -> None:
    from vision.vlm import VisionContext, build_context

    counting = CountingOcr()
    result = perceive(dial_frame(45), frame_index=0, detector=None, ocr=counting, instrument=GAUGE)
    ctx = VisionContext(goal="Check the boiler", **context_fields(result))  # type: ignore[arg-type]
    text = build_context(ctx)
    assert "Text in view (OCR): X" in text
    assert "gauge by geometry: 2.6" in text or "gauge by geometry: 2.7" in text
