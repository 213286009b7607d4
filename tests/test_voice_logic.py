"""The voice socket's pure logic, in-process: the wire and its limits, audio framing, which
frame carried which sentence and what a person heard when they cut in, the sentence-to-audio
queue speaking while the model still writes, and the utterance states."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from actors.voice import protocol as p
from actors.voice.audio import float_to_pcm, frames_of, is_quiet, pcm_to_float, read_wav, resample, wav_bytes
from actors.voice.heard import PlayLog, words_for
from actors.voice.speaker import SpeechQueue
from actors.voice.utterance import (
    MAX_UTTERANCE_BYTES,
    MIN_UTTERANCE_BYTES,
    Phase,
    Refusal,
    Utterance,
    early_transcript_holds,
)


# -- the wire ----------------------------------------------------------------------------------

def test_client_messages_parse_by_type_and_bad_ones_are_refused() -> None:
    assert isinstance(p.parse_client('{"type": "end"}'), p.EndOfUtterance)
    assert p.parse_client('{"type": "text", "text": "[call answered] dentist"}').text == "[call answered] dentist"
    assert p.parse_client('{"type": "interrupt", "heard_seq": 4}').heard_seq == 4
    assert p.parse_client('{"type": "interrupt"}').heard_seq is None
    assert p.parse_client('{"type": "played", "seq": 0}').seq == 0
    confirm = p.parse_client('{"type": "confirm", "id": "s.x", "approve": true, "pin": "1234"}')
    assert confirm.approve and confirm.pin == "1234"
    for bad in ('{"type": "shout"}', "not json", '{"type": "text", "text": ""}',
                '{"type": "interrupt", "heard_seq": -1}', '{"type": "played"}',
                json.dumps({"type": "text", "text": "x" * (p.MAX_TURN_TEXT + 1)})):
        with pytest.raises(p.BadMessage):
            p.parse_client(bad)
    # At the limit is fine.
    assert p.parse_client(json.dumps({"type": "text", "text": "x" * p.MAX_TURN_TEXT}))


def test_audio_frames_carry_sequence_and_sentence() -> None:
    pcm = b"\x01\x00\x02\x00"
    frame = p.audio_frame(70_000, 3, pcm)
    assert len(frame) == p.HEADER.size + len(pcm)
    assert p.read_audio_frame(frame) == (70_000, 3, pcm)


def test_events_are_flat_json_with_the_one_error_shape() -> None:
    assert p.VoiceError(code="no_speech", message="m").wire() == {"type": "error", "code": "no_speech", "message": "m"}
    ready = p.VoiceReady(session_id="abc").wire()
    assert ready["input_rate"] == 16_000 and ready["audio"]["rate"] == p.OUTPUT_RATE
    assert ready["audio"]["header_bytes"] == 8


# -- audio helpers -------------------------------------------------------------------------------

def test_pcm_round_trip_resample_and_wav() -> None:
    tone = np.sin(np.linspace(0, 2 * np.pi * 440, 16_000)).astype(np.float32) * 0.5
    pcm = float_to_pcm(tone)
    assert np.allclose(pcm_to_float(pcm), tone, atol=1e-3)
    assert resample(tone, 16_000, 22_050).size == 22_050
    back, rate = read_wav(wav_bytes(pcm, 16_000))
    assert (back, rate) == (pcm, 16_000)
    with pytest.raises(ValueError):
        read_wav(b"RIFF....nope")
    assert [len(f) for f in frames_of(b"\x00" * 10, 2)] == [4, 4, 2]


# -- what was heard ------------------------------------------------------------------------------

def _turn(log: PlayLog, sentences: list[tuple[str, int]], frame: int = 100) -> list[int]:
    """Record each sentence's frames (samples each); the seqs, in order."""
    seqs = []
    for text, samples in sentences:
        position = log.sentence(text)
        end = 0
        while end < samples:
            end = min(samples, end + frame)
            seqs.append(log.frame(position, end, samples))
    return seqs


def test_a_fully_played_sentence_is_heard_by_index() -> None:
    log = PlayLog()
    seqs = _turn(log, [("Paris is sunny today.", 300), ("It will rain tomorrow.", 300)])
    assert seqs == [0, 1, 2, 3, 4, 5]
    cancel = log.heard(2)  # the last frame of sentence 0
    assert cancel.heard_index == 0 and cancel.heard is None


def test_a_partly_played_sentence_keeps_the_words_played() -> None:
    log = PlayLog()
    _turn(log, [("Paris is sunny today.", 300), ("It will rain tomorrow and after.", 1000)])
    cancel = log.heard(5)  # 300 of sentence 1's 1000 samples: 30% of its 32 characters
    assert cancel.heard_index is None
    assert cancel.heard == words_for("It will rain tomorrow and after.", 0.3) == "It will"


