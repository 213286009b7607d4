"""GET /v1/voice/ws: talk to the agent. Transport only: the protocol, framing, heard-mapping,
sentence-to-audio queue and utterance states are actors/voice (Ray-free); the speech models
live once per cluster in the SpeechActor; turns run in the conversation's SessionActor.

Who may open it: the owner key, a person's session token (header, ?token= or the page's
cookie), or a paired device's token for its person (with that person's tiers and PIN).
`?session_id=` continues one of the caller's own conversations; without it a new one starts.
`?text=` is the first turn's text (an answered call with no prepared opening sends
`[call answered] <reason>`, and the agent speaks first); `?opening=` is a call's prepared
opening line, spoken as it is (no model turn).

Close codes: 4401 no key, a bad one or a revoked device; 4403 a caller voice is not for;
4404 a session_id that is not the caller's; 4400 a message that breaks the protocol; 4408
nothing received for IDLE_SECONDS; 1009 a message over its limit (64 KB audio, 16 KB JSON).
"""

import asyncio
import logging
import os
import time
from typing import Any

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState
from ray.actor import ActorHandle

from actors.common.restart import first_then_rest
from actors.devices.people import OWNER_ID
from actors.devices.privacy import event_for_reader
from actors.devices.repository import claim_conversation, conversation_person
from actors.recent_errors import report
from actors.session.events import ENDS_TURN, Done, Sentence, TurnStarted
from actors.store.models import new_id
from actors.voice import protocol as p
from actors.voice.heard import PlayLog
from actors.voice.speaker import SpeechQueue
from actors.voice.speech_actor import speech_actor
from actors.voice.utterance import Refusal, Utterance, early_transcript_holds
from serve_apps.http.bodies import SESSION_ID
from serve_apps.http.receive import receive_within
from serve_apps.http.deps import context_of
from serve_apps.http.errors import ApiError, SocketClosed
from serve_apps.http.people_auth import Principal, person_or_device
from serve_apps.routes.confirmations import answer_confirmation

log = logging.getLogger(__name__)
router = APIRouter()
PREVIOUS_TURN_WAIT = 30.0


def speech_environ() -> dict[str, str]:
    """What the speech actor needs of this process's environment: the providers and their keys."""
    keep = {"IRIIS_PROVIDERS"}
    raw = os.environ.get("IRIIS_PROVIDERS", "")
    keep |= {name for name in os.environ if name in raw}
    return {k: os.environ[k] for k in keep if k in os.environ}


