"""Notebook 02's explorer: traffic and scheduler controls driving the simulator and one
FigureWidget (ITL histograms | step timeline | TTFT-ITL frontier)."""

from __future__ import annotations

import html
from dataclasses import replace

import ipywidgets as widgets

from itlkit.errors import ConfigError, UnknownNameError
from itlkit.physics.roofline import Deployment
from itlkit.plots._style import title_margin_px
from itlkit.plots.scheduler import (
    FRONTIER_BUDGETS,
    SchedulerView,
    figure_title,
    overload_text,
    scheduler_figure,
    scheduler_view,
    trace_data,
    with_frontier,
)
from itlkit.sim.scheduler import SchedulerConfig, SimulationResult
from itlkit.widgets._figure import FitFiguresToWidth, figure_widget, update_traces
from itlkit.widgets._style import (
    BUSY_HTML,
    CONTROL_WIDTH,
    busy_label,
    checkbox,
    columns,
    error_banner,
    slider,
)

_WIDE = {"description_width": "180px"}  # as the sliders' labels
BUDGETS = FRONTIER_BUDGETS
MAX_NUM_SEQS = (8, 16, 32, 64, 128, 256, 512, 1024)
# The step model: the roofline as is, or with the constants fitted on real vLLM runs
# (itlkit/data/calibration.json, `itlkit calibrate`).
STEP_MODELS = (("roofline (uncalibrated)", "none"),
               ("calibrated on real vLLM 0.15.1 runs", "bundled"))  # fmt: skip


class SchedulerExplorer:
    """Controls + figure for chunked-prefill interference (notebook 02)."""

    def __init__(
        self,
        *,
        model: str = "llama-3.1-8b",
        gpu: str = "h100-sxm",
        rate_per_second: float = 3.0,
        max_num_batched_tokens: int = 2048,
        prompt_tokens: int = 4096,
        output_tokens: int = 768,
        max_num_seqs: int = 256,
        window_seconds: float = 120.0,
        seed: int = 0,
    ):
        self.roofline = Deployment.create(model=model, gpu=gpu)
        self.deployment, self.efficiency = self.roofline, 1.0
        self.window_seconds = float(window_seconds)
        self.seed = int(seed)
        self._build_controls(
            rate_per_second=rate_per_second,
            max_num_batched_tokens=max_num_batched_tokens,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            max_num_seqs=max_num_seqs,
        )
        self.status = widgets.HTML()
        self.busy = busy_label()
        self._frontier, self._frontier_key = (), None
        view, key, _ = self._compute()
        self._view = with_frontier(view)
        self._frontier, self._frontier_key = self._view.frontier, key
        self.figure = figure_widget(scheduler_figure(self._view))
        self.status.value = status_html(self._view)
        self.controls = [
            self.rate,
            self.budget,
            self.prompt,
            self.output,
            self.max_num_seqs,
            self.chunked,
            self.disaggregated,
            self.step_model,
        ]
        for control in self.controls:
            control.observe(self.update, names="value")
        left = widgets.VBox(self.controls[:4])
        right = widgets.VBox(self.controls[4:])
        self.view = widgets.VBox(
            [columns(left, right), self.busy, self.status, self.figure, FitFiguresToWidth()]
        )

    def _build_controls(
        self,
        *,
        rate_per_second: float,
        max_num_batched_tokens: int,
        prompt_tokens: int,
        output_tokens: int,
        max_num_seqs: int,
    ) -> None:
        """Traffic and scheduler sliders (redraw on release) and the two prefill switches."""
        self.rate = slider(
            widgets.FloatSlider, "arrival rate (requests/s)", simulated=True,
            value=rate_per_second, min=0.25, max=10.0, step=0.25,
        )  # fmt: skip
        self.budget = slider(
            widgets.SelectionSlider,
            "token budget (tokens/step)",
            simulated=True,
            options=BUDGETS,
            value=max_num_batched_tokens,
        )
        self.prompt = slider(
            widgets.IntSlider, "prompt length (tokens)", simulated=True,
            value=prompt_tokens, min=256, max=16384, step=256,
        )  # fmt: skip
        self.output = slider(
            widgets.IntSlider, "output length (tokens)", simulated=True,
            value=output_tokens, min=16, max=2048, step=16,
        )  # fmt: skip
        self.budget.add_class("itlkit-budget")  # handles for browser tests
        self.rate.add_class("itlkit-rate")
        self.max_num_seqs = slider(
            widgets.SelectionSlider,
            "max_num_seqs (requests)",
            simulated=True,
            options=MAX_NUM_SEQS,
            value=max_num_seqs,
        )
        self.chunked = checkbox("chunked prefill", value=True)
        self.disaggregated = checkbox("disaggregated prefill (separate instance)")
        self.step_model = widgets.Dropdown(
            options=STEP_MODELS, value="none", description="step time", style=_WIDE,
            layout=widgets.Layout(width=CONTROL_WIDTH),
        )  # fmt: skip

    @property
    def result(self) -> SimulationResult:
        """The simulation behind the figure as drawn now."""
        return self._view.result

    def config(self) -> SchedulerConfig:
        """The scheduler settings the controls describe."""
        return SchedulerConfig(
            max_num_batched_tokens=int(self.budget.value),
            max_num_seqs=int(self.max_num_seqs.value),
            enable_chunked_prefill=bool(self.chunked.value),
            disaggregated=bool(self.disaggregated.value),
        )

    def _apply_step_model(self) -> str:
        """The deployment and efficiency of the chosen step model; its calibration's name."""
        if self.step_model.value == "none":
            self.deployment, self.efficiency = self.roofline, 1.0
            return ""
        from itlkit.cli._runs import load_calibration

        c = load_calibration(self.step_model.value)
        self.deployment = replace(
            self.roofline,
            host_overhead_seconds=c.host_seconds_per_step,
            host_seconds_per_sequence=c.host_seconds_per_sequence,
            allreduce_latency_seconds=c.allreduce_for(self.roofline.gpu),
        )
        self.efficiency = c.efficiency
        return c.name

    def _compute(self) -> tuple[SchedulerView, tuple, bool]:
        """The new view, its frontier key, and whether its frontier is still to be computed."""
        config = self.config()
        config.validate()
        calibration = self._apply_step_model()
        traffic = dict(
            rate_per_second=float(self.rate.value),
            prompt_tokens=int(self.prompt.value),
            output_tokens=int(self.output.value),
        )
        # The frontier sweeps the budget, so moving only the budget slider reuses it.
        key = (tuple(traffic.values()), config.max_num_seqs, config.enable_chunked_prefill,
               config.disaggregated, self.step_model.value)  # fmt: skip
        stale = key != self._frontier_key
        view = scheduler_view(
            self.deployment,
            **traffic,
            config=config,
            window_seconds=self.window_seconds,
            seed=self.seed,
            frontier=() if stale else self._frontier,
            efficiency=self.efficiency,
            calibration=calibration,
        )
        return view, key, stale

    def update(self, change=None) -> None:
        """Re-simulate and redraw in place; invalid settings show an error and keep the plot.

        The run's panels are redrawn first; when the traffic changed, the frontier (five more
        runs) follows in a second update, so the histograms never wait for it.
        """
        # Sent to the page before the simulations start: the reader sees the wait.
        self.busy.value = BUSY_HTML
        try:
            view, key, stale = self._compute()
        except (ConfigError, UnknownNameError) as exc:
            self.status.value = error_banner("Cannot run:", str(exc))
            self.figure.layout.title.text = f"cannot run this setting: {exc}"
            self.busy.value = ""
            return
        self._draw(view)
        if stale:
            view = with_frontier(view)
            self._frontier, self._frontier_key = view.frontier, key
            self._draw(view)
        self.busy.value = ""

    def _draw(self, view: SchedulerView) -> None:
        self._view = view
        with self.figure.batch_update():
            update_traces(self.figure, trace_data(view))
            title = figure_title(view)
            self.figure.layout.title.text = title
            self.figure.layout.margin.t = title_margin_px(title)
        self.status.value = status_html(view)


