"""Charts as PNG bytes: line, bar, scatter and pie, drawn with matplotlib (imported on first use).

The request is checked by `ChartSpec` first, so a runaway tool call (thousands of series, a pie
of negative values) gets a one-line ArtefactError instead of a drawing.
"""

from __future__ import annotations

import io
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from actors.tools.artefacts.shared import ArtefactError

ChartKind = Literal["line", "bar", "scatter", "pie"]

# Enough for any chart a person can read; more is a runaway tool call, not a chart.
MAX_SERIES = 50
MAX_POINTS = 10_000
CHART_SIZE_IN = (8.0, 5.0)
CHART_DPI = 100


class ChartSpec(BaseModel):
    kind: ChartKind
    title: str = ""
    series: dict[str, list[float]] = Field(default_factory=dict, max_length=MAX_SERIES)
    x: list[float] | None = Field(default=None, max_length=MAX_POINTS)
    y: list[float] | None = Field(default=None, max_length=MAX_POINTS)
    x_labels: list[str] | None = Field(default=None, max_length=MAX_POINTS)
    x_label: str | None = None
    y_label: str | None = None

    @model_validator(mode="after")
    def _has_data(self) -> "ChartSpec":
        if self.y is not None:
            if self.x is not None and len(self.x) != len(self.y):
                raise ValueError(f"x has {len(self.x)} values but y has {len(self.y)}")
            # x/y lists are one unnamed series; folding them in keeps one drawing path.
            self.series = {**self.series, (self.y_label or "y"): list(self.y)}
        if not self.series or not any(self.series.values()):
            raise ValueError("a chart needs data: give series {label: [numbers]} or x and y lists")
        for label, values in self.series.items():
            if len(values) > MAX_POINTS:
                raise ValueError(f"series {label!r} has more than {MAX_POINTS} points")
        return self


def chart(
    kind: ChartKind,
    title: str = "",
    series: dict[str, list[float]] | None = None,
    x: list[float] | None = None,
    y: list[float] | None = None,
    x_labels: list[str] | None = None,
    x_label: str | None = None,
    y_label: str | None = None,
) -> bytes:
    """A PNG chart (800 x 500 px)."""
    try:
        spec = ChartSpec(kind=kind, title=title, series=series or {}, x=x, y=y, x_labels=x_labels,
                         x_label=x_label, y_label=y_label)
    except ValueError as exc:
        raise ArtefactError(_first_error(exc)) from None

    # The object API with an Agg canvas, not pyplot: pyplot keeps global state that is
    # unsafe when the server renders in worker threads.
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazy: matplotlib costs ~0.5 s; only a chart needs it
    from matplotlib.figure import Figure  # lazy: matplotlib costs ~0.5 s; only a chart needs it

    fig = Figure(figsize=CHART_SIZE_IN, dpi=CHART_DPI)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if spec.kind == "pie":
        _draw_pie(ax, spec)
    else:
        _draw_xy(ax, spec)
    if spec.title:
        ax.set_title(spec.title)
    if spec.kind != "pie":
        if spec.x_label:
            ax.set_xlabel(spec.x_label)
        if spec.y_label:
            ax.set_ylabel(spec.y_label)
        if len(spec.series) > 1:
            ax.legend()
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _draw_xy(ax: Any, spec: ChartSpec) -> None:
    longest = max(len(v) for v in spec.series.values())
    xs: list[float] = list(spec.x) if spec.x is not None else list(range(longest))
    if spec.kind == "bar":
        width = 0.8 / len(spec.series)
        for i, (label, values) in enumerate(spec.series.items()):
            offset = (i - (len(spec.series) - 1) / 2) * width
            positions = [p + offset for p in range(len(values))]
            ax.bar(positions, values, width=width, label=label)
        ax.set_xticks(range(longest))
        ax.set_xticklabels(_tick_labels(spec.x_labels, spec.x, longest))
        return
    for label, values in spec.series.items():
        points = xs[: len(values)] if len(xs) >= len(values) else list(range(len(values)))
        if spec.kind == "line":
            ax.plot(points, values, marker="o" if len(values) <= 30 else None, label=label)
        else:
            ax.scatter(points, values, label=label)
    if spec.x_labels:
        ax.set_xticks(xs[: len(spec.x_labels)])
        ax.set_xticklabels(spec.x_labels[: len(xs)])


def _tick_labels(labels: list[str] | None, x: list[float] | None, count: int) -> list[str]:
    if labels:
        return (list(labels) + [""] * count)[:count]
    if x:
        return [f"{v:g}" for v in (list(x) + [float("nan")] * count)[:count]]
    return [str(i) for i in range(count)]


def _draw_pie(ax: Any, spec: ChartSpec) -> None:
    # Either one value per series label ({"rent": [900], "food": [300]}) or one series
    # whose slices are named by x_labels.
    if all(len(v) == 1 for v in spec.series.values()) and len(spec.series) > 1:
        labels = list(spec.series)
        values = [v[0] for v in spec.series.values()]
    else:
        if len(spec.series) > 1:
            raise ArtefactError("a pie chart takes one series (or one value per label)")
        values = next(iter(spec.series.values()))
        labels = _tick_labels(spec.x_labels, None, len(values))
    if any(v < 0 for v in values):
        raise ArtefactError("a pie chart cannot show negative values")
    if not sum(values):
        raise ArtefactError("a pie chart needs at least one positive value")
    ax.pie(values, labels=labels, autopct="%1.0f%%", startangle=90, counterclock=False)
    ax.axis("equal")


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        err = errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", exc)).removeprefix("Value error, ")
        return f"{where}: {msg}" if where else msg
    return str(exc)
