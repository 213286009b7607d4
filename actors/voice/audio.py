"""PCM helpers: int16 bytes to floats and back, resampling, WAV in and out, and cutting a
sentence's audio into frames. numpy only."""

from __future__ import annotations

import io
import wave

import numpy as np


def pcm_to_float(pcm: bytes) -> np.ndarray:
    """PCM16 little-endian bytes as float32 in [-1, 1] (an odd trailing byte is dropped)."""
    usable = len(pcm) - (len(pcm) % 2)
    return np.frombuffer(pcm[:usable], dtype="<i2").astype(np.float32) / 32768.0


def float_to_pcm(samples: np.ndarray) -> bytes:
    clipped = np.clip(samples, -1.0, 1.0)
    return (clipped * 32767.0).astype("<i2").tobytes()


def resample(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    """Linear resampling; enough for speech going to a recogniser or a speaker."""
    if rate == target or samples.size == 0:
        return samples.astype(np.float32, copy=False)
    count = max(1, int(round(samples.size * target / rate)))
    positions = np.linspace(0, samples.size - 1, count)
    return np.interp(positions, np.arange(samples.size), samples).astype(np.float32)


def resample_pcm(pcm: bytes, rate: int, target: int) -> bytes:
    return pcm if rate == target else float_to_pcm(resample(pcm_to_float(pcm), rate, target))


def wav_bytes(pcm: bytes, rate: int) -> bytes:
    """Mono PCM16 as a WAV file (what hosted speech to text is sent)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return out.getvalue()


def read_wav(data: bytes) -> tuple[bytes, int]:
    """(mono PCM16, rate) of a 16-bit WAV file; several channels are averaged. Raises ValueError."""
    try:
        with wave.open(io.BytesIO(data), "rb") as w:
            channels, width, rate = w.getnchannels(), w.getsampwidth(), w.getframerate()
            frames = w.readframes(w.getnframes())
    except (wave.Error, EOFError) as exc:
        raise ValueError(f"not a readable WAV file ({exc})") from None
    if width != 2:
        raise ValueError("only 16-bit WAV is read")
    if channels > 1:
        mixed = np.frombuffer(frames, dtype="<i2").reshape(-1, channels).mean(axis=1)
        frames = mixed.astype("<i2").tobytes()
    return frames, rate


def frames_of(pcm: bytes, frame_samples: int) -> list[bytes]:
    """A sentence's audio cut into frames of `frame_samples` (the last may be shorter)."""
    step = frame_samples * 2
    return [pcm[i:i + step] for i in range(0, len(pcm), step)]


def seconds(pcm: bytes, rate: int) -> float:
    return len(pcm) / 2 / rate


def is_quiet(pcm: bytes, rate: int, threshold: float, piece_seconds: float = 0.02) -> bool:
    """True when no `piece_seconds` piece of `pcm` is louder (RMS, full scale 1.0) than
    `threshold`: nothing was said in it."""
    samples = pcm_to_float(pcm)
    if samples.size == 0:
        return True
    size = max(1, int(rate * piece_seconds))
    padded = np.pad(samples, (0, (-samples.size) % size))
    pieces = padded.reshape(-1, size)
    return bool((np.sqrt(np.mean(pieces * pieces, axis=1)) <= threshold).all())
