"""Analogue dial reading by needle geometry on gauges the test draws at known angles."""

from __future__ import annotations

import cv2
import pytest
from pydantic import ValidationError

from tests.vision_draw import blank, dial_frame, jpeg, shapes_frame, stop_sign_frame, text_frame
from vision.dial import angle_to_value, read_dial
from vision.frames import decode_jpeg
from vision.procedure import Instrument

PRESSURE = Instrument(name="pressure", unit="kPa", min_value=0, max_value=100)
BAR = Instrument(name="line", unit="bar", min_value=0, max_value=10, min_angle=-120, max_angle=120)
THERMO = Instrument(name="oven", unit="°C", min_value=-30, max_value=50, min_angle=-135, max_angle=135)
HALF = Instrument(name="tank", unit="MPa", min_value=0, max_value=1.6, min_angle=-90, max_angle=90)

# Within 1.5% of the span: a quarter of a minor division on a 50-division gauge.
TOLERANCE = 0.015


def _expected(instrument: Instrument, needle: float) -> float:
    return instrument.min_value + ((needle - instrument.min_angle) % 360) / instrument.sweep * instrument.span


CASES = [
    (PRESSURE, needle) for needle in (-135, -100, -45, 0, 37, 90, 135)
] + [
    (BAR, needle) for needle in (-120, -60, 12, 75, 120)
] + [
    (THERMO, needle) for needle in (-130, -20, 60, 130)
] + [
    (HALF, needle) for needle in (-90, -33, 0, 45, 89)
]


@pytest.mark.parametrize(("instrument", "needle"), CASES, ids=lambda v: getattr(v, "name", str(v)))
def test_reading_matches_the_drawn_needle(instrument: Instrument, needle: float) -> None:
    frame = dial_frame(
        needle, min_angle=instrument.min_angle, max_angle=instrument.max_angle, labels=["0", "2", "4", "6", "8", "10"]
    )
    reading = read_dial(decode_jpeg(jpeg(frame)), instrument)
    assert reading is not None
    assert reading.unit == instrument.unit
    assert reading.in_sweep
    expected = _expected(instrument, needle)
    assert abs(reading.value - expected) <= TOLERANCE * instrument.span, (reading, expected)
    assert reading.confidence >= 0.5


@pytest.mark.parametrize("needle", [-80, 20, 110])
def test_red_needle_small_off_centre_dial_with_clutter(needle: float) -> None:
    frame = dial_frame(needle, center=(230, 200), radius=110, needle_colour=(30, 30, 210), clutter=True)
    reading = read_dial(frame, PRESSURE)
    assert reading is not None
    assert abs(reading.value - _expected(PRESSURE, needle)) <= TOLERANCE * PRESSURE.span
    assert abs(reading.circle.cx - 230) < 4 and abs(reading.circle.cy - 200) < 4


@pytest.mark.parametrize("needle", [-110, 50])
def test_light_needle_on_a_dark_face(needle: float) -> None:
    frame = dial_frame(needle, face=(30, 30, 30), ink=(235, 235, 235), needle_colour=(245, 245, 245))
    reading = read_dial(frame, PRESSURE)
    assert reading is not None
    assert abs(reading.value - _expected(PRESSURE, needle)) <= TOLERANCE * PRESSURE.span


@pytest.mark.parametrize(("squash_x", "squash_y"), [(1.0, 0.92), (1.0, 0.75), (0.7, 1.0)])
@pytest.mark.parametrize("needle", [-100, 0, 80])
def test_dial_seen_at_an_angle_is_read_through_its_ellipse(squash_x: float, squash_y: float, needle: float) -> None:
    # A camera tilted off square-on sees the face as an ellipse.
    frame = dial_frame(needle, labels=["0", "20", "40", "60", "80", "100"])
    tilted = cv2.resize(frame, (round(640 * squash_x), round(480 * squash_y)), interpolation=cv2.INTER_AREA)
    reading = read_dial(tilted, PRESSURE)
    assert reading is not None
    assert abs(reading.value - _expected(PRESSURE, needle)) <= TOLERANCE * PRESSURE.span


def test_needle_in_the_dead_zone_is_clamped_and_flagged() -> None:
    reading = read_dial(dial_frame(160), PRESSURE)  # past max (135) toward the bottom
    assert reading is not None
    assert not reading.in_sweep
    assert reading.value == PRESSURE.max_value
    in_sweep = read_dial(dial_frame(130), PRESSURE)
    assert in_sweep is not None and reading.confidence < in_sweep.confidence


def test_no_dial_in_view_gives_no_reading() -> None:
    assert read_dial(blank(), PRESSURE) is None
    assert read_dial(text_frame(["PRESSURE 42.5 kPa", "no gauge here"]), PRESSURE) is None
    assert read_dial(shapes_frame(), PRESSURE) is None
    assert read_dial(stop_sign_frame(), PRESSURE) is None


def test_face_without_a_needle_gives_no_reading() -> None:
    frame = dial_frame(0)
    # Paint the needle out with the face colour (hub included).
    plain = dial_frame(0, needle_colour=(250, 250, 250))
    assert read_dial(plain, PRESSURE) is None
    assert read_dial(frame, PRESSURE) is not None


def test_angle_mapping_wraps_through_twelve_o_clock() -> None:
    wrap = Instrument(name="w", unit="rpm", min_value=0, max_value=300, min_angle=300, max_angle=60)
    assert wrap.sweep == 120
    assert angle_to_value(300, wrap) == (0, True)
    assert angle_to_value(0, wrap) == (150, True)
    assert angle_to_value(60, wrap) == (300, True)
    assert angle_to_value(90, wrap) == (300, False)  # nearer the max end
    assert angle_to_value(250, wrap) == (0, False)  # nearer the min end
    # A hair past either end still reads as that end, in sweep.
    assert angle_to_value(61.5, wrap) == (300, True)
    assert angle_to_value(298.5, wrap) == (0, True)


def test_full_circle_instrument_maps_every_angle() -> None:
    compass = Instrument(name="c", unit="deg", min_value=0, max_value=360, min_angle=0, max_angle=360)
    assert compass.sweep == 360
    value, in_sweep = angle_to_value(270, compass)
    assert in_sweep and value == pytest.approx(270)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_value": 10, "max_value": 10},
        {"min_value": 10, "max_value": 0},
        {"min_value": 0, "max_value": 1, "min_angle": 45, "max_angle": 45},
        {"min_value": 0, "max_value": 1, "safe_min": 0.8, "safe_max": 0.2},
    ],
)
def test_instrument_rejects_impossible_spans(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        Instrument(name="x", unit="u", **kwargs)


def test_reading_is_deterministic_and_serialisable() -> None:
    frame = dial_frame(33)
    first = read_dial(frame, PRESSURE)
    assert first is not None
    assert read_dial(frame.copy(), PRESSURE) == first
    assert type(first).model_validate_json(first.model_dump_json()) == first
