"""Analogue dial reading by needle geometry (OpenCV, no model).

1. Find the dial face: a large circle whose rim is on edges (Hough, refined by a least-squares
   fit), or, for a camera that is not square-on, an ellipse stretched back into a circle.
2. Find the needle: cast rays from the centre every half degree and score each by how much of
   it runs over needle-coloured pixels between 15% and 75% of the radius. That band skips the hub,
   the tick marks near the rim, and most of the printed numbers, which cover only part of a ray.
3. Map the needle angle onto the instrument's sweep and span.

Angles are degrees clockwise from 12 o'clock, as in :class:`vision.procedure.Instrument`.
"""

from __future__ import annotations

import math
from typing import Any

import cv2
import numpy as np
from pydantic import BaseModel, Field

from vision.procedure import Instrument

RAY_INNER = 0.15
RAY_OUTER = 0.75
ANGLE_STEP = 0.5
MIN_RIM_SUPPORT = 0.6
STRONG_RIM_SUPPORT = 0.9
# A needle drawn exactly at a span end reads a hair outside it; this much still counts as the end.
EDGE_TOLERANCE_DEG = 2.0


class DialCircle(BaseModel):
    cx: float
    cy: float
    r: float = Field(gt=0)


class DialReading(BaseModel):
    value: float
    unit: str
    angle: float = Field(description="needle angle, degrees clockwise from 12 o'clock, 0-360")
    confidence: float = Field(ge=0.0, le=1.0)
    in_sweep: bool = Field(description="false when the needle points into the dead zone")
    circle: DialCircle


def find_dial(gray: np.ndarray) -> tuple[DialCircle, float] | None:
    """The most convincing round dial face in a grayscale image and its rim support, or None.

    A candidate circle counts only when edges run along most of its rim: Hough also "finds"
    circles in text and clutter, and a needle read off one of those is nonsense.
    """
    height, width = gray.shape[:2]
    short = min(height, width)
    blurred = cv2.medianBlur(gray, 5)
    edges = cv2.Canny(blurred, 60, 160)
    circles = cv2.HoughCircles(
        blurred,
        cv2.HOUGH_GRADIENT,
        dp=1.2,
        minDist=short / 2,
        param1=120,
        param2=45,
        minRadius=int(short * 0.12),
        maxRadius=int(short * 0.52),
    )
    candidates: list[DialCircle] = []
    if circles is not None:
        # OpenCV orders by accumulator votes; the face is usually the largest strong one.
        for cx, cy, r in sorted(circles[0][:5], key=lambda c: -c[2]):
            candidates.append(refine_circle(edges, DialCircle(cx=float(cx), cy=float(cy), r=float(r))))
    contour = _roundest_contour(edges, short)
    if contour is not None:
        candidates.append(contour)
    for circle in candidates:
        support = rim_support(edges, circle)
        if support >= MIN_RIM_SUPPORT:
            return circle, support
    return None


def locate_dial(gray: np.ndarray) -> tuple[DialCircle, np.ndarray | None] | None:
    """The dial's circle, and the affine matrix to apply first when it is seen at an angle.

    A circle whose whole rim is on edges wins. Otherwise an ellipse (a tilted view) is preferred
    to a circle that only partly fits, since reading a tilted face as a circle skews the angle.
    """
    found = find_dial(gray)
    if found is not None and found[1] >= STRONG_RIM_SUPPORT:
        return found[0], None
    tilted = find_dial_ellipse(gray)
    if tilted is not None:
        matrix, circle, _ratio = tilted
        return circle, matrix
    return (found[0], None) if found is not None else None


def rim_support(edges: np.ndarray, circle: DialCircle, slack: int = 3) -> float:
    """Fraction of the circle's rim (sampled every 2 degrees) with an edge pixel within ``slack``."""
    near = cv2.dilate(edges, np.ones((2 * slack + 1, 2 * slack + 1), np.uint8)) > 0
    height, width = edges.shape[:2]
    angles = np.deg2rad(np.arange(0, 360, 2.0))
    xs = np.rint(circle.cx + circle.r * np.sin(angles)).astype(int)
    ys = np.rint(circle.cy - circle.r * np.cos(angles)).astype(int)
    inside = (xs >= 0) & (xs < width) & (ys >= 0) & (ys < height)
    if not inside.any():
        return 0.0
    # Rim points outside the frame count against the circle: a dial cut off by the frame edge
    # is not read.
    return float(near[ys[inside], xs[inside]].sum()) / len(angles)


