"""Voice through the real `iriis serve`: speech made offline by piper streamed as PCM16 over
GET /v1/voice/ws, transcribed by faster-whisper in the cluster's speech actor, answered by the
scripted model, spoken back as numbered audio frames that transcribe to the reply; barge-in
keeping only what was heard; an answered call where the agent speaks first; who may open it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from actors.voice import protocol as p
from actors.voice.audio import resample_pcm
from actors.voice.engines import SpeechService
from tests.conftest import OWNER_KEY, OWNER_PIN
from tests.device_client import pair
from tests.scripted_openai import text as scripted_text
from tests.speech_check import heard_as, steady_speech, words
from tests.waiting import WAIT_MS

pytestmark = pytest.mark.e2e

QUESTION = "What is the weather like in London today?"
REPLY = "It is sunny in London today. Take a light jacket for the evening."


class VoiceClient:
    """A raw client of the voice socket: JSON events and audio frames, kept in arrival order."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.events: list[dict[str, Any]] = []
        self.frames: list[tuple[int, int, bytes]] = []
        self.order: list[str] = []   # "event:<type>" / "frame" as they came

    async def next(self, timeout: float = 60) -> dict[str, Any] | tuple[int, int, bytes]:
        async with asyncio.timeout(timeout):  # cancel-safe, unlike 3.11's wait_for (tests/device_client.py)
            message = await self.ws.recv()
        if isinstance(message, bytes):
            frame = p.read_audio_frame(message)
            self.frames.append(frame)
            self.order.append("frame")
            return frame
        event = json.loads(message)
        self.events.append(event)
        self.order.append(f"event:{event['type']}")
        return event

    async def until(self, kind: str, timeout: float = 90) -> dict[str, Any]:
        """Read until an event of `kind` (frames and other events are kept on the way)."""
        async with asyncio.timeout(timeout):
            while True:
                got = await self.next(timeout)
                if isinstance(got, dict) and got["type"] == kind:
                    return got

    async def speak(self, pcm: bytes, piece: int = 3200) -> None:
        """Stream an utterance as the microphone would, then mark its end."""
        for i in range(0, len(pcm), piece):
            await self.ws.send(pcm[i:i + piece])
        await self.ws.send(json.dumps({"type": "end"}))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


def ws_url(server: Any, **query: str) -> str:
    q = "&".join(f"{k}={v}" for k, v in query.items())
    return server.url.replace("http://", "ws://") + "/v1/voice/ws" + (f"?{q}" if q else "")


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def voice_server(device_server) -> Any:
    """The shared device server (tests/conftest.py): no hosted speech is configured there, so the
    offline engines do it all; its device timers are short, which no test here comes near."""
    return device_server


@pytest.fixture(scope="module")
def speech() -> SpeechService:
    """The same offline engines, in the test, to make the question and to check the answer."""
    return SpeechService(environ={})


async def spoken(speech: SpeechService, sentence: str) -> bytes:
    """The question as the microphone would send it; the same audio every run (steady_speech)."""
    said = await asyncio.to_thread(steady_speech, sentence)
    return resample_pcm(said, p.OUTPUT_RATE, p.INPUT_RATE)


def stored(server: Any, session_id: str) -> list[dict[str, Any]]:
    with httpx.Client(base_url=server.url, timeout=60, headers=bearer(OWNER_KEY)) as client:
        got = client.get(f"/v1/sessions/{session_id}/messages")
        assert got.status_code == 200, got.text
        return got.json()["data"]


def last_user_message(model: Any) -> str:
    return [m for m in model.requests[-1]["body"]["messages"] if m["role"] == "user"][-1]["content"]


# -- the pipeline ------------------------------------------------------------------------------

