"""Figures and the HTML report of a postmortem (notebook 04): the ITL histogram over time, the
slow-mode share against arrivals, and observed vs predicted histograms for a what-if."""

from __future__ import annotations

import datetime as dt
import html
import math

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from itlkit.diagnosis.report import build_report, to_html
from itlkit.diagnosis.scoring import Diagnosis
from itlkit.diagnosis.whatif import Prediction
from itlkit.metrics.histogram import Histogram
from itlkit.plots._style import FOOT_LEGEND, responsive, title_margin_px, top_title, wrap
from itlkit.plots.histogram import TICK_LABELS
from itlkit.units import MILLISECOND, format_seconds


def _times(seconds: np.ndarray) -> list[dt.datetime]:
    return [dt.datetime.fromtimestamp(float(s), tz=dt.UTC) for s in seconds]


def _bucket_labels(bounds: np.ndarray) -> list[str]:
    lower = np.concatenate([[0.0], bounds[:-1]])
    return [
        f"({a / MILLISECOND:g}, {'+Inf' if math.isinf(b) else f'{b / MILLISECOND:g}'}] ms"
        for a, b in zip(lower, bounds, strict=True)
    ]


# The heatmap's colour is log10 of the share: a preemption gap seen a few times in 100,000 ITLs
# (share 1e-5) must show beside a bucket holding most of them (share 1).
LOG_SHARE_MIN = -6  # darkest colour: 0.0001 % of a window's observations (or fewer)
NO_SERIES = "one page has no time series: these panels need two or more scrapes"


def _log_shares(shares: np.ndarray) -> list[list]:
    """log10 of each share; empty buckets are None (drawn blank; NaN is not valid JSON)."""
    out = np.full(shares.shape, np.nan)
    np.log10(shares, out=out, where=shares > 0)
    return [[None if np.isnan(v) else float(v) for v in row] for row in out]


def timeline_data(d: Diagnosis) -> list[dict]:
    """Trace data of the timeline figure, in trace order (the widget copies it in place)."""
    t = d.timeline
    shares = np.array(
        [h.bucket_counts / h.count if h.count else np.zeros(h.upper_bounds.size) for h in t.itl]
    ).T
    when = _times(t.end_seconds) if t.has_time_axis else ["all time"]
    labels = _bucket_labels(t.itl_total.upper_bounds)
    return [
        {"x": when, "y": labels, "z": _log_shares(shares), "customdata": 100 * shares},
        {"x": when, "y": 100 * np.nan_to_num(d.slow_share_by_window, nan=0.0)},
        {"x": when, "y": np.nan_to_num(t.first_tokens_per_second)},
        {"x": when, "y": np.nan_to_num(t.running)},
        {"x": when, "y": np.atleast_1d(d.floor_seconds_by_window) / MILLISECOND},
    ]


# The timeline's panels in px: every bucket row of the heatmap is labelled (plotly's automatic
# ticks labelled every other one, and the bundled incident's slow stripes sat in the unlabelled
# rows), so each row must hold an 11 px label; the two panels below it, and the gap that holds
# a subplot title.
BUCKET_ROW_PX = 15
PANEL_PX = 130
PANEL_GAP_PX = 55
TIMELINE_BOTTOM_PX = 70  # the time axis' two-line tick labels and its title (the legend is added)
LEGEND_ROWS_PX = 50  # the legend at the foot, two rows at 1,280 px


def timeline_figure(
    d: Diagnosis, *, width: int | None = None, height: int | None = None
) -> go.Figure:
    """Histogram shape per window (heatmap), slow-mode share vs arrivals, batch and floor.

    The height follows the number of buckets (BUCKET_ROW_PX each) unless `height` is given."""
    data = timeline_data(d)
    heatmap_px = BUCKET_ROW_PX * len(data[0]["y"])
    plots_px = heatmap_px + 2 * PANEL_PX + 2 * PANEL_GAP_PX
    fig = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        row_heights=[heatmap_px, PANEL_PX, PANEL_PX],
        vertical_spacing=PANEL_GAP_PX / plots_px,
        specs=[[{}], [{"secondary_y": True}], [{"secondary_y": True}]],
        subplot_titles=(
            "share of each window's ITL observations per bucket",
            "slow-mode share vs arrivals (first tokens per second)",
            "running requests and the bandwidth floor they imply",
        ),
    )
    _add_timeline_traces(fig, data)
    title = timeline_title(d)
    top_px = title_margin_px(title, below=60)
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left", font=dict(size=14)),
        margin=dict(l=60, r=30, t=top_px, b=TIMELINE_BOTTOM_PX),
        legend=FOOT_LEGEND,
    )
    if height is None:
        height = top_px + plots_px + TIMELINE_BOTTOM_PX + LEGEND_ROWS_PX
    responsive(fig, height=height, width=width)
    _label_timeline_axes(fig, list(data[0]["y"]), has_time_axis=d.timeline.has_time_axis)
    fig.update_xaxes(title_text="time (UTC)", row=3, col=1)
    return fig