def status_html(view: SchedulerView) -> str:
    """The run's headline numbers as a small table (ms and s for display)."""
    s = view.result.summary()
    rows = [
        ("ITL p50 / p99", f"{s.itl_p50_seconds * 1e3:.1f} ms / {s.itl_p99_seconds * 1e3:.1f} ms"),
        ("TTFT p50 / p99", f"{s.ttft_p50_seconds:.2f} s / {s.ttft_p99_seconds:.2f} s"),
        ("bandwidth floor at the mean batch", f"{view.floor_seconds * 1e3:.1f} ms"),
        ("running requests (time average)", f"{view.mean_running:.0f}"),
        (
            "requests finished / in flight at the end",
            f"{s.requests_finished} / {s.requests_in_flight}",
        ),
        ("preemptions", f"{s.preemptions}"),
        ("engine steps simulated", f"{s.steps} in {view.window_seconds:.0f} s"),
    ]
    # two name-value pairs a row: a short table keeps the figure below it in view
    cell = '<td style="padding:2px 24px 2px 0">{}</td>'
    cells = [cell.format(html.escape(a)) + cell.format(html.escape(b)) for a, b in rows]
    body = "".join(f"<tr>{''.join(cells[i : i + 2])}</tr>" for i in range(0, len(cells), 2))
    table = f'<table style="font-size:13px">{body}</table>'
    verdict = overload_text(view)
    if not verdict:
        return table
    head, _, numbers = verdict.partition(" · ")
    return error_banner(head, numbers.replace(" · ", ", ")) + table
