"""Figures for the decode-floor explorer (notebook 01): the step's terms, the roofline, and step
time against batch size. Pure functions: a view in, plotly data out, no widgets."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from itlkit.physics.roofline import (
    Capacity,
    Deployment,
    StepTime,
    capacity,
    decode_step,
    mixed_step,
)
from itlkit.physics.speculative import Speculation, crossover_batch, speculative_step
from itlkit.plots._style import FOOT_LEGEND, responsive, title_margin_px, top_title, wrap
from itlkit.units import MILLISECOND, TERA

TITLE_LINES = 3
BATCH_AXIS = np.unique(np.round(np.geomspace(1, 1024, 160)).astype(int))
GEMM_LABELS = ("decode", "with chunk")
TERMS = (
    ("weights / GEMMs", "#4C72B0"),
    ("KV read", "#DD8452"),
    ("prefill attention", "#8172B3"),
    ("all-reduce", "#937860"),
    ("host overhead", "#8C8C8C"),
)


@dataclass(frozen=True)
class DecodeView:
    """Everything notebook 01 shows for one setting of the controls."""

    deployment: Deployment
    batch_size: int
    context_tokens: int
    chunk_tokens: int
    decode: StepTime
    mixed: StepTime
    capacity: Capacity
    batch_floor_seconds: np.ndarray  # the bandwidth floor: weights + KV read at HBM speed
    # the decode step: above the floor by all-reduce and host time, and once GEMMs turn
    # compute-bound
    batch_decode_seconds: np.ndarray
    batch_mixed_seconds: np.ndarray
    # speculative decoding (`physics.speculative`), None when off: per-token latency vs batch,
    # and the batch where it stops paying (None: it pays across the axis)
    speculation: Speculation | None = None
    batch_speculative_seconds: np.ndarray | None = None
    crossover_batch: int | None = None

    @property
    def fits(self) -> bool:
        return self.capacity.fits(batch_size=self.batch_size)

    @property
    def compute_bound(self) -> bool:
        """The decode step's GEMMs take longer than streaming the weights: its tokens are past
        the ridge at this MFU (a step can exceed its floor without it: all-reduce, host)."""
        return bool(self.decode.compute_bound)

    @property
    def over_floor(self) -> tuple[tuple[str, float], ...]:
        """What makes the decode step longer than its bandwidth floor (see `over_floor_terms`)."""
        return over_floor_terms(self.decode)

    @property
    def chunk_label(self) -> str:
        """Name of the second bar: the step carrying the chunk, or none at chunk 0."""
        if not self.chunk_tokens:
            return "no prefill chunk"
        return f"with {self.chunk_tokens}-token chunk"


def over_floor_terms(step: StepTime) -> tuple[tuple[str, float], ...]:
    """The terms that make `step` longer than its bandwidth floor, (name, seconds), largest
    first; empty at the floor. From `roofline.step_time`'s formula at efficiency 1:
    step - floor = (max(GEMMs, weight read) - weight read) + prefill attention + all-reduce + host.
    """
    floor = float(step.floor_seconds)
    terms = (
        ("compute-bound", float(step.gemm_seconds) - float(step.weight_read_seconds)),
        ("prefill attention", float(step.prefill_attention_seconds)),
        ("all-reduce", float(step.allreduce_seconds)),
        ("host overhead", float(step.host_overhead_seconds)),
    )
    # below a millionth of the floor a term is float noise, not a cause worth a label
    kept = [(name, seconds) for name, seconds in terms if seconds > floor * 1e-6]
    return tuple(sorted(kept, key=lambda term: -term[1]))


def over_floor_label(terms: tuple[tuple[str, float], ...]) -> str:
    """The terms' names as the step's formula reads: "compute-bound" when the GEMMs set it
    (the floor is then not a part of it), else "floor + all-reduce + host overhead"."""
    names = [name for name, _ in terms]
    if "compute-bound" in names:
        return " + ".join(["compute-bound", *(n for n in names if n != "compute-bound")])
    return " + ".join(["floor", *names])


def decode_view(
    deployment: Deployment,
    *,
    batch_size: int,
    context_tokens: int,
    chunk_tokens: int,
    speculation: Speculation | None = None,
) -> DecodeView:
    """Compute the floor, the step with a chunk, capacity and the batch sweep (and, with a
    speculation, the per-token latency of its verification steps across the batch axis)."""
    kwargs = dict(context_tokens=context_tokens)
    spec_fields = {}
    if speculation is not None:
        sweep = speculative_step(deployment, batch_size=BATCH_AXIS, spec=speculation, **kwargs)
        cross = crossover_batch(deployment, spec=speculation, max_batch=int(BATCH_AXIS[-1]),
                                **kwargs)  # fmt: skip
        per_token = np.asarray(sweep.per_token_seconds)
        spec_fields = dict(speculation=speculation, crossover_batch=cross,
                           batch_speculative_seconds=per_token)  # fmt: skip
    sweep_decode = decode_step(deployment, batch_size=BATCH_AXIS, **kwargs)
    sweep_mixed = mixed_step(deployment, batch_size=BATCH_AXIS, chunk_tokens=chunk_tokens, **kwargs)
    return DecodeView(
        deployment=deployment,
        batch_size=int(batch_size),
        context_tokens=int(context_tokens),
        chunk_tokens=int(chunk_tokens),
        decode=decode_step(deployment, batch_size=batch_size, **kwargs),
        mixed=mixed_step(deployment, batch_size=batch_size, chunk_tokens=chunk_tokens, **kwargs),
        capacity=capacity(deployment, context_tokens=context_tokens),
        batch_floor_seconds=np.asarray(sweep_decode.floor_seconds),
        batch_decode_seconds=np.asarray(sweep_decode.step_seconds),
        batch_mixed_seconds=np.asarray(sweep_mixed.step_seconds),
        **spec_fields,
    )


def figure_title(view: DecodeView) -> str:
    """The setting, then its headline numbers: bandwidth floor, the decode step when it exceeds
    the floor (named by what adds the time), the step with the chunk."""
    dep = view.deployment
    tp = f" x{dep.tp}" if dep.tp > 1 else ""
    ms = MILLISECOND
    setting = (
        f"{dep.model.slug} · {dep.gpu.slug}{tp} · batch {view.batch_size} · "
        f"context {view.context_tokens}"
    )
    numbers = [f"floor {view.decode.floor_seconds / ms:.2f} ms"]
    if view.over_floor:
        numbers.append(
            f"decode step {view.decode.step_seconds / ms:.2f} ms "
            f"({over_floor_label(view.over_floor)})"
        )
    if view.chunk_tokens:
        numbers.append(
            f"with {view.chunk_tokens}-token chunk {view.mixed.step_seconds / ms:.2f} ms"
        )
    if view.speculation is not None:
        spec = view.speculation
        where = ("pays across the axis" if view.crossover_batch is None
                 else f"stops paying at batch {view.crossover_batch}")  # fmt: skip
        numbers.append(f"speculation k={spec.k}, {spec.tokens_per_step:.2f} tokens/step: {where}")
    if not view.fits:
        numbers.append("DOES NOT FIT IN MEMORY")
    return wrap(f"{setting} → " + " · ".join(numbers))


def _terms_ms(step: StepTime) -> list[float]:
    return [
        step.gemm_seconds / MILLISECOND,
        step.kv_read_seconds / MILLISECOND,
        step.prefill_attention_seconds / MILLISECOND,
        step.allreduce_seconds / MILLISECOND,
        step.host_overhead_seconds / MILLISECOND,
    ]


def _roofline_curve(deployment: Deployment) -> tuple[np.ndarray, np.ndarray]:
    intensity = np.geomspace(1, 1e5, 200)
    peak = deployment.peak_flops_per_second
    attainable = np.minimum(peak, deployment.gpu.hbm_bytes_per_second * intensity)
    return intensity, attainable / TERA


def _gemm_point(step: StepTime) -> tuple[float, float]:
    """A step's GEMMs on the roofline: FLOP per weight byte, achieved TFLOP/s."""
    intensity = step.matmul_flops / step.weight_bytes
    return intensity, step.matmul_flops / step.gemm_seconds / TERA


