"""Notebook 02's explorer: traffic and scheduler controls driving the simulator and one
FigureWidget (ITL histograms | step timeline | TTFT-ITL frontier).

The traffic controls offer the simulator's clients (open loop, closed loop, burst), spread
request lengths and repeated prompts, built as `itlkit simulate` builds them
(`plots.scheduler.scheduler_workload`)."""

from __future__ import annotations

import html

import ipywidgets as widgets

from itlkit.errors import ConfigError, UnknownNameError
from itlkit.physics.roofline import Deployment
from itlkit.physics.speculative import Speculation, measured_overheads
from itlkit.plots._style import title_margin_px
from itlkit.plots.scheduler import (
    CLIENTS,
    FRONTIER_BUDGETS,
    SPREADS,
    Client,
    SchedulerView,
    Spread,
    client_text,
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
_LONG_LABEL = "240px"  # "max concurrency (requests in flight)" needs ~235 px of label
# The client's menu reads "closed loop (max concurrency)": 220 px beside a 180-px label cut it.
_CLIENT_LABEL = {"description_width": "100px"}
BUDGETS = FRONTIER_BUDGETS
MAX_NUM_SEQS = (8, 16, 32, 64, 128, 256, 512, 1024)
# The step model: the roofline as is, or with the constants fitted on real vLLM runs
# (itlkit/data/calibration.json, `itlkit calibrate`).
# The engine's schedule: vLLM's mixed steps, or SGLang's prefill batches alone (its default);
# SGLang with --enable-mixed-chunk schedules as vLLM does (`itlkit.sim.sglang`).
ENGINES = {
    "vllm": "vLLM: mixed steps",
    "sglang": "SGLang: prefill alone",
    "sglang-mixed": "SGLang: mixed chunk",
}
# Speculative decoding's drafts: free (n-gram lookup on the host), or a model pass each whose
# time beyond the roofline was measured (`physics.speculative.MEASURED_OVERHEADS`).
SPEC_METHODS = (("n-gram (free drafts)", "ngram"), ("EAGLE head (measured)", "eagle"),
                ("MTP layer (measured)", "mtp"))  # fmt: skip
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
        client: str = "open",
        max_concurrency: int = 16,
        burst_requests: int = 100,
        spread: str = "fixed",
        spread_percent: int = 50,
        repeat_share: float = 0.0,
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
        self._build_traffic_controls(
            client=client,
            max_concurrency=max_concurrency,
            burst_requests=burst_requests,
            spread=spread,
            spread_percent=spread_percent,
            repeat_share=repeat_share,
        )
        self._show_traffic_controls()
        self.status = widgets.HTML()
        self.busy = busy_label()
        self._frontier, self._frontier_key = (), None
        view, key, _ = self._compute()
        self._view = with_frontier(view)
        self._frontier, self._frontier_key = self._view.frontier, key
        self.figure = figure_widget(scheduler_figure(self._view))
        self.status.value = status_html(self._view)
        # the client and what it sends on the left; the lengths' spread and the engine on
        # the right; a client's own slider shows only for that client, the spread only for
        # spread lengths, so that each column holds five or six rows and the figure stays in
        # view below them
        client = [self.client, self.rate, self.burst_requests, self.max_concurrency,
                  self.prompt, self.output, self.repeat_share, self.spec_k,
                  self.spec_acceptance, self.spec_method]  # fmt: skip
        engine = [self.spread, self.spread_percent, self.engine, self.budget, self.max_num_seqs,
                  self.step_model, self.chunked, self.disaggregated]  # fmt: skip
        self.controls = client + engine
        for control in self.controls:
            control.observe(self.update, names="value")
        left = widgets.VBox(client)
        switches = widgets.HBox([self.chunked, self.disaggregated],
                                layout=widgets.Layout(grid_gap="0 24px"))  # fmt: skip
        right = widgets.VBox([*engine[:-2], switches])
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
        self.engine = widgets.Dropdown(
            options=[(words, key) for key, words in ENGINES.items()], value="vllm",
            description="engine", style=_WIDE, layout=widgets.Layout(width=CONTROL_WIDTH),
        )  # fmt: skip
        self.engine.add_class("itlkit-engine")
        self.chunked = checkbox("chunked prefill", value=True)
        self.disaggregated = checkbox("disaggregated prefill")
        self.step_model = widgets.Dropdown(
            options=STEP_MODELS, value="none", description="step time", style=_WIDE,
            layout=widgets.Layout(width=CONTROL_WIDTH),
        )  # fmt: skip

    def _build_traffic_controls(
        self,
        *,
        client: str,
        max_concurrency: int,
        burst_requests: int,
        spread: str,
        spread_percent: int,
        repeat_share: float,
    ) -> None:
        """The client, its slots or its burst, the lengths' spread and the repeated prompts."""
        self.client = widgets.Dropdown(
            options=[(words, kind) for kind, words in CLIENTS.items()], value=client,
            description="client", style=_CLIENT_LABEL,
            layout=widgets.Layout(width=CONTROL_WIDTH),
        )  # fmt: skip
        self.max_concurrency = slider(
            widgets.IntSlider, "max concurrency (requests in flight)", simulated=True,
            label_width=_LONG_LABEL, value=max_concurrency, min=1, max=256,
        )  # fmt: skip
        self.burst_requests = slider(
            widgets.IntSlider, "requests in the burst (num_prompts)", simulated=True,
            label_width=_LONG_LABEL, value=burst_requests, min=10, max=1000, step=10,
        )  # fmt: skip
        self.spread = widgets.Dropdown(
            options=[(words, kind) for kind, words in SPREADS.items()], value=spread,
            description="prompt and output lengths", style=_WIDE,
            layout=widgets.Layout(width=CONTROL_WIDTH),
        )  # fmt: skip
        # below 100 %: vLLM's random dataset refuses a range ratio of 1 (lengths down to 0)
        self.spread_percent = slider(
            widgets.IntSlider, "spread (%)", simulated=True,
            value=spread_percent, min=0, max=90, step=5,
        )  # fmt: skip
        self.repeat_share = slider(
            widgets.FloatSlider, "repeated prompts (share)", simulated=True,
            value=repeat_share, min=0.0, max=1.0, step=0.05,
        )  # fmt: skip
        self.spec_k = slider(
            widgets.IntSlider, "speculative drafts k (0: off)", simulated=True,
            value=0, min=0, max=7,
        )  # fmt: skip
        self.spec_acceptance = slider(
            widgets.FloatSlider, "acceptance per draft (0-1)", simulated=True,
            value=0.7, min=0.0, max=1.0, step=0.05,
        )  # fmt: skip
        self.spec_method = widgets.Dropdown(
            options=SPEC_METHODS, value="eagle", description="drafts", style=_WIDE,
            layout=widgets.Layout(width=CONTROL_WIDTH),
        )  # fmt: skip
        self.spec_k.add_class("itlkit-spec-k")
        self.client.add_class("itlkit-client")  # handles for browser tests
        self.max_concurrency.add_class("itlkit-concurrency")
        self.spread.add_class("itlkit-spread")

    def _show_traffic_controls(self) -> None:
        """Show the sliders the chosen client and spread use, hide the others."""
        kind = self.client.value
        shown = {
            self.rate: kind != "burst",
            self.max_concurrency: kind == "closed",
            self.burst_requests: kind == "burst",
            self.spread_percent: self.spread.value != "fixed",
            self.spec_acceptance: self.spec_k.value > 0,
            self.spec_method: self.spec_k.value > 0,
        }
        for control, show in shown.items():
            control.layout.display = None if show else "none"

    def traffic(self) -> dict:
        """The traffic the controls describe, as `scheduler_view`'s keywords."""
        return dict(
            rate_per_second=float(self.rate.value),
            prompt_tokens=int(self.prompt.value),
            output_tokens=int(self.output.value),
            client=Client(
                kind=self.client.value,
                max_concurrency=int(self.max_concurrency.value),
                burst_requests=int(self.burst_requests.value),
            ),
            spread=Spread(kind=self.spread.value, share=self.spread_percent.value / 100),
            repeat_share=float(self.repeat_share.value),
        )

    def speculation(self) -> Speculation | None:
        """The speculative decoding the controls describe (None at k = 0): geometric acceptance
        per draft, the method's measured overheads (`MEASURED_OVERHEADS`)."""
        k = int(self.spec_k.value)
        if k == 0:
            return None
        method = self.spec_method.value
        return Speculation(k, float(self.spec_acceptance.value), method=method,
                           **measured_overheads(method))  # fmt: skip

    @property
    def result(self) -> SimulationResult:
        """The simulation behind the figure as drawn now."""
        return self._view.result

    def config(self) -> SchedulerConfig:
        """The scheduler settings the controls describe. SGLang's default runs each prefill
        batch alone (`sim.sglang`): the budget is then its --chunked-prefill-size; a decode
        instance of disaggregated prefill runs no prompts, whatever the engine."""
        disaggregated = bool(self.disaggregated.value)
        return SchedulerConfig(
            max_num_batched_tokens=int(self.budget.value),
            max_num_seqs=int(self.max_num_seqs.value),
            enable_chunked_prefill=bool(self.chunked.value),
            disaggregated=disaggregated,
            prefill_only_steps=self.engine.value == "sglang" and not disaggregated,
        )

    def _apply_step_model(self) -> str:
        """The deployment and efficiency of the chosen step model; its calibration's name."""
        if self.step_model.value == "none":
            self.deployment, self.efficiency = self.roofline, 1.0
            return ""
        from itlkit.physics.calibration import load_calibration

        c = load_calibration(self.step_model.value).for_model(
            self.roofline.gpu.slug, self.roofline.model
        )
        self.deployment = c.apply(self.roofline)
        self.efficiency = c.efficiency
        return c.name

    def _compute(self) -> tuple[SchedulerView, tuple, bool]:
        """The new view, its frontier key, and whether its frontier is still to be computed."""
        config = self.config()
        config.validate()
        calibration = self._apply_step_model()
        traffic = self.traffic()
        # The frontier sweeps the budget, so moving only the budget slider reuses it; every
        # other control (the client, the lengths, the repeats too) makes it stale.
        speculation = self.speculation()
        key = (tuple(traffic.values()), config.max_num_seqs, config.enable_chunked_prefill,
               config.disaggregated, config.prefill_only_steps, self.step_model.value,
               speculation)  # fmt: skip
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
            speculation=speculation,
        )
        return view, key, stale

    def update(self, change=None) -> None:
        """Re-simulate and redraw in place; invalid settings show an error and keep the plot.

        The run's panels are redrawn first; when the traffic changed, the frontier (five more
        runs) follows in a second update, so the histograms never wait for it.
        """
        self._show_traffic_controls()
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
    if view.speculation is not None:
        tpot = view.result.itl_views().mean("request_tpot")
        rows += [
            ("tokens a step (speculation)", f"{view.speculation.tokens_per_step:.2f}"),
            ("TPOT mean (per token; ITL above is per step)", f"{tpot * 1e3:.1f} ms"),
        ]
    # two name-value pairs a row: a short table keeps the figure below it in view; the client
    # (which ran, what it sent) in one line above it, which leaves the columns as narrow
    cell = '<td style="padding:2px 24px 2px 0">{}</td>'
    cells = [cell.format(html.escape(a)) + cell.format(html.escape(b)) for a, b in rows]
    body = "".join(f"<tr>{''.join(cells[i : i + 2])}</tr>" for i in range(0, len(cells), 2))
    client = f'<div style="font-size:13px">client: {html.escape(client_text(view))}</div>'
    table = client + f'<table style="font-size:13px">{body}</table>'
    verdict = overload_text(view)
    if not verdict:
        return table
    head, _, numbers = verdict.partition(" · ")
    return error_banner(head, numbers.replace(" · ", ", ")) + table
