"""Tests for actors.providers.chunker.SentenceChunker."""

from __future__ import annotations

import random

import pytest

from actors.providers.chunker import SentenceChunker


def whole(text: str, **kwargs: int) -> list[str]:
    chunker = SentenceChunker(**kwargs)
    return chunker.feed(text) + chunker.flush()


def streamed(text: str, seed: int, **kwargs: int) -> list[str]:
    """Feed ``text`` in random 1-3 character deltas, as a token stream would."""
    rng = random.Random(seed)
    chunker = SentenceChunker(**kwargs)
    out: list[str] = []
    i = 0
    while i < len(text):
        step = rng.randint(1, 3)
        out += chunker.feed(text[i : i + step])
        i += step
    return out + chunker.flush()


PARAGRAPH = (
    "Good morning! The pressure is 2.5 kPa and pi is 3.14, e.g. for circles. "
    "Dr. Smith met J. Smith at 9 a.m. in the U.S. yesterday. Wait... really?! "
    '"Yes." she said. Well… Maybe tomorrow.\n\n'
    "Steps:\n1. Boil water.\n2. Add pasta\n- Milk\n- Eggs\n\n"
    "```python\nx = 1. \nprint(x)  # Done. Really.\n```\nThat is all"
)

PARAGRAPH_SENTENCES = [
    "Good morning!",
    "The pressure is 2.5 kPa and pi is 3.14, e.g. for circles.",
    "Dr. Smith met J. Smith at 9 a.m. in the U.S. yesterday.",
    "Wait... really?!",
    '"Yes." she said.',
    "Well…",
    "Maybe tomorrow.",
    "Steps:",
    "1. Boil water.",
    "2. Add pasta",
    "- Milk",
    "- Eggs",
    "```python\nx = 1. \nprint(x)  # Done. Really.\n```",
    "That is all",
]


def test_paragraph_whole() -> None:
    assert whole(PARAGRAPH) == PARAGRAPH_SENTENCES


@pytest.mark.parametrize("seed", range(25))
def test_token_by_token_matches_whole(seed: int) -> None:
    assert streamed(PARAGRAPH, seed) == PARAGRAPH_SENTENCES


@pytest.mark.parametrize("seed", range(10))
def test_long_sentence_cut_is_split_independent(seed: int) -> None:
    text = "word, " * 120 + "end. Next one."
    assert streamed(text, seed) == whole(text)


def test_first_sentence_before_stream_ends() -> None:
    chunker = SentenceChunker()
    assert chunker.feed("Hello there.") == []  # "." at the end is ambiguous
    assert chunker.feed(" How") == ["Hello there."]
    assert chunker.feed(" are you") == []
    assert chunker.flush() == ["How are you"]


def test_waits_for_character_after_the_whitespace() -> None:
    chunker = SentenceChunker()
    assert chunker.feed("It is done.  \n") == []
    assert chunker.feed("Next") == ["It is done."]


def test_decimal_split_across_deltas() -> None:
    chunker = SentenceChunker()
    assert chunker.feed("The value is 3.") == []
    assert chunker.feed("14 exactly. Then") == ["The value is 3.14 exactly."]


@pytest.mark.parametrize(
    "text",
    [
        "It costs 2.5 dollars and 3.14 more today.",
        "Bring fruit, e.g. apples and pears.",
        "That is, i.e. the other one.",
        "Talk to Dr. Jones and Mr. Brown today.",
        "Mrs. Lee and Ms. Kim came by.",
        "It was red vs. blue in the game.",
        "She lives on Main St. near the park.",
        "Read No. 5 on the list.",
        "It holds approx. four liters here.",
        "We met at 9 a.m. and left at 5 p.m. without lunch.",
        "The U.S. economy grew.",
        "The author J. Smith wrote it.",
        "And then… nothing happened at all.",
        "Fruit, nuts, etc. are fine.",
    ],
)
def test_no_split_inside(text: str) -> None:
    assert whole(text + " Next sentence here.") == [text, "Next sentence here."]


def test_split_on_runs_and_closing_quotes() -> None:
    assert whole('He said "Stop!" Then left?! (Really.) Fine...  Ok') == [
        'He said "Stop!"',
        "Then left?!",
        "(Really.)",
        "Fine...",
        "Ok",
    ]


def test_etc_and_no_can_end_a_sentence() -> None:
    assert whole("Apples, pears, etc. Then more. No. I won't.") == [
        "Apples, pears, etc.",
        "Then more.",
        "No.",
        "I won't.",
    ]


def test_short_fragment_merged_into_next() -> None:
    assert whole("1. Intro text here. 10. Second part.") == ["1. Intro text here.", "10. Second part."]


def test_code_fence_is_one_chunk_emitted_when_closed() -> None:
    chunker = SentenceChunker()
    assert chunker.feed("Here it is:\n```sh\necho hi. \n") == ["Here it is:"]
    assert chunker.feed("echo there.\nls\n``") == []
    assert chunker.feed("`") == ["```sh\necho hi. \necho there.\nls\n```"]
    assert chunker.feed("\nAfter. Done") == ["After."]
    assert chunker.flush() == ["Done"]


def test_code_fence_at_stream_start() -> None:
    assert whole("```\na. B. c.\n```\nText.") == ["```\na. B. c.\n```", "Text."]


def test_unclosed_fence_flushed_whole() -> None:
    assert whole("Look:\n```\nx. Y. z") == ["Look:", "```\nx. Y. z"]


def test_lists_split_per_item() -> None:
    text = "Shopping:\n- milk\n* bread\n+ jam\n1. first\n2) second\n3. third item"
    assert whole(text) == ["Shopping:", "- milk", "* bread", "+ jam", "1. first", "2) second", "3. third item"]


def test_newline_that_is_not_a_list_does_not_split() -> None:
    assert whole("one line\ncontinues here\n-5 degrees\n2024 was long") == [
        "one line\ncontinues here\n-5 degrees\n2024 was long"
    ]


def test_paragraph_break_splits_without_punctuation() -> None:
    assert whole("Title line\n\nBody text") == ["Title line", "Body text"]


def test_overlong_sentence_is_cut_at_comma() -> None:
    text = "word " * 50 + "clause, " + "more " * 100 + "end."
    out = whole(text)
    assert len(out) >= 2
    assert out[0].endswith("clause,")
    assert all(len(s) <= 400 for s in out)
    assert " ".join(out).split() == text.split()


def test_overlong_sentence_without_comma_cut_at_space() -> None:
    out = whole("abcd " * 150, max_chars=100)
    assert all(len(s) <= 100 for s in out)
    assert all(set(s.split()) == {"abcd"} for s in out)
    assert sum(len(s.split()) for s in out) == 150


def test_flush_behaviour() -> None:
    chunker = SentenceChunker()
    assert chunker.flush() == []
    assert chunker.feed("Dangling 3.") == []
    assert chunker.flush() == ["Dangling 3."]
    # flush resets: the next stream starts clean
    assert chunker.flush() == []
    assert chunker.feed("  ") == []
    assert chunker.flush() == []
    assert chunker.feed("Second stream. Yes") == ["Second stream."]
    assert chunker.flush() == ["Yes"]


def test_empty_input() -> None:
    chunker = SentenceChunker()
    assert chunker.feed("") == []
    assert chunker.flush() == []
    assert whole("") == []
    assert whole(" \n\n ") == []


def test_max_chars_validated() -> None:
    with pytest.raises(ValueError):
        SentenceChunker(max_chars=5)
