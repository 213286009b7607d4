"""Comparing what speech recognition heard with what was said."""

from __future__ import annotations

import difflib
import re


def words(text: str) -> list[str]:
    return re.findall(r"[a-z']+", text.lower())


def heard_as(heard: str, said: str) -> bool:
    """Speech recognition of synthetic speech: the same words, give or take one (piper's voice
    varies run to run and tiny.en now and then hears "in" as "then")."""
    got, want = words(heard), words(said)
    matcher = difflib.SequenceMatcher(a=got, b=want, autojunk=False)
    missed = len(want) - sum(block.size for block in matcher.get_matching_blocks())
    return missed <= 1 and abs(len(got) - len(want)) <= 1


def steady_speech(sentence: str) -> bytes:
    """`sentence` spoken by the bundled piper voice with its sampling noise off, as 16-bit PCM
    at the voice protocol's output rate: the same audio every run. A test's spoken question is
    its input, and piper's default noise made tiny.en hear two words wrong now and then (one
    clean-clone run in four: "weather I can London" for "weather like in London")."""
    from piper import SynthesisConfig

    from actors.voice.audio import resample_pcm
    from actors.voice.engines import PiperOffline
    from actors.voice.protocol import OUTPUT_RATE

    global _PIPER
    if _PIPER is None:
        _PIPER = PiperOffline()
    steady = SynthesisConfig(noise_scale=0.0, noise_w_scale=0.0)
    pcm = b"".join(c.audio_int16_bytes for c in _PIPER.voice.synthesize(sentence, syn_config=steady))
    return resample_pcm(pcm, _PIPER.rate, OUTPUT_RATE)


_PIPER = None