async def test_a_spoken_question_is_answered_aloud(voice_server, model, speech) -> None:
    model.enqueue(scripted_text(REPLY))
    question = await spoken(speech, QUESTION)
    async with connect(ws_url(voice_server), additional_headers=bearer(OWNER_KEY)) as ws:
        voice = VoiceClient(ws)
        ready = await voice.until("ready")
        assert ready["input_rate"] == 16_000 and ready["audio"]["rate"] == p.OUTPUT_RATE
        await voice.speak(question)
        transcript = await voice.until("transcript")
        assert heard_as(transcript["text"], QUESTION), transcript
        assert transcript["engine"] == "faster-whisper/tiny.en"
        done = await voice.until("done")
        spoken_event = await voice.until("spoken")
    assert heard_as(last_user_message(model), QUESTION)
    sentences = voice.of("sentence")
    assert [s["text"] for s in sentences] == ["It is sunny in London today.", "Take a light jacket for the evening."]
    assert done["text"] == REPLY and not done["cancelled"]
    # Frames numbered 0, 1, 2 ... sentence by sentence, the last one named by `spoken`.
    seqs = [seq for seq, _pos, _pcm in voice.frames]
    assert seqs == list(range(len(seqs))) and spoken_event["last_seq"] == seqs[-1]
    positions = [pos for _seq, pos, _pcm in voice.frames]
    assert positions == sorted(positions) and set(positions) == {0, 1}
    # The first sentence's event comes before any audio, and audio of it before the turn ended
    # would be allowed; what must hold is that each sentence is announced before it is heard.
    assert voice.order.index("event:sentence") < voice.order.index("frame")
    # The reply's audio says the reply's words.
    audio = b"".join(pcm for _seq, _pos, pcm in voice.frames)
    heard = await speech.transcribe(resample_pcm(audio, p.OUTPUT_RATE, p.INPUT_RATE), p.INPUT_RATE)
    assert heard_as(heard.text, REPLY), heard.text
    timings = spoken_event["timings"]
    assert timings["stt_s"] > 0 and timings["tts_first_s"] > 0 and timings["end_to_first_audio_s"] > 0
    history = stored(voice_server, ready["session_id"])
    assert [(m["role"], m["content"]) for m in history] == [("user", transcript["text"]), ("assistant", REPLY)]


async def test_speech_to_text_starts_at_a_pause_and_stands_when_only_quiet_follows(
        voice_server, model, speech) -> None:
    model.enqueue(scripted_text(REPLY))
    question = await spoken(speech, QUESTION)
    async with connect(ws_url(voice_server), additional_headers=bearer(OWNER_KEY)) as ws:
        voice = VoiceClient(ws)
        ready = await voice.until("ready")
        for i in range(0, len(question), 3200):
            await ws.send(question[i:i + 3200])
        await ws.send(json.dumps({"type": "pause"}))
        for _ in range(5):  # the page's trailing quiet, as the microphone sends it
            await asyncio.sleep(0.1)
            await ws.send(bytes(3200))
        await ws.send(json.dumps({"type": "end"}))
        transcript = await voice.until("transcript")
        timings = (await voice.until("spoken"))["timings"]
    assert heard_as(transcript["text"], QUESTION), transcript
    assert timings["stt_early"] is True and 0 <= timings["stt_wait_s"]
    assert heard_as(last_user_message(model), QUESTION)
    history = stored(voice_server, ready["session_id"])
    assert [m["role"] for m in history] == ["user", "assistant"] and history[0]["content"] == transcript["text"]