def _add_timeline_traces(fig: go.Figure, data) -> None:
    """The heatmap, the slow share beside the arrivals, the running requests beside the floor."""
    ticks = list(range(LOG_SHARE_MIN, 1))
    low, high = fig.layout.yaxis.domain  # the colour bar stands beside the heatmap
    fig.add_trace(
        go.Heatmap(
            **data[0],
            colorscale="Viridis",
            zmin=LOG_SHARE_MIN,
            zmax=0,
            colorbar=dict(title="share (log)", len=high - low, y=(low + high) / 2,
                          tickvals=ticks, ticktext=[f"{100 * 10.0**k:g} %" for k in ticks]),
            hovertemplate="%{x}<br>ITL %{y}<br>%{customdata:.4g} % of the window's "
            "observations<extra></extra>",
            name="ITL buckets",
        ),
        row=1, col=1,
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(**data[1], name="slow-mode share (%)", mode="lines+markers",
                   line=dict(color="#C44E52")),
        row=2, col=1,
    )  # fmt: skip
    fig.add_trace(
        go.Bar(**data[2], name="first tokens per second", marker_color="rgba(76,114,176,0.5)"),
        row=2, col=1, secondary_y=True,
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(**data[3], name="running requests", mode="lines", line=dict(color="black")),
        row=3, col=1,
    )  # fmt: skip
    fig.add_trace(
        go.Scatter(**data[4], name="bandwidth floor (ms)", mode="lines",
                   line=dict(color="#4C72B0", dash="dot")),
        row=3, col=1, secondary_y=True,
    )  # fmt: skip


def _label_timeline_axes(fig: go.Figure, buckets: list, *, has_time_axis: bool) -> None:
    """Every bucket row labelled, counts from zero, the overlaying axes' own round ticks, and
    a note over the time panels when one scrape has no time axis."""
    fig.update_yaxes(title_text="ITL bucket", tickmode="array", tickvals=buckets, ticktext=buckets,
                     tickfont=dict(size=11), row=1, col=1)  # fmt: skip
    counts = dict(rangemode="tozero", col=1)  # shares, rates and counts start at zero
    # plotly.js 3+ gives an overlaying axis tickmode "sync": its ticks at its partner's grid
    # lines (0.99 / 1.99 / 2.98 requests/s); its own round ticks, and no second grid
    own_ticks = dict(tickmode="auto", showgrid=False, **counts)
    fig.update_yaxes(title_text="slow share (%)", row=2, secondary_y=False, **counts)
    fig.update_yaxes(title_text="requests/s", row=2, secondary_y=True, **own_ticks)
    fig.update_yaxes(title_text="requests", row=3, secondary_y=False, **counts)
    fig.update_yaxes(title_text="floor (ms)", row=3, secondary_y=True, **own_ticks)
    if not has_time_axis:
        for row in (2, 3):
            fig.add_annotation(
                text=NO_SERIES, showarrow=False, xref="x domain", yref="y domain", x=0.5, y=0.5,
                bgcolor="rgba(255,255,255,0.85)", row=row, col=1,
            )  # fmt: skip


def timeline_title(d: Diagnosis) -> str:
    """Headline of the timeline figure: floor and quantiles (the verdict is shown beside it)."""
    q = d.itl_quantiles_seconds
    return wrap(
        f"floor {format_seconds(d.floor_seconds)} · fast mode "
        f"{format_seconds(d.fast_mode_seconds)} · ITL p50 {format_seconds(q[0.5])} · "
        f"p99 {format_seconds(q[0.99])} over {d.timeline.itl_total.count:,.0f} observations"
    )


