"""Videos: a contact sheet of frames spread over the clip (the last one included), the vision
model on the sheet, and the soundtrack's transcript."""

from __future__ import annotations

import asyncio
import io
import math
from collections.abc import Mapping
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from actors.providers.types import ProviderError
from actors.providers.vision_http import ask_vision_any, configured_providers
from actors.tools.inspect.media import (
    clock,
    inspect_audio,
    length_text,
    media_facts,
    soundtrack_text,
    video_stream,
)
from actors.tools.inspect.model import Inspection, SaveFile, Tile, inspect_timeout

if TYPE_CHECKING:
    from PIL import Image as PILImage

TILE_WIDTH = 320
TILE_MAX_HEIGHT = 360
TILE_GAP = 4
SHEET_COLUMNS = 3
# Beyond this gap between wanted frames a seek beats decoding every frame in between.
SEEK_GAP_S = 4.0


def _spread(count: int, wanted: int) -> list[int]:
    """``wanted`` indices spread evenly over ``count`` items, always the first and last."""
    if count <= wanted:
        return list(range(count))
    return sorted({round(i * (count - 1) / (wanted - 1)) for i in range(wanted)})


def _frames_wanted(duration: float | None) -> int:
    # Six tiles show a short clip well; longer clips get nine so no scene is skipped over.
    return 6 if duration is not None and duration < 30 else 9


def _grab_frames(data: bytes, wanted: int) -> list[tuple[float, "PILImage.Image"]]:
    """(seconds from the start, thumbnail) for frames spread across the clip, the last included.

    A pass over the packets (no decoding) finds every frame's timestamp, so the last frame
    is known exactly; then only the chosen frames are decoded, seeking across long gaps.
    """
    import av  # lazy: PyAV (FFmpeg) loads only for audio or video

    with av.open(io.BytesIO(data)) as container:
        stream = video_stream(container)
        pts = sorted({p.pts for p in container.demux(stream) if p.pts is not None and p.size})
    with av.open(io.BytesIO(data)) as container:
        stream = video_stream(container)
        stream.thread_type = "AUTO"
        tb = stream.time_base
        width, height = _tile_size(stream.codec_context.width, stream.codec_context.height)
        if not pts:
            return _grab_sequential(container, stream, wanted, width, height)
        start = pts[0]
        targets = [pts[i] for i in _spread(len(pts), wanted)]
        grabbed: list[tuple[float, Any]] = []
        decoder: Any = None
        position: int | None = None
        for target in targets:
            if decoder is None or position is None or float((target - position) * tb) > SEEK_GAP_S:
                container.seek(target, stream=stream, backward=True, any_frame=False)
                decoder = container.decode(stream)
            chosen = None
            last = None
            for frame in decoder:
                last = frame
                if frame.pts is None:
                    continue
                position = frame.pts
                if frame.pts >= target:
                    chosen = frame
                    break
            if chosen is None:
                decoder = None  # ran off the end; the next target must seek again
                chosen = last
            if chosen is not None:
                when = float(((chosen.pts if chosen.pts is not None else target) - start) * tb)
                grabbed.append((when, chosen.reformat(width=width, height=height, format="rgb24").to_image()))
        return grabbed


def _grab_sequential(container: Any, stream: Any, wanted: int, width: int, height: int) -> list[tuple[float, Any]]:
    # Streams without timestamps: count frames, then decode again and keep the chosen ones.
    total = sum(1 for _ in container.decode(stream))
    picks = set(_spread(total, wanted))
    rate = float(stream.average_rate or stream.guessed_rate or 25)
    container.seek(0)
    out: list[tuple[float, Any]] = []
    for index, frame in enumerate(container.decode(stream)):
        if index in picks:
            out.append((index / rate, frame.reformat(width=width, height=height, format="rgb24").to_image()))
    return out


def _tile_size(width: int, height: int) -> tuple[int, int]:
    if width <= 0 or height <= 0:
        return TILE_WIDTH, TILE_WIDTH * 9 // 16
    tile_w = TILE_WIDTH
    tile_h = round(tile_w * height / width)
    if tile_h > TILE_MAX_HEIGHT:  # portrait video: narrower tiles, not giant ones
        tile_h = TILE_MAX_HEIGHT
        tile_w = round(tile_h * width / height)
    return max(tile_w - tile_w % 2, 2), max(tile_h - tile_h % 2, 2)


def _label_font(size: int) -> Any:
    from PIL import ImageFont  # lazy: Pillow loads only when an image is read

    try:
        import matplotlib  # lazy: optional; matplotlib (~0.5 s) only for its fonts

        return ImageFont.truetype(f"{matplotlib.get_data_path()}/fonts/ttf/DejaVuSans-Bold.ttf", size)
    except Exception:  # no matplotlib or no FreeType: Pillow's own font still draws digits
        return ImageFont.load_default()