# plotly clips marker text at the plot's edges: at batch 1 the decode GEMMs sit on the roofline's
# left edge and "decode", left of its point, lost its first letters; at batch 1,024 with a
# 16,384-token chunk "with chunk" ran off the right edge. "decode" goes above its point and to
# its left, "with chunk" below and to its right (apart even when the points coincide); a label
# whose point lies within this share of the panel's log-intensity span from an edge goes to the
# other side ("with chunk" is about 70 px, a third of the panel's 240 px at 1,280 px).
GEMM_LABEL_EDGE = 0.3
# The ridge line reaches this factor above the roof, so that the roofline panel's autorange
# holds "decode" above a point on the roof (at MFU 1 its top was cut): a quarter of a decade.
ROOF_HEADROOM = 10**0.25


def _gemm_places(intensities, *, x_range) -> list[str]:
    """Text positions of the GEMM points' labels ("decode", then "with chunk") on the roofline
    panel's log intensity axis (`x_range`: the curve's ends, FLOP/B)."""
    low, high = np.log10(x_range)
    across = (np.log10(intensities) - low) / (high - low)
    places = ["top right" if across[0] < GEMM_LABEL_EDGE else "top left"]
    if across.size > 1:
        places.append("bottom left" if across[1] > 1 - GEMM_LABEL_EDGE else "bottom right")
    return places


