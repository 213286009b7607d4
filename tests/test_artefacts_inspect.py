"""Artefacts made by actors.tools.artefacts, read back by actors.tools.inspect.

Media (audio, video, images) is generated here with PyAV and Pillow; the vision and
speech providers are a small scripted OpenAI-compatible server on localhost.
"""

from __future__ import annotations

import base64
import io
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest
import uvicorn
from PIL import Image, ImageDraw, ImageFont
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from actors.store.migrate import migrate
from actors.store.store import Store
from actors.tools import artefacts
from actors.tools.inspect import NO_SPEECH, NO_VISION, detect_kind, inspect_bytes, inspect_file

NO_PROVIDERS: dict[str, str] = {}
RED = (255, 0, 0)


# -- a scripted provider --------------------------------------------------------------------


class FakeProvider:
    """Answers /chat/completions (vision) and /audio/transcriptions, recording each request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.fail_models: set[str] = set()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        # Listening before the thread starts: connections queue until uvicorn accepts them,
        # so no test has to wait for start-up.
        self._sock.listen(16)
        app = Starlette(routes=[
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/v1/audio/transcriptions", self._transcribe, methods=["POST"]),
        ])
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"

    def env(self, kind: str, model: str = "fake-model") -> dict[str, str]:
        return {
            "IRIIS_PROVIDERS": json.dumps([
                {"name": "chatonly", "base_url": "http://127.0.0.1:9/v1", "models": ["c"], "kinds": ["chat"]},
                {"name": "fake", "base_url": self.base_url, "api_key_env": "FAKE_KEY",
                 "models": [model], "kinds": [kind]},
            ]),
            "FAKE_KEY": "  sk-fake-key\n",
        }

    async def _chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.requests.append({"path": "chat", "body": body, "auth": request.headers.get("authorization")})
        if body.get("model") in self.fail_models:
            return JSONResponse({"error": {"message": "scripted failure"}}, status_code=500)
        parts = body["messages"][0]["content"]
        question = next(p["text"] for p in parts if p["type"] == "text")
        return JSONResponse({"choices": [{"message": {"role": "assistant",
                                                      "content": f"A red square. You asked: {question}"}}]})

    async def _transcribe(self, request: Request) -> JSONResponse:
        form = await request.form()
        upload = form["file"]
        data = await upload.read()  # type: ignore[union-attr]
        self.requests.append({"path": "audio", "model": form.get("model"), "filename": upload.filename,  # type: ignore[union-attr]
                              "bytes": data, "auth": request.headers.get("authorization")})
        return JSONResponse({"text": "hello from the fake transcriber"})

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeProvider]:
    fake = FakeProvider()
    yield fake
    fake.stop()


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    s = Store.open(f"sqlite+aiosqlite:///{tmp_path / 'files.sqlite3'}")
    await migrate(s)
    yield s
    await s.close()


# -- generated media ------------------------------------------------------------------------


def sine(seconds: float, rate: int = 16_000) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 440 * t) * 32767).astype(np.int16)


def make_wav(seconds: float = 1.0, rate: int = 16_000) -> bytes:
    out = io.BytesIO()
    with av.open(out, "w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=rate, layout="mono")
        frame = av.AudioFrame.from_ndarray(sine(seconds, rate)[None, :], format="s16", layout="mono")
        frame.sample_rate = rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return out.getvalue()


def frame_colour(i: int, total: int) -> tuple[int, int, int]:
    """Blue fading to green, and a red last frame the contact sheet must show."""
    if i == total - 1:
        return RED
    step = int(255 * i / (total - 1))
    return (0, step, 255 - step)


def make_video(seconds: int = 3, fps: int = 10, size: tuple[int, int] = (160, 120), sound: bool = True) -> bytes:
    width, height = size
    total = seconds * fps
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=fps)
        video.width, video.height, video.pix_fmt = width, height, "yuv420p"
        audio = container.add_stream("aac", rate=16_000, layout="mono") if sound else None
        for i in range(total):
            pixels = np.full((height, width, 3), frame_colour(i, total), np.uint8)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts, frame.time_base = i, Fraction(1, fps)
            for packet in video.encode(frame):
                container.mux(packet)
        for packet in video.encode(None):
            container.mux(packet)
        if audio is not None:
            chunk = av.AudioFrame.from_ndarray(sine(seconds)[None, :], format="s16", layout="mono")
            chunk.sample_rate = 16_000
            for packet in [*audio.encode(chunk), *audio.encode(None)]:
                container.mux(packet)
    return out.getvalue()


def text_image(text: str, fmt: str = "PNG") -> bytes:
    import matplotlib

    font = ImageFont.truetype(f"{matplotlib.get_data_path()}/fonts/ttf/DejaVuSans.ttf", 40)
    img = Image.new("RGB", (520, 140), "white")
    ImageDraw.Draw(img).text((24, 45), text, fill="black", font=font)
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return buf.getvalue()


# -- documents ------------------------------------------------------------------------------

BODY = """# Findings
Revenue grew **twelve percent** — in Zürich, Αθήνα and Kraków.