def test_nothing_played_keeps_nothing_and_a_fragment_that_recurs_later_falls_back() -> None:
    log = PlayLog()
    _turn(log, [("Yes it is.", 1000), ("Yes it is, really.", 300)])
    assert log.heard(None).heard_index == -1
    # One frame of "Yes it is." is "Yes", which the later sentence also holds: keep none of it.
    assert log.heard(0).heard_index == -1
    # Less than a word played: the sentence before (none here).
    log2 = PlayLog()
    _turn(log2, [("Wonderful.", 1000)])
    assert log2.heard(0).heard_index == -1


def test_heard_text_spells_out_what_a_cancel_keeps() -> None:
    log = PlayLog()
    _turn(log, [("Paris is sunny today.", 300), ("It will rain tomorrow and after.", 1000)])
    assert log.heard_text(log.heard(2)) == "Paris is sunny today."
    assert log.heard_text(log.heard(5)) == "Paris is sunny today. It will"
    log2 = PlayLog()
    _turn(log2, [("Wonderful.", 1000)])
    assert log2.heard_text(log2.heard(None)) == ""


def test_reports_move_forward_only_and_sequences_go_on_across_turns() -> None:
    log = PlayLog()
    _turn(log, [("One two three four.", 400)])
    log.report(2)
    log.report(1)
    assert log.played == 2
    log.report(99)  # not a frame of this turn
    assert log.played == 2
    log.new_turn()
    assert log.heard(None).heard_index == -1
    seqs = _turn(log, [("Next.", 100)])
    assert seqs == [4]
    assert log.heard(3).heard_index == -1  # a frame of the previous turn counts for nothing now
    assert log.heard(4).heard_index == 0


def test_words_for_cuts_at_whole_words_from_the_text_itself() -> None:
    text = "Take  the  second street."
    assert words_for(text, 0) == ""
    assert words_for(text, 1) == text
    cut = words_for(text, 0.5)
    assert text.startswith(cut) and cut.endswith("the")


# -- the sentence-to-audio queue -----------------------------------------------------------------

async def test_the_first_sentence_is_spoken_while_the_model_still_writes() -> None:
    sent: list[tuple[int, int, bytes]] = []
    synthesised: list[str] = []
    first_frame = asyncio.Event()

    async def synthesize(text: str) -> bytes:
        synthesised.append(text)
        return b"\x00\x00" * 250

    async def send(seq: int, position: int, pcm: bytes) -> None:
        sent.append((seq, position, pcm))
        first_frame.set()

    log = PlayLog()
    queue = SpeechQueue(synthesize, send, log, frame_samples=100)
    queue.add("First sentence.")
    # The turn has not finished (no finish()): audio of the first sentence goes out anyway.
    await asyncio.wait_for(first_frame.wait(), 5)
    queue.add("Second sentence.")
    queue.finish()
    await queue.drained()
    assert synthesised == ["First sentence.", "Second sentence."]
    assert [s for s, _, _ in sent] == list(range(6))
    assert [pos for _, pos, _ in sent] == [0, 0, 0, 1, 1, 1]
    assert [len(pcm) for _, _, pcm in sent] == [200, 200, 100] * 2
    assert queue.last_seq == 5 and queue.frames == 6
    assert log.heard(2).heard_index == 0
    t = queue.timings
    assert t.first_sentence <= t.first_tts_started <= t.first_tts_done <= t.first_frame


async def test_stop_drops_what_is_queued_and_sends_nothing_more() -> None:
    sent: list[int] = []
    release = asyncio.Event()

    async def synthesize(text: str) -> bytes:
        if text.startswith("Slow"):
            await release.wait()
        return b"\x00\x00" * 100

    async def send(seq: int, position: int, pcm: bytes) -> None:
        sent.append(seq)

    queue = SpeechQueue(synthesize, send, PlayLog(), frame_samples=100)
    queue.add("Fast one.")
    queue.add("Slow one.")
    queue.add("Never spoken.")
    await asyncio.sleep(0.05)
    queue.stop()
    release.set()
    queue.finish()
    await queue.drained()
    assert sent == [0]


async def test_a_sentence_that_fails_to_synthesise_does_not_stop_the_rest() -> None:
    sent: list[int] = []

    async def synthesize(text: str) -> bytes:
        if "bad" in text:
            raise RuntimeError("engine broke")
        return b"\x00\x00" * 100

    async def send(seq: int, position: int, pcm: bytes) -> None:
        sent.append(position)

    queue = SpeechQueue(synthesize, send, PlayLog(), frame_samples=100)
    for text in ("good.", "bad.", "good again."):
        queue.add(text)
    queue.finish()
    await queue.drained()
    assert sent == [0, 2] and len(queue.failures) == 1