def _shares(h: Histogram) -> tuple[np.ndarray, np.ndarray]:
    """Step-line x (bucket edges, ms, +Inf drawn one decade past the last bound) and shares."""
    bounds = h.upper_bounds
    finite = bounds[np.isfinite(bounds)]
    lower = np.concatenate([[finite[0] / 10 if finite[0] > 0 else 1e-4], bounds[:-1]])
    upper = np.where(np.isfinite(bounds), bounds, finite[-1] * 10)
    share = h.bucket_counts / h.count if h.count else np.zeros(bounds.size)
    x = np.ravel(np.column_stack([lower, upper])) / MILLISECOND
    y = np.ravel(np.column_stack([share, share])) * 100
    return x, y


def _occupied_range(histograms: list[Histogram], marks_ms=()) -> list[float]:
    """log10 x-range (ms) spanning the buckets that hold observations and every marked value
    (the quantiles a title quotes), with a little margin."""
    lows, highs = [], []
    for h in histograms:
        x, y = _shares(h)
        held = x[np.repeat(y[::2] > 0, 2)]
        if held.size:
            lows.append(held.min())
            highs.append(held.max())
    marks = [m for m in marks_ms if m is not None and math.isfinite(m) and m > 0]
    lows, highs = lows + marks, highs + marks
    if not lows:
        return [-1, 5]
    return [math.log10(min(lows)) - 0.2, math.log10(max(highs)) + 0.2]


def _p99s(d: Diagnosis, baseline: Prediction, prediction: Prediction) -> tuple[list, list]:
    """The ITL and TTFT p99s the what-if title quotes (observed, replayed, what-if), in ms."""
    t = d.timeline
    itl = [t.itl_total.quantile(0.99), baseline.itl_quantile(0.99), prediction.itl_quantile(0.99)]
    ttft = [t.ttft_total.quantile(0.99) if t.ttft_total is not None else math.nan,
            baseline.ttft_quantile(0.99), prediction.ttft_quantile(0.99)]  # fmt: skip
    return [v / MILLISECOND for v in itl], [v / MILLISECOND for v in ttft]


def whatif_data(d: Diagnosis, baseline: Prediction, prediction: Prediction) -> list[dict]:
    """Trace data of the what-if figure, in trace order."""
    t = d.timeline
    data = []
    for hist in (t.itl_total, baseline.itl, prediction.itl):
        x, y = _shares(hist)
        data.append({"x": x, "y": y})
    observed_ttft = t.ttft_total if t.ttft_total is not None else baseline.ttft
    for hist in (observed_ttft, baseline.ttft, prediction.ttft):
        x, y = _shares(hist)
        data.append({"x": x, "y": y})
    floor = d.floor_seconds / MILLISECOND
    data.append({"x": [floor, floor], "y": [0, 100]})
    return data


def whatif_title(d: Diagnosis, baseline: Prediction, prediction: Prediction) -> str:
    """Headline: ITL p99 and TTFT p99, observed and replayed read through the same buckets (the
    comparison the replay's quality rests on), then the prediction's exact quantile with its
    bucketed reading beside it."""
    t = d.timeline
    observed_ttft = t.ttft_total.quantile(0.99) if t.ttft_total is not None else math.nan

    def line(name: str, observed: float, replayed: float, exact: float, bucketed: float) -> str:
        return wrap(
            f"{name} p99 {format_seconds(observed)} observed, {format_seconds(replayed)} replayed "
            f"(in buckets) · {format_seconds(exact)} predicted ({format_seconds(bucketed)} "
            "in buckets)"
        )

    return "<br>".join([
        wrap(f"what-if ({prediction.setting.label})"),
        line("ITL", t.itl_total.quantile(0.99), baseline.itl_bucket_quantile(0.99),
             prediction.itl_quantile(0.99), prediction.itl_bucket_quantile(0.99)),
        line("TTFT", observed_ttft, baseline.ttft_bucket_quantile(0.99),
             prediction.ttft_quantile(0.99), prediction.ttft_bucket_quantile(0.99)),
    ])  # fmt: skip


