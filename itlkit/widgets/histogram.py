"""Notebook 03's explorer: pick an example or upload scrapes, see the bucket histogram with its
quantiles, mean and the roofline floor, and, for a series, the slow-mode share over time."""

from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go

from itlkit.diagnosis.deployment import (
    InferredDeployment,
    PageFacts,
    infer_deployment,
    page_facts,
    served_model_names,
)
from itlkit.diagnosis.evidence import require_scrape_times
from itlkit.diagnosis.scoring import default_max_num_batched_tokens, floor_beaten
from itlkit.errors import ConfigError, SourceError, UnknownNameError
from itlkit.metrics.histogram import (
    HistogramSeries,
    counter_rate,
    series_window,
    slow_share_over_time,
    summarize,
)
from itlkit.metrics.page_info import cache_config_of_texts
from itlkit.metrics.readers import read_paths, read_texts
from itlkit.metrics.series import histogram_series
from itlkit.metrics.vllm_metrics import SECONDS_HISTOGRAMS
from itlkit.physics.roofline import decode_step
from itlkit.physics.stall import POLICIES, stall
from itlkit.plots._style import title_margin_px, wrap
from itlkit.plots.histogram import (
    empty_series_spec,
    histogram_spec,
    series_spec,
    summary_lines,
)
from itlkit.units import format_seconds
from itlkit.widgets._deployment import AUTO_VALUE, auto_options, deployment_picker
from itlkit.widgets._figure import FitFiguresToWidth, figure_widget, plain, update_figure
from itlkit.widgets._style import columns

_WIDE = {"description_width": "150px"}
_LAYOUT = widgets.Layout(width="400px")  # as the deployment picker's controls
QUANTILES = (0.5, 0.9, 0.99)
_STALE = '<span style="color:#c00">'
_ERRORS = (SourceError, ConfigError, UnknownNameError, ValueError, OSError)
BY_HAND = "floor"  # the slow mode at the slider's multiple of the floor
SLOW_MODES = [("a multiple of the floor", BY_HAND)] + [
    (text, key) for key, text in POLICIES.items()
]


