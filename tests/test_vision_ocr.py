"""Text and digit reading on frames the test draws (RapidOCR's bundled PP-OCR models)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.vision_draw import jpeg, text_frame
from vision.frames import decode_jpeg
from vision.ocr import OcrUnavailable, RapidOcrEngine, lines_to_text, make_ocr


@pytest.fixture(scope="module")
def ocr() -> RapidOcrEngine:
    return RapidOcrEngine()


def test_reads_drawn_lines_exactly_in_reading_order(ocr: RapidOcrEngine) -> None:
    lines = ["PRESSURE 42.5 kPa", "Close valve B before", "TEMP 71 C", "Batch 20931"]
    # Through a JPEG round trip, as frames arrive from the camera.
    image = decode_jpeg(jpeg(text_frame(lines)))
    found = ocr.read(image)
    assert [ln.text for ln in found] == lines
    assert all(ln.confidence >= 0.8 for ln in found)
    # Boxes sit where the lines were drawn (x from 40, one line every 90 px from y=40).
    for i, ln in enumerate(found):
        assert 25 <= ln.box.x <= 60
        assert abs(ln.box.y - (40 + 90 * i)) <= 20


def test_reads_digits_and_decimal_points(ocr: RapidOcrEngine) -> None:
    lines = ["0.75", "1013", "-12.5"]
    found = ocr.read(text_frame(lines, font_size=48, line_gap=120))
    assert lines_to_text(found) == "0.75\n1013\n-12.5"


def test_blank_frame_reads_nothing(ocr: RapidOcrEngine) -> None:
    assert ocr.read(text_frame([])) == []


def test_unconfigured_ocr_is_rapidocr() -> None:
    assert make_ocr({}).name == "rapidocr"


def test_half_configured_paddleocr_stops_with_a_reason(tmp_path: Path) -> None:
    with pytest.raises(OcrUnavailable, match="both"):
        make_ocr({"IRIIS_PADDLEOCR_DET_DIR": str(tmp_path)})


def test_paddleocr_model_folder_must_exist(tmp_path: Path) -> None:
    with pytest.raises(OcrUnavailable, match="not found"):
        make_ocr({"IRIIS_PADDLEOCR_DET_DIR": str(tmp_path), "IRIIS_PADDLEOCR_REC_DIR": str(tmp_path / "missing")})


def test_paddleocr_folders_without_the_package_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Simulated absence, so the test runs wherever paddleocr happens to be installed.
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "paddleocr" else real_find_spec(name, *a))
    (tmp_path / "det").mkdir()
    (tmp_path / "rec").mkdir()
    with pytest.raises(OcrUnavailable, match="paddleocr is not installed"):
        make_ocr({"IRIIS_PADDLEOCR_DET_DIR": str(tmp_path / "det"), "IRIIS_PADDLEOCR_REC_DIR": str(tmp_path / "rec")})


def test_the_ocr_lane_keeps_to_its_threads() -> None:
    """One thread by default (the frame loop's detection has the other core), as configured."""
    def threads(engine: RapidOcrEngine) -> int:
        return engine._engine.cfg.EngineConfig.onnxruntime.intra_op_num_threads

    assert threads(make_ocr({})) == 1
    assert threads(make_ocr({"IRIIS_OCR_THREADS": "2"})) == 2
    for bad in ("0", "two", "-1"):
        with pytest.raises(OcrUnavailable, match="IRIIS_OCR_THREADS"):
            make_ocr({"IRIIS_OCR_THREADS": bad})
