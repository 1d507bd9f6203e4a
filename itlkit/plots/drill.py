"""The interview drill's figure: the user's three step times beside the worked ones.

Pure functions: a Grade (or None before the first check) in, plotly data out. The time axis is
logarithmic and every bar carries its value: a 15.8 ms floor beside a 585 ms chunked step would be
a sliver on a linear axis.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from itlkit.drill.grading import Grade
from itlkit.plots._style import FOOT_LEGEND, responsive
from itlkit.units import MILLISECOND, format_seconds

QUANTITIES = (
    ("floor", "bandwidth floor"),
    ("kv_term", "KV term"),
    ("mixed_step", "step with a chunk"),
)
TRACES = (("your answer", "#C44E52"), ("worked", "#4C72B0"))
# Decades of log axis below the shortest bar and above the tallest: the shortest bar stays a
# visible stub, and the tallest bar's label has room above it.
DECADES_BELOW, DECADES_ABOVE = 0.5, 0.3


def trace_data(grade: Grade | None) -> list[dict]:
    """x, y (ms) and value labels of the two bar traces; before a check both are empty (no
    spoilers)."""
    x = [label for _, label in QUANTITIES]
    if grade is None:
        return [{"x": x, "y": [None] * len(x), "text": [None] * len(x)} for _ in TRACES]
    items = [grade.item(key) for key, _ in QUANTITIES]
    yours = [None if i.answer is None or i.answer <= 0 else i.answer for i in items]
    worked = [i.worked for i in items]
    return [_bars(x, yours), _bars(x, worked)]


def _bars(x: list[str], seconds: list[float | None]) -> dict:
    return {
        "x": x,
        "y": [None if s is None else s / MILLISECOND for s in seconds],
        "text": [None if s is None else format_seconds(s) for s in seconds],
    }


def y_range(grade: Grade | None) -> list[float] | None:
    """The log axis' range (log10 of ms) around every bar drawn; None (autorange) before a check."""
    values = [y for trace in trace_data(grade) for y in trace["y"] if y is not None and y > 0]
    if not values:
        return None
    return [math.log10(min(values)) - DECADES_BELOW, math.log10(max(values)) + DECADES_ABOVE]


def figure_title(grade: Grade | None) -> str:
    """The verdicts in one line, or an invitation before the first check."""
    if grade is None:
        return "your numbers against the worked ones appear after 'check my answer'"
    verdicts = ", ".join(f"{label} {grade.item(key).verdict}" for key, label in QUANTITIES)
    return f"{verdicts} · rubric: {grade.rubric.level}"


def answer_figure(
    grade: Grade | None = None, *, width: int | None = None, height: int = 380
) -> go.Figure:
    """Grouped bars: your floor, KV term and chunked step against the worked numbers (ms)."""
    fig = go.Figure()
    for (name, color), values in zip(TRACES, trace_data(grade), strict=True):
        fig.add_trace(
            go.Bar(
                name=name, marker_color=color, textposition="outside", cliponaxis=False, **values
            )
        )
    fig.update_layout(
        title=dict(text=figure_title(grade), font=dict(size=13)),
        barmode="group",
        margin=dict(l=60, r=20, t=60, b=40),
        legend=FOOT_LEGEND,  # at the figure's foot: clear of the axis's tick labels
    )
    limits = y_range(grade)
    fig.update_yaxes(
        title_text="time (ms, log scale)",
        type="log",
        range=limits,
        autorange=limits is None,
    )
    return responsive(fig, width=width, height=height)
