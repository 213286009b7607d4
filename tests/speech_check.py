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
