"""Notebook 01's explorer: model, GPU, precisions, batch, context, TP and its link, chunk and MFU
controls driving one FigureWidget (terms | roofline | step vs batch) and a status panel."""

from __future__ import annotations

import html

import ipywidgets as widgets

from itlkit.errors import ConfigError, UnknownNameError
from itlkit.physics.roofline import (
    NETWORK_BYTES_PER_SECOND,
    Deployment,
    compute_bound_tokens_per_step,
    ridge_tokens_per_step,
)
from itlkit.physics.speculative import Speculation
from itlkit.plots.decode import (
    DecodeView,
    bar_ticks,
    decode_figure,
    decode_view,
    figure_title,
    over_floor_label,
    trace_data,
)
from itlkit.units import (
    MICROSECOND,
    MILLISECOND,
    format_bytes,
    format_seconds,
)
from itlkit.widgets._deployment import deployment_picker
from itlkit.widgets._figure import FitFiguresToWidth, figure_widget, update_traces
from itlkit.widgets._style import checkbox, columns, error_banner, labelled, slider

# The link TP's all-reduces cross, as `itlkit explain --interconnect` names it; "own" (not None,
# which a Dropdown reads as no selection): the GPU's scale-up link, or PCIe on a card without one.
# (Each label fits the 250 px box beside its label.)
LINKS = (
    ("own: NVLink / Infinity Fabric", "own"),
    ("PCIe (no NVLink between GPUs)", "pcie"),
    (f"network between nodes, {NETWORK_BYTES_PER_SECOND * 8 / 1e9:.0f} Gb/s", "network"),
)


class DecodeExplorer:
    """Controls + figure for the decode floor and the chunked-prefill step (notebook 01)."""

    def __init__(
        self,
        *,
        model: str = "llama-3.1-8b",
        gpu: str = "h100-sxm",
        weight_precision: str = "bf16",
        kv_precision: str = "bf16",
        batch_size: int = 64,
        context_tokens: int = 4096,
        chunk_tokens: int = 2048,
        tp: int = 1,
        mfu: float = 0.5,
    ):
        self.picker = deployment_picker(
            model=model, gpu=gpu, weight_precision=weight_precision, kv_precision=kv_precision
        )
        self.model, self.model_path = self.picker.model, self.picker.model_path
        self.gpu, self.weights, self.kv = self.picker.gpu, self.picker.weights, self.picker.kv
        self._build_workload_controls(
            batch_size=batch_size, context_tokens=context_tokens, chunk_tokens=chunk_tokens
        )
        self._build_engine_controls(tp=tp, mfu=mfu)
        self.status = widgets.HTML()
        self._view = self._compute()
        self.figure = figure_widget(decode_figure(self._view))
        self.status.value = status_html(self._view)
        controls = [
            *self.picker.controls,
            self.batch,
            self.context,
            self.chunk,
            self.tp,
            self.link,
            self.mfu,
            self.host_overhead,
            self.allreduce_latency,
            self.prefill_attention,
            self.exclude_embedding,
            self.spec_k,
            self.spec_acceptance,
        ]
        for control in controls:
            control.observe(self.update, names="value")
        left = widgets.VBox(controls[:8])
        right = widgets.VBox(controls[8:])
        self.view = widgets.VBox(
            [columns(left, right), self.status, self.figure, FitFiguresToWidth()]
        )

    def _build_workload_controls(
        self, *, batch_size: int, context_tokens: int, chunk_tokens: int
    ) -> None:
        """Sliders for the batch (sequences), its context and the prefill chunk (tokens)."""
        self.batch = slider(
            widgets.IntSlider, "batch (sequences)", value=batch_size, min=1, max=1024, step=1
        )
        self.batch.add_class("itlkit-batch")
        self.context = slider(
            widgets.IntSlider,
            "context (tokens)",
            value=context_tokens,
            min=128,
            max=131072,
            step=128,
        )
        self.chunk = slider(
            widgets.IntSlider,
            "prefill chunk (tokens)",
            value=chunk_tokens,
            min=0,
            max=16384,
            step=64,
        )

    def _build_engine_controls(self, *, tp: int, mfu: float) -> None:
        """TP and its link, MFU, host overhead (ms), all-reduce latency (µs) and the two
        accounting switches."""
        self.tp = slider(
            widgets.SelectionSlider, "TP (GPUs)", options=[1, 2, 4, 8, 16, 32], value=tp
        )
        self.link = labelled(widgets.Dropdown, "TP link", options=list(LINKS), value="own")
        self.mfu = slider(
            widgets.FloatSlider, "MFU (fraction)", value=mfu, min=0.05, max=1.0, step=0.05
        )
        self.host_overhead = slider(
            widgets.FloatSlider, "host overhead (ms)", value=0.0, min=0.0, max=20.0, step=0.5
        )
        self.allreduce_latency = slider(
            widgets.FloatSlider, "all-reduce latency (µs)", value=0.0, min=0.0, max=50.0, step=1.0
        )
        self.prefill_attention = checkbox("count prefill attention FLOPs")
        self.exclude_embedding = checkbox("skip the input-embedding read (row gather)")
        # speculative decoding with n-gram drafts (no draft model): k = 0 is off
        self.spec_k = slider(widgets.IntSlider, "drafts k (tokens)", value=0, min=0, max=8, step=1)
        self.spec_acceptance = slider(
            widgets.FloatSlider, "acceptance (share)", value=0.7, min=0.05, max=0.95,
            step=0.05,
        )  # fmt: skip

    def deployment(self) -> Deployment:
        """The Deployment the controls describe (raises ConfigError/UnknownNameError)."""
        return self.picker.deployment(
            tp=int(self.tp.value),
            interconnect=None if self.link.value == "own" else self.link.value,
            mfu=float(self.mfu.value),
            host_overhead_seconds=self.host_overhead.value * MILLISECOND,
            allreduce_latency_seconds=self.allreduce_latency.value * MICROSECOND,
            prefill_attention=self.prefill_attention.value,
            exclude_input_embedding=self.exclude_embedding.value,
        )

    def _compute(self) -> DecodeView:
        k = int(self.spec_k.value)
        spec = Speculation(k, float(self.spec_acceptance.value)) if k else None
        return decode_view(
            self.deployment(),
            batch_size=self.batch.value,
            context_tokens=self.context.value,
            chunk_tokens=self.chunk.value,
            speculation=spec,
        )

    def update(self, change=None) -> None:
        """Recompute and redraw in place; invalid settings show an error and keep the plot."""
        try:
            view = self._compute()
        except (ConfigError, UnknownNameError) as exc:
            self.status.value = error_banner("Cannot run:", str(exc))
            self.figure.layout.title.text = f"cannot run this configuration: {exc}"
            return
        self._view = view
        with self.figure.batch_update():
            update_traces(self.figure, trace_data(view))
            self.figure.layout.title.text = figure_title(view)
            self.figure.layout.xaxis.update(bar_ticks(view))
        self.status.value = status_html(view)


