"""Figures for reading a vLLM latency histogram honestly (notebook 03).

Buckets have very different widths (10 ms next to 2.5 s), so bar heights are *share of
observations per decade of latency* on a log time axis: the area of each bucket is its share,
whatever its width. The first bucket (0, le] has no finite left edge on a log axis and the +Inf
bucket no right edge; both are drawn one decade wide, in grey, and say so on hover.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go

from itlkit.metrics.histogram import Histogram, ModeTimeline, Summary
from itlkit.plots._style import FOOT_LEGEND, title_margin_px, top_title
from itlkit.units import format_percent, format_seconds

OPEN_BUCKET_DECADES = 1.0  # how wide the open-ended first and +Inf buckets are drawn
COLORS = {
    "bucket": "#4C78A8",
    "open": "#B0B0B0",
    "mean": "#54A24B",
    "quantile": ("#F2A0A1", "#E45756", "#9D1C1E"),
    "floor": "#222222",
    "slow": "#F58518",
}


@dataclass(frozen=True)
class BucketBars:
    """Drawing geometry of each bucket: edges on a log axis, share, and height per decade."""

    left_seconds: np.ndarray
    right_seconds: np.ndarray
    counts: np.ndarray
    share: np.ndarray
    share_per_decade: np.ndarray
    open_ended: np.ndarray  # True for buckets whose drawn edge is not a real bound
    labels: tuple[str, ...]


def bucket_bars(histogram: Histogram) -> BucketBars:
    """Left/right edges, shares and heights (share per decade) of every non-empty-width bucket."""
    h = histogram
    upper = h.upper_bounds.astype(float)
    lower = h.lower_bounds.astype(float)
    finite = upper[np.isfinite(upper) & (upper > 0)]
    if finite.size == 0:
        raise ValueError("histogram has no positive finite bucket bound to draw on a log axis")
    left, right = lower.copy(), upper.copy()
    open_left = ~(left > 0)
    left[open_left] = right[open_left] / 10**OPEN_BUCKET_DECADES
    open_right = ~np.isfinite(right)
    right[open_right] = left[open_right] * 10**OPEN_BUCKET_DECADES
    counts = h.bucket_counts
    share = counts / h.count if h.count > 0 else np.zeros_like(counts)
    decades = np.log10(right / left)
    labels = tuple(
        f"({'0' if lo == 0 else format_seconds(lo)}, {format_seconds(hi)}]"
        for lo, hi in zip(lower, upper, strict=True)
    )
    keep = right > left  # a first bucket with le <= 0 cannot be drawn on a log axis
    return BucketBars(
        left_seconds=left[keep],
        right_seconds=right[keep],
        counts=counts[keep],
        share=share[keep],
        share_per_decade=(share / decades)[keep],
        open_ended=(open_left | open_right)[keep],
        labels=tuple(lab for lab, k in zip(labels, keep, strict=True) if k),
    )


def _outline(bars: BucketBars, mask: np.ndarray) -> tuple[list, list]:
    """Rectangles (x, y in percent per decade) separated by None, for one filled scatter trace."""
    xs, ys = [], []
    for lo, hi, y in zip(bars.left_seconds[mask], bars.right_seconds[mask],
                         bars.share_per_decade[mask], strict=True):  # fmt: skip
        xs += [lo, lo, hi, hi, lo, None]
        ys += [0, 100 * y, 100 * y, 0, 0, None]
    return xs, ys


# plotly.js's default ("hide past div") measures every tick label on every redraw to hide those
# past the figure's edge; the margins keep them inside, and the redraw is 10-15 ms faster
TICK_LABELS = dict(ticklabeloverflow="allow")

# Label sizes on the narrowest plot the figure is laid out for (about 600 px of output area)
LABEL_CHAR_PX = 6.5  # 11 px type
LABEL_PLOT_PX = 500
LABEL_STEP = 0.09  # each further row of labels sits this share of the plot height higher
PLOT_PX = 330  # the histogram's plot area; the title's lines are added above it
BOTTOM_PX = 110  # tick labels, the axis title, then a legend of up to two rows (at the foot)


@dataclass(frozen=True)
class Mark:
    """One vertical marker line: its legend name, position, look and hover text."""

    name: str
    x: float
    color: str
    dash: str
    hover: str


def label_rows(marks: list[Mark], x_range: list[float]) -> list[tuple[str, int]]:
    """Text and row (0 = lowest) of each mark's label: marks at the same place share one label
    ("p90 · p99"), labels that would overlap on the log axis go one row up."""
    span = x_range[1] - x_range[0]
    logs = [math.log10(m.x) if m.x and math.isfinite(m.x) and m.x > 0 else None for m in marks]
    texts = [m.name for m in marks]
    order = sorted((i for i, lx in enumerate(logs) if lx is not None), key=lambda i: logs[i])
    for a, b in itertools.pairwise(order):  # one label for coinciding marks
        if abs(logs[b] - logs[a]) < 0.004 * span and texts[a]:
            texts[a], texts[b] = "", f"{texts[a]} · {texts[b]}"
    rows = [0] * len(marks)
    placed: list[tuple[float, float, int]] = []  # (left, right, row) in log10 units
    for i in order:
        if not texts[i]:
            continue
        half = (len(texts[i]) * LABEL_CHAR_PX / 2 + 4) / LABEL_PLOT_PX * span
        left, right = logs[i] - half, logs[i] + half
        row = 0
        while any(r == row and left < hi and lo < right for lo, hi, r in placed):
            row += 1
        placed.append((left, right, row))
        rows[i] = row
    return list(zip(texts, rows, strict=True))


def _vline(mark: Mark, top: float, label: str, row: int) -> dict:
    height = top * (1 + LABEL_STEP * row)
    return dict(
        type="scatter",
        name=mark.name,
        x=[mark.x, mark.x],
        y=[0, height],
        mode="lines+text",
        text=["", label],
        textposition="top center",
        textfont=dict(color=mark.color, size=11),
        line=dict(color=mark.color, dash=mark.dash, width=2),
        hovertemplate=f"{mark.hover}<extra></extra>",
    )


def _x_range(bars: BucketBars, marks: list[float]) -> list[float]:
    """log10 range covering the non-empty buckets and every marked line, with some margin."""
    full = bars.counts > 0
    xs = [*bars.left_seconds[full], *bars.right_seconds[full]]
    xs += [x for x in marks if x is not None and math.isfinite(x) and x > 0]
    if not xs:
        xs = [bars.left_seconds.min(), bars.right_seconds.max()]
    return [math.log10(min(xs)) - 0.3, math.log10(max(xs)) + 0.3]


def _marks(summary: Summary, *, floor_seconds, slow_factor, floor_label,
           slow_label: str = "") -> list[Mark]:  # fmt: skip
    """The mean, one line per quantile, then the floor and the slow mode when given
    (`slow_label`: where that multiple comes from, in its hover text)."""
    marks = [Mark("mean", summary.mean, COLORS["mean"], "dot",
                  f"mean {format_seconds(summary.mean)}")]  # fmt: skip
    shades = COLORS["quantile"]
    for i, est in enumerate(summary.quantiles):
        bucket = f"({format_seconds(est.bucket_lower)}, {format_seconds(est.bucket_upper)}]"
        marks.append(
            Mark(
                f"p{est.q * 100:g}",
                est.value,
                shades[min(i, len(shades) - 1)],
                "dash",
                f"p{est.q * 100:g} {format_seconds(est.value)}, interpolated in bucket {bucket}",
            )
        )
    if floor_seconds is not None:
        marks.append(Mark("floor", floor_seconds, COLORS["floor"], "solid",
                          f"floor {format_seconds(floor_seconds)} {floor_label}"))  # fmt: skip
        if slow_factor is not None:
            marks.append(
                Mark(
                    f"{slow_factor:.3g}× floor",
                    floor_seconds * slow_factor,
                    COLORS["slow"],
                    "dashdot",
                    f"slow mode at {slow_factor:.3g}× floor = "
                    f"{format_seconds(floor_seconds * slow_factor)}"
                    + (f": {slow_label}" if slow_label else ""),
                )
            )
    return marks


def histogram_spec(
    summary: Summary,
    *,
    floor_seconds: float | None = None,
    slow_factor: float | None = None,
    floor_label: str = "",
    title: str = "",
    slow_label: str = "",
) -> dict:
    """`histogram_figure` as plain data ({"data": traces, "layout": ...}), without plotly's
    validation: what a widget diffs against the figure it shows."""
    bars = bucket_bars(summary.histogram)
    top = 100 * float(bars.share_per_decade.max()) * 1.08 if bars.share.sum() > 0 else 1.0
    closed_x, closed_y = _outline(bars, ~bars.open_ended)
    open_x, open_y = _outline(bars, bars.open_ended)
    centers = np.sqrt(bars.left_seconds * bars.right_seconds)
    notes = [
        " (drawn 1 decade wide: the bucket is open-ended)" if o else "" for o in bars.open_ended
    ]
    traces = [
        dict(type="scatter", name="buckets", x=closed_x, y=closed_y, fill="toself",
             mode="lines", line=dict(color=COLORS["bucket"]), hoverinfo="skip"),
        dict(type="scatter", name="open-ended buckets", x=open_x, y=open_y, fill="toself",
             mode="lines", line=dict(color=COLORS["open"], dash="dot"), hoverinfo="skip"),
        dict(
            type="scatter",
            name="bucket",
            x=centers,
            y=100 * bars.share_per_decade,
            mode="markers",
            marker=dict(size=6, color=COLORS["bucket"], opacity=0.0),
            customdata=np.stack([bars.counts, 100 * bars.share], axis=1),
            text=[lab + note for lab, note in zip(bars.labels, notes, strict=True)],
            hovertemplate="bucket %{text}<br>%{customdata[0]:,.0f} observations "
            "(%{customdata[1]:.2f} %)<extra></extra>",
            showlegend=False,
        ),
    ]  # fmt: skip
    marks = _marks(summary, floor_seconds=floor_seconds, slow_factor=slow_factor,
                   floor_label=floor_label, slow_label=slow_label)  # fmt: skip
    x_range = _x_range(bars, [m.x for m in marks])
    labels = label_rows(marks, x_range)
    traces += [_vline(m, top, text, row) for m, (text, row) in zip(marks, labels, strict=True)]
    top_px = title_margin_px(title) if title else 30
    layout = dict(
        xaxis=dict(
            type="log", title=dict(text="latency (s, log scale)"), range=x_range, **TICK_LABELS
        ),
        yaxis=dict(
            title=dict(text="observations (% per decade of latency)"),
            rangemode="tozero",
            **TICK_LABELS,
        ),
        # at the figure's foot, below the axis title: the plot keeps its own height
        legend=FOOT_LEGEND,
        margin=dict(l=70, r=20, t=top_px, b=BOTTOM_PX),
        autosize=True,  # as plots._style.responsive: the output area's width
        height=top_px + PLOT_PX + BOTTOM_PX,
    )
    if title:
        layout["title"] = top_title(title)  # its lines grow down into the margin, not the plot
    return dict(data=traces, layout=layout)


def histogram_figure(
    summary: Summary,
    *,
    floor_seconds: float | None = None,
    slow_factor: float | None = None,
    floor_label: str = "",
    title: str = "",
) -> go.Figure:
    """The bucket histogram with its mean, quantiles (and their buckets) and an optional floor.

    Trace order is fixed (tests and widgets rely on it): 0 buckets, 1 open-ended buckets,
    2 bucket hover points, 3 mean, 4.. one per quantile, then floor and slow mode.
    """
    spec = histogram_spec(
        summary,
        floor_seconds=floor_seconds,
        slow_factor=slow_factor,
        floor_label=floor_label,
        title=title,
    )
    return go.Figure(spec)


def summary_lines(summary: Summary) -> list[str]:
    """The numbers under the figure: count, mean, quantiles with buckets, the mode split."""
    lines = [
        f"{summary.count:,.0f} observations, mean {format_seconds(summary.mean)}",
        *(
            f"p{e.q * 100:g} {format_seconds(e.value)} (interpolated in bucket "
            f"({format_seconds(e.bucket_lower)}, {format_seconds(e.bucket_upper)}])"
            for e in summary.quantiles
        ),
    ]
    m = summary.modes
    if m is not None:
        if m.warning:
            lines.append(f"modes: {m.warning}")
        else:
            lines.append(
                f"{format_percent(m.near_floor_share)} within {format_seconds(m.cut_seconds)} "
                f"(near the floor {format_seconds(m.floor_seconds)}), "
                f"{format_percent(m.slow_share)} slower"
            )
    return lines


# plotly's make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08), written out:
# building it costs more than the rest of a redraw
SERIES_AXES = dict(
    xaxis=dict(anchor="y", domain=[0.0, 1.0], matches="x2", showticklabels=False),
    yaxis=dict(anchor="x", domain=[0.54, 1.0]),
    xaxis2=dict(anchor="y2", domain=[0.0, 1.0]),
    yaxis2=dict(anchor="x2", domain=[0.0, 0.46]),
)


def series_spec(
    timeline: ModeTimeline,
    *,
    ttft_times_seconds,
    ttft_count_per_second,
    start_seconds: float,
    message: str = "",
) -> dict:
    """`series_figure` as plain data ({"data": traces, "layout": ...}); a `message` is shown
    in the middle (a placeholder for a source without a series)."""
    minutes = (np.asarray(timeline.midpoints_seconds) - start_seconds) / 60
    slow = dict(type="scatter", name="slow-mode share", x=minutes,
                y=100 * np.asarray(timeline.slow_share), mode="lines+markers",
                line=dict(color=COLORS["slow"]), xaxis="x", yaxis="y",
                hovertemplate="%{y:.1f} % of ITLs in the slow mode<extra></extra>")  # fmt: skip
    ttft = dict(
        type="scatter",
        name="TTFT count rate",
        x=(np.asarray(ttft_times_seconds) - start_seconds) / 60,
        y=np.asarray(ttft_count_per_second),
        mode="lines+markers",
        line=dict(color=COLORS["bucket"]),
        xaxis="x2",
        yaxis="y2",
        hovertemplate="%{y:.2f} first tokens/s<extra></extra>",
    )
    axes = {name: dict(axis, **TICK_LABELS) for name, axis in SERIES_AXES.items()}
    axes["yaxis"] |= dict(title=dict(text="slow-mode share (% of ITLs)"), rangemode="tozero")
    axes["yaxis2"] |= dict(title=dict(text="TTFT count rate (1/s)"), rangemode="tozero")
    axes["xaxis2"] |= dict(title=dict(text="time since the first scrape (min)"))
    layout = dict(
        **axes,
        margin=dict(l=70, r=20, t=30, b=40),
        showlegend=False,
        autosize=True,  # as plots._style.responsive: the output area's width
        height=420,
    )
    if message:
        layout["annotations"] = [
            dict(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
        ]
    return dict(data=[slow, ttft], layout=layout)


def series_figure(
    timeline: ModeTimeline, *, ttft_times_seconds, ttft_count_per_second, start_seconds: float
) -> go.Figure:
    """Slow-mode share of ITL per scrape interval, above the TTFT count rate (first tokens/s).

    Trace 0 is the slow share (%), trace 1 the TTFT count rate; x is minutes from `start_seconds`.
    """
    spec = series_spec(
        timeline,
        ttft_times_seconds=ttft_times_seconds,
        ttft_count_per_second=ttft_count_per_second,
        start_seconds=start_seconds,
    )
    return go.Figure(spec)


def empty_series_spec(message: str) -> dict:
    """A placeholder where a series figure would be (one scrape has no intervals)."""
    nothing = np.zeros(0)
    return series_spec(
        ModeTimeline(nothing, nothing, nothing, None),
        ttft_times_seconds=nothing,
        ttft_count_per_second=nothing,
        start_seconds=0.0,
        message=message,
    )


def empty_series_figure(message: str) -> go.Figure:
    """A placeholder where a series figure would be (one scrape has no intervals)."""
    return go.Figure(empty_series_spec(message))
