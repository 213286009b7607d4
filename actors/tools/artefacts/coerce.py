"""Chart data in the shapes models send, turned into the named series and labels a chart draws.

`make_chart` asks for `series` as {name: [numbers]} with `x_labels`, but a small local model often
sends what a person would write: "Jan 40, Feb 32, Mar 55", {"Jan": 40, "Feb": 32}, a list of
{"label": "Jan", "value": 40} records, [["Jan", 40], ...] pairs or a bare [40, 32, 55].
`chart_data` reads every shape that can mean only one thing and refuses the rest with an
ArtefactError that shows the shape to send, so the model's retry succeeds. No MCP import: the
studio server turns the error into a ToolError.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from typing import Any

from actors.tools.artefacts.shared import ArtefactError

SHAPE = ('send series as {name: [numbers]} with x_labels naming the points, e.g. series={"Sales": [40, 32, 55]} '
         'and x_labels=["Jan", "Feb", "Mar"], or label/number pairs like {"Jan": 40, "Feb": 32} or "Jan 40, Feb 32"')
# Longer text is a runaway tool call, not chart data (ChartSpec bounds the points themselves).
MAX_TEXT = 200_000
# Record fields that name a point, and fields that hold its one number, in order of preference.
LABEL_KEYS = ("label", "name", "category", "x", "key", "month", "date", "period", "year")
VALUE_KEYS = ("value", "y", "count", "amount", "total", "number")
_SERIES_LABEL_KEYS = ("labels", "x_labels", "categories", "names")

_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[-+]?\.\d+")
_NAMED_SERIES = re.compile(r"^(?P<name>[^:=]+?)\s*[:=]\s*(?P<numbers>.+)$")


@dataclass(frozen=True)
class ChartData:
    """What a chart draws: named series of numbers, the names of the points, and their x positions."""

    series: dict[str, list[float]]
    x_labels: list[str] | None = None
    x: list[float] | None = None


def _refuse(problem: str) -> ArtefactError:
    return ArtefactError(f"{problem}; {SHAPE}")


def number(value: Any) -> float | None:
    """A finite number from a number or from text like "40", "-3.5", "1,200", "$40", "12%"; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    text = value.strip().strip("$€£¥%").strip()
    if not _NUMBER.fullmatch(text):
        return None
    return float(text.replace(",", ""))


def numbers(value: Any) -> list[float] | None:
    """A list of numbers from a list of numbers, or from text "40, 32, 55" / "40 32 55"; else None."""
    if isinstance(value, str):  # separators split, so "1,200" here is two numbers
        value = [p for p in re.split(r"[\s,;]+", value.strip()) if p]
    if not isinstance(value, list | tuple):
        return None
    found = [number(v) for v in value]
    return None if any(v is None for v in found) else [v for v in found if v is not None]


def labels(value: Any) -> Any:
    """Point names from text "Jan, Feb, Mar" (or one a line) or a list of numbers ([2024, 2025]);
    anything else is returned as given, for validation to accept or refuse."""
    if isinstance(value, str):
        return [p.strip() for p in re.split(r"[,;\n]", value) if p.strip()]
    if isinstance(value, list | tuple):
        return [f"{v:g}" if isinstance(v, float) else str(v) if isinstance(v, int) else v for v in value]
    return value


def split_numbers(value: Any) -> Any:
    """For a list-of-numbers parameter: text "40, 32, 55" as a list; anything else as given, for
    validation to accept or refuse. Raises ValueError, with the shape to send, for other text."""
    if isinstance(value, str):
        found = numbers(value)
        if found is None:
            raise ValueError(f"{value[:60]!r} is not a list of numbers; send one like [40, 32, 55]")
        return found
    return value


def chart_data(series: Any, x_labels: list[str] | None = None, name: str = "value") -> ChartData | None:
    """`series` in any unambiguous shape as ChartData; None when it is None. A single unnamed
    series is called `name`. Labels read from `series` replace `x_labels`: they came with the
    numbers. Raises ArtefactError, saying what to send, for an empty or ambiguous shape."""
    if series is None:
        return None
    data = _read(series, name)
    if not data.series or not any(data.series.values()):
        raise _refuse("series has no numbers")
    return ChartData(data.series, data.x_labels if data.x_labels is not None else x_labels, data.x)


