"""Video review: timestamped frames from a clip or the stream's last 90 seconds, the prompt
that asks for a review, and the report it must come back as.
"""

from __future__ import annotations

import base64
import io
import json
from collections import deque
from dataclasses import dataclass
from typing import Any

import av
import numpy as np
from pydantic import BaseModel, Field

from actors.common.errors import IriisError
from vision.frames import frame_for_vlm
from vision.vlm import SCHEMA_KEYS, cap, json_objects

# Every object a look or a review could be: a model asked for a review may answer with a look.
REVIEW_KEYS = SCHEMA_KEYS | frozenset({"summary", "problems", "timeline"})

HISTORY_SECONDS = 90.0
# 90 s at 5 fps of ~60 kB JPEGs is ~27 MB; the cap keeps a fast client from growing it further.
HISTORY_MAX_BYTES = 48 * 1024 * 1024
DEFAULT_SAMPLES = 8
MAX_SAMPLES = 16
MAX_CLIP_SECONDS = 600.0


class ClipError(IriisError, ValueError):
    """A clip that cannot be reviewed. ``code``: not_video, no_video_stream, too_long, empty."""

    code = "bad_clip"   # each raise names its own

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class TimedFrame:
    t: float  # seconds from the start of the clip or window
    image: np.ndarray  # BGR uint8


def _spread(count: int, wanted: int) -> list[int]:
    """``wanted`` indices spread evenly over ``range(count)``, always including the last."""
    if count <= 0:
        return []
    wanted = max(1, min(wanted, count))
    if wanted == 1:
        return [count - 1]
    return sorted({round(i * (count - 1) / (wanted - 1)) for i in range(wanted)})


def sample_clip(
    source: bytes | str, samples: int = DEFAULT_SAMPLES, *, max_seconds: float = MAX_CLIP_SECONDS
) -> list[TimedFrame]:
    """Frames spread evenly across a video clip (bytes or a path), the last frame always among them.

    Two passes: counting packets (no decoding) finds which frames to keep, then one decode
    converts only those, so memory holds ``samples`` images, not the clip.
    Raises ClipError when the data is not a video PyAV can open, has no video stream, is longer
    than ``max_seconds`` or has no frames.
    """
    samples = max(1, min(samples, MAX_SAMPLES))
    with _open(source) as container:
        stream = _video_stream(container)
        duration = _duration(container, stream)
        if duration is not None and duration > max_seconds:
            raise ClipError("too_long", f"the clip is {duration:.0f} s; the limit is {max_seconds:.0f} s")
        try:
            count = sum(1 for packet in container.demux(stream) if packet.size)
        except av.error.FFmpegError as exc:
            raise ClipError("not_video", "the clip could not be read") from exc
    if count == 0:
        raise ClipError("empty", "the clip has no frames")
    wanted = set(_spread(count, samples))
    kept: list[tuple[float, np.ndarray]] = []
    last: tuple[int, float, Any] | None = None
    first_t: float | None = None
    with _open(source) as container:
        stream = _video_stream(container)
        stream.thread_type = "AUTO"
        rate = float(stream.average_rate or 25)
        try:
            for index, frame in enumerate(container.decode(stream)):
                t = float(frame.time) if frame.time is not None else index / rate
                if t > max_seconds:
                    raise ClipError("too_long", f"the clip runs past {max_seconds:.0f} s")
                if first_t is None:
                    first_t = t
                if index in wanted:
                    kept.append((t, frame.to_ndarray(format="bgr24")))
                last = (index, t, frame)
        except av.error.FFmpegError as exc:
            # A damaged tail still leaves the frames before it worth reviewing.
            if last is None:
                raise ClipError("not_video", "the clip could not be decoded") from exc
    if last is None:
        raise ClipError("empty", "the clip has no frames")
    index, t, frame = last
    if index not in wanted:  # fewer frames decoded than packets counted: keep the real last one
        kept.append((t, frame.to_ndarray(format="bgr24")))
    start = first_t or 0.0
    return [TimedFrame(t=round(t - start, 3), image=img) for t, img in kept]


def _open(source: bytes | str) -> Any:
    clip: Any = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        return av.open(clip, mode="r")
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        raise ClipError("not_video", "the clip could not be opened as a video") from exc


def _video_stream(container: Any) -> Any:
    if not container.streams.video:
        raise ClipError("no_video_stream", "the clip has no video stream")
    return container.streams.video[0]


