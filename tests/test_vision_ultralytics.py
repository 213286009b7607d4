"""The Ultralytics backend on an untrained model built from its yaml (nothing downloads).

Ultralytics needs torch (a ~6 GB install), so it is optional: these tests skip, saying why,
where it is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip(
    "ultralytics",
    reason="ultralytics is not installed (optional: needs torch 2.14.1 + torchvision 0.29.1, ~6 GB)",
)

from tests.vision_draw import stop_sign_frame  # noqa: E402
from vision.detect import UltralyticsDetector, make_detector  # noqa: E402


@pytest.fixture(scope="module")
def untrained(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UltralyticsDetector]:
    # Its settings file would otherwise land in the home folder.
    mp = pytest.MonkeyPatch()
    mp.setenv("YOLO_CONFIG_DIR", str(tmp_path_factory.mktemp("ultralytics")))
    mp.setenv("YOLO_OFFLINE", "1")
    yield UltralyticsDetector.from_yaml("yolo11n.yaml", min_confidence=0.0001)
    mp.undo()


def test_untrained_model_runs_and_returns_well_formed_detections(untrained: UltralyticsDetector) -> None:
    frame = stop_sign_frame()
    found = untrained.detect(frame)
    # Untrained weights give near-zero scores; with a tiny threshold some boxes come through,
    # which exercises the conversion from Ultralytics results to our Detection model.
    assert found
    for d in found:
        assert 0.0 <= d.confidence <= 1.0
        assert 0 <= d.box.x <= d.box.x + d.box.w <= frame.shape[1]
        assert 0 <= d.box.y <= d.box.y + d.box.h <= frame.shape[0]
    assert [d.confidence for d in found] == sorted((d.confidence for d in found), reverse=True)


def test_configured_pt_file_loads_through_make_detector(untrained: UltralyticsDetector, tmp_path: Path) -> None:
    weights = tmp_path / "custom.pt"
    untrained._model.save(str(weights))
    detector = make_detector({"IRIIS_YOLO_WEIGHTS": str(weights)})
    assert isinstance(detector, UltralyticsDetector)
    assert isinstance(detector.detect(stop_sign_frame()), list)