async def test_speech_after_a_pause_is_transcribed_with_the_rest(voice_server, model, speech) -> None:
    model.enqueue(scripted_text(REPLY))
    question = await spoken(speech, QUESTION)
    cut = (len(question) * 2 // 5) & ~1
    async with connect(ws_url(voice_server), additional_headers=bearer(OWNER_KEY)) as ws:
        voice = VoiceClient(ws)
        await voice.until("ready")
        for i in range(0, cut, 3200):
            await ws.send(question[i:min(i + 3200, cut)])
        await ws.send(json.dumps({"type": "pause"}))
        await ws.send(bytes(3200))
        await voice.speak(question[cut:])  # the person went on: the early transcript is dropped
        transcript = await voice.until("transcript")
        timings = (await voice.until("spoken"))["timings"]
    assert heard_as(transcript["text"], QUESTION), transcript
    assert timings["stt_early"] is False


async def test_barge_in_keeps_only_what_was_heard(voice_server, model, speech) -> None:
    first = "The forecast has three parts."
    rest = " " + " ".join(f"word{i}" for i in range(40)) + "."
    model.enqueue(scripted_text(first + rest, chunk_delay=0.15))
    async with connect(ws_url(voice_server), additional_headers=bearer(OWNER_KEY)) as ws:
        voice = VoiceClient(ws)
        ready = await voice.until("ready")
        await ws.send(json.dumps({"type": "text", "text": "Tell me the forecast."}))
        async with asyncio.timeout(90):
            while len(voice.frames) < 4:
                await voice.next()
        # Cut in after four frames (0.8 s) of the first sentence's audio.
        heard_seq = voice.frames[3][0]
        await ws.send(json.dumps({"type": "interrupt", "heard_seq": heard_seq}))
        done = await voice.until("done")
        await ws.send(json.dumps({"type": "ping"}))
        await voice.until("pong")
    assert done["cancelled"]
    assert done["text"] and first.startswith(done["text"]) and len(done["text"]) < len(first)
    history = stored(voice_server, ready["session_id"])
    reply = history[-1]
    assert reply["role"] == "assistant" and reply["meta"]["interrupted"] is True
    assert reply["content"] == done["text"] and "word" not in reply["content"]
    # Only the first sentence was ever spoken, and nothing after the turn stopped.
    assert {pos for _seq, pos, _pcm in voice.frames} == {0}
    assert "frame" not in voice.order[voice.order.index("event:done"):]


async def test_barge_in_after_the_reply_was_written_still_cuts_it(voice_server, model, speech) -> None:
    # The model finishes at once; its audio takes seconds. Cutting in while it plays must keep
    # only what was heard, as when the model was still writing.
    first = "The forecast has three parts."
    rest = " After that " + " ".join(f"word{i}" for i in range(30)) + "."
    model.enqueue(scripted_text(first + rest))
    async with connect(ws_url(voice_server), additional_headers=bearer(OWNER_KEY)) as ws:
        voice = VoiceClient(ws)
        ready = await voice.until("ready")
        await ws.send(json.dumps({"type": "text", "text": "Tell me the forecast."}))
        done = await voice.until("done", timeout=90)
        assert not done["cancelled"]
        async with asyncio.timeout(90):
            while len(voice.frames) < 4:
                await voice.next()
        await ws.send(json.dumps({"type": "interrupt", "heard_seq": voice.frames[3][0]}))
        await ws.send(json.dumps({"type": "ping"}))
        await voice.until("pong")
    reply = stored(voice_server, ready["session_id"])[-1]
    assert reply["role"] == "assistant" and reply["meta"]["interrupted"] is True
    assert first.startswith(reply["content"]) and 0 < len(reply["content"]) < len(first)
    assert "word" not in reply["content"]


async def test_the_next_turn_knows_the_reply_was_cut(voice_server, model, speech) -> None:
    # A minute of writing, so the model is still at it when the person speaks over the reply
    # even on a loaded machine (done then says cancelled; one written out is cut as it plays).
    model.enqueue(scripted_text("One moment please. " + " ".join(["more"] * 400), chunk_delay=0.15),
                  scripted_text("Sure."))
    async with connect(ws_url(voice_server), additional_headers=bearer(OWNER_KEY)) as ws:
        voice = VoiceClient(ws)
        await voice.until("ready")
        await ws.send(json.dumps({"type": "text", "text": "Start."}))
        async with asyncio.timeout(90):
            while len(voice.frames) < 5:
                await voice.next()
        # Speaking over the reply: a new utterance interrupts it (last played reported first).
        await ws.send(json.dumps({"type": "played", "seq": voice.frames[4][0]}))
        await ws.send(json.dumps({"type": "text", "text": "Stop, next."}))
        await voice.until("spoken", timeout=120)
    assert [d["cancelled"] for d in voice.of("done")] == [True, False], httpx.get(voice_server.url + "/v1/errors", headers=bearer(OWNER_KEY)).text[-5000:]
    assistant = [m for m in model.requests[-1]["body"]["messages"] if m["role"] == "assistant"][-1]
    assert assistant["content"].startswith("One") and "more" not in assistant["content"]
    assert "interrupted" in assistant["content"]


async def test_a_conversation_killed_between_spoken_turns_answers_the_next_on_the_same_socket(
        voice_server, model) -> None:
    from tests.fault_probe import Probe

    model.enqueue(scripted_text("Your locker is 12."), scripted_text("It is 12."))
    probe = Probe(voice_server)
    try:
        async with connect(ws_url(voice_server), additional_headers=bearer(OWNER_KEY)) as ws:
            voice = VoiceClient(ws)
            ready = await voice.until("ready")
            await ws.send(json.dumps({"type": "text", "text": "My locker is 12."}))
            await voice.until("spoken")
            # kill -9 of the conversation's actor while the socket stays open; the socket's
            # handle to it is now stale, and the next turn must find the restarted actor.
            before = probe.kill(ready["session_id"], session=True)
            await ws.send(json.dumps({"type": "text", "text": "What is my locker number?"}))
            done = await voice.until("done")
            await voice.until("spoken")
        after = probe.session(ready["session_id"])
    finally:
        probe.close()
    assert done["text"] == "It is 12." and not voice.of("error"), voice.events
    assert after["pid"] != before["pid"]
    assert [m["content"] for m in stored(voice_server, ready["session_id"])] == [
        "My locker is 12.", "Your locker is 12.", "What is my locker number?", "It is 12."]


async def test_an_answered_call_lets_the_agent_speak_first(voice_server, model) -> None:
    model.enqueue(scripted_text("Hello, this is your reminder about the dentist."))
    url = ws_url(voice_server, text="%5Bcall%20answered%5D%20dentist%20at%20three")
    async with connect(url, additional_headers=bearer(OWNER_KEY)) as ws:
        voice = VoiceClient(ws)
        await voice.until("spoken")
    assert last_user_message(model) == "[call answered] dentist at three"
    assert voice.of("sentence")[0]["text"].startswith("Hello") and voice.frames


async def test_an_answered_calls_opening_is_spoken_and_kept_in_its_conversation(voice_server, model) -> None:
    opening = "Did you turn the oven off?"
    async with httpx.AsyncClient(base_url=voice_server.url, timeout=60, headers=bearer(OWNER_KEY)) as client:
        made = await client.post("/v1/calls", json={"at": "2030-01-01T09:00", "reason": "the oven",
                                                    "opening": opening})
        assert made.status_code == 201, made.text
        answered = (await client.post(f"/v1/calls/{made.json()['id']}/answer")).json()
        assert (answered["mode"], answered["opening"], answered["turn"]) == ("answered", opening, None)
        sid = answered["conversation_id"]
        url = ws_url(voice_server, session_id=sid, opening="Did%20you%20turn%20the%20oven%20off%3F")
        async with connect(url, additional_headers=bearer(OWNER_KEY)) as ws:
            voice = VoiceClient(ws)
            await voice.until("spoken")
            assert voice.of("sentence")[0]["text"] == opening and voice.frames
            model.enqueue(scripted_text("Good, then all is well."))
            await ws.send(json.dumps({"type": "text", "text": "Yes, I did."}))
            await voice.until("done", timeout=120)
        stored = (await client.get(f"/v1/sessions/{sid}/messages")).json()["data"]
        # Answering twice (a second tab) does not say the opening twice.
        assert (await client.post(f"/v1/calls/{made.json()['id']}/answer")).json()["mode"] == "answered"
        again = (await client.get(f"/v1/sessions/{sid}/messages")).json()["data"]
    assert [(m["role"], m["content"]) for m in stored] == [
        ("assistant", opening), ("user", "Yes, I did."), ("assistant", "Good, then all is well.")]
    assert len(again) == 3
    sent = model.requests[-1]["body"]["messages"]
    assert [m["content"] for m in sent if m["role"] == "assistant"][-1] == opening


# -- who may talk --------------------------------------------------------------------------------

async def closed_with(url: str, headers: dict[str, str] | None = None) -> tuple[int, list[dict[str, Any]]]:
    got: list[dict[str, Any]] = []
    async with connect(url, additional_headers=headers or {}) as ws:
        try:
            while True:
                got.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else 1006, got


async def test_no_key_or_a_bad_one_is_refused_with_4401(voice_server) -> None:
    code, events = await closed_with(ws_url(voice_server))
    assert code == p.CLOSE_UNAUTHORIZED == 4401
    assert events[0]["type"] == "error" and events[0]["code"] == "unauthorized" and events[0]["message"]
    code, _ = await closed_with(ws_url(voice_server), bearer("not-the-key"))
    assert code == 4401
    code, _ = await closed_with(ws_url(voice_server, token="irad_" + "A" * 43))
    assert code == 4401


async def test_a_broken_message_closes_4400_and_oversized_audio_1009(voice_server) -> None:
    async with connect(ws_url(voice_server), additional_headers=bearer(OWNER_KEY)) as ws:
        await ws.recv()
        await ws.send(json.dumps({"type": "shout"}))
        error = json.loads(await ws.recv())
        assert error["type"] == "error" and error["code"] == "bad_message"
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd.code == p.CLOSE_PROTOCOL
    async with connect(ws_url(voice_server), additional_headers=bearer(OWNER_KEY)) as ws:
        await ws.recv()
        await ws.send(b"\x00" * p.MAX_UPSTREAM_FRAME)  # at the limit: taken
        await ws.send(json.dumps({"type": "ping"}))
        assert json.loads(await ws.recv())["type"] == "pong"
        await ws.send(b"\x00" * (p.MAX_UPSTREAM_FRAME + 2))
        with pytest.raises(ConnectionClosed) as closed:
            await ws.recv()
        assert closed.value.rcvd.code == p.CLOSE_TOO_BIG


async def test_a_device_token_talks_for_its_person_and_not_into_others_history(voice_server, model) -> None:
    from tests.test_devices_agent import add_member

    device = await asyncio.to_thread(pair, voice_server.url, OWNER_KEY, OWNER_PIN)
    model.enqueue(scripted_text("Hi from the agent."))
    async with connect(ws_url(voice_server), additional_headers=bearer(device["token"])) as ws:
        voice = VoiceClient(ws)
        ready = await voice.until("ready")
        await ws.send(json.dumps({"type": "text", "text": "Hello from my laptop."}))
        done = await voice.until("done")
        await voice.until("spoken")
    assert done["text"] == "Hi from the agent." and voice.frames
    owners_session = ready["session_id"]
    assert stored(voice_server, owners_session)[-1]["content"] == "Hi from the agent."

    member = await add_member(voice_server, "voice-member@example.com")
    member_token = member["Authorization"].split(" ", 1)[1]
    theirs = await asyncio.to_thread(pair, voice_server.url, member_token, "1357")
    code, _ = await closed_with(ws_url(voice_server, session_id=owners_session), bearer(theirs["token"]))
    assert code == p.CLOSE_NO_SESSION
    # Their own conversation opens.
    async with connect(ws_url(voice_server), additional_headers=bearer(theirs["token"])) as ws:
        assert json.loads(await ws.recv())["type"] == "ready"
    # A revoked device is refused at once.
    with httpx.Client(base_url=voice_server.url, timeout=60, headers=member) as client:
        assert client.delete(f"/v1/me/devices/{theirs['device_id']}").status_code == 200
    code, _ = await closed_with(ws_url(voice_server), bearer(theirs["token"]))
    assert code == p.CLOSE_UNAUTHORIZED


# -- the page: the voice module in Chromium with a fake microphone --------------------------------

CHROMIUM = "/usr/bin/chromium"


async def browser_page(server: Any, wav: str | None = None):
    from playwright.async_api import async_playwright

    args = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            "--autoplay-policy=no-user-gesture-required"]
    if wav:
        args.append(f"--use-file-for-fake-audio-capture={wav}%noloop")
    pw = await async_playwright().start()
    browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=args)
    page = await browser.new_page()
    page.set_default_timeout(WAIT_MS)
    await page.goto(server.url + "/healthz")

    async def close() -> None:
        await browser.close()
        await pw.stop()
    return page, close