def _duration(container: Any, stream: Any) -> float | None:
    if stream.duration is not None and stream.time_base is not None:
        return float(stream.duration * stream.time_base)
    if container.duration is not None:
        return container.duration / 1_000_000
    return None


class FrameHistory:
    """The stream's recent frames as JPEG bytes, for "review the last 90 seconds"."""

    def __init__(self, *, seconds: float = HISTORY_SECONDS, max_bytes: int = HISTORY_MAX_BYTES) -> None:
        self.seconds = seconds
        self.max_bytes = max_bytes
        self._frames: deque[tuple[float, bytes]] = deque()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._frames)

    def add(self, t: float, jpeg: bytes) -> None:
        """Record a frame taken at ``t`` (seconds, monotonic)."""
        self._frames.append((t, jpeg))
        self._bytes += len(jpeg)
        while self._frames and (t - self._frames[0][0] > self.seconds or self._bytes > self.max_bytes):
            _, old = self._frames.popleft()
            self._bytes -= len(old)

    def sample(self, samples: int = DEFAULT_SAMPLES) -> list[tuple[float, bytes]]:
        """Evenly spread frames as (seconds from the window's start, jpeg), the newest included."""
        frames = list(self._frames)
        if not frames:
            return []
        start = frames[0][0]
        return [(round(frames[i][0] - start, 3), frames[i][1]) for i in _spread(len(frames), min(samples, MAX_SAMPLES))]


# -- the review request and its report --------------------------------------------------------

class TimelineEntry(BaseModel):
    t: float = Field(ge=0)
    event: str


class ReviewReport(BaseModel):
    summary: str
    problems: list[str] = Field(default_factory=list)
    timeline: list[TimelineEntry] = Field(default_factory=list)


REVIEW_SCHEMA = '{"summary": string, "problems": [string], "timeline": [{"t": seconds, "event": string}]}'


def build_review_messages(
    frames: list[TimedFrame], *, goal: str = "", question: str = "", max_images: int = MAX_SAMPLES
) -> list[dict[str, Any]]:
    """A multi-image request: each frame preceded by its timestamp. Frames beyond
    ``max_images`` (the provider's image limit) are thinned evenly, the last one kept."""
    picked = [frames[i] for i in _spread(len(frames), max(1, max_images))]
    intro = (
        "These frames were sampled from a video, in order, each labelled with its time in seconds. "
        "Review what happens. Reply with one JSON object only: " + REVIEW_SCHEMA + ". "
        "List mistakes, safety issues and anything left unfinished under problems."
    )
    if goal:
        intro += f" The owner's goal: {cap(goal, 300)}."
    if question:
        intro += f" The owner asks: {cap(question, 500)}"
    content: list[dict[str, Any]] = [{"type": "text", "text": intro}]
    for frame in picked:
        b64 = base64.b64encode(frame_for_vlm(frame.image)).decode()
        content.append({"type": "text", "text": f"t={frame.t:.1f}s"})
        content.append({"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64}"}})
    return [{"role": "user", "content": content}]


def parse_report(text: Any) -> ReviewReport:
    """A ReviewReport from the model's reply; prose becomes the summary. Never raises."""
    if not isinstance(text, str):
        text = json.dumps(text) if isinstance(text, (dict, list)) else ""
    try:
        objects = json_objects(text, REVIEW_KEYS)
    except RecursionError:
        objects = []
    obj = next((o for o in objects if "summary" in o or "timeline" in o), None)
    if obj is None:
        return ReviewReport(summary=cap(text, 1500) or "The reviewer returned nothing readable.")
    problems = obj.get("problems")
    problem_list = [cap(str(p), 300) for p in problems if str(p).strip()] if isinstance(problems, list) else []
    timeline: list[TimelineEntry] = []
    raw_timeline = obj.get("timeline")
    if isinstance(raw_timeline, list):
        for item in raw_timeline:
            if not isinstance(item, dict):
                continue
            t = item.get("t", item.get("time"))
            event = item.get("event", item.get("what", ""))
            try:
                seconds = float(str(t).rstrip("s")) if t is not None else None
            except ValueError:
                seconds = None
            if seconds is not None and seconds >= 0 and str(event).strip():
                timeline.append(TimelineEntry(t=seconds, event=cap(str(event), 300)))
    summary = obj.get("summary")
    return ReviewReport(
        summary=cap(summary, 1500) if isinstance(summary, str) and summary.strip() else "No summary given.",
        problems=problem_list[:20],
        timeline=sorted(timeline, key=lambda e: e.t)[:40],
    )
