"""A video review job (the last seconds of the stream, or an uploaded clip): frames sampled,
one look at all of them, progress as `job` events and the result as a `report` event. No Ray:
the actor gives the frames, the router and where events go."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from actors.camera.events import CameraEvent, Job, Report
from actors.camera.look import look
from actors.providers.failover import RouterClient
from actors.providers.openai_compat import OpenAICompatProvider
from actors.store.store import Store
from vision.frames import FrameError, decode_jpeg
from vision.review import FrameHistory, ReviewReport, TimedFrame, build_review_messages, parse_report, sample_clip
from vision.vlm import VlmAnswer

log = logging.getLogger(__name__)

FAILED_LOGGED = "the review failed; it was logged"


async def history_frames(history: FrameHistory, seconds: float) -> list[TimedFrame]:
    """The stream's kept frames from the last ``seconds``, decoded."""
    sampled = history.sample()
    if sampled:
        newest = sampled[-1][0]
        sampled = [(t, jpeg) for t, jpeg in sampled if t >= newest - seconds]
    return [TimedFrame(t=t, image=await asyncio.to_thread(decode_jpeg, jpeg)) for t, jpeg in sampled]


async def review_frames(store: Store, history: FrameHistory, seconds: float, file_id: int | None) -> list[TimedFrame]:
    """What a review looks at: an uploaded clip (`file_id`, sampled), or the stream's last seconds."""
    if file_id is None:
        return await history_frames(history, seconds)
    found = await store.get_file(file_id)
    if found is None:
        raise ValueError(f"no file {file_id}")
    return await asyncio.to_thread(sample_clip, found[1])


async def ask_for_report(router: RouterClient | None, providers: dict[str, OpenAICompatProvider],
                         frames: list[TimedFrame], *, goal: str, question: str, timeout: float) -> ReviewReport:
    """The vision model's report on ``frames``; without one, a report that says so."""
    if router is not None:
        candidates = await router.candidates(1)
        max_images = max((c.max_images for c in candidates), default=1) or 1
        messages = build_review_messages(frames, goal=goal, question=question, max_images=max_images)
        result = await look(router, providers, messages, timeout=timeout, person_waiting=True,
                            fallback=lambda: VlmAnswer(say="", status="unsure"))
        if result.source == "model":
            return parse_report(result.text)
    return ReviewReport(summary=f"No vision model answered, so {len(frames)} frames were sampled but not "
                                "reviewed; configure IRIIS_VISION_MODEL or a vision provider.")


async def run_review(job: int, push: Callable[[CameraEvent], None],
                     frames: Callable[[], Awaitable[list[TimedFrame]]],
                     ask: Callable[[list[TimedFrame]], Awaitable[ReviewReport]],
                     failed: Callable[[Exception], None]) -> None:
    """One job from sampling to report. A frame or file problem fails the job with its reason;
    anything else is handed to ``failed`` (logged and reported) and fails it plainly."""
    def progress(stage: Any, fraction: float, **extra: Any) -> None:
        push(Job(job=job, stage=stage, progress=fraction, **extra))

    try:
        progress("sampling", 0.1)
        sampled = await frames()
        if not sampled:
            progress("failed", 1.0, error="no frames to review yet")
            return
        progress("asking", 0.4, frames=len(sampled))
        report = await ask(sampled)
        progress("done", 1.0)
        push(Report.of(job, len(sampled), report))
    except (FrameError, ValueError) as exc:
        progress("failed", 1.0, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - background boundary: the caller logs and reports it
        failed(exc)
        progress("failed", 1.0, error=FAILED_LOGGED)