async def test_two_overlapping_recordings_each_decode(voice_server) -> None:
    import base64
    import io

    import av

    page, close = await browser_page(voice_server)
    try:
        blobs = await page.evaluate("""async () => {
            const { Recorder } = await import("/static/js/voice.js");
            const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
            const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
            const first = new Recorder(stream, "audio/webm").start(100);
            await sleep(400);
            const second = new Recorder(stream, "audio/webm").start(100);
            await sleep(800);
            const a = await first.stop();
            await sleep(400);
            const b = await second.stop();
            const b64 = async (blob) => {
                const bytes = new Uint8Array(await blob.arrayBuffer());
                let s = ""; for (const x of bytes) s += String.fromCharCode(x); return btoa(s);
            };
            return [await b64(a), await b64(b)];
        }""")
    finally:
        await close()
    for encoded in blobs:
        data = base64.b64decode(encoded)
        assert data[:4] == b"\x1a\x45\xdf\xa3"  # each file starts with its own EBML header
        with av.open(io.BytesIO(data)) as container:
            decoded = sum(frame.samples for frame in container.decode(audio=0))
        assert decoded > 0


async def test_the_page_talks_hands_free_with_a_fake_microphone(voice_server, model, speech, tmp_path) -> None:
    from actors.voice.audio import wav_bytes

    model.enqueue(scripted_text(REPLY))
    silence = b"\x00\x00" * (p.INPUT_RATE // 2)
    wav = tmp_path / "question.wav"
    # The fake microphone plays from getUserMedia on, before the page's audio worklet is loaded
    # (a person speaks once "Listening…" shows): 4 s of quiet first, or a slowed server loses the
    # question's first words while the worklet's module is fetched.
    wav.write_bytes(wav_bytes(silence * 8 + await spoken(speech, QUESTION) + silence * 6, p.INPUT_RATE))
    page, close = await browser_page(voice_server, str(wav))
    try:
        await page.evaluate("""async (token) => {
            const { mountVoice } = await import("/static/js/voice.js");
            window.voiceEvents = [];
            window.voice = mountVoice(document.body, { token, onEvent: (e) => window.voiceEvents.push(e) });
        }""", OWNER_KEY)
        await page.wait_for_function("window.voiceEvents.some((e) => e.type === 'ready')", timeout=60_000)
        await page.check(".voice-handsfree input")
        await page.wait_for_function("window.voiceEvents.some((e) => e.type === 'spoken')", timeout=120_000)
        events = await page.evaluate("window.voiceEvents")
        shown = await page.inner_text(".voice-transcript")
    finally:
        await close()
    transcript = next(e for e in events if e["type"] == "transcript")
    assert heard_as(transcript["text"], QUESTION), transcript
    # The live transcript shows what was said, then the reply as it was spoken.
    said, answered = " ".join(words(transcript["text"])), " ".join(words(REPLY))
    assert " ".join(words(shown)).startswith(said) and answered in " ".join(words(shown))


async def test_the_chat_pages_talk_button_talks_hands_free_with_a_fake_microphone(
        voice_server, model, speech, tmp_path) -> None:
    from pathlib import Path

    from actors.voice.audio import wav_bytes

    shots = Path(__file__).resolve().parent.parent / "test-artifacts" / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    model.enqueue(scripted_text(REPLY))
    silence = b"\x00\x00" * (p.INPUT_RATE // 2)
    wav = tmp_path / "question.wav"
    wav.write_bytes(wav_bytes(silence * 8 + await spoken(speech, QUESTION) + silence * 6, p.INPUT_RATE))
    page, close = await browser_page(voice_server, str(wav))
    try:
        await page.set_viewport_size({"width": 1280, "height": 800})
        await page.goto(f"{voice_server.url}/#key={OWNER_KEY}")
        await page.wait_for_selector("#talk:not([hidden])")
        await page.click("#talk")
        await page.wait_for_selector(".voice-panel .voice-talk")
        assert await page.get_attribute("#talk", "aria-pressed") == "true"
        await page.wait_for_function("() => document.querySelector('.voice-status').textContent === 'Ready'",
                                     timeout=60_000)
        await page.check(".voice-handsfree input")
        # The question is heard, answered, and the reply shown as it is spoken.
        await page.wait_for_selector(".voice-agent", timeout=120_000)
        await page.wait_for_function("() => document.querySelector('.voice-status').textContent === 'Listening…'",
                                     timeout=120_000)
        said, agent = await page.inner_text(".voice-you"), await page.inner_text(".voice-agent")
        # The panel sits above the composer, inside the page.
        panel, form = await page.evaluate("""() => [document.querySelector('.voice-panel').getBoundingClientRect().bottom,
                                                    document.querySelector('#chat-form').getBoundingClientRect().top]""")
        await page.screenshot(path=str(shots / "voice-panel-desktop.png"))
        await page.set_viewport_size({"width": 390, "height": 844})
        await page.wait_for_timeout(250)
        await page.screenshot(path=str(shots / "voice-panel-phone.png"))
        # The spoken exchange is a conversation like any other: listed, and shown once the panel closes.
        await page.wait_for_selector("#conversations li.conversation")
        await page.click("#talk")
        await page.wait_for_selector(".voice-panel .voice", state="detached")
        assert await page.get_attribute("#talk", "aria-pressed") == "false"
        await page.wait_for_selector(".msg.assistant[data-done='true']")
        shown = await page.evaluate("() => [...document.querySelectorAll('.msg.user, .msg.assistant')]"
                                    ".map((m) => m.dataset.text)")
    finally:
        await close()
    assert heard_as(said, QUESTION), said
    assert words(agent) == words(REPLY)
    assert panel <= form + 1
    assert len(shown) == 2 and heard_as(shown[0], QUESTION) and shown[1] == REPLY, shown
