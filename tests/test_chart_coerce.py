"""Chart data in the shapes models send (issue 32): each unambiguous shape becomes named series
and point labels; an empty or ambiguous one is refused with the shape to send, as the tool's error."""

from __future__ import annotations

from typing import Any

import pytest

from actors.tools.artefacts import ArtefactError, chart
from actors.tools.artefacts.coerce import SHAPE, ChartData, chart_data, labels, split_numbers

MONTHS = ["Jan", "Feb", "Mar"]
PAIRS = ChartData({"value": [40.0, 32.0, 55.0]}, MONTHS)


@pytest.mark.parametrize("series, expected", [
    # label/number pairs, as text
    ("Jan 40, Feb 32, Mar 55", PAIRS),
    ("Jan: 40, Feb: 32, Mar: 55", PAIRS),
    ("Jan=40; Feb=32; Mar=55", PAIRS),
    ("Jan 40\nFeb 32\nMar 55", PAIRS),
    ("Jan 40 Feb 32 Mar 55", PAIRS),
    ("Jan $40, Feb $32, Mar $55", PAIRS),
    # ... as an object of numbers, records, pairs or one-key objects
    ({"Jan": 40, "Feb": 32, "Mar": 55}, PAIRS),
    ({"Jan": "40", "Feb": "32", "Mar": "55"}, PAIRS),
    ([{"label": "Jan", "value": 40}, {"label": "Feb", "value": 32}, {"label": "Mar", "value": 55}], PAIRS),
    ([{"month": "Jan", "count": 40}, {"month": "Feb", "count": 32}, {"month": "Mar", "count": 55}], PAIRS),
    ([["Jan", 40], ["Feb", 32], ["Mar", 55]], PAIRS),
    ([{"Jan": 40}, {"Feb": 32}, {"Mar": 55}], PAIRS),
    (["Jan 40", "Feb 32", "Mar 55"], PAIRS),
    # ... as JSON or Python literals inside a string
    ('{"Jan": 40, "Feb": 32, "Mar": 55}', PAIRS),
    ("{'Jan': 40, 'Feb': 32, 'Mar': 55}", PAIRS),
    ('[{"label": "Jan", "value": 40}, {"label": "Feb", "value": 32}, {"label": "Mar", "value": 55}]', PAIRS),
    # bare numbers: one unnamed series
    ([40, 32, 55], ChartData({"value": [40.0, 32.0, 55.0]})),
    ("40, 32, 55", ChartData({"value": [40.0, 32.0, 55.0]})),
    # named series, as asked for, or in words
    ({"Sales": [40, 32, 55]}, ChartData({"Sales": [40.0, 32.0, 55.0]})),
    ({"Sales": "40, 32, 55"}, ChartData({"Sales": [40.0, 32.0, 55.0]})),
    ("Sales: 40, 32, 55; Costs: 30, 20, 10", ChartData({"Sales": [40.0, 32.0, 55.0], "Costs": [30.0, 20.0, 10.0]})),
    ({"labels": MONTHS, "Sales": [40, 32, 55]}, ChartData({"Sales": [40.0, 32.0, 55.0]}, MONTHS)),
    ({"Sales": {"Jan": 40, "Feb": 32}, "Costs": {"Jan": 30, "Feb": 20}},
     ChartData({"Sales": [40.0, 32.0], "Costs": [30.0, 20.0]}, ["Jan", "Feb"])),
    ([{"month": "Jan", "sales": 40, "costs": 30}, {"month": "Feb", "sales": 32, "costs": 20}],
     ChartData({"sales": [40.0, 32.0], "costs": [30.0, 20.0]}, ["Jan", "Feb"])),
    ([{"year": 2024, "value": 5}, {"year": 2025, "value": 6}], ChartData({"value": [5.0, 6.0]}, ["2024", "2025"])),
    # points at x positions
    ([[1, 2], [3, 4]], ChartData({"value": [2.0, 4.0]}, x=[1.0, 3.0])),
    ([{"x": 1, "y": 2}, {"x": 3, "y": 4}], ChartData({"value": [2.0, 4.0]}, x=[1.0, 3.0])),
    # one value per label stays as it was (a pie's slices)
    ({"rent": [900], "food": [300]}, ChartData({"rent": [900.0], "food": [300.0]})),
    # thousands separators where commas do not separate the pairs
    ("Jan 1,200; Feb 900", ChartData({"value": [1200.0, 900.0]}, ["Jan", "Feb"])),
])
def test_each_shape_becomes_series_and_labels(series: Any, expected: ChartData) -> None:
    assert chart_data(series) == expected


def test_a_single_series_takes_the_given_name_and_labels_from_the_pairs_win() -> None:
    got = chart_data("Jan 40, Feb 32", ["January", "February"], name="Rain (mm)")
    assert got == ChartData({"Rain (mm)": [40.0, 32.0]}, ["Jan", "Feb"])
    assert chart_data({"Sales": [1, 2]}, ["Q1", "Q2"]) == ChartData({"Sales": [1.0, 2.0]}, ["Q1", "Q2"])
    assert chart_data(None, ["Q1"]) is None


@pytest.mark.parametrize("series, problem", [
    ("", "empty"), ("   ", "empty"), ([], "empty"), ({}, "empty"),
    ("Jan, Feb, Mar", "not a label and a number"),
    ("Jan 40, 32", "some numbers have labels and some do not"),
    ("Sales 40 32", "some numbers have labels and some do not"),
    ("Jan 40 Feb", "has no number after it"),
    ({"Jan": 40, "Feb": [32]}, "mixes single numbers and lists"),
    ({"Jan": "forty"}, "not a number or a list of numbers"),
    ({"labels": MONTHS}, "labels but no numbers"),
    ({"Sales": {"Jan": 40}, "Costs": {"Feb": 30}}, "names different points"),
    ([{"a": "x", "b": "y", "v": 1}], "need one field naming each point"),
    ([{"label": "Jan", "value": 40}, {"label": "Feb"}], "same fields"),
    ([["Jan", "forty"]], "second item is not a number"),
    ([[1, 2, 3], [4, 5, 6]], "mixed or nested"),
    ([40, "Feb"], "mixed or nested"),
    ("[1, 2", "not valid JSON"),
    (True, "cannot be a bool"),
    ({"Sales": []}, "no numbers"),
])
def test_an_empty_or_ambiguous_shape_is_refused_with_what_to_send(series: Any, problem: str) -> None:
    with pytest.raises(ArtefactError) as refused:
        chart_data(series)
    message = str(refused.value)
    assert problem in message and message.endswith(SHAPE)
    assert '{"Sales": [40, 32, 55]}' in message and 'x_labels=["Jan", "Feb", "Mar"]' in message


def test_lists_sent_as_text_are_split_before_validation() -> None:
    assert split_numbers("40, 32, 55") == [40.0, 32.0, 55.0]
    assert split_numbers("1 2.5 -3") == [1.0, 2.5, -3.0]
    assert split_numbers([1, 2]) == [1, 2]
    with pytest.raises(ValueError, match=r"send one like \[40, 32, 55\]"):
        split_numbers("forty, thirty")
    assert labels("Jan, Feb; Mar") == MONTHS
    assert labels([2024, 2025.0, "Q3"]) == ["2024", "2025", "Q3"]


def test_coerced_pairs_draw_a_chart() -> None:
    data = chart_data("Jan 40, Feb 32, Mar 55")
    assert data is not None
    png = chart("bar", "Rain", data.series, x_labels=data.x_labels)
    assert png.startswith(b"\x89PNG")