def _read(series: Any, name: str) -> ChartData:
    if isinstance(series, str):
        return _read_text(series, name)
    if isinstance(series, dict):
        return _read_dict(series, name)
    if isinstance(series, list | tuple):
        return _read_list(list(series), name)
    found = number(series)
    if found is not None:
        return ChartData({name: [found]})
    raise _refuse(f"series cannot be a {type(series).__name__}")


def _read_text(text: str, name: str) -> ChartData:
    text = text.strip()
    if not text:
        raise _refuse("series is empty")
    if len(text) > MAX_TEXT:
        raise _refuse(f"series text is longer than {MAX_TEXT} characters")
    if text[0] in "[{":
        try:
            parsed = json.loads(text)
        except ValueError:
            try:  # Python literals ({'Jan': 40}); literal_eval builds values only, it runs nothing
                parsed = ast.literal_eval(text)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                raise _refuse("series looks like JSON but is not valid JSON") from None
        return _read(parsed, name)
    # Several named series, one a line or ';'-separated: "Sales: 40, 32, 55; Costs: 30, 20, 10".
    lines = [p.strip() for p in re.split(r"[;\n]", text) if p.strip()]
    named = [_NAMED_SERIES.match(line) for line in lines]
    if all(named):
        found = {m.group("name").strip(): numbers(m.group("numbers")) for m in named if m}
        if all(v is not None and len(v) > 1 for v in found.values()) and len(found) == len(lines):
            return ChartData({k: v for k, v in found.items() if v is not None})
    if ";" in text or "\n" in text or "," in text:
        parts = lines if (";" in text or "\n" in text) else [p.strip() for p in text.split(",") if p.strip()]
        return _pairs([_pair_text(p) for p in parts], name)
    return _pairs(_pairs_from_words(text.split()), name)


def _pair_text(part: str) -> tuple[str | None, float]:
    """"Jan 40", "Jan: 40", "Q1 2024 = 40" as a label and its number (the last one); "40" alone."""
    alone = number(part)
    if alone is not None:
        return None, alone
    match = re.fullmatch(r"(?P<label>.*?\S)\s*[:=]?\s*(?P<value>[-+]?[$€£¥]?[\d.,]+%?)", part)
    found = number(match.group("value")) if match else None
    if match is None or found is None or not match.group("label").strip(" :="):
        raise _refuse(f"{part[:60]!r} is not a label and a number")
    return match.group("label").strip(" :="), found


def _pairs_from_words(words: list[str]) -> list[tuple[str | None, float]]:
    """"Jan 40 Feb 32" (no separators): words up to each number name it."""
    pairs: list[tuple[str | None, float]] = []
    label: list[str] = []
    for word in words:
        found = number(word)
        if found is None:
            label.append(word.strip(":="))
            continue
        pairs.append((" ".join(w for w in label if w) or None, found))
        label = []
    if label:
        raise _refuse(f"{' '.join(label)[:60]!r} has no number after it")
    return pairs


def _pairs(pairs: list[tuple[str | None, float]], name: str) -> ChartData:
    """All labelled (label/number pairs) or none (a bare series); a mix is ambiguous."""
    named = [label for label, _ in pairs if label is not None]
    if named and len(named) != len(pairs):
        raise _refuse("some numbers have labels and some do not")
    return ChartData({name: [v for _, v in pairs]}, named or None)