- first bullet point
  - a nested detail
1. numbered step

## Next steps
Hire two engineers.
"""


async def test_pdf_round_trip() -> None:
    data = artefacts.pdf_document("Annual Report", BODY)
    assert data.startswith(b"%PDF-")
    text = await inspect_bytes(data, "application/pdf", "report.pdf", environ=NO_PROVIDERS)
    assert "1 page" in text
    for words in ("Annual Report", "Findings", "twelve percent", "Zürich", "Αθήνα", "Kraków",
                  "first bullet point", "a nested detail", "numbered step", "Hire two engineers."):
        assert words in text
    assert "**" not in text
    # Found by its bytes when the upload came without a type or name.
    unnamed = await inspect_bytes(data, "application/octet-stream", None, environ=NO_PROVIDERS)
    assert "Annual Report" in unnamed and "unnamed file" in unnamed


async def test_word_round_trip_with_table() -> None:
    from docx import Document

    data = artefacts.word_document("Plan", BODY)
    # A table added afterwards: inspect reads tables as well as paragraphs, in order.
    doc = Document(io.BytesIO(data))
    table = doc.add_table(rows=2, cols=2)
    for r, row in enumerate([("city", "visits"), ("Kraków", "42")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    buf = io.BytesIO()
    doc.save(buf)

    text = await inspect_bytes(buf.getvalue(), "application/octet-stream", "plan.docx", environ=NO_PROVIDERS)
    assert text.startswith("Word document plan.docx")
    assert "# Plan" in text and "## Findings" in text and "### Next steps" in text
    assert "Revenue grew twelve percent — in Zürich" in text
    assert "- first bullet point" in text and "- numbered step" in text
    assert "city | visits\nKraków | 42" in text
    assert text.index("Hire two engineers.") < text.index("[table]")


async def test_spreadsheet_round_trip() -> None:
    data = artefacts.spreadsheet({
        "Sales/Q1": [["region", "amount"], ["north", 120], ["south", 80.5], ["total", "=SUM(B2:B3)"]],
        "Notes": [["checked", True]],
    })
    text = await inspect_bytes(data, artefacts.MIME["xlsx"], "sales.xlsx", environ=NO_PROVIDERS)
    assert "## Sheet: Sales_Q1" in text  # "/" is not allowed in sheet names
    assert "row 1: region | amount" in text
    assert "row 3: south | 80.5" in text
    assert "row 4: total | =SUM(B2:B3)" in text
    assert "## Sheet: Notes\nrow 1: checked | True" in text


async def test_slides_round_trip() -> None:
    data = artefacts.slide_deck("Roadmap", [
        {"title": "Goals", "bullets": ["ship the studio", "  - charts first"], "notes": "speak slowly"},
        {"title": "Risks", "bullets": ["time"]},
    ], subtitle="Q3")
    text = await inspect_bytes(data, "", "roadmap.pptx", environ=NO_PROVIDERS)
    assert "## Slide 1: Roadmap" in text and "- Q3" in text
    assert "## Slide 2: Goals\n- ship the studio\n  - charts first\nNotes: speak slowly" in text
    assert "## Slide 3: Risks\n- time" in text


async def test_chart_round_trip_reports_size_and_reads_title() -> None:
    data = artefacts.chart("bar", "Quarterly Sales", {"2023": [3, 4, 5, 6], "2024": [4, 5, 7, 9]},
                           x_labels=["Q1", "Q2", "Q3", "Q4"])
    text = await inspect_bytes(data, "image/png", "sales.png", environ=NO_PROVIDERS)
    assert "PNG, 800 x 500 pixels" in text
    assert NO_VISION in text
    assert "quarterly sales" in text.lower()


@pytest.mark.parametrize("kind", ["line", "scatter", "pie"])
def test_other_chart_kinds_render(kind: str) -> None:
    data = artefacts.chart(kind, "t", {"a": [1, 2, 3]}, x_labels=["x", "y", "z"])
    assert Image.open(io.BytesIO(data)).size == (800, 500)


def test_bad_chart_requests_say_why() -> None:
    with pytest.raises(artefacts.ArtefactError, match="needs data"):
        artefacts.chart("line", "empty")
    with pytest.raises(artefacts.ArtefactError, match="x has 2 values but y has 3"):
        artefacts.chart("line", "xy", x=[1, 2], y=[1, 2, 3])
    with pytest.raises(artefacts.ArtefactError, match="negative"):
        artefacts.chart("pie", "p", {"a": [1, -2]})


async def test_text_kinds_go_through_extract_text() -> None:
    assert await inspect_bytes(b"a,b\n1,2\n", "text/csv", "t.csv", environ=NO_PROVIDERS) == "a,b\n1,2\n"
    junk = await inspect_bytes(b"\x00\x01\x02", "application/octet-stream", None, environ=NO_PROVIDERS)
    assert "binary file" in junk


# -- images ---------------------------------------------------------------------------------


async def test_image_text_read_by_ocr_without_vision() -> None:
    data = text_image("INVOICE 4711", fmt="JPEG")
    result = await inspect_file(data, "application/octet-stream", "scan.jpg", environ=NO_PROVIDERS)
    assert result.kind == "image"
    assert "JPEG, 520 x 140 pixels" in result.text
    assert NO_VISION in result.text
    assert "INVOICE 4711" in result.text.replace("\n", " ")


async def test_image_question_answered_by_vision_provider(provider: FakeProvider) -> None:
    provider.requests.clear()
    data = text_image("hello")
    text = await inspect_bytes(data, "image/png", "photo.png", "What colour is it?",
                               environ=provider.env("vision", "vision-model"))
    assert "A red square. You asked: What colour is it?" in text
    assert NO_VISION not in text
    (request,) = provider.requests
    assert request["auth"] == "Bearer sk-fake-key"  # the key's whitespace is stripped
    assert request["body"]["model"] == "vision-model"
    url = request["body"]["messages"][0]["content"][1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == data


async def test_failing_vision_provider_falls_back_to_ocr(provider: FakeProvider) -> None:
    provider.fail_models.add("broken")
    try:
        text = await inspect_bytes(text_image("FALLBACK 99"), "image/png", "x.png",
                                   environ=provider.env("vision", "broken"))
    finally:
        provider.fail_models.discard("broken")
    assert "The vision model failed (fake answered HTTP 500)" in text
    assert "FALLBACK 99" in text.replace("\n", " ")


# -- audio ----------------------------------------------------------------------------------


async def test_audio_without_speech_to_text_is_described_plainly() -> None:
    text = await inspect_bytes(make_wav(1.0), "audio/wav", "tone.wav", environ=NO_PROVIDERS)
    assert text.startswith("Audio tone.wav: 1.0 s")
    assert "wav container, pcm_s16le, 16000 Hz, mono" in text
    assert NO_SPEECH in text


async def test_audio_transcribed_by_speech_provider(provider: FakeProvider) -> None:
    provider.requests.clear()
    wav = make_wav(1.0)
    text = await inspect_bytes(wav, "audio/wav", "memo.wav", environ=provider.env("speech", "whisper-fake"))
    assert "Transcript (fake/whisper-fake):\nhello from the fake transcriber" in text
    (request,) = provider.requests
    assert request["path"] == "audio" and request["model"] == "whisper-fake"
    assert request["filename"] == "memo.wav" and request["bytes"] == wav  # sent as it is
    assert request["auth"] == "Bearer sk-fake-key"


# -- video ----------------------------------------------------------------------------------


async def test_video_contact_sheet_includes_last_frame(store: Store) -> None:
    data = make_video(seconds=3, fps=10)
    assert detect_kind(data, "application/octet-stream", None) == "video"

    async def save(name: str, mime: str, content: bytes) -> int:
        return (await store.add_file(name, mime, content)).id

    result = await inspect_file(data, "video/mp4", "clip.mp4", save=save, environ=NO_PROVIDERS)
    assert result.kind == "video"
    assert "160 x 120 px" in result.text and "10 fps" in result.text
    assert NO_SPEECH in result.text  # it has a soundtrack, but nothing to transcribe it

    # Six tiles across the 30 frames, first and last included.
    assert 6 <= len(result.tiles) <= 9
    assert result.timestamps[0] == 0.0
    assert result.timestamps[-1] == pytest.approx(2.9, abs=0.01)
    assert result.timestamps == sorted(result.timestamps)
    assert "0:02.9" in result.text

    (sheet_id,) = result.files
    assert f"Contact sheet: file {sheet_id}" in result.text
    found = await store.get_file(sheet_id)
    assert found is not None
    record, png = found
    assert record.mime == "image/png" and record.name == "clip-contact-sheet.png"
    sheet = Image.open(io.BytesIO(png)).convert("RGB")

    def centre(tile_index: int) -> tuple[int, ...]:
        tile = result.tiles[tile_index]
        return sheet.getpixel((tile.x + tile.width // 2, tile.y + tile.height // 3))

    first, last = centre(0), centre(-1)
    assert first[2] > 200 and first[0] < 60  # the blue first frame
    assert last[0] > 200 and last[1] < 60 and last[2] < 60  # the red final frame
    assert all(centre(i)[0] < 60 for i in range(len(result.tiles) - 1))  # red only at the end
    # Each tile carries its timestamp: white label pixels at the tile's bottom-left.
    tile = result.tiles[-1]
    label = sheet.crop((tile.x, tile.y + tile.height - 30, tile.x + tile.width // 2, tile.y + tile.height))
    assert (np.asarray(label).min(axis=2) > 200).any()


async def test_video_soundtrack_transcribed(provider: FakeProvider) -> None:
    provider.requests.clear()
    text = await inspect_bytes(make_video(seconds=2, sound=True), "video/mp4", "talk.mp4",
                               environ=provider.env("speech"))
    assert "Contact sheet made but not stored" in text
    assert "hello from the fake transcriber" in text
    (request,) = provider.requests
    assert request["filename"] == "talk.wav"  # the soundtrack goes as WAV
    with av.open(io.BytesIO(request["bytes"])) as wav:
        stream = wav.streams.audio[0]
        assert stream.sample_rate == 16_000 and stream.codec_context.layout.nb_channels == 1


async def test_silent_video_says_it_has_no_soundtrack() -> None:
    text = await inspect_bytes(make_video(seconds=1, sound=False), "video/mp4", "mute.mp4", environ=NO_PROVIDERS)
    assert "no soundtrack" in text
    assert NO_SPEECH not in text
