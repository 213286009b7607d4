"""Audio (and a video's soundtrack): container facts, 16 kHz WAV for transcription, and the
transcript from the speech providers."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel

from actors.providers.speech import transcribe_any
from actors.providers.types import ProviderError
from actors.providers.vision_http import configured_providers
from actors.tools.inspect.model import NO_SPEECH, Inspection, inspect_timeout

# Speech endpoints commonly refuse uploads over 25 MB; 16 kHz mono WAV is 32 kB/s.
MAX_UPLOAD_BYTES = 24 * 1024 * 1024
MAX_TRANSCRIBE_SECONDS = MAX_UPLOAD_BYTES // 32_000
# Formats OpenAI-compatible transcription endpoints accept as they are.
_STT_FORMATS = frozenset({"flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "wav", "webm"})


class MediaFacts(BaseModel):
    container: str
    duration: float | None = None
    video: str | None = None
    audio: str | None = None
    width: int = 0
    height: int = 0
    has_audio: bool = False
    has_video: bool = False


def video_stream(container: Any) -> Any:
    # Cover art in an MP3 or M4A shows up as a one-picture video stream; that is audio.
    from av.stream import Disposition  # lazy: PyAV (FFmpeg) loads only for audio or video

    for stream in container.streams.video:
        if not (stream.disposition & Disposition.attached_pic):
            return stream
    return None


def _duration(container: Any, stream: Any | None) -> float | None:
    if container.duration:
        return container.duration / 1_000_000
    if stream is not None and stream.duration and stream.time_base:
        return float(stream.duration * stream.time_base)
    return None


def media_facts(data: bytes) -> MediaFacts:
    import av  # lazy: PyAV (FFmpeg) loads only for audio or video

    with av.open(io.BytesIO(data)) as container:
        video = video_stream(container)
        audio = container.streams.audio[0] if container.streams.audio else None
        # FFmpeg names the MP4 family "mov,mp4,m4a,..."; people know it as mp4.
        names = container.format.name.split(",")
        facts = MediaFacts(container="mp4" if "mp4" in names else names[0],
                           duration=_duration(container, video or audio))
        if video is not None:
            rate = video.average_rate or video.guessed_rate
            fps = f", {float(rate):.3g} fps" if rate else ""
            facts.video = f"{video.codec_context.name}, {video.codec_context.width} x {video.codec_context.height} px{fps}"
            facts.width, facts.height = video.codec_context.width, video.codec_context.height
            facts.has_video = True
        if audio is not None:
            layout = audio.codec_context.layout
            channels = {1: "mono", 2: "stereo"}.get(layout.nb_channels, f"{layout.nb_channels} channels")
            facts.audio = f"{audio.codec_context.name}, {audio.codec_context.sample_rate} Hz, {channels}"
            facts.has_audio = True
    return facts


def clock(seconds: float, long: bool = False) -> str:
    # Round first so 59.97 s reads 1:00.0, not 0:60.0.
    if long:
        minutes, secs = divmod(round(max(seconds, 0.0)), 60)
        hours, minutes = divmod(minutes, 60)
        return f"{hours}:{minutes:02d}:{secs:02d}"
    minutes, secs = divmod(round(max(seconds, 0.0), 1), 60)
    return f"{int(minutes)}:{secs:04.1f}"


def length_text(seconds: float | None) -> str:
    return "unknown length" if seconds is None else f"{seconds:.1f} s ({clock(seconds, seconds >= 3600)})"


def _to_wav(data: bytes, max_seconds: int = MAX_TRANSCRIBE_SECONDS) -> tuple[bytes, bool]:
    """The first audio stream as 16 kHz mono WAV, and whether it was cut at ``max_seconds``."""
    import av  # lazy: PyAV (FFmpeg) loads only for audio or video

    out = io.BytesIO()
    cut = False
    with av.open(io.BytesIO(data)) as source, av.open(out, "w", format="wav") as sink:
        stream = source.streams.audio[0]
        target = sink.add_stream("pcm_s16le", rate=16_000, layout="mono")
        resampler = av.AudioResampler(format="s16", layout="mono", rate=16_000)
        written = 0
        for frame in source.decode(stream):
            for chunk in resampler.resample(frame):
                sink.mux(target.encode(chunk))
                written += chunk.samples
            if written >= max_seconds * 16_000:
                cut = True
                break
        if not cut:
            for chunk in resampler.resample(None):
                sink.mux(target.encode(chunk))
        sink.mux(target.encode(None))
    return out.getvalue(), cut


async def soundtrack_text(
    data: bytes, mime: str, display: str, env: Mapping[str, str], *, is_video: bool
) -> str:
    providers = configured_providers("speech", env)
    if not providers:
        return NO_SPEECH
    ext = PurePath(display).suffix.lower().lstrip(".")
    cut = False
    if not is_video and ext in _STT_FORMATS and len(data) <= MAX_UPLOAD_BYTES:
        audio, filename, audio_mime = data, display, (mime or "application/octet-stream")
    else:
        # Videos and unusual formats go as plain WAV, which every endpoint understands.
        try:
            audio, cut = await asyncio.to_thread(_to_wav, data)
        except Exception as exc:  # FFmpeg could not decode the audio
            return f"The audio could not be decoded for transcription ({type(exc).__name__})."
        filename, audio_mime = PurePath(display).stem + ".wav", "audio/wav"
    try:
        provider, model, transcript = await transcribe_any(providers, audio, filename, audio_mime,
                                                           inspect_timeout(env))
    except ProviderError as exc:
        return f"Speech-to-text failed: {exc}."
    label = f"Transcript ({provider.name}/{model}"
    label += f", first {MAX_TRANSCRIBE_SECONDS // 60} minutes only)" if cut else ")"
    return f"{label}:\n{transcript or '(no speech recognised)'}"


async def inspect_audio(data: bytes, mime: str, display: str, env: Mapping[str, str]) -> Inspection:
    try:
        facts = await asyncio.to_thread(media_facts, data)
    except Exception as exc:  # not decodable
        return Inspection(kind="audio", text=f"Audio {display} could not be opened ({type(exc).__name__}).")
    if not facts.has_audio:
        return Inspection(kind="audio", text=f"{display} ({facts.container}) holds no audio stream.")
    head = f"Audio {display}: {length_text(facts.duration)}, {facts.container} container, {facts.audio}."
    words = await soundtrack_text(data, mime, display, env, is_video=False)
    return Inspection(kind="audio", text=f"{head}\n{words}")
