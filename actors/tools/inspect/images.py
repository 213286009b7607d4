"""Images: their facts, the vision model's answer when one is configured, OCR otherwise."""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from actors.providers.types import ProviderError
from actors.providers.vision_http import ask_vision_any, configured_providers
from actors.tools.inspect.model import NO_VISION, Inspection, inspect_timeout

if TYPE_CHECKING:
    from PIL import Image as PILImage

# Formats vision endpoints accept as data URLs without conversion.
_VISION_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
VISION_MAX_SIDE = 2048

_ocr_engine: Any = None
_ocr_lock = threading.Lock()


def ocr(image: "PILImage.Image") -> str:
    """The text RapidOCR finds, one detected line per line."""
    global _ocr_engine
    from PIL import Image  # lazy: Pillow loads only when an image is read

    with _ocr_lock:
        if _ocr_engine is None:
            from rapidocr import RapidOCR  # lazy: RapidOCR (onnxruntime, OpenCV) costs ~0.6 s

            # The models ship inside the wheel, so this never downloads. The fast settings
            # cap detection at 640 px: enough for screenshots and photos of pages.
            _ocr_engine = RapidOCR(params={
                "Global.use_cls": False, "Det.limit_type": "max", "Det.limit_side_len": 640,
                "Global.log_level": "warning",
            })
        engine = _ocr_engine
    if image.mode in ("RGBA", "LA", "P", "PA"):
        # Transparent pixels are often black underneath; text drawn on them would vanish.
        rgba = image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, "white")
        flat.paste(rgba, mask=rgba.getchannel("A"))
        image = flat
    elif image.mode != "RGB":
        image = image.convert("RGB")
    result = engine(image)
    return "\n".join(t for t in (getattr(result, "txts", None) or ()) if t.strip())


def _image_facts(data: bytes) -> tuple[str, "PILImage.Image", str | None]:
    from PIL import Image, ImageOps  # lazy: Pillow loads only when an image is read

    img = Image.open(io.BytesIO(data))
    fmt = img.format or "unknown"
    frames = getattr(img, "n_frames", 1)
    facts = f"{fmt}, {img.width} x {img.height} pixels, {img.mode}"
    if frames > 1:
        facts += f", {frames} frames (the first is shown)"
    img.load()
    return facts, ImageOps.exif_transpose(img) or img, img.format


def _vision_payload(data: bytes, image: "PILImage.Image", fmt: str | None) -> tuple[bytes, str]:
    if fmt in _VISION_FORMATS and max(image.size) <= VISION_MAX_SIDE and len(data) <= 8 * 1024 * 1024:
        return data, _VISION_FORMATS[fmt]
    small = image.convert("RGB")
    small.thumbnail((VISION_MAX_SIDE, VISION_MAX_SIDE))
    buf = io.BytesIO()
    small.save(buf, format="JPEG", quality=88)
    return buf.getvalue(), "image/jpeg"


async def inspect_image(data: bytes, display: str, question: str | None, env: Mapping[str, str]) -> Inspection:
    try:
        facts, image, fmt = await asyncio.to_thread(_image_facts, data)
    except Exception as exc:  # not decodable after all
        return Inspection(kind="image", text=f"Image {display} could not be opened ({type(exc).__name__}).")
    head = f"Image {display}: {facts}."
    providers = configured_providers("vision", env)
    note = NO_VISION
    if providers:
        payload, payload_mime = await asyncio.to_thread(_vision_payload, data, image, fmt)
        prompt = question or "Describe this image in detail, including any text it contains."
        try:
            provider, model, answer = await ask_vision_any(providers, payload, payload_mime, prompt,
                                                           inspect_timeout(env))
            label = f"Answer from the vision model ({provider.name}/{model})"
            return Inspection(kind="image", text=f"{head}\n{label}:\n{answer or '(empty answer)'}")
        except ProviderError as exc:
            note = f"The vision model failed ({exc}), so the image was read by OCR only."
    words = await asyncio.to_thread(ocr, image)
    body = f"Text found by OCR:\n{words}" if words else "OCR found no text in the image."
    return Inspection(kind="image", text=f"{head}\n{note}\n{body}")
