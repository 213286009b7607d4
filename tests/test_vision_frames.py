"""Camera frame checks: what the socket accepts, what it refuses, and the VLM resize."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from PIL import Image

from tests.vision_draw import dial_frame, jpeg, text_frame
from vision.frames import (
    MAX_FRAME_BYTES,
    FrameError,
    decode_jpeg,
    frame_for_vlm,
    resize_long_side,
)


def test_good_jpeg_decodes_to_bgr_image_of_its_size() -> None:
    frame = dial_frame(0)
    image = decode_jpeg(jpeg(frame))
    assert image.shape == (480, 640, 3)
    assert image.dtype == np.uint8
    # Colour order survives: the face is near-white, the background light grey.
    assert np.abs(image.astype(int) - frame.astype(int)).mean() < 4


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"", "empty"),
        (b"hello, this is text", "not_jpeg"),
        (b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "not_jpeg"),
        (b"\xff\xd8\xff" + b"\x00" * 200, "undecodable"),
    ],
)
def test_bad_frames_get_a_stable_error_code(data: bytes, code: str) -> None:
    with pytest.raises(FrameError) as err:
        decode_jpeg(data)
    assert err.value.code == code


def test_png_image_is_refused_as_not_jpeg() -> None:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), "white").save(buf, format="PNG")
    with pytest.raises(FrameError) as err:
        decode_jpeg(buf.getvalue())
    assert err.value.code == "not_jpeg"


def test_truncated_jpeg_is_refused_not_padded_with_grey() -> None:
    data = jpeg(text_frame(["PRESSURE 42.5 kPa"]))
    with pytest.raises(FrameError) as err:
        decode_jpeg(data[: len(data) // 2])
    assert err.value.code == "undecodable"


def test_size_limit_at_under_and_over() -> None:
    data = jpeg(dial_frame(10))
    assert decode_jpeg(data, max_bytes=len(data)).shape == (480, 640, 3)
    assert decode_jpeg(data, max_bytes=len(data) + 1).shape == (480, 640, 3)
    with pytest.raises(FrameError) as err:
        decode_jpeg(data, max_bytes=len(data) - 1)
    assert err.value.code == "too_large"


def test_default_limit_refuses_a_frame_over_two_mebibytes() -> None:
    # Noise compresses badly: a large noisy frame is several MB as a JPEG.
    rng = np.random.default_rng(7)
    noisy = rng.integers(0, 256, (1800, 1800, 3), dtype=np.uint8)
    data = jpeg(noisy, quality=100)
    assert len(data) > MAX_FRAME_BYTES
    with pytest.raises(FrameError) as err:
        decode_jpeg(data)
    assert err.value.code == "too_large"


def test_declared_canvas_over_the_side_limit_is_refused_before_decoding() -> None:
    wide = np.full((8, 5000, 3), 200, np.uint8)
    data = jpeg(wide)
    with pytest.raises(FrameError) as err:
        decode_jpeg(data)
    assert err.value.code == "too_many_pixels"
    assert decode_jpeg(data, max_side=5000).shape == (8, 5000, 3)


def test_header_declaring_a_huge_canvas_is_refused_without_decoding() -> None:
    # A 16x16 JPEG whose frame header claims 60000 x 60000 pixels.
    data = bytearray(jpeg(np.zeros((16, 16, 3), np.uint8)))
    sof = data.find(b"\xff\xc0")
    data[sof + 5 : sof + 9] = (60000).to_bytes(2, "big") * 2
    with pytest.raises(FrameError) as err:
        decode_jpeg(bytes(data))
    assert err.value.code == "too_many_pixels"


@pytest.mark.parametrize(
    ("shape", "expected"),
    [
        ((1080, 1920), (360, 640)),  # landscape: long side to 640
        ((1920, 1080), (640, 360)),  # portrait
        ((480, 640), (480, 640)),  # already 640: unchanged
        ((200, 300), (200, 300)),  # small frames are never enlarged
    ],
)
def test_resize_long_side(shape: tuple[int, int], expected: tuple[int, int]) -> None:
    image = np.zeros((*shape, 3), np.uint8)
    assert resize_long_side(image).shape[:2] == expected


def test_resize_target_must_be_within_512_to_640() -> None:
    image = np.zeros((1000, 1000, 3), np.uint8)
    assert resize_long_side(image, 512).shape[:2] == (512, 512)
    for bad in (511, 641):
        with pytest.raises(ValueError):
            resize_long_side(image, bad)


def test_frame_for_vlm_is_a_jpeg_at_most_640_on_the_long_side() -> None:
    big = cv2.resize(text_frame(["Close valve B"]), (1600, 1200))
    data = frame_for_vlm(big)
    again = decode_jpeg(data)
    assert again.shape == (480, 640, 3)
