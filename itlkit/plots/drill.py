"""The interview drill's figure: the user's three step times beside the worked ones.

Pure functions: a Grade (or None before the first check) in, plotly data out.
"""

from __future__ import annotations

import plotly.graph_objects as go

from itlkit.drill.grading import Grade
from itlkit.plots._style import responsive
from itlkit.units import MILLISECOND

QUANTITIES = (
    ("floor", "bandwidth floor"),
    ("kv_term", "KV term"),
    ("mixed_step", "step with a chunk"),
)
TRACES = (("your answer", "#C44E52"), ("worked", "#4C72B0"))


def trace_data(grade: Grade | None) -> list[dict]:
    """x and y (ms) of the two bar traces; before a check both are empty (no spoilers)."""
    x = [label for _, label in QUANTITIES]
    if grade is None:
        return [{"x": x, "y": [None] * len(x)} for _ in TRACES]
    items = [grade.item(key) for key, _ in QUANTITIES]
    yours = [None if i.answer is None or i.answer <= 0 else i.answer / MILLISECOND for i in items]
    worked = [i.worked / MILLISECOND for i in items]
    return [{"x": x, "y": yours}, {"x": x, "y": worked}]


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
        fig.add_trace(go.Bar(name=name, marker_color=color, **values))
    fig.update_layout(
        title=dict(text=figure_title(grade), font=dict(size=13)),
        barmode="group",
        margin=dict(l=60, r=20, t=60, b=40),
        legend=dict(orientation="h", y=-0.15),
    )
    fig.update_yaxes(title_text="time (ms)", rangemode="tozero")
    return responsive(fig, width=width, height=height)