class HistogramExplorer:
    """Controls + two FigureWidgets for reading vLLM latency histograms (notebook 03)."""

    def __init__(
        self,
        *,
        examples: dict[str, str | Path],
        metric: str = "itl",
        model: str = "llama-3.1-8b",
        gpu: str = "h100-sxm",
        batch_size: int = 64,
        context_tokens: int = 4096,
        slow_factor: float = 5.0,
    ):
        if not examples:
            raise ValueError("give at least one example (name → scrape file or folder)")
        self.examples = {name: Path(path) for name, path in examples.items()}
        self.example = widgets.Dropdown(
            options=list(self.examples), description="example", style=_WIDE, layout=_LAYOUT
        )
        self.upload = widgets.FileUpload(
            accept=".prom,.txt,.metrics,.json",
            multiple=True,
            description="or upload scrapes",
            layout=widgets.Layout(width="auto"),  # the default width cuts "…scrapes (0)"
        )
        self.metric = widgets.Dropdown(
            options=SECONDS_HISTOGRAMS, value=metric, description="histogram", style=_WIDE
        )
        # every part AUTO: read off the metrics or assumed, as `itlkit diagnose` does
        self.picker = deployment_picker(auto=True)
        self.model, self.gpu = self.picker.model, self.picker.gpu
        self.model_path, self.weights, self.kv = (
            self.picker.model_path, self.picker.weights, self.picker.kv)  # fmt: skip
        self.tp = widgets.Dropdown(
            options=auto_options((1, 2, 4, 8)), value=AUTO_VALUE,
            description="TP (GPUs)", style=_WIDE, layout=_LAYOUT,
        )  # fmt: skip
        self.batch, self.context, self.slow_factor, self.slow_mode, self.chunk = _step_controls(
            batch_size, context_tokens, slow_factor)  # fmt: skip
        self.batch.add_class("itlkit-hist-batch")  # a handle for browser tests
        self.status = widgets.HTML()
        self.error = widgets.HTML()
        self.warning = widgets.HTML()  # red when the gaps beat the floor drawn
        self._frame = read_paths([self.examples[self.example.value]])
        self._facts = page_facts(served_model_names(self._frame),
                                 [self.examples[self.example.value]])  # fmt: skip
        self._source = self.example.value
        self._quiet = False  # set while a new source sets the slow-mode controls
        self._engine_defaults()
        hist, series = self._figures()
        # the last good title and height, under a failure's mark
        self._title, self._height = hist["layout"]["title"]["text"], hist["layout"]["height"]
        self.figure = figure_widget(go.Figure(hist))
        self.series_figure = figure_widget(go.Figure(series))
        self.example.observe(self._on_example, names="value")
        self.upload.observe(self._on_upload, names="value")
        for control in (self.metric, *self.picker.controls, self.tp, self.batch, self.context,
                        self.slow_factor, self.slow_mode, self.chunk):  # fmt: skip
            control.observe(self.update, names="value")
        controls = columns(
            widgets.VBox([self.example, self.upload, self.metric, *self.picker.controls, self.tp]),
            widgets.VBox([self.batch, self.context, self.slow_mode, self.chunk, self.slow_factor]),
        )
        self.view = widgets.VBox(
            [
                controls,
                self.error,
                self.warning,
                self.status,
                self.figure,
                self.series_figure,
                FitFiguresToWidth(),
            ]
        )

    # --- computations (pure, from the current controls) ------------------------------------

    def inferred(self) -> InferredDeployment:
        """The deployment the controls state, the rest read off the metrics or assumed."""
        return infer_deployment(self.picker.stated(tp=self.tp.value), self._facts)

    def floor_seconds(self, inferred: InferredDeployment | None = None) -> float:
        """Bandwidth floor of one decode step for the deployment (`inferred`, when the caller
        has it already), batch and context."""
        deployment = (inferred or self.inferred()).deployment
        step = decode_step(deployment, batch_size=self.batch.value,
                           context_tokens=self.context.value)  # fmt: skip
        return float(step.floor_seconds)

    def slow_mode_factor(self, inferred: InferredDeployment, floor: float) -> tuple[float, str]:
        """(the slow mode as a multiple of `floor`, where it comes from): the slider's value, or
        the gap a stream sees under the chosen engine policy while a chunk is served."""
        if self.slow_mode.value == BY_HAND:
            return float(self.slow_factor.value), ""
        gap = stall(inferred.deployment, policy=self.slow_mode.value, batch_size=self.batch.value,
                    context_tokens=self.context.value, chunk_tokens=self.chunk.value)  # fmt: skip
        return gap.gap_seconds / floor, f"{POLICIES[gap.policy]}: {gap.how}"

    def _engine_defaults(self) -> None:
        """An SGLang page: its policy's slow mode at SGLang's default chunk for the GPU the
        controls name; a vLLM page: vLLM's policy where SGLang's was chosen, else as it was."""
        if not _is_sglang(self._frame):
            if self.slow_mode.value.startswith("sglang"):
                self._set_quietly(self.slow_mode, "vllm")
            return
        chunk = default_max_num_batched_tokens(self.inferred().deployment, "sglang")
        self._set_quietly(self.slow_mode, "sglang")
        self._set_quietly(self.chunk, chunk)

    def _set_quietly(self, control, value) -> None:
        """Set a control without a redraw (the caller draws once after)."""
        self._quiet = True
        try:
            control.value = value
        finally:
            self._quiet = False

    @property
    def _frame(self):
        return self._loaded_frame

    @_frame.setter
    def _frame(self, frame) -> None:
        self._loaded_frame = frame
        self._read: dict[str, HistogramSeries | SourceError] = {}  # metric -> its series

    def _histogram_series(self, metric: str) -> HistogramSeries:
        """`metric`'s snapshots from the current source, read once per source: the sliders
        move the floor, not the data (re-reading cost 3 × 20 ms per redraw)."""
        if metric not in self._read:
            try:
                self._read[metric] = histogram_series(self._frame, metric)
            except SourceError as exc:
                self._read[metric] = exc
        found = self._read[metric]
        if isinstance(found, SourceError):
            raise found
        return found

    def series(self) -> HistogramSeries:
        """The chosen histogram's snapshots from the current source."""
        return self._histogram_series(self.metric.value)

    def _figures(self) -> tuple[dict, dict]:
        """Both figures as plain data (plots.histogram's specs) for the current controls."""
        series = self.series()
        inferred = self.inferred()  # once per redraw: a config.json is read each time
        floor = self.floor_seconds(inferred)
        k, slow_label = self.slow_mode_factor(inferred, floor)
        self.slow_factor.disabled = self.slow_mode.value != BY_HAND
        self.chunk.disabled = self.slow_mode.value == BY_HAND
        if len(series) >= 2:
            require_scrape_times(series)  # as `itlkit diagnose`: untimed scrapes have no window
            window = series_window(series)
            hist = window.histogram
            span = f"window of {len(series)} scrapes ({window.duration_seconds / 60:.1f} min)"
            if window.counter_reset:
                span += ", counter reset: counts are a lower bound"
        else:
            hist = series.snapshot(0)
            span = "one snapshot: everything since the server started"
        title = wrap(f"{html.escape(self._source)} · {self.metric.value} · {span}")
        self.warning.value = ""
        if self.metric.value == "itl":
            summary = summarize(hist, quantiles=QUANTILES, floor_seconds=floor, slow_factor=k)
            label = (f"({inferred.deployment.label}, batch {self.batch.value}, "
                     f"{self.context.value} tokens)")  # fmt: skip
            # which floor the histogram is judged against, always in sight (it is an assumption)
            said = "; ".join(inferred.assumptions)
            title += "<br>" + wrap(
                f"floor {format_seconds(floor)} for {html.escape(label[1:-1])}"
                + (f" · assumed: {html.escape(said)}" if said else ""),
                small=True,
            )
            if slow_label:
                title += "<br>" + wrap(f"slow mode: {html.escape(slow_label)}", small=True)
            hist = histogram_spec(summary, floor_seconds=floor, slow_factor=k, floor_label=label,
                                  title=title, slow_label=slow_label)  # fmt: skip
            self.warning.value = below_floor_html(
                floor_beaten(summary.histogram, floor, f"this {format_seconds(floor)} floor")
            )
        else:  # one decode step bounds the gap between two tokens, not this latency
            summary = summarize(hist, quantiles=QUANTILES)
            title += "<br>" + wrap(
                f"no floor drawn: the decode floor bounds ITLs only, not {self.metric.value}",
                small=True,
            )
            hist = histogram_spec(summary, title=title)
        self.status.value = "<br>".join(html.escape(line) for line in summary_lines(summary))
        return hist, self._series_spec(floor, k)

    def _series_spec(self, floor: float, k: float) -> dict:
        """The ITLs' slow-mode share over time beside the TTFT count rate, whichever histogram
        the upper figure shows."""
        try:
            itl = self._histogram_series("itl")
        except SourceError:
            return empty_series_spec("no ITL histogram in this source")
        if len(itl) < 2 or not np.isfinite(itl.timestamps_seconds).all():
            return empty_series_spec("a series needs two or more timestamped scrapes")
        timeline = slow_share_over_time(itl, floor_seconds=floor, slow_factor=k)
        ttft_times, ttft_rate = self._ttft_rate()
        return series_spec(
            timeline,
            ttft_times_seconds=ttft_times,
            ttft_count_per_second=ttft_rate,
            start_seconds=float(itl.timestamps_seconds[0]),
        )

    def _ttft_rate(self) -> tuple[np.ndarray, np.ndarray]:
        try:
            ttft = self._histogram_series("ttft")
        except SourceError:
            return np.zeros(0), np.zeros(0)
        t = ttft.timestamps_seconds
        return (t[1:] + t[:-1]) / 2, counter_rate(t, ttft.counts)

    # --- wiring -----------------------------------------------------------------------------

    def _show(self) -> None:
        try:
            hist, series = self._figures()
        except _ERRORS as exc:
            self._fail(str(exc), what="this setting could not be drawn")
            return
        self.error.value = ""
        self._title, self._height = hist["layout"]["title"]["text"], hist["layout"]["height"]
        for target, spec in ((self.figure, hist), (self.series_figure, series)):
            if len(target.data) != len(spec["data"]):  # the floor's lines come and go
                target.data = ()
                target.add_traces(plain(spec["data"]))
            with target.batch_update():
                update_figure(target, spec)

    def _fail(self, message: str, *, what: str) -> None:
        """Say what failed under the controls and mark the figure left in sight as stale."""
        self.error.value = f'<span style="color:#c00">error: {html.escape(message)}</span>'
        mark = wrap(f"not updated: {what} · still showing {self._source}")
        title = "<br>".join(f"{_STALE}{html.escape(line)}</span>" for line in mark.split("<br>"))
        title += "<br>" + self._title
        grow = title_margin_px(title) - title_margin_px(self._title)  # the plot keeps its height
        with self.figure.batch_update():
            self.figure.layout.title.text = title
            self.figure.layout.margin.t = title_margin_px(title)
            self.figure.layout.height = self._height + grow

    def update(self, change=None) -> None:
        """Recompute and redraw from the current controls."""
        if not self._quiet:
            self._show()

    def _on_example(self, change) -> None:
        if change["new"] is None:  # cleared after an upload: nothing to load
            return
        try:
            self._frame = read_paths([self.examples[change["new"]]])
        except _ERRORS as exc:
            self._fail(str(exc), what=f"{change['new']} could not be read")
            return
        self._source = change["new"]
        self._facts = page_facts(served_model_names(self._frame), [self.examples[change["new"]]])
        self._engine_defaults()
        self._show()

    def _on_upload(self, change) -> None:
        files = change["new"]
        if not files:
            return
        names = ", ".join(sorted(str(f["name"]) for f in files))
        try:
            texts = {f["name"]: bytes(f["content"]).decode("utf-8") for f in files}
            self._frame = read_texts(texts)
        except UnicodeDecodeError as exc:
            self._fail(f"not UTF-8 text ({exc})", what=f"{names} could not be read")
            return
        except _ERRORS as exc:
            self._fail(str(exc), what=f"{names} could not be read")
            return
        self._source = ", ".join(sorted(texts)) if len(texts) <= 2 else f"{len(texts)} uploads"
        # the dropdown no longer names what is shown, and choosing any example is a change again
        self.example.value = None
        self._facts = PageFacts(tuple(served_model_names(self._frame)),
                                cache_config_of_texts(sorted(texts.items())))  # fmt: skip
        self._engine_defaults()
        self._show()