def _bar_names(view: DecodeView) -> list[str]:
    """The step-terms panel's two bars (its categories)."""
    return ["decode step", view.chunk_label]


def bar_ticks(view: DecodeView) -> dict:
    """The step-terms panel's x axis: each bar named in two short lines, level (rotated names
    ran under the legend)."""
    second = f"+{view.chunk_tokens}<br>chunk" if view.chunk_tokens else "no prefill<br>chunk"
    return {"tickvals": _bar_names(view), "ticktext": ["decode<br>step", second]}


def trace_data(view: DecodeView) -> list[dict]:
    """Data of every trace, in figure order; the widget copies these into its FigureWidget."""
    dep = view.deployment
    bars_x = _bar_names(view)
    decode_terms, mixed_terms = _terms_ms(view.decode), _terms_ms(view.mixed)
    data = [{"x": bars_x, "y": [decode_terms[i], mixed_terms[i]]} for i in range(len(TERMS))]
    intensity, attainable = _roofline_curve(dep)
    data.append({"x": intensity, "y": attainable})
    ridge = dep.ridge_flops_per_byte
    roof = dep.peak_flops_per_second / TERA
    data.append({"x": [ridge, ridge], "y": [attainable.min(), roof * ROOF_HEADROOM]})
    points = [_gemm_point(view.decode), _gemm_point(view.mixed)]
    if not view.chunk_tokens:  # the chunked step is the decode step: one point, one label
        points = points[:1]
    places = _gemm_places([p[0] for p in points], x_range=(intensity[0], intensity[-1]))
    data.append({"x": [p[0] for p in points], "y": [p[1] for p in points],
                 "text": list(GEMM_LABELS[: len(points)]), "textposition": places})  # fmt: skip
    data.append({"x": BATCH_AXIS, "y": view.batch_floor_seconds / MILLISECOND})
    data.append({"x": BATCH_AXIS, "y": view.batch_decode_seconds / MILLISECOND})
    data.append({"x": BATCH_AXIS, "y": view.batch_mixed_seconds / MILLISECOND})
    fits_limit = min(max(view.capacity.max_sequences, 0), int(BATCH_AXIS[-1]))
    top = float(np.max(view.batch_mixed_seconds)) / MILLISECOND
    data.append({"x": [fits_limit, fits_limit], "y": [0, top]})
    data.append(
        {
            "x": [view.batch_size, view.batch_size],
            "y": [view.decode.step_seconds / MILLISECOND, view.mixed.step_seconds / MILLISECOND],
        }
    )
    spec = view.batch_speculative_seconds
    data.append({"x": BATCH_AXIS if spec is not None else [],
                 "y": spec / MILLISECOND if spec is not None else []})  # fmt: skip
    return data


