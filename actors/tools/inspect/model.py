"""What an inspection returns, and the limits and notes every kind of file shares."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Literal

from pydantic import BaseModel, Field

FileKind = Literal["pdf", "docx", "xlsx", "pptx", "image", "audio", "video", "text", "other"]
SaveFile = Callable[[str, str, bytes], Awaitable[int]]

MAX_CHARS = 20_000

NO_VISION = ('No vision model is configured (a provider with kind "vision" in IRIIS_PROVIDERS), '
             "so the image was read by OCR only.")
NO_SPEECH = ('No speech-to-text is configured (a provider with kind "speech" in IRIIS_PROVIDERS), '
             "so the spoken words cannot be transcribed.")


class Tile(BaseModel):
    """One frame on a contact sheet: when it was taken and where it sits on the sheet."""

    time: float
    x: int
    y: int
    width: int
    height: int


class Inspection(BaseModel):
    kind: FileKind
    text: str
    # Files made while inspecting (a video's contact sheet).
    files: list[int] = Field(default_factory=list)
    tiles: list[Tile] = Field(default_factory=list)

    @property
    def timestamps(self) -> list[float]:
        return [t.time for t in self.tiles]



def inspect_timeout(environ: Mapping[str, str]) -> float:
    """Seconds a provider may take: IRIIS_INSPECT_TIMEOUT, default 120."""
    # Not IRIIS_PROVIDER_TIMEOUT: that bounds a chat reply's first token, while transcribing
    # a long recording legitimately takes minutes.
    try:
        return max(float(environ.get("IRIIS_INSPECT_TIMEOUT") or 120.0), 1.0)
    except ValueError:
        return 120.0



def cap_text(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


def size_text(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} bytes"