class VoiceConnection:
    """One voice socket: its utterance state, its play log, and the turn (and audio) running."""

    def __init__(self, ws: WebSocket, gw: Any, who: Principal, session_id: str, handle: ActorHandle, speech: Any) -> None:
        self.ws, self.gw, self.who = ws, gw, who
        self.session_id, self.handle, self.speech = session_id, handle, speech
        self.utter = Utterance()
        self.log = PlayLog()
        self.lock = asyncio.Lock()
        self.turn: asyncio.Task[None] | None = None
        self.queue: SpeechQueue | None = None
        self.ended_at: float | None = None   # the last end of utterance (for the timings)
        self.stt_seconds: float | None = None
        self.stt_wait: float | None = None   # end of utterance -> its transcript in hand
        self.stt_early: bool | None = None   # that transcript was started at a pause
        # Speech to text started at the last `pause`: (bytes of utterance it covers, its task).
        self.early: tuple[int, asyncio.Task[Any]] | None = None
        self.reply_id: str | None = None     # the running turn's saved reply, once it is written

    # -- sending ------------------------------------------------------------------------

    async def send_json(self, event: dict[str, Any]) -> None:
        async with self.lock:
            if self.ws.application_state == WebSocketState.CONNECTED:
                await self.ws.send_json(event)

    async def send_frame(self, seq: int, position: int, pcm: bytes) -> None:
        async with self.lock:
            if self.ws.application_state == WebSocketState.CONNECTED:
                await self.ws.send_bytes(p.audio_frame(seq, position, pcm))

    async def error(self, code: str, message: str) -> None:
        await self.send_json(p.VoiceError(code=code, message=message).wire())

    async def synthesize(self, text: str) -> bytes:
        said = await self.speech.synthesize.remote(text)
        return said.pcm

    # -- turns --------------------------------------------------------------------------

    async def start_turn(self, text: str) -> None:
        if self.turn is not None and not self.turn.done():
            # The interrupted turn ends (its `done`) before the next begins on this socket.
            await asyncio.wait([self.turn], timeout=PREVIOUS_TURN_WAIT)
        self.utter.text()
        self.turn = asyncio.get_running_loop().create_task(self._turn(text))

    async def _turn(self, text: str) -> None:
        me = asyncio.current_task()
        self.log.new_turn()
        self.reply_id = None
        queue = self.queue = SpeechQueue(self.synthesize, self.send_frame, self.log, p.FRAME_SAMPLES)
        started = time.monotonic()
        try:
            # A conversation whose actor went away between turns (idle exit, kill -9) is found
            # again for this turn: the person is not asked to say it twice.
            self.handle, events, first = await self.gw.conversations.begin(
                self.session_id, self.handle,
                lambda actor: actor.chat.options(num_returns="streaming").remote(text, attended=True))
            async for event in first_then_rest(first, events):
                if isinstance(event, TurnStarted):
                    await self.send_json({"type": "turn", "turn_id": event.turn_id, "session_id": self.session_id})
                    continue
                await self.send_json(p.turn_event_wire(event_for_reader(event, True)))
                if isinstance(event, Sentence):
                    queue.add(event.text)
                if isinstance(event, Done) and not event.cancelled:
                    self.reply_id = event.message_id
                if isinstance(event, ENDS_TURN):
                    break
        except asyncio.CancelledError:
            queue.stop()
            raise
        except Exception as exc:  # noqa: BLE001 - the conversation's actor went away mid-turn
            queue.stop()
            report("voice.turn", exc, path="/v1/voice/ws", request={"session": self.session_id})
            await self.error("session_unavailable", "The conversation stopped unexpectedly; what was said so "
                                                    "far is saved. Please say it again.")
        finally:
            queue.finish()
        await queue.drained()
        if queue.failures:
            await self.error("speech_failed", "Part of the reply could not be spoken; it is in the transcript.")
        if not queue.stopped:
            await self.send_json(p.Spoken(last_seq=queue.last_seq, frames=queue.frames,
                                          timings=self._timings(queue, started)).wire())
        if self.turn is me:
            self.utter.finished()

    async def speak(self, line: str) -> None:
        """A prepared line (an answered call's opening) spoken as it is, without a model turn."""
        self.log.new_turn()
        queue = self.queue = SpeechQueue(self.synthesize, self.send_frame, self.log, p.FRAME_SAMPLES)
        await self.send_json({"type": "sentence", "text": line, "index": 0})
        queue.add(line)
        queue.finish()
        self.utter.text()
        self.turn = asyncio.get_running_loop().create_task(self._spoken(queue, time.monotonic()))

    async def _spoken(self, queue: SpeechQueue, started: float) -> None:
        me = asyncio.current_task()
        await queue.drained()
        if not queue.stopped:
            await self.send_json(p.Spoken(last_seq=queue.last_seq, frames=queue.frames,
                                          timings=self._timings(queue, started)).wire())
        if self.turn is me:
            self.utter.finished()

    def _timings(self, queue: SpeechQueue, started: float) -> dict[str, float | None]:
        """Where the time went from the end of the utterance to the first audio frame."""
        t = queue.timings

        def span(a: float | None, b: float | None) -> float | None:
            return round(b - a, 4) if a is not None and b is not None else None

        return {"stt_s": self.stt_seconds, "stt_wait_s": self.stt_wait, "stt_early": self.stt_early,
                "model_first_sentence_s": span(started, t.first_sentence),
                "tts_first_s": span(t.first_tts_started, t.first_tts_done),
                "end_to_first_audio_s": span(self.ended_at, t.first_frame) if self.ended_at else None,
                "turn_to_first_audio_s": span(started, t.first_frame)}

    async def interrupt(self, heard_seq: int | None) -> None:
        """Barge-in: stop the audio, cancel the turn; history keeps what was heard.

        Audio goes out faster than it plays, so the turn (and even its audio) may be finished
        here while the person still hears it: the saved reply is then cut to what was heard."""
        if not self.utter.responding:
            if self.reply_id is not None and heard_seq is not None:
                await self.handle.keep_heard.remote(self.reply_id, self.log.heard_text(self.log.heard(heard_seq)))
            return
        if self.queue is not None:
            self.queue.stop()
        cancel = self.log.heard(heard_seq)
        if self.reply_id is None:
            await self.handle.cancel.remote(cancel.heard, cancel.heard_index)
        else:  # the reply is already saved (its `done` came): cut the saved reply instead
            await self.handle.keep_heard.remote(self.reply_id, self.log.heard_text(cancel))
        self.utter.interrupted()

    # -- input --------------------------------------------------------------------------

    async def end_of_utterance(self) -> None:
        self.ended_at = time.monotonic()
        if self.utter.responding:
            await self.interrupt(None)
        try:
            pcm = self.utter.end()
        except Refusal as refusal:
            await self.error(refusal.code, refusal.message)
            return
        try:
            heard = await self._transcript(pcm, self.utter.ended_paused_at)
        except Exception as exc:  # noqa: BLE001 - speech failed: say so, keep the socket
            self.utter.heard()
            report("voice.stt", exc, path="/v1/voice/ws")
            await self.error("speech_failed", "Speech to text failed; try again or type instead.")
            return
        self.stt_wait = round(time.monotonic() - self.ended_at, 4)
        self.stt_seconds = round(heard.seconds, 4)
        await self.send_json(p.Transcript(text=heard.text, engine=heard.engine).wire())
        self.utter.heard()
        if not heard.text.strip():
            await self.error("no_speech", "No words were recognised; say it again.")
            return
        await self.start_turn(heard.text)

    def pause(self) -> None:
        """Quiet after speech: start speech to text on the utterance so far, so that at `end`
        (usually SILENCE_MS later) the transcript is ready or nearly so."""
        if self.early is not None and not self.early[1].done():
            return  # one at a time: the speech actor would only queue a second
        pcm = self.utter.pause()
        if pcm is None:
            return
        task = asyncio.get_running_loop().create_task(self._stt(pcm))
        # An early transcript nobody uses (speech went on) must not log an unread failure.
        task.add_done_callback(lambda t: t.cancelled() or t.exception())
        self.early = (len(pcm), task)

    async def _stt(self, pcm: bytes) -> Any:
        return await self.speech.transcribe.remote(pcm, p.INPUT_RATE)

    async def _transcript(self, pcm: bytes, paused_at: int | None) -> Any:
        """The utterance's transcript: the one started at its pause when only quiet came after
        it, else (or if that one failed) a fresh one of the whole utterance."""
        early, self.early = self.early, None
        if early is not None and early[0] == paused_at and early_transcript_holds(pcm, paused_at):
            try:
                heard = await early[1]
                self.stt_early = True
                return heard
            except Exception:  # noqa: BLE001 - transcribe the whole utterance instead
                log.warning("early speech to text failed; transcribing the utterance again")
        self.stt_early = False
        return await self._stt(pcm)

    async def text(self, text: str) -> None:
        self.ended_at, self.stt_seconds, self.stt_wait, self.stt_early = None, None, None, None
        if self.utter.responding:
            await self.interrupt(None)
        try:
            await self.start_turn(text)
        except Refusal as refusal:
            await self.error(refusal.code, refusal.message)

    async def confirm(self, message: p.ConfirmAnswer) -> None:
        try:
            result = await answer_confirmation(self.gw, message.id, message.approve, message.pin)
        except ApiError as exc:
            await self.error(exc.code, exc.message)
            return
        await self.send_json({"type": "confirmed", **result.model_dump(mode="json")})

    async def dispatch(self, message: Any) -> None:
        if isinstance(message, p.EndOfUtterance):
            await self.end_of_utterance()
        elif isinstance(message, p.Pause):
            self.pause()
        elif isinstance(message, p.SayText):
            await self.text(message.text)
        elif isinstance(message, p.Interrupt):
            await self.interrupt(message.heard_seq)
        elif isinstance(message, p.Played):
            self.log.report(message.seq)
        elif isinstance(message, p.ConfirmAnswer):
            await self.confirm(message)
        else:
            await self.send_json(p.Pong().wire())

    async def serve(self) -> None:
        while True:
            message = await receive_within(self.ws, p.IDLE_SECONDS)
            if message is None:
                raise SocketClosed(p.CLOSE_IDLE, f"nothing received for {p.IDLE_SECONDS:g} s")
            if message["type"] == "websocket.disconnect":
                return
            data, text = message.get("bytes"), message.get("text")
            if data is not None:
                if len(data) > p.MAX_UPSTREAM_FRAME:
                    raise SocketClosed(p.CLOSE_TOO_BIG, f"audio messages are at most {p.MAX_UPSTREAM_FRAME} bytes")
                self.utter.audio(data)
            elif text is not None:
                if len(text) > p.MAX_TEXT_FRAME:
                    raise SocketClosed(p.CLOSE_TOO_BIG, f"JSON messages are at most {p.MAX_TEXT_FRAME} bytes")
                try:
                    parsed = p.parse_client(text)
                except p.BadMessage as exc:
                    await self.error("bad_message", str(exc))
                    raise SocketClosed(p.CLOSE_PROTOCOL, "that message breaks the voice protocol") from None
                await self.dispatch(parsed)

    async def close(self) -> None:
        """The socket ended: stop the audio; a turn still running stops where it was heard."""
        if self.early is not None:
            self.early[1].cancel()
        if self.turn is not None and not self.turn.done():
            if self.utter.responding:
                await self.interrupt(None)
            self.turn.cancel()
            await asyncio.wait([self.turn])


