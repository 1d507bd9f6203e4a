"""Notebook 06's capacity planner: SLO and traffic sliders over a cached sweep, the frontier
redrawn live, a chosen configuration opened as notebook 02's views, the plan exported.

Moving an SLO slider only re-ranks the sweep already simulated (no simulation); moving the
traffic sweeps again, through the on-disk cache, so going back to a rate is instant.
"""

from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as widgets

from itlkit.physics.calibration import Calibration, load_calibration
from itlkit.plan.frontier import nothing_meets, ranked
from itlkit.plan.prices import PriceTable
from itlkit.plan.prune import deployment_of
from itlkit.plan.report import plan_markdown
from itlkit.plan.space import Slo, Space, Traffic
from itlkit.plan.sweep import run_sweep
from itlkit.plots.plan import figure_title, plan_figure, trace_data
from itlkit.plots.scheduler import scheduler_figure, scheduler_view
from itlkit.sim.config import SchedulerConfig
from itlkit.widgets._figure import FitFiguresToWidth, figure_widget, update_traces
from itlkit.widgets._style import busy_label, columns, slider

CHOSEN_WINDOW_SECONDS = 60.0  # the chosen configuration's views simulate this much traffic


class CapacityPlanner:
    """Controls, the cost frontier and the chosen configuration's views (notebook 06)."""

    def __init__(self, space: Space, *, model: str, prompt_tokens: int, output_tokens: int,
                 prices: PriceTable, calibration: Calibration | str = "bundled",
                 rate_per_second: float = 8.0,
                 itl_p99_seconds: float = 0.05, ttft_p99_seconds: float = 1.0,
                 duration_seconds: float = 60.0, cache: Path | None = None):  # fmt: skip
        self.space, self.model, self.prices = space, model, prices
        self.calibration = (calibration if isinstance(calibration, Calibration)
                            else load_calibration(calibration))  # fmt: skip
        self.lengths = (prompt_tokens, output_tokens)
        self.duration, self.cache = duration_seconds, cache
        self.rate = slider(widgets.FloatSlider, "peak traffic (requests/s)", simulated=True,
                           value=rate_per_second, min=0.5, max=40.0, step=0.5)  # fmt: skip
        self.itl = slider(widgets.FloatSlider, "ITL p99 target (ms)", value=itl_p99_seconds * 1e3,
                          min=5.0, max=300.0, step=5.0)  # fmt: skip
        self.ttft = slider(widgets.FloatSlider, "TTFT p99 target (s)", value=ttft_p99_seconds,
                           min=0.1, max=10.0, step=0.1)  # fmt: skip
        self.itl.add_class("itlkit-itl-target")  # a handle for browser tests
        self.chosen = widgets.Dropdown(description="open", options=[],
                                       layout=widgets.Layout(width="760px"))  # fmt: skip
        self.export_button = widgets.Button(description="export the plan", icon="download")
        self.status, self.busy = widgets.HTML(), busy_label()
        self.results = self._sweep()
        self.figure = figure_widget(plan_figure(self.results, self.slo()))
        self.detail = figure_widget(self._detail_figure())
        self.rate.observe(self.resweep, names="value")
        for control in (self.itl, self.ttft):
            control.observe(self.rerank, names="value")
        self.chosen.observe(self.open_chosen, names="value")
        self.export_button.on_click(lambda _: self.export(Path("capacity-plan.md")))
        self._refresh_choices()
        controls = columns(widgets.VBox([self.rate]), widgets.VBox([self.itl, self.ttft]))
        parts = [controls, self.busy, self.status, self.figure, self.chosen, self.export_button,
                 self.detail, FitFiguresToWidth()]  # fmt: skip
        self.view = widgets.VBox(parts)

    # ---- the model behind the controls -----------------------------------------------------
    def slo(self) -> Slo:
        return Slo(itl_p99_seconds=self.itl.value / 1e3, ttft_p99_seconds=self.ttft.value)

    def traffic(self) -> Traffic:
        return Traffic(float(self.rate.value), *self.lengths, duration_seconds=self.duration)

    def _sweep(self):
        return run_sweep(self.space, model=self.model, traffic=self.traffic(), slo=self.slo(),
                         prices=self.prices, calibration=self.calibration,
                         calibration_name=self.calibration.name, workers=1,
                         cache=self.cache, early_stop=False).results  # fmt: skip

    def best(self):
        return ranked(self.results, self.slo(), "cost_per_hour")

    # ---- observers -----------------------------------------------------------------------------
    def rerank(self, change=None) -> None:
        """A target moved: re-rank what was simulated and redraw (no simulation)."""
        with self.figure.batch_update():
            update_traces(self.figure, trace_data(self.results, self.slo()))
            self.figure.layout.title.text = figure_title(self.results, self.slo())
        self._refresh_choices()

    def resweep(self, change=None) -> None:
        """The traffic moved: sweep again (through the cache) and redraw."""
        self.busy.value = "simulating..."
        self.results = self._sweep()
        self.busy.value = ""
        self.rerank()

    def _refresh_choices(self) -> None:
        best = self.best()
        self.status.value = "" if best else html.escape(nothing_meets(self.results, self.slo()))
        options = [(f"{r.candidate.label()}: ${r.cost_per_hour:,.2f}/h", i)
                   for i, r in enumerate(best[:10])]  # fmt: skip
        self.chosen.options = options
        self.chosen.value = options[0][1] if options else None

    def open_chosen(self, change=None) -> None:
        with self.detail.batch_update():
            fresh = self._detail_figure()
            update_traces(self.detail, [t.to_plotly_json() for t in fresh.data])
            self.detail.layout.title.text = fresh.layout.title.text

    def _detail_figure(self):
        """The chosen configuration (the best by default) as notebook 02's views: one
        replica's ITL histograms, step timeline and token-budget frontier."""
        best = self.best()
        index = self.chosen.value if self.chosen.value is not None else 0
        if not best:
            return plan_figure(self.results, self.slo())
        c = best[min(index, len(best) - 1)].candidate
        dep = deployment_of(c, self.model)
        calibration = self.calibration.for_model(c.gpu, dep.model)
        view = scheduler_view(
            calibration.apply(dep),
            rate_per_second=self.rate.value / c.replicas, prompt_tokens=self.lengths[0],
            output_tokens=self.lengths[1], window_seconds=CHOSEN_WINDOW_SECONDS,
            config=SchedulerConfig(max_num_batched_tokens=c.max_num_batched_tokens,
                                   max_num_seqs=c.max_num_seqs),
            efficiency=calibration.efficiency, frontier=(),
        )  # fmt: skip
        return scheduler_figure(view)

    def export(self, path: Path) -> Path:
        """Write the one-page plan (Markdown) of the sweep under the current targets."""
        text = plan_markdown(self.results, model=self.model, traffic=self.traffic(),
                             slo=self.slo(), objective="cost_per_hour",
                             prices_note=f"{self.prices.origin} ({self.prices.date})")  # fmt: skip
        path.write_text(text)
        self.status.value = f"plan written to {html.escape(str(path))}"
        return path