# plotly's make_subplots(rows=1, cols=2, subplot_titles=("ITL per bucket", "TTFT per bucket")),
# written out: building it costs more than the rest of a what-if redraw (about 50 ms); tick
# labels as plots.histogram's (not measured for overflow on every redraw)
WHATIF_AXES = dict(
    xaxis=dict(anchor="y", domain=[0.0, 0.45], **TICK_LABELS),
    yaxis=dict(anchor="x", domain=[0.0, 1.0], **TICK_LABELS),
    xaxis2=dict(anchor="y2", domain=[0.55, 1.0], **TICK_LABELS),
    yaxis2=dict(anchor="x2", domain=[0.0, 1.0], **TICK_LABELS),
)
WHATIF_PANEL_TITLES = [
    dict(text=text, x=x, y=1.0, xref="paper", yref="paper", xanchor="center", yanchor="bottom",
         showarrow=False, font=dict(size=16))
    for text, x in (("ITL per bucket", 0.225), ("TTFT per bucket", 0.775))
]  # fmt: skip


def whatif_spec(
    d: Diagnosis,
    baseline: Prediction,
    prediction: Prediction,
    *,
    width: int | None = None,
    height: int = 460,
) -> dict:
    """`whatif_figure` as plain data ({"data": traces, "layout": ...}), without plotly's
    validation: what the widget diffs against the figure it shows."""
    styles = [
        dict(name="observed", line=dict(color="black", width=3)),
        dict(name="replay (current settings)", line=dict(color="#4C72B0", dash="dash")),
        dict(name="what-if", line=dict(color="#C44E52")),
    ]
    data = whatif_data(d, baseline, prediction)
    traces = [dict(type="scatter", **values, mode="lines", **styles[i], xaxis="x", yaxis="y")
              for i, values in enumerate(data[:3])]  # fmt: skip
    traces += [dict(type="scatter", **values, mode="lines", **styles[i], showlegend=False,
                    xaxis="x2", yaxis="y2") for i, values in enumerate(data[3:6])]  # fmt: skip
    traces.append(dict(type="scatter", **data[6], mode="lines", name="bandwidth floor",
                       line=dict(color="gray", dash="dot"), xaxis="x", yaxis="y"))  # fmt: skip
    title = whatif_title(d, baseline, prediction)
    itl_p99s, ttft_p99s = _p99s(d, baseline, prediction)
    itl_range = _occupied_range([d.timeline.itl_total, baseline.itl, prediction.itl], itl_p99s)
    ttft = [h for h in (d.timeline.ttft_total, baseline.ttft, prediction.ttft) if h is not None]
    axes = {name: dict(axis) for name, axis in WHATIF_AXES.items()}
    axes["xaxis"] |= dict(type="log", title=dict(text="inter-token latency (ms)"),
                          range=itl_range)  # fmt: skip
    axes["xaxis2"] |= dict(type="log", title=dict(text="time to first token (ms)"),
                           range=_occupied_range(ttft, ttft_p99s))  # fmt: skip
    axes["yaxis"] |= dict(title=dict(text="share of observations (%)"))
    layout = dict(
        **axes,
        annotations=[dict(a, font=dict(a["font"])) for a in WHATIF_PANEL_TITLES],
        title=top_title(title),  # hung from the top: its lines never reach the panel titles
        margin=dict(l=60, r=30, t=title_margin_px(title, below=60), b=50),
        legend=FOOT_LEGEND,  # at y=-0.2 of the plot it covered the axis titles at 1,920 px
        autosize=width is None,  # as plots._style.responsive
        height=height + 18 * max(title.count("<br>") - 2, 0),  # the plots keep their height
    )
    if width is not None:
        layout["width"] = width
    return dict(data=traces, layout=layout)


def whatif_figure(
    d: Diagnosis,
    baseline: Prediction,
    prediction: Prediction,
    *,
    width: int | None = None,
    height: int = 460,
) -> go.Figure:
    """Observed vs replayed vs what-if: ITL and TTFT bucket shares on log time axes.

    Traces: 0-2 ITL observed, replayed, what-if; 3-5 the same for TTFT; 6 the bandwidth floor.
    """
    return go.Figure(whatif_spec(d, baseline, prediction, width=width, height=height))


def postmortem_html(
    d: Diagnosis, figures: list[go.Figure], *, title: str = "ITL postmortem"
) -> str:
    """A self-contained HTML report (plotly.js inlined once: it opens offline)."""
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        "<style>body{font-family:sans-serif;max-width:1150px;margin:2em auto;}"
        "li{margin:.2em 0}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
        to_html(build_report(d)),
    ]
    for i, fig in enumerate(figures):
        parts.append(pio.to_html(fig, full_html=False, include_plotlyjs=(i == 0)))
    parts.append("</body></html>")
    return "\n".join(parts)