def _step_controls(batch_size: int, context_tokens: int, slow_factor: float) -> tuple:
    """The load (batch, context) and the slow mode's controls: a multiple of the floor by hand,
    or an engine's policy with its chunk."""
    batch = widgets.IntSlider(
        value=batch_size, min=1, max=1024, description="batch (sequences)",
        continuous_update=False, style=_WIDE, layout=_LAYOUT,
    )  # fmt: skip
    context = widgets.IntSlider(
        value=context_tokens, min=128, max=131072, step=128, description="context (tokens)",
        continuous_update=False, style=_WIDE, layout=_LAYOUT,
    )  # fmt: skip
    factor = widgets.FloatSlider(
        value=slow_factor, min=1.5, max=20.0, step=0.5, description="slow mode (× floor)",
        continuous_update=False, style=_WIDE, layout=_LAYOUT,
    )  # fmt: skip
    # the slow mode a prompt chunk makes under an engine's policy (`physics.stall`), set to
    # SGLang's where the page is SGLang's, or by hand as a multiple of the floor
    mode = widgets.Dropdown(
        options=SLOW_MODES, value=BY_HAND, description="slow mode from",
        style=_WIDE, layout=_LAYOUT,
    )  # fmt: skip
    chunk = widgets.IntSlider(
        value=2048, min=256, max=16384, step=256, description="chunk (tokens)",
        continuous_update=False, disabled=True, style=_WIDE, layout=_LAYOUT,
    )  # fmt: skip
    return batch, context, factor, mode, chunk


def _is_sglang(frame) -> bool:
    """Whether the source is an SGLang server's (its families are `sglang:`)."""
    return bool(len(frame)) and frame["family"].astype(str).str.startswith("sglang:").any()


def below_floor_html(why: str) -> str:
    """A red banner saying the gaps beat the floor drawn (nothing when they do not)."""
    if not why:
        return ""
    return (
        "<div class='itlkit-below-floor' style='border:2px solid #c62828;background:#fdecea;"
        f"color:#b71c1c;padding:6px 10px'><b>The gaps beat the floor:</b> {html.escape(why)}. "
        "These metrics did not come from this deployment: pick its model (or its config.json), "
        "precision, TP and GPU.</div>"
    )