def _allreduce_rows(view: DecodeView) -> list[tuple[str, str, str]]:
    """Under TP, the decode step's all-reduce: its bytes per GPU over the link at its speed
    (none where the step sends none: one GPU, or the all-reduce switched off)."""
    dep, dec = view.deployment, view.decode
    if not dec.allreduce_bytes:
        return []
    speed = f"{dep.link_kind} at {dep.link_bytes_per_second / 1e9:.1f} GB/s"
    return [(f"all-reduce in the decode step ({speed})", format_bytes(dec.allreduce_bytes),
             format_seconds(dec.allreduce_seconds))]  # fmt: skip


def status_html(view: DecodeView) -> str:
    """The numbers behind the figure as a small table, and a red banner when it does not fit."""
    dep, dec, mix = view.deployment, view.decode, view.mixed
    rows = [
        (
            "weights per GPU",
            format_bytes(dec.weight_bytes),
            format_seconds(dec.weight_read_seconds),
        ),
        ("KV read per step", format_bytes(dec.kv_bytes), format_seconds(dec.kv_read_seconds)),
        ("bandwidth floor", "weights + KV at HBM speed", format_seconds(dec.floor_seconds)),
        (
            f"decode step ({over_floor_label(view.over_floor)})"
            if view.over_floor
            else "decode step",
            f"{dec.matmul_flops / 1e12:.1f} TFLOP",
            f"{format_seconds(dec.step_seconds)} ({dec.over_floor:.2f}× floor"
            + "".join(f"; +{format_seconds(s)} {name}" for name, s in view.over_floor)
            + ")",
        ),
        (
            f"step {view.chunk_label}" if view.chunk_tokens else view.chunk_label,
            f"{mix.matmul_flops / 1e12:.1f} TFLOP",
            f"{format_seconds(mix.step_seconds)} ({mix.over_floor:.1f}× floor)",
        ),
        *_allreduce_rows(view),
        (
            "ridge point",
            f"{dep.ridge_flops_per_byte:.0f} FLOP/B",
            f"GEMMs cross it at {ridge_tokens_per_step(dep):.0f} tokens/step "
            f"({compute_bound_tokens_per_step(dep):.0f} at MFU {dep.mfu:.2f})",
        ),
    ]
    body = "".join(
        f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td><td>{html.escape(c)}</td></tr>"
        for a, b, c in rows
    )
    table = f'<table style="font-size:13px">{body}</table>'
    fit = html.escape(view.capacity.explain(batch_size=view.batch_size))
    if view.fits:
        return f'{table}<div style="color:#2a7a2a">Memory: {fit}</div>'
    return table + (
        '<div style="background:#fde2e1;border-left:4px solid #c00;padding:6px">'
        f"<b>Does not fit in GPU memory:</b> {fit}</div>"
    )