async def _open_session(gw: Any, who: Principal, session_id: str | None) -> tuple[str, Any]:
    """The caller's conversation (or a new one claimed for them). Raises SocketClosed 4404."""
    if session_id:
        if not SESSION_ID.match(session_id):
            raise SocketClosed(p.CLOSE_NO_SESSION, "no such session of yours")
        person, _device = await conversation_person(gw.store, session_id)
        if person != who.person_id:
            raise SocketClosed(p.CLOSE_NO_SESSION, "no such session of yours")
        # An answered call names its conversation before anything is in it: the owner's
        # voice may start it under that id; anyone else continues only what exists.
        starts = who.person_id == OWNER_ID and await gw.store.get_conversation(session_id) is None
        try:
            handle = await gw.conversations.open(session_id, create=starts)
        except ApiError as exc:
            raise _busy(exc) or SocketClosed(p.CLOSE_NO_SESSION, "no such session of yours") from None
        if who.device_id is not None:
            await claim_conversation(gw.store, session_id, who.person_id, who.device_id)
        return session_id, handle
    sid = new_id()
    await claim_conversation(gw.store, sid, who.person_id, who.device_id)
    try:
        return sid, await gw.conversations.open(sid, create=True)
    except ApiError as exc:
        raise _busy(exc) or exc from None