def decode_figure(view: DecodeView, *, width: int | None = None, height: int = 460) -> go.Figure:
    """The whole explorer figure: stacked terms | roofline | step time vs batch."""
    fig = make_subplots(
        rows=1,
        cols=3,
        column_widths=[0.26, 0.37, 0.37],
        subplot_titles=("step terms", "roofline (GEMMs)", "step time vs batch"),
        horizontal_spacing=0.08,
    )
    data = trace_data(view)
    for (name, color), values in zip(TERMS, data, strict=False):
        fig.add_trace(go.Bar(name=name, marker_color=color, **values), row=1, col=1)
    extra = [
        dict(name="attainable FLOP/s", mode="lines", line=dict(color="black")),
        dict(name="ridge", mode="lines", line=dict(color="gray", dash="dash")),
        dict(
            name="this step's GEMMs",
            mode="markers+text",  # labels placed by _gemm_places
            marker=dict(size=11, color=["#4C72B0", "#C44E52"]),
        ),
        dict(name="bandwidth floor", mode="lines", line=dict(color="#4C72B0", dash="dot")),
        dict(name="decode step", mode="lines", line=dict(color="#4C72B0")),
        dict(name="step with chunk", mode="lines", line=dict(color="#C44E52")),
        dict(name="memory limit", mode="lines", line=dict(color="red", dash="dot")),
        dict(name="this batch", mode="markers", marker=dict(size=10, color="black")),
        dict(name="per token, speculative", mode="lines", line=dict(color="#55A868", dash="dash")),
    ]
    cols = [2, 2, 2, 3, 3, 3, 3, 3, 3]
    for style, values, col in zip(extra, data[len(TERMS) :], cols, strict=True):
        fig.add_trace(go.Scatter(**style, **values), row=1, col=col)
    fig.update_layout(
        # hung from the top edge, with room for three lines (a compute-bound step, a chunk and
        # DOES NOT FIT): the widget changes only its text, and plotly's default centred a third
        # line in the margin and ran it over the subplot titles
        title=top_title(figure_title(view), size=14),
        barmode="stack",
        margin=dict(l=50, r=20, t=title_margin_px("<br>" * (TITLE_LINES - 1)), b=50),
        legend=FOOT_LEGEND,  # a fraction of the plot's height put it over the axis titles
    )
    fig.update_yaxes(title_text="time (ms)", row=1, col=1)
    fig.update_xaxes(tickangle=0, **bar_ticks(view), row=1, col=1)
    fig.update_xaxes(type="log", title_text="arithmetic intensity (FLOP/B)", row=1, col=2)
    fig.update_yaxes(type="log", title_text="throughput (TFLOP/s)", row=1, col=2)
    fig.update_xaxes(type="log", title_text="batch size (sequences)", row=1, col=3)
    fig.update_yaxes(title_text="step time (ms)", row=1, col=3)
    # plotly.js's default ("hide past div") measures every tick label on every redraw to hide
    # those past the figure's edge; the margins keep them inside, and a redraw is 10-15 ms faster
    fig.update_xaxes(ticklabeloverflow="allow")
    fig.update_yaxes(ticklabeloverflow="allow")
    return responsive(fig, width=width, height=height)
