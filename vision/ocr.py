"""Text and digit reading with PP-OCR mobile models.

* :class:`RapidOcrEngine` (default): RapidOCR's PP-OCR ONNX models, which ship inside the
  ``rapidocr`` wheel, run by onnxruntime. Settings chosen by measuring on a 2-core machine
  (benchmarks/MEASURED.md): no angle classifier, detection capped at 640 px on the long side.
* :class:`PaddleOcrEngine`: PaddleOCR itself, only when its model folders are configured
  (``IRIIS_PADDLEOCR_DET_DIR`` and ``IRIIS_PADDLEOCR_REC_DIR``). PaddleOCR cannot fetch models
  offline, so it is never the default.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, Field

from actors.common.errors import IriisError
from vision.detect import Box


class OcrLine(BaseModel):
    text: str
    confidence: float = Field(ge=0.0, le=1.0)
    box: Box


class OcrUnavailable(IriisError, RuntimeError):
    """The configured OCR engine cannot run here."""

    code = "ocr_unavailable"


class OcrEngine(Protocol):
    name: str

    def read(self, image: np.ndarray) -> list[OcrLine]:
        """Text lines in a BGR uint8 image, top to bottom."""
        ...


def _box_from_points(points: Any, width: int, height: int) -> Box:
    pts = np.asarray(points, dtype=np.float32).reshape(-1, 2)
    x0, y0 = np.clip(pts.min(axis=0), 0, [width, height])
    x1, y1 = np.clip(pts.max(axis=0), 0, [width, height])
    return Box(x=int(x0), y=int(y0), w=int(x1 - x0), h=int(y1 - y0))


def _reading_order(lines: list[OcrLine]) -> list[OcrLine]:
    # Rows first (a line's vertical centre, bucketed by half a typical line height), then left to right.
    if not lines:
        return lines
    unit = max(8, int(np.median([ln.box.h for ln in lines]) / 2))
    return sorted(lines, key=lambda ln: ((ln.box.y + ln.box.h // 2) // unit, ln.box.x))


def lines_to_text(lines: Sequence[OcrLine]) -> str:
    return "\n".join(ln.text for ln in lines)


class RapidOcrEngine:
    """RapidOCR with the bundled models. One engine per process; calls are serialised
    because onnxruntime sessions are shared and the engine keeps per-call state."""

    name = "rapidocr"

    def __init__(self, *, min_confidence: float = 0.5, limit_side_len: int = 640, threads: int = 1) -> None:
        from rapidocr import RapidOCR  # lazy: RapidOCR (onnxruntime, OpenCV) costs ~0.6 s

        self.min_confidence = min_confidence
        self._engine = RapidOCR(
            params={
                "Global.use_cls": False,
                "Det.limit_type": "max",
                "Det.limit_side_len": limit_side_len,
                "Global.log_level": "warning",
                # The OCR lane runs beside the frame loop's detection: one thread keeps it on
                # one core instead of contending for all of them (benchmarks/perception.py: the
                # camera socket's frames/s 8.8 -> 12.4 on 2 cores, the OCR itself as fast).
                "EngineConfig.onnxruntime.intra_op_num_threads": threads,
                "EngineConfig.onnxruntime.inter_op_num_threads": 1,
            }
        )
        self._lock = threading.Lock()

    def read(self, image: np.ndarray) -> list[OcrLine]:
        height, width = image.shape[:2]
        with self._lock:
            result = self._engine(image)
        texts = getattr(result, "txts", None) or ()
        scores = getattr(result, "scores", None) or ()
        boxes = getattr(result, "boxes", None)
        lines = []
        for i, text in enumerate(texts):
            score = float(scores[i]) if i < len(scores) else 0.0
            if not text.strip() or score < self.min_confidence:
                continue
            box = _box_from_points(boxes[i], width, height) if boxes is not None else Box(x=0, y=0, w=0, h=0)
            lines.append(OcrLine(text=text.strip(), confidence=min(1.0, score), box=box))
        return _reading_order(lines)


class PaddleOcrEngine:
    """PaddleOCR 3.x on local model folders (Paddle inference format)."""

    name = "paddleocr"

    def __init__(
        self,
        det_dir: Path,
        rec_dir: Path,
        *,
        det_model: str = "PP-OCRv5_mobile_det",
        rec_model: str = "PP-OCRv5_mobile_rec",
        min_confidence: float = 0.5,
    ) -> None:
        for folder in (det_dir, rec_dir):
            if not folder.is_dir():
                raise OcrUnavailable(f"PaddleOCR model folder not found: {str(folder)!r}")
        if importlib.util.find_spec("paddleocr") is None:
            raise OcrUnavailable("PaddleOCR model folders are set but paddleocr is not installed")
        from paddleocr import PaddleOCR  # lazy: optional package

        self.min_confidence = min_confidence
        self._engine = PaddleOCR(
            text_detection_model_name=det_model,
            text_detection_model_dir=str(det_dir),
            text_recognition_model_name=rec_model,
            text_recognition_model_dir=str(rec_dir),
            use_doc_orientation_classify=False,
            use_doc_unwarping=False,
            use_textline_orientation=False,
        )
        self._lock = threading.Lock()

    def read(self, image: np.ndarray) -> list[OcrLine]:
        height, width = image.shape[:2]
        with self._lock:
            results = self._engine.predict(image)
        lines = []
        for res in results:
            texts = res.get("rec_texts", []) or []
            scores = res.get("rec_scores", []) or []
            polys = res.get("rec_polys", []) or []
            for text, score, poly in zip(texts, scores, polys):
                if not str(text).strip() or float(score) < self.min_confidence:
                    continue
                lines.append(
                    OcrLine(
                        text=str(text).strip(),
                        confidence=min(1.0, float(score)),
                        box=_box_from_points(poly, width, height),
                    )
                )
        return _reading_order(lines)


def make_ocr(env: Mapping[str, str] | None = None) -> OcrEngine:
    """PaddleOCR when both model folders are configured, else RapidOCR's bundled models.

    Raises OcrUnavailable when only one folder is set, a folder is missing, or paddleocr is
    not installed: a half-configured engine should stop start-up, not silently fall back.
    """
    env = os.environ if env is None else env
    det = env.get("IRIIS_PADDLEOCR_DET_DIR", "").strip()
    rec = env.get("IRIIS_PADDLEOCR_REC_DIR", "").strip()
    if det or rec:
        if not (det and rec):
            raise OcrUnavailable("set both IRIIS_PADDLEOCR_DET_DIR and IRIIS_PADDLEOCR_REC_DIR")
        return PaddleOcrEngine(
            Path(det),
            Path(rec),
            det_model=env.get("IRIIS_PADDLEOCR_DET_MODEL", "").strip() or "PP-OCRv5_mobile_det",
            rec_model=env.get("IRIIS_PADDLEOCR_REC_MODEL", "").strip() or "PP-OCRv5_mobile_rec",
        )
    threads = env.get("IRIIS_OCR_THREADS", "").strip()
    if threads and not (threads.isdigit() and int(threads) > 0):
        raise OcrUnavailable(f"IRIIS_OCR_THREADS must be a whole number of threads above 0, not {threads!r}")
    return RapidOcrEngine(threads=int(threads or 1))
