"""Video review: sampling clips and the stream's recent frames, the request, the report."""

from __future__ import annotations

import io
import json
from pathlib import Path

import av
import numpy as np
import pytest

from tests.vision_draw import dial_frame, jpeg
from vision.review import (
    ClipError,
    FrameHistory,
    TimedFrame,
    build_review_messages,
    parse_report,
    sample_clip,
)

FPS = 10
SECONDS = 3
STEP = 8  # frame i is filled with grey level i * STEP, so a sampled frame tells its index


def _clip(frames: int = FPS * SECONDS, container: str = "mp4", codec: str = "mpeg4") -> bytes:
    buf = io.BytesIO()
    with av.open(buf, mode="w", format=container) as out:
        stream = out.add_stream(codec, rate=FPS)
        stream.width, stream.height, stream.pix_fmt = 320, 240, "yuv420p"
        for i in range(frames):
            image = np.full((240, 320, 3), i * STEP, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="bgr24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return buf.getvalue()


@pytest.fixture(scope="module")
def clip() -> bytes:
    return _clip()


def _index(frame: TimedFrame) -> int:
    return round(float(frame.image.mean()) / STEP)


def test_clip_is_sampled_evenly_with_timestamps_and_the_last_frame(clip: bytes) -> None:
    frames = sample_clip(clip, samples=5)
    assert len(frames) == 5
    indices = [_index(f) for f in frames]
    assert indices[0] == 0 and indices[-1] == FPS * SECONDS - 1
    assert indices == sorted(indices) and len(set(indices)) == 5
    for frame, index in zip(frames, indices):
        assert frame.t == pytest.approx(index / FPS, abs=1e-6)
        assert frame.image.shape == (240, 320, 3)


def test_clip_from_a_path_and_more_samples_than_frames(tmp_path: Path) -> None:
    path = tmp_path / "short.mp4"
    path.write_bytes(_clip(frames=4))
    frames = sample_clip(str(path), samples=8)
    assert [_index(f) for f in frames] == [0, 1, 2, 3]


def test_h264_clip_with_reordered_frames_is_sampled_in_time_order() -> None:
    frames = sample_clip(_clip(frames=25, codec="libx264"), samples=4)
    assert [f.t for f in frames] == sorted(f.t for f in frames)
    assert _index(frames[-1]) == 24


def test_not_a_video_is_refused() -> None:
    with pytest.raises(ClipError) as err:
        sample_clip(b"this is not a video at all" * 10)
    assert err.value.code == "not_video"


def test_audio_only_file_has_no_video_stream() -> None:
    buf = io.BytesIO()
    with av.open(buf, mode="w", format="wav") as out:
        stream = out.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(np.zeros((1, 800), np.int16), format="s16", layout="mono")
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with pytest.raises(ClipError) as err:
        sample_clip(buf.getvalue())
    assert err.value.code == "no_video_stream"


def test_clip_over_the_length_limit_is_refused(clip: bytes) -> None:
    with pytest.raises(ClipError) as err:
        sample_clip(clip, max_seconds=1.0)
    assert err.value.code == "too_long"
    assert len(sample_clip(clip, samples=2, max_seconds=3.0)) == 2


def test_history_keeps_only_the_last_ninety_seconds() -> None:
    history = FrameHistory()
    for t in range(0, 121):
        history.add(float(t), f"frame{t}".encode())
    assert len(history) == 91  # t = 30 .. 120
    picked = history.sample(4)
    assert [t for t, _ in picked] == [0.0, 30.0, 60.0, 90.0]
    assert picked[-1][1] == b"frame120"  # the newest is always included


def test_history_is_bounded_in_bytes_too() -> None:
    history = FrameHistory(max_bytes=1000)
    for t in range(50):
        history.add(t * 0.1, bytes(100))
    assert len(history) == 10
    assert history.sample(3)[-1][0] == pytest.approx(0.9)
    assert FrameHistory().sample() == []


def test_review_request_labels_each_frame_and_respects_the_image_limit() -> None:
    frames = [TimedFrame(t=i * 1.5, image=dial_frame(-135 + i * 20)) for i in range(10)]
    messages = build_review_messages(frames, goal="Bleed the radiator", max_images=4)
    parts = messages[0]["content"]
    images = [p for p in parts if p["type"] == "image_url"]
    labels = [p["text"] for p in parts if p["type"] == "text" and p["text"].startswith("t=")]
    assert len(images) == 4
    assert labels[0] == "t=0.0s" and labels[-1] == "t=13.5s"
    assert "Bleed the radiator" in parts[0]["text"] and '"timeline"' in parts[0]["text"]


def test_report_parses_and_repairs() -> None:
    reply = "Here you go:\n```json\n" + json.dumps(
        {
            "summary": "The owner bled the radiator.",
            "problems": ["valve left open", ""],
            "timeline": [{"t": "12.5s", "event": "valve closed"}, {"t": 3, "event": "valve opened"}, {"t": "soon", "event": "?"}, "junk"],
        }
    ) + "\n```"
    report = parse_report(reply)
    assert report.summary == "The owner bled the radiator."
    assert report.problems == ["valve left open"]
    assert [(e.t, e.event) for e in report.timeline] == [(3.0, "valve opened"), (12.5, "valve closed")]


@pytest.mark.parametrize("reply", ["", None, 17, "{", "The video shows a kitchen."])
def test_unreadable_report_becomes_a_summary_and_never_raises(reply: object) -> None:
    report = parse_report(reply)
    assert report.summary
    assert report.problems == [] and report.timeline == []


def test_sampled_frames_round_trip_as_jpeg(clip: bytes) -> None:
    frame = sample_clip(clip, samples=1)[0]
    assert frame.t == pytest.approx(2.9)
    assert len(jpeg(frame.image)) > 0
