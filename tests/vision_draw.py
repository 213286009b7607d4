"""Frames the vision tests and the perception benchmark draw for themselves.

Nothing here is read from disk or downloaded: text is drawn with Pillow's bundled font, dials
and signs with OpenCV primitives.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

WIDTH, HEIGHT = 640, 480


def blank(colour: tuple[int, int, int] = (228, 230, 232), size: tuple[int, int] = (WIDTH, HEIGHT)) -> np.ndarray:
    return np.full((size[1], size[0], 3), colour, np.uint8)


def text_frame(
    lines: list[str],
    *,
    font_size: int = 34,
    origin: tuple[int, int] = (40, 40),
    line_gap: int = 90,
    base: np.ndarray | None = None,
) -> np.ndarray:
    """Dark text lines on a light background (BGR)."""
    canvas = blank() if base is None else base.copy()
    img = Image.fromarray(canvas[:, :, ::-1])
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=font_size)
    for i, line in enumerate(lines):
        draw.text((origin[0], origin[1] + i * line_gap), line, fill=(20, 20, 20), font=font)
    return np.ascontiguousarray(np.asarray(img)[:, :, ::-1])


def _polar(cx: float, cy: float, angle_deg: float, radius: float) -> tuple[int, int]:
    a = math.radians(angle_deg)
    return round(cx + radius * math.sin(a)), round(cy - radius * math.cos(a))


def dial_frame(
    needle_deg: float,
    *,
    center: tuple[int, int] = (320, 240),
    radius: int = 170,
    min_angle: float = -135.0,
    max_angle: float = 135.0,
    labels: list[str] | None = None,
    needle_colour: tuple[int, int, int] = (20, 20, 20),
    face: tuple[int, int, int] = (250, 250, 250),
    ink: tuple[int, int, int] = (20, 20, 20),
    clutter: bool = False,
) -> np.ndarray:
    """A gauge with ticks, numbers and a needle at ``needle_deg`` (clockwise from 12 o'clock)."""
    img = blank()
    if clutter:
        # Things a camera sees around a gauge: a pipe, a label plate, a bolt.
        cv2.rectangle(img, (0, 400), (640, 440), (90, 110, 130), -1)
        cv2.rectangle(img, (520, 30), (630, 90), (60, 60, 60), 3)
        cv2.circle(img, (580, 420), 14, (40, 40, 40), -1)
    cx, cy = center
    cv2.circle(img, center, radius, face, -1)
    cv2.circle(img, center, radius, ink, 6)
    sweep = (max_angle - min_angle) % 360 or 360
    majors = 10
    for k in range(majors + 1):
        a = min_angle + sweep * k / majors
        cv2.line(img, _polar(cx, cy, a, radius * 0.82), _polar(cx, cy, a, radius * 0.94), ink, 3)
        if labels is not None and k % 2 == 0 and k // 2 < len(labels):
            tx, ty = _polar(cx, cy, a, radius * 0.66)
            text = labels[k // 2]
            (tw, th), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, 0.6, 2)
            cv2.putText(img, text, (tx - tw // 2, ty + th // 2), cv2.FONT_HERSHEY_SIMPLEX, 0.6, ink, 2)
    for k in range(majors * 5 + 1):
        a = min_angle + sweep * k / (majors * 5)
        cv2.line(img, _polar(cx, cy, a, radius * 0.88), _polar(cx, cy, a, radius * 0.94), ink, 1)
    tip = _polar(cx, cy, needle_deg, radius * 0.8)
    tail = _polar(cx, cy, needle_deg + 180, radius * 0.18)
    cv2.line(img, tail, tip, needle_colour, 5, cv2.LINE_AA)
    cv2.circle(img, center, max(4, radius // 14), needle_colour, -1)
    return img


def stop_sign_frame() -> np.ndarray:
    """A red octagon with STOP on a post: yolov3-tiny's COCO "stop sign" class."""
    img = blank((180, 180, 180))
    pts = np.array(
        [_polar(320, 230, 22.5 + 45 * k, 150) for k in range(8)], dtype=np.int32
    )
    cv2.rectangle(img, (310, 380), (330, 480), (120, 120, 120), -1)
    cv2.fillPoly(img, [pts], (30, 30, 200))
    cv2.polylines(img, [pts], True, (255, 255, 255), 8)
    cv2.putText(img, "STOP", (200, 262), cv2.FONT_HERSHEY_SIMPLEX, 3, (255, 255, 255), 12)
    return img


def shapes_frame() -> np.ndarray:
    """Flat geometric shapes: nothing a COCO detector should call a person."""
    img = blank()
    cv2.rectangle(img, (40, 60), (200, 200), (200, 80, 40), -1)
    cv2.circle(img, (420, 140), 70, (40, 160, 60), -1)
    cv2.ellipse(img, (300, 360), (120, 50), 15, 0, 360, (60, 60, 200), -1)
    return img


def jpeg(image: np.ndarray, quality: int = 90) -> bytes:
    ok, buf = cv2.imencode(".jpg", image, [int(cv2.IMWRITE_JPEG_QUALITY), quality])
    assert ok
    return buf.tobytes()