def _busy(exc: ApiError) -> SocketClosed | None:
    """A burst of new conversations (503 with Retry-After): close 1013, try again later."""
    if exc.status != 503:
        return None
    return SocketClosed(p.CLOSE_BUSY, exc.message)


@router.websocket("/voice/ws")
async def voice_socket(ws: WebSocket) -> None:
    gw = context_of(ws)
    await ws.accept()
    try:
        who = await person_or_device(gw, ws)
    except ApiError as exc:
        await ws.send_json(p.VoiceError(code=exc.code, message=exc.message).wire())
        await ws.close(p.CLOSE_FORBIDDEN if exc.status == 403 else p.CLOSE_UNAUTHORIZED, exc.code)
        return
    conn: VoiceConnection | None = None
    try:
        session_id, handle = await _open_session(gw, who, ws.query_params.get("session_id"))
        speech = await speech_actor(speech_environ())
        speech.warm.remote()  # the models load once per cluster; the first socket starts it
        conn = VoiceConnection(ws, gw, who, session_id, handle, speech)
        await conn.send_json(p.VoiceReady(session_id=session_id).wire())
        opening = (ws.query_params.get("opening") or "").strip()
        first = (ws.query_params.get("text") or "").strip()
        if opening:
            await conn.speak(opening[:p.MAX_TURN_TEXT])
        elif first:
            await conn.text(first[:p.MAX_TURN_TEXT])
        await conn.serve()
    except SocketClosed as closed:
        if ws.application_state == WebSocketState.CONNECTED:
            await ws.close(closed.close_code, closed.reason[:120])
    except WebSocketDisconnect:
        pass
    except Exception as exc:  # noqa: BLE001 - socket boundary: log, then close cleanly
        log.exception("voice socket failed")
        report("voice.ws", exc, path="/v1/voice/ws")
        if ws.application_state == WebSocketState.CONNECTED:
            await ws.close(1011, "server error; it was logged")
    finally:
        if conn is not None:
            await conn.close()