def refine_circle(edges: np.ndarray, rough: DialCircle, band: float = 0.08) -> DialCircle:
    """Least-squares circle through the edge pixels near ``rough``.

    Hough's accumulator is coarse (a few pixels); an off-centre circle skews every needle
    angle, so fit the rim's edge pixels exactly (Kasa's algebraic fit).
    """
    ys, xs = np.nonzero(edges)
    dist = np.hypot(xs - rough.cx, ys - rough.cy)
    near = np.abs(dist - rough.r) < rough.r * band
    if near.sum() < 30:
        return rough
    x = xs[near].astype(np.float64)
    y = ys[near].astype(np.float64)
    a = np.column_stack([x, y, np.ones_like(x)])
    b = x * x + y * y
    (c0, c1, c2), *_ = np.linalg.lstsq(a, b, rcond=None)
    cx, cy = c0 / 2, c1 / 2
    r2 = c2 + cx * cx + cy * cy
    if r2 <= 0 or math.hypot(cx - rough.cx, cy - rough.cy) > rough.r * band:
        return rough
    return DialCircle(cx=float(cx), cy=float(cy), r=float(math.sqrt(r2)))


def _roundest_contour(edges: np.ndarray, short: int) -> DialCircle | None:
    closed = cv2.dilate(edges, np.ones((3, 3), np.uint8))
    contours, _ = cv2.findContours(closed, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
    best: tuple[float, DialCircle] | None = None
    for contour in contours:
        (cx, cy), r = cv2.minEnclosingCircle(contour)
        if r < short * 0.12:
            continue
        area = cv2.contourArea(contour)
        roundness = area / (math.pi * r * r)
        if roundness < 0.7:
            continue
        score = roundness * r
        if best is None or score > best[0]:
            best = (score, DialCircle(cx=cx, cy=cy, r=r))
    return best[1] if best else None


def find_dial_ellipse(gray: np.ndarray) -> tuple[np.ndarray, DialCircle, float] | None:
    """A dial seen at an angle: (affine matrix that makes it round, its circle there, axis ratio).

    A camera that is not square-on sees the face as an ellipse. Stretching the ellipse's short
    axis back to the long one undoes a mild tilt (an affine view; strong perspective is not
    corrected). Only ellipses with axis ratio 0.6-1.0 that their contour fills are accepted.
    """
    height, width = gray.shape[:2]
    short = min(height, width)
    edges = cv2.Canny(cv2.medianBlur(gray, 5), 60, 160)
    closed = cv2.dilate(edges, np.ones((3, 3), np.uint8))
    contours, _ = cv2.findContours(closed, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    best: tuple[float, Any] | None = None
    for contour in contours:
        if len(contour) < 40:
            continue
        ellipse = cv2.fitEllipse(contour)
        (_, _), (axis_w, axis_h), _ = ellipse
        major, minor = max(axis_w, axis_h), min(axis_w, axis_h)
        if minor <= 0 or major / 2 < short * 0.12 or minor / major < 0.6:
            continue
        fill = cv2.contourArea(contour) / (math.pi * axis_w * axis_h / 4)
        if not 0.9 <= fill <= 1.1:
            continue
        if best is None or major > best[0]:
            best = (major, ellipse)
    if best is None:
        return None
    (cx, cy), (axis_w, axis_h), angle_deg = best[1]
    radius = max(axis_w, axis_h) / 2
    theta = math.radians(angle_deg)
    rot = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    scale = np.diag([2 * radius / axis_w, 2 * radius / axis_h])
    linear = rot @ scale @ rot.T
    centre = np.array([cx, cy])
    matrix = np.hstack([linear, (centre - linear @ centre).reshape(2, 1)])
    return matrix, DialCircle(cx=cx, cy=cy, r=radius), min(axis_w, axis_h) / max(axis_w, axis_h)


def needle_mask(gray: np.ndarray, circle: DialCircle) -> np.ndarray:
    """Boolean mask of needle-coloured pixels inside the face.

    The needle contrasts with the face; which way is decided by the face's median brightness.
    """
    height, width = gray.shape[:2]
    inside = np.zeros((height, width), np.uint8)
    cv2.circle(inside, (round(circle.cx), round(circle.cy)), max(1, round(circle.r * 0.9)), 255, -1)
    face = gray[inside > 0]
    if face.size == 0:
        return np.zeros((height, width), bool)
    level, _ = cv2.threshold(face.reshape(-1, 1), 0, 255, cv2.THRESH_BINARY + cv2.THRESH_OTSU)
    bright_face = float(np.median(face)) >= level
    mask = gray < level if bright_face else gray > level
    return mask & (inside > 0)


def ray_scores(mask: np.ndarray, circle: DialCircle, step: float = ANGLE_STEP) -> np.ndarray:
    """For each angle (0, step, 2*step, ...), the fraction of the ray band on needle pixels."""
    height, width = mask.shape[:2]
    angles = np.deg2rad(np.arange(0.0, 360.0, step))
    radii = np.linspace(RAY_INNER, RAY_OUTER, 48) * circle.r
    xs = circle.cx + np.outer(np.sin(angles), radii)
    ys = circle.cy - np.outer(np.cos(angles), radii)
    xi = np.clip(np.rint(xs).astype(int), 0, width - 1)
    yi = np.clip(np.rint(ys).astype(int), 0, height - 1)
    return mask[yi, xi].mean(axis=1)


def needle_angle(scores: np.ndarray, step: float = ANGLE_STEP) -> tuple[float, float]:
    """(angle in degrees, confidence 0-1) from ray scores.

    The angle is the score-weighted circular mean within 6 degrees of the best ray, which puts it
    on the needle's centre line rather than one edge. Confidence is the best ray's coverage,
    reduced when another direction, away from the needle, scores nearly as high.
    """
    n = len(scores)
    best = int(np.argmax(scores))
    peak = float(scores[best])
    if peak <= 0:
        return 0.0, 0.0
    half = max(1, int(round(6.0 / step)))
    idx = np.arange(best - half, best + half + 1) % n
    weights = scores[idx]
    rad = np.deg2rad(idx * step)
    angle = math.degrees(math.atan2(float(np.sum(weights * np.sin(rad))), float(np.sum(weights * np.cos(rad)))))
    away = np.ones(n, bool)
    far = max(1, int(round(20.0 / step)))
    away[np.arange(best - far, best + far + 1) % n] = False
    rival = float(scores[away].max()) if away.any() else 0.0
    confidence = peak * (1.0 - rival / peak) if peak > 0 else 0.0
    return angle % 360.0, float(min(max(confidence, 0.0), 1.0))


def angle_to_value(angle: float, instrument: Instrument) -> tuple[float, bool]:
    """(value, in_sweep). In the dead zone the value is clamped to the nearer end of the span."""
    rel = (angle - instrument.min_angle) % 360.0
    sweep = instrument.sweep
    if rel <= sweep + 1e-9:
        return instrument.min_value + rel / sweep * instrument.span, True
    past_max = rel - sweep
    before_min = 360.0 - rel
    if past_max < before_min:
        return instrument.max_value, past_max <= EDGE_TOLERANCE_DEG
    return instrument.min_value, before_min <= EDGE_TOLERANCE_DEG


def read_dial(
    image: np.ndarray, instrument: Instrument, circle: DialCircle | None = None
) -> DialReading | None:
    """Read ``instrument`` off a BGR (or grayscale) frame; None when no dial or needle is found.

    Assumes the gauge is upright in the frame (12 o'clock up); camera roll is not corrected.
    In a tilted view the returned circle is in the straightened image's coordinates.
    """
    gray = image if image.ndim == 2 else cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    if circle is None:
        located = locate_dial(gray)
        if located is None:
            return None
        circle, matrix = located
        if matrix is not None:
            height, width = gray.shape[:2]
            gray = cv2.warpAffine(
                gray, matrix, (width, height), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
            )
    mask = needle_mask(gray, circle)
    scores = ray_scores(mask, circle)
    angle, confidence = needle_angle(scores)
    # A needle covers nearly its whole ray band; printed numbers or a shadow cover a little.
    if confidence < 0.25:
        return None
    value, in_sweep = angle_to_value(angle, instrument)
    if not in_sweep:
        confidence *= 0.5
    return DialReading(
        value=round(value, 6),
        unit=instrument.unit,
        angle=round(angle, 3),
        confidence=round(confidence, 3),
        in_sweep=in_sweep,
        circle=circle,
    )