def _read_dict(series: dict[Any, Any], name: str) -> ChartData:
    if not series:
        raise _refuse("series is empty")
    given = {str(k): v for k, v in series.items()}
    point_names: list[str] | None = None
    for key in _SERIES_LABEL_KEYS:  # {"labels": ["Jan", "Feb"], "Sales": [40, 32]}
        value = given.get(key)
        if isinstance(value, list) and value and all(isinstance(v, str) and number(v) is None for v in value):
            point_names = [str(v) for v in given.pop(key)]
            break
    if not given:
        raise _refuse("series has labels but no numbers")
    singles = {k: number(v) for k, v in given.items()}
    if all(v is not None for v in singles.values()):  # {"Jan": 40, "Feb": 32}
        return ChartData({name: [v for v in singles.values() if v is not None]}, list(given))
    if any(v is not None for v in singles.values()):
        raise _refuse("series mixes single numbers and lists")
    if all(isinstance(v, dict) for v in given.values()):  # {"Sales": {"Jan": 40}, "Costs": {"Jan": 30}}
        return _read_nested(given)
    lists = {k: numbers(v) for k, v in given.items()}
    bad = [k for k, v in lists.items() if v is None]
    if bad:
        raise _refuse(f"series {bad[0]!r} is not a number or a list of numbers")
    return ChartData({k: v for k, v in lists.items() if v is not None}, point_names)


def _read_nested(given: dict[str, Any]) -> ChartData:
    keys = list(next(iter(given.values())))
    out: dict[str, list[float]] = {}
    for series_name, points in given.items():
        if list(points) != keys:
            raise _refuse(f"series {series_name!r} names different points than the first series")
        values = [number(v) for v in points.values()]
        if any(v is None for v in values) or not values:
            raise _refuse(f"series {series_name!r} has a value that is not a number")
        out[series_name] = [v for v in values if v is not None]
    return ChartData(out, [str(k) for k in keys])


def _read_list(items: list[Any], name: str) -> ChartData:
    if not items:
        raise _refuse("series is empty")
    bare = numbers(items)
    if bare is not None:  # [40, 32, 55]
        return ChartData({name: bare})
    if all(isinstance(i, dict) for i in items):
        return _read_records(items, name)
    if all(isinstance(i, list | tuple) and len(i) == 2 for i in items):  # [["Jan", 40], ...] or [[x, y], ...]
        xs, ys = [number(i[0]) for i in items], [number(i[1]) for i in items]
        if any(y is None for y in ys):
            raise _refuse("a pair's second item is not a number")
        values = [y for y in ys if y is not None]
        if all(x is not None for x in xs):
            return ChartData({name: values}, x=[x for x in xs if x is not None])
        return ChartData({name: values}, [str(i[0]) for i in items])
    if all(isinstance(i, str) for i in items):  # ["Jan 40", "Feb 32"]
        return _pairs([_pair_text(i) for i in items], name)
    raise _refuse("series is a list of mixed or nested items")


def _read_records(items: list[dict[Any, Any]], name: str) -> ChartData:
    """[{"label": "Jan", "value": 40}, ...]: one field names each point; every numeric field is a
    series (a lone value field takes the series `name`). [{"Jan": 40}, {"Feb": 32}] are pairs."""
    rows = [{str(k): v for k, v in item.items()} for item in items]
    if all(len(r) == 1 for r in rows) and all(number(v) is not None for r in rows for v in r.values()):
        return _pairs([(k, number(v) or 0.0) for r in rows for k, v in r.items()], name)
    fields = list(rows[0])
    if any(set(r) != set(fields) for r in rows):
        raise _refuse("the records do not all have the same fields")
    numeric = [f for f in fields if all(number(r[f]) is not None for r in rows)]
    text = [f for f in fields if f not in numeric]
    # The naming field: a known one ("label", "month", "year"...) if numbers remain beside it, else the only text one.
    label = next((k for k in LABEL_KEYS if k in fields and any(f != k for f in numeric)), None)
    if label is None and len(text) == 1:
        label = text[0]
    values = [f for f in numeric if f != label]
    if (label is None and text) or not values:
        raise _refuse(f"records with fields {fields} need one field naming each point and number fields")
    lone = values[0] if len(values) == 1 and values[0] in VALUE_KEYS else None
    out = {(name if f == lone else f): [number(r[f]) or 0.0 for r in rows] for f in values}
    if label == "x" and label in numeric:  # [{"x": 1, "y": 2}, ...]: points at x positions
        return ChartData(out, x=[number(r["x"]) or 0.0 for r in rows])
    return ChartData(out, [str(r[label]) for r in rows] if label else None)
