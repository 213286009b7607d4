"""Camera frames: JPEG checks, decoding with limits, and the resize the VLM gets.

A frame arrives as raw bytes from a WebSocket. Everything here either returns a BGR image
(OpenCV's layout, uint8, HxWx3) or raises :class:`FrameError` with a stable ``code`` that the
socket handler turns into an error event; the stream goes on after a bad frame.
"""

from __future__ import annotations

import io
from typing import Literal

import cv2
import numpy as np
from PIL import Image, UnidentifiedImageError

from actors.common.errors import IriisError

# A 640x480 camera JPEG is 30-120 kB; 2 MiB leaves room for 1080p stills without letting one
# client push arbitrarily large buffers through the socket.
MAX_FRAME_BYTES = 2 * 1024 * 1024
# Decompression-bomb guard: a tiny JPEG can declare a huge canvas. 4096 px covers 4K cameras.
MAX_FRAME_SIDE = 4096
# The VLM gets the frame at 512-640 px on its long side (spec section 12).
VLM_MIN_SIDE = 512
VLM_MAX_SIDE = 640

FrameErrorCode = Literal["empty", "not_jpeg", "too_large", "too_many_pixels", "undecodable"]


class FrameError(IriisError, ValueError):
    """A frame that cannot be used. ``code`` is stable; the message is for people."""

    code = "bad_frame"   # each raise names its own

    def __init__(self, code: FrameErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: FrameErrorCode = code


def looks_like_jpeg(data: bytes) -> bool:
    """True when ``data`` starts with a JPEG start-of-image marker followed by another marker."""
    return len(data) >= 4 and data[0] == 0xFF and data[1] == 0xD8 and data[2] == 0xFF


def jpeg_size(data: bytes) -> tuple[int, int]:
    """(width, height) read from the JPEG header without decoding the pixels.

    Raises FrameError("undecodable") when the header cannot be read.
    """
    try:
        with Image.open(io.BytesIO(data)) as img:
            if img.format != "JPEG":
                raise FrameError("not_jpeg", f"frame is {img.format}, not JPEG")
            return img.size
    except Image.DecompressionBombError as exc:
        raise FrameError("too_many_pixels", "the JPEG declares an enormous canvas") from exc
    except (UnidentifiedImageError, OSError, SyntaxError, ImportError) as exc:
        # ImportError: once Ultralytics is imported it patches Image.open to retry unknown data
        # with an optional HEIF plugin, and that import fails when the plugin is absent.
        raise FrameError("undecodable", "the JPEG header could not be read") from exc


def decode_jpeg(
    data: bytes, *, max_bytes: int = MAX_FRAME_BYTES, max_side: int = MAX_FRAME_SIDE
) -> np.ndarray:
    """Decode one camera frame to a BGR uint8 image.

    Raises FrameError with code ``empty``, ``too_large`` (over ``max_bytes``), ``not_jpeg``,
    ``too_many_pixels`` (a side over ``max_side``) or ``undecodable`` (truncated or corrupt).
    """
    if not data:
        raise FrameError("empty", "empty frame")
    if len(data) > max_bytes:
        raise FrameError("too_large", f"frame is {len(data)} bytes; the limit is {max_bytes}")
    if not looks_like_jpeg(data):
        raise FrameError("not_jpeg", "frame is not a JPEG (no start-of-image marker)")
    width, height = jpeg_size(data)
    if width > max_side or height > max_side:
        raise FrameError(
            "too_many_pixels", f"frame is {width}x{height}; the largest side allowed is {max_side}"
        )
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if image is None or image.size == 0:
        raise FrameError("undecodable", "the JPEG data could not be decoded")
    if not _has_end_marker(data):
        # libjpeg pads a truncated scan with grey and only warns; a half-grey frame would
        # mislead detection and the VLM, so refuse it like any other corrupt frame.
        raise FrameError("undecodable", "the JPEG is truncated (no end-of-image marker)")
    return image


def _has_end_marker(data: bytes) -> bool:
    # Some encoders append padding or metadata after EOI, so look near the end, not only at it.
    return b"\xff\xd9" in data[-64:]


def encode_jpeg(image: np.ndarray, quality: int = 85) -> bytes:
    """Encode a BGR image as JPEG bytes."""
    ok, buf = cv2.imencode(".jpg", image, [int(cv2.IMWRITE_JPEG_QUALITY), quality])
    if not ok:
        raise ValueError("OpenCV could not encode the image as JPEG")
    return buf.tobytes()


def resize_long_side(image: np.ndarray, max_side: int = VLM_MAX_SIDE) -> np.ndarray:
    """Shrink ``image`` so its long side is at most ``max_side``; never enlarge it.

    Enlarging a small frame adds no detail and costs the provider more image tokens.
    """
    if not VLM_MIN_SIDE <= max_side <= VLM_MAX_SIDE:
        raise ValueError(f"max_side must be between {VLM_MIN_SIDE} and {VLM_MAX_SIDE}")
    height, width = image.shape[:2]
    long_side = max(height, width)
    if long_side <= max_side:
        return image
    scale = max_side / long_side
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    return cv2.resize(image, size, interpolation=cv2.INTER_AREA)


def frame_for_vlm(image: np.ndarray, max_side: int = VLM_MAX_SIDE, quality: int = 85) -> bytes:
    """The JPEG the VLM receives: resized to at most ``max_side`` on the long side."""
    return encode_jpeg(resize_long_side(image, max_side), quality)