async def test_a_turn_with_no_sentences_drains_at_once() -> None:
    async def never(text: str) -> bytes:
        raise AssertionError

    async def send(seq: int, position: int, pcm: bytes) -> None:
        raise AssertionError

    queue = SpeechQueue(never, send, PlayLog(), frame_samples=100)
    queue.finish()
    await asyncio.wait_for(queue.drained(), 5)
    assert queue.last_seq is None


# -- the utterance states ----------------------------------------------------------------------

def test_an_utterance_goes_listening_transcribing_responding_and_back() -> None:
    u = Utterance()
    u.audio(b"\x00" * MIN_UTTERANCE_BYTES)
    assert u.end() == b"\x00" * MIN_UTTERANCE_BYTES and u.phase is Phase.TRANSCRIBING
    with pytest.raises(Refusal) as busy:
        u.text()
    assert busy.value.code == "busy"
    u.heard()
    assert u.phase is Phase.LISTENING
    u.text()
    assert u.responding
    u.audio(b"\x00" * 100)  # collected while the reply plays; kept for the next utterance
    u.interrupted()
    assert u.phase is Phase.LISTENING and len(u.buffer) == 100
    u.text()
    u.finished()
    assert u.phase is Phase.LISTENING


def test_utterance_limits_at_over_and_under() -> None:
    u = Utterance()
    u.audio(b"\x00" * (MIN_UTTERANCE_BYTES - 2))
    with pytest.raises(Refusal) as short:
        u.end()
    assert short.value.code == "no_speech" and u.phase is Phase.LISTENING
    u.audio(b"\x00" * MAX_UTTERANCE_BYTES)
    assert len(u.end()) == MAX_UTTERANCE_BYTES  # exactly at the limit is taken
    u.heard()
    u.audio(b"\x00" * MAX_UTTERANCE_BYTES)
    u.audio(b"\x00\x00")
    with pytest.raises(Refusal) as long:
        u.end()
    assert long.value.code == "utterance_too_long"
    assert u.buffer == bytearray()  # the next utterance starts clean


# -- early speech to text at a pause ------------------------------------------------------------

def _tone(seconds: float, loudness: float) -> bytes:
    n = int(p.INPUT_RATE * seconds)
    return float_to_pcm(np.sin(np.linspace(0, 2 * np.pi * 300 * seconds, n)).astype(np.float32) * loudness)


def test_a_pause_message_parses_and_only_with_its_type() -> None:
    assert isinstance(p.parse_client('{"type": "pause"}'), p.Pause)
    with pytest.raises(p.BadMessage):
        p.parse_client('{"type": "paused"}')


def test_quiet_is_judged_piece_by_piece_against_the_threshold() -> None:
    assert is_quiet(b"", p.INPUT_RATE, p.QUIET_RMS)
    assert is_quiet(bytes(3200), p.INPUT_RATE, p.QUIET_RMS)
    # Room noise under the threshold is quiet; one 20 ms word-sized burst in a second is not.
    assert is_quiet(_tone(1.0, 0.02), p.INPUT_RATE, p.QUIET_RMS)
    assert not is_quiet(bytes(16_000) + _tone(0.02, 0.3) + bytes(16_000), p.INPUT_RATE, p.QUIET_RMS)


def test_a_pause_hands_over_the_speech_so_far_and_end_remembers_where_it_came() -> None:
    u = Utterance()
    u.audio(bytes(MIN_UTTERANCE_BYTES - 2))
    assert u.pause() is None  # too little to transcribe yet
    u.audio(b"\x01\x00" * 10)
    early = u.pause()
    assert early is not None and len(early) == MIN_UTTERANCE_BYTES + 18 == u.paused_at
    u.audio(bytes(320))
    pcm = u.end()
    assert u.ended_paused_at == len(early) and u.paused_at is None and len(pcm) == len(early) + 320
    assert u.pause() is None  # transcribing: no early transcript of the next one yet


def test_no_pause_no_early_transcript_and_past_the_limit_none() -> None:
    u = Utterance()
    u.audio(bytes(MIN_UTTERANCE_BYTES))
    u.end()
    assert u.ended_paused_at is None
    u.heard()
    u.audio(bytes(MAX_UTTERANCE_BYTES + 2))
    assert u.pause() is None


def test_the_early_transcript_holds_only_when_quiet_followed_the_pause() -> None:
    speech = _tone(1.0, 0.4)
    assert early_transcript_holds(speech + bytes(16_000), len(speech))
    assert early_transcript_holds(speech, len(speech))
    # The person went on talking after the pause: transcribe the whole utterance.
    assert not early_transcript_holds(speech + bytes(3200) + _tone(0.5, 0.4), len(speech))
    assert not early_transcript_holds(speech, None)
    assert not early_transcript_holds(speech, len(speech) + 2)