def contact_sheet(frames: list[tuple[float, "PILImage.Image"]], total: float | None) -> tuple[bytes, list[Tile]]:
    """Frames in a grid, each stamped with its time; returns the PNG and where each tile sits."""
    from PIL import Image, ImageDraw  # lazy: Pillow loads only when an image is read

    tile_w = max(img.width for _, img in frames)
    tile_h = max(img.height for _, img in frames)
    columns = min(SHEET_COLUMNS, len(frames))
    rows = math.ceil(len(frames) / columns)
    sheet = Image.new("RGB", (columns * tile_w + (columns + 1) * TILE_GAP, rows * tile_h + (rows + 1) * TILE_GAP),
                      (24, 24, 24))
    draw = ImageDraw.Draw(sheet)
    font = _label_font(max(12, tile_h // 12))
    long = (total or 0) >= 3600
    tiles: list[Tile] = []
    for i, (when, img) in enumerate(frames):
        x = TILE_GAP + (i % columns) * (tile_w + TILE_GAP)
        y = TILE_GAP + (i // columns) * (tile_h + TILE_GAP)
        sheet.paste(img, (x, y))
        label = clock(when, long) + (" end" if i == len(frames) - 1 else "")
        left, top, right, bottom = draw.textbbox((0, 0), label, font=font)
        pad = 3
        box = (x + pad, y + img.height - (bottom - top) - 3 * pad, x + 3 * pad + (right - left), y + img.height - pad)
        draw.rectangle(box, fill=(0, 0, 0))
        draw.text((box[0] + pad - left, box[1] + pad - top), label, fill=(255, 255, 255), font=font)
        tiles.append(Tile(time=round(when, 3), x=x, y=y, width=img.width, height=img.height))
    buf = io.BytesIO()
    sheet.save(buf, format="PNG", optimize=True)
    return buf.getvalue(), tiles


def _make_sheet(data: bytes, duration: float | None) -> tuple[bytes, list[Tile]] | None:
    frames = _grab_frames(data, _frames_wanted(duration))
    return contact_sheet(frames, duration) if frames else None


async def inspect_video(
    data: bytes, mime: str, display: str, question: str | None, save: SaveFile | None, env: Mapping[str, str]
) -> Inspection:
    try:
        facts = await asyncio.to_thread(media_facts, data)
    except Exception as exc:  # not decodable
        return Inspection(kind="video", text=f"Video {display} could not be opened ({type(exc).__name__}).")
    if not facts.has_video:
        return await inspect_audio(data, mime, display, env)
    sound = f"soundtrack {facts.audio}" if facts.has_audio else "no soundtrack"
    lines = [f"Video {display}: {length_text(facts.duration)}, {facts.video}, {facts.container} container, {sound}."]
    result = Inspection(kind="video", text="")
    try:
        made = await asyncio.to_thread(_make_sheet, data, facts.duration)
    except Exception as exc:  # a damaged stream can fail mid-decode
        made = None
        lines.append(f"No contact sheet: the frames could not be decoded ({type(exc).__name__}).")
    if made is not None:
        png, tiles = made
        result.tiles = tiles
        stamps = ", ".join(clock(t.time, (facts.duration or 0) >= 3600) for t in tiles)
        grid = f"{min(SHEET_COLUMNS, len(tiles))} x {math.ceil(len(tiles) / SHEET_COLUMNS)}"
        what = f"{len(tiles)} frames in a {grid} grid at {stamps}; the last tile is the final frame"
        if save is not None:
            file_id = await save(PurePath(display).stem + "-contact-sheet.png", "image/png", png)
            result.files.append(file_id)
            lines.append(f"Contact sheet: file {file_id} ({what}).")
        else:
            lines.append(f"Contact sheet made but not stored ({what}).")
        providers = configured_providers("vision", env)
        if providers:
            prompt = (f"These are {len(tiles)} frames from one video, in time order, each stamped with its time. "
                      + (question or "Describe what happens in the video."))
            try:
                provider, _model, answer = await ask_vision_any(providers, png, "image/png", prompt,
                                                                inspect_timeout(env))
                lines.append(f"The vision model ({provider.name}) on the contact sheet:\n{answer}")
            except ProviderError as exc:
                lines.append(f"The vision model failed on the contact sheet ({exc}).")
    if facts.has_audio:
        lines.append(await soundtrack_text(data, mime, display, env, is_video=True))
    result.text = "\n".join(lines)
    return result
