"""Figures for the scheduler simulator (notebook 02): ITL histograms, step timeline, frontier.

`scheduler_view` runs the simulations one setting needs (the run itself and the same traffic at
every token budget of the frontier); `scheduler_figure` draws a view; `trace_data` gives the data
of every trace in figure order so a FigureWidget can be updated in place. The traffic is built
with the library calls `itlkit simulate` uses: a `Client` (open loop, closed loop or burst), a
`Spread` of request lengths, and a share of repeated prompts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from itlkit.errors import UnknownNameError
from itlkit.physics.roofline import Deployment, decode_step
from itlkit.physics.speculative import Speculation
from itlkit.plots._style import FOOT_LEGEND, responsive, title_margin_px, top_title, wrap
from itlkit.sim.lengths import (
    Fixed,
    Lengths,
    LogNormal,
    vllm_random_output_lengths,
    vllm_random_prompt_lengths,
)
from itlkit.sim.run_workload import repeat_prompts
from itlkit.sim.scheduler import (
    SchedulerConfig,
    SimulationResult,
    fine_buckets_seconds,
    kv_capacity_tokens,
    simulate_deployment,
)
from itlkit.sim.workload import Workload, bench_workload, synthetic_workload
from itlkit.units import MILLISECOND

# The token budgets the notebook offers, all on the frontier (the slider's every stop).
FRONTIER_BUDGETS = (256, 512, 1024, 2048, 4096, 8192, 16384)
# A run is overloaded when, at the end of the window, more requests wait to start than arrive in
# this many seconds: the queue grows, and TTFT with it, faster than the engine serves (a stable
# run ends with next to none waiting; rate 6/s at the defaults leaves ~420 waiting, 70 s worth).
OVERLOAD_QUEUE_SECONDS = 10.0
# Frontier labels (about 5 characters, one text line) overlap when their points are closer than
# this share of the plotted span on both axes (log TTFT across, ITL up): about 40 x 16 px of a
# 330 x 200 px panel.
FRONTIER_LABEL_SPAN = (0.12, 0.08)
# plotly clips marker text at the plot's edges ("now" beside a point at the left edge read "ow",
# "16384" above the highest point lost its top). A label runs away from the nearer side: left of
# a point in the right half of the log-TTFT span, right of one in the left half; below a point in
# the top share of the ITL range (which starts at 0), above the others. Half the panel (170 px at
# 1,280 px) holds the longest label, "4096-16384 (now)" (about 110 px).
FRONTIER_LEFT_LABELS = 0.5
FRONTIER_LABELS_BELOW = 0.15
# The clients and length spreads the notebook offers, by name, with the words its menus show.
CLIENTS = {
    "open": "open loop (Poisson at the rate)",
    "closed": "closed loop (max concurrency)",
    "burst": "burst (all at t = 0)",
}
SPREADS = {
    "fixed": "fixed",
    "uniform": "uniform ± spread",
    "lognormal": "lognormal with a spread",
}
# vLLM's KV block (vllm/platforms/cuda.py, block_size 16; see sim.versions): the prefix cache
# serves repeated prompts in whole blocks, as `itlkit simulate --repeat-share` assumes.
BLOCK_SIZE_TOKENS = 16
FINE_BUCKETS_SECONDS = fine_buckets_seconds(low_seconds=2e-3, high_seconds=2.0, per_decade=40)
_FAST, _SLOW, _ARRIVAL = "#4C72B0", "#C44E52", "#55A868"


@dataclass(frozen=True)
class Client:
    """Who sends the requests, and when (`kind`, one of CLIENTS).

    "open": Poisson arrivals at the rate (`synthetic_workload`); "closed": the same arrivals
    held back by `max_concurrency` slots, each next request sent when one in flight finishes
    (`vllm bench serve --max-concurrency`); "burst": `burst_requests` requests all at t = 0
    (`bench_workload` at `--request-rate inf`).
    """

    kind: str = "open"
    max_concurrency: int = 16
    burst_requests: int = 100

    def __post_init__(self) -> None:
        if self.kind not in CLIENTS:
            raise UnknownNameError(f"unknown client {self.kind!r}; known: {', '.join(CLIENTS)}")


@dataclass(frozen=True)
class Spread:
    """How request lengths vary around the chosen length L (`kind`, one of SPREADS).

    "fixed": every request L; "uniform": from L(1 - share) to L(1 + share), as `vllm bench
    serve --dataset-name random` with `--random-range-ratio share`; "lognormal": mean L and
    log-space spread sigma = share (about share x L standard deviation while share is small).
    """

    kind: str = "fixed"
    share: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in SPREADS:
            raise UnknownNameError(f"unknown spread {self.kind!r}; known: {', '.join(SPREADS)}")

    def lengths(self, tokens: int, *, output: bool = False) -> Lengths:
        """The distribution of prompt (or `output`) lengths around `tokens`."""
        if self.kind == "uniform":
            if output:
                return vllm_random_output_lengths(output_len=tokens, range_ratio=self.share)
            return vllm_random_prompt_lengths(input_len=tokens, range_ratio=self.share)
        if self.kind == "lognormal":
            return LogNormal.from_mean(float(tokens), float(self.share))
        return Fixed(int(tokens))


@dataclass(frozen=True)
class FrontierPoint:
    """TTFT p99 and ITL p99 of the same traffic at one token budget."""

    max_num_batched_tokens: int
    ttft_p99_seconds: float
    itl_p99_seconds: float


@dataclass(frozen=True, eq=False)
class SchedulerView:
    """One simulated setting, its frontier across token budgets, and the floor to compare with."""

    deployment: Deployment
    config: SchedulerConfig
    rate_per_second: float
    window_seconds: float
    result: SimulationResult  # a closed loop's: its workload's arrivals are the send times
    frontier: tuple[FrontierPoint, ...]
    mean_running: float
    mean_context_tokens: float
    floor_seconds: float
    timeline_start_seconds: float
    timeline_seconds: float
    efficiency: float = 1.0  # the step function's (a calibration's; 1 = the roofline as is)
    calibration: str = ""  # the name of the calibration in force, if any
    client: Client = Client()
    spread: Spread = Spread()
    repeat_share: float = 0.0
    workload: Workload | None = None  # what the client wanted to send (None: the result's)
    speculation: Speculation | None = None  # speculative decoding (None: off)


def scheduler_workload(
    *,
    rate_per_second: float,
    prompt_tokens: int,
    output_tokens: int,
    window_seconds: float,
    seed: int = 0,
    client: Client = Client(),
    spread: Spread = Spread(),
    repeat_share: float = 0.0,
    prefix_cache_blocks: int = 1,
) -> Workload:
    """The notebook's traffic over the window, built as `itlkit simulate` builds it: Poisson
    arrivals at the rate (held back by a closed loop's slots), or a burst at t = 0; lengths
    drawn around the chosen ones; a `repeat_share` of requests resending an earlier prompt,
    served by a prefix cache of `prefix_cache_blocks` blocks."""
    prompt = spread.lengths(prompt_tokens)
    output = spread.lengths(output_tokens, output=True)
    if client.kind == "burst":
        workload = bench_workload(
            num_prompts=client.burst_requests,
            prompt_tokens=prompt,
            output_tokens=output,
            seed=seed,
        )
    else:
        workload = synthetic_workload(
            duration_seconds=window_seconds,
            rate_per_second=rate_per_second,
            prompt_tokens=prompt,
            output_tokens=output,
            max_concurrency=client.max_concurrency if client.kind == "closed" else None,
            seed=seed,
        )
    if not repeat_share or not workload.num_requests:
        return workload
    # The repeats draw from their own stream, so that they do not echo the arrivals' draws.
    return repeat_prompts(workload, share=repeat_share, block_size=BLOCK_SIZE_TOKENS,
                          capacity_blocks=max(prefix_cache_blocks, 1),
                          seed=np.random.default_rng((seed, 1)))  # fmt: skip


def run_window(workload: Workload, *, deployment: Deployment, config: SchedulerConfig,
               window_seconds: float, efficiency: float = 1.0,
               speculation: Speculation | None = None) -> SimulationResult:  # fmt: skip
    """One simulated window of the notebook's traffic, with speculative decoding or without."""
    return simulate_deployment(
        workload, deployment=deployment, config=config, efficiency=efficiency,
        until_seconds=window_seconds, speculation=speculation, kv_tokens=None,
    )  # fmt: skip


def frontier_points(
    workload: Workload,
    *,
    deployment: Deployment,
    config: SchedulerConfig,
    window_seconds: float,
    budgets=FRONTIER_BUDGETS,
    known: dict[int, FrontierPoint] | None = None,
    efficiency: float = 1.0,
    speculation: Speculation | None = None,
) -> tuple[FrontierPoint, ...]:
    """Simulate the same traffic at each token budget: the TTFT p99 / ITL p99 trade.

    Points in `known` (by budget; e.g. the run already done for the current setting) are reused.
    """
    points = []
    for budget in budgets:
        if budget < config.max_num_seqs:
            continue
        if known and budget in known:
            points.append(known[budget])
            continue
        run = run_window(workload, deployment=deployment,
                         config=replace(config, max_num_batched_tokens=int(budget)),
                         window_seconds=window_seconds, efficiency=efficiency,
                         speculation=speculation)  # fmt: skip
        summary = run.summary()
        points.append(FrontierPoint(int(budget), summary.ttft_p99_seconds, summary.itl_p99_seconds))
    return tuple(points)


def scheduler_view(
    deployment: Deployment,
    *,
    rate_per_second: float,
    prompt_tokens: int,
    output_tokens: int,
    config: SchedulerConfig,
    window_seconds: float = 120.0,
    seed: int = 0,
    frontier: tuple[FrontierPoint, ...] | None = None,
    timeline_seconds: float = 15.0,
    efficiency: float = 1.0,
    calibration: str = "",
    client: Client = Client(),
    spread: Spread = Spread(),
    repeat_share: float = 0.0,
    speculation: Speculation | None = None,
) -> SchedulerView:
    """Simulate one setting over a window of traffic (`scheduler_workload`), and its frontier
    unless given; with `speculation`, decoding in verification steps.

    `frontier=()` leaves the frontier empty, to be added later with `with_frontier`. A
    calibration's host and all-reduce terms travel in `deployment`, its efficiency here.
    """
    capacity = kv_capacity_tokens(deployment)
    workload = scheduler_workload(
        rate_per_second=rate_per_second,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        window_seconds=window_seconds,
        seed=seed,
        client=client,
        spread=spread,
        repeat_share=repeat_share,
        prefix_cache_blocks=capacity // BLOCK_SIZE_TOKENS,
    )
    result = run_window(workload, deployment=deployment, config=config,
                        window_seconds=window_seconds, efficiency=efficiency,
                        speculation=speculation)  # fmt: skip
    durations = result.step_duration_seconds
    decoding = result.step_itl_observations
    busy = durations.sum()
    mean_running = float(np.dot(result.step_running, durations) / busy) if busy else 0.0
    # Mean context the decodes read, from each step's size: the floor for a typical batch.
    batch = max(round(float(np.dot(decoding, durations) / busy)) if busy else 1, 1)
    context = _mean_context_tokens(workload, prompt_tokens, output_tokens)
    floor = float(decode_step(deployment, batch_size=batch, context_tokens=context).floor_seconds)
    # A burst happens at t = 0: the timeline shows its start; other traffic, the middle.
    start = 0.0 if client.kind == "burst" else window_seconds / 2
    start = min(max(start, 0.0), max(window_seconds - timeline_seconds, 0.0))
    view = SchedulerView(
        deployment=deployment,
        config=config,
        rate_per_second=float(rate_per_second),
        window_seconds=float(window_seconds),
        result=result,
        frontier=() if frontier is None else frontier,
        mean_running=mean_running,
        mean_context_tokens=context,
        floor_seconds=floor,
        timeline_start_seconds=start,
        timeline_seconds=float(timeline_seconds),
        efficiency=float(efficiency),
        calibration=calibration,
        client=client,
        spread=spread,
        repeat_share=float(repeat_share),
        workload=workload,
        speculation=speculation,
    )
    return with_frontier(view) if frontier is None else view


def _mean_context_tokens(workload: Workload, prompt_tokens: int, output_tokens: int) -> float:
    """A decode's context halfway through its output, averaged over the requests drawn."""
    if not workload.num_requests:
        return float(prompt_tokens + output_tokens / 2)
    return float(workload.prompt_tokens.mean() + workload.output_tokens.mean() / 2)


def with_frontier(view: SchedulerView) -> SchedulerView:
    """The view with its frontier: the same traffic at every budget (the current run reused).

    The same traffic is what the client wanted to send: a closed loop sends again as each
    budget's finishes free its slots."""
    summary = view.result.summary()
    current = FrontierPoint(
        view.config.max_num_batched_tokens, summary.ttft_p99_seconds, summary.itl_p99_seconds
    )
    frontier = frontier_points(
        view.result.workload if view.workload is None else view.workload,
        deployment=view.deployment,
        config=view.config,
        window_seconds=view.window_seconds,
        known={current.max_num_batched_tokens: current},
        efficiency=view.efficiency,
        speculation=view.speculation,
    )
    return replace(view, frontier=frontier)


def waiting_at_end(view: SchedulerView) -> int:
    """Requests that arrived but had not started when the window ended (in flight - running)."""
    running = int(view.result.step_running[-1]) if view.result.step_running.size else 0
    return max(view.result.summary().requests_in_flight - running, 0)


def overloaded(view: SchedulerView) -> bool:
    """More than OVERLOAD_QUEUE_SECONDS of arrivals still waiting at the end: the queue grows.

    Only an open loop's queue can grow so: a closed loop holds at most its slots in flight, and
    a burst sends once."""
    if view.client.kind != "open":
        return False
    return waiting_at_end(view) > view.rate_per_second * OVERLOAD_QUEUE_SECONDS


def overload_text(view: SchedulerView) -> str:
    """The overload verdict with its numbers, or "" when the engine keeps up."""
    if not overloaded(view):
        return ""
    s = view.result.summary()
    return (
        f"OVERLOADED: arrivals exceed what the engine can serve · TTFT p99 "
        f"{s.ttft_p99_seconds:.0f} s · {waiting_at_end(view)} requests waiting, "
        f"{s.requests_in_flight} in flight at the end"
    )


def client_words(view: SchedulerView) -> str:
    """The client in a few words, for the title: "3 req/s", "3 req/s, at most 4 in flight",
    "a burst of 100 at t = 0"."""
    c = view.client
    if c.kind == "burst":
        return f"a burst of {c.burst_requests} at t = 0"
    words = f"{view.rate_per_second:g} req/s"
    return words + (f", at most {c.max_concurrency} in flight" if c.kind == "closed" else "")


def client_text(view: SchedulerView) -> str:
    """Which client ran, what it sent, the lengths and the repeats (the status table's row)."""
    c, w = view.client, view.result.workload
    if c.kind == "burst":
        text = f"burst: {w.num_requests} requests sent at t = 0"
    elif c.kind == "closed":
        sent = int(view.result.arrived.sum())
        text = (
            f"closed loop, at most {c.max_concurrency} in flight: sent {sent} of "
            f"{w.num_requests} (wanted at {view.rate_per_second:g} req/s)"
        )
    else:
        text = f"open loop: {w.num_requests} requests, Poisson at {view.rate_per_second:g} req/s"
    s = view.spread
    spread = {"fixed": "fixed lengths", "uniform": f"lengths uniform ± {s.share:.0%}",
              "lognormal": f"lognormal lengths (sigma {s.share:g})"}[s.kind]  # fmt: skip
    text += f" · {spread}"
    if view.repeat_share:
        cached = int(np.count_nonzero(w.cached_prompt_tokens))
        text += (
            f" · {view.repeat_share:.0%} resend an earlier prompt ({cached} from the prefix cache)"
        )
    return text


def figure_title(view: SchedulerView) -> str:
    """Headline: ITL p50/p99, TTFT p99, running, floor (the overload verdict first when it
    applies); the setting in words."""
    s = view.result.summary()
    c = view.config
    mode = "chunked prefill" if c.enable_chunked_prefill else "chunked prefill OFF"
    if c.prefill_only_steps:
        mode += ", prefill batches alone (decodes wait)"
    if c.disaggregated:
        mode += ", disaggregated"
    ms = MILLISECOND
    head = (
        f"ITL p50 {s.itl_p50_seconds / ms:.1f} ms, p99 {s.itl_p99_seconds / ms:.1f} ms · "
        f"TTFT p99 {s.ttft_p99_seconds:.2f} s · {view.mean_running:.0f} running on average · "
        f"floor at that batch {view.floor_seconds / ms:.1f} ms"
    )
    setting = (
        f"{view.deployment.label}, {client_words(view)} · budget "
        f"{c.max_num_batched_tokens} tokens/step, max_num_seqs {c.max_num_seqs}, {mode} · "
        f"{s.preemptions} preemptions, {s.requests_in_flight} requests in flight at the end"
        + (f" · calibration {view.calibration}" if view.calibration else "")
    )
    verdict = overload_text(view)
    verdict = f"<b>{wrap(verdict)}</b><br>" if verdict else ""
    return verdict + wrap(head) + "<br>" + wrap(setting, chars=110, small=True)


def _label_places(x_seconds, y_seconds) -> list[str]:
    """Where each point's label goes so that the plot does not clip it (FRONTIER_LEFT_LABELS,
    FRONTIER_LABELS_BELOW): the spans are those of all the points the panel shows."""
    x = np.log10(np.maximum(np.asarray(x_seconds, dtype=float), 1e-9))
    y = np.asarray(y_seconds, dtype=float)
    x_low, x_span = float(x.min()), max(float(np.ptp(x)), 1e-9)
    y_top = max(float(y.max()), 1e-12)
    places = []
    for a, b in zip(x.tolist(), y.tolist(), strict=True):
        up = "bottom" if b > (1 - FRONTIER_LABELS_BELOW) * y_top else "top"
        side = "left" if a - x_low > FRONTIER_LEFT_LABELS * x_span else "right"
        places.append(f"{up} {side}")
    return places


def _frontier_text(points, *, current_budget: int | None = None) -> list[str]:
    """Each point's label: one per group of points whose labels would print on each other
    ("8192-16384", judged on the plotted scales: log10 TTFT across, ITL up), blanks for the
    rest; the group holding `current_budget` says "(now)" (the star sits on that point)."""
    if not points:
        return []
    x = np.log10([max(p.ttft_p99_seconds, 1e-9) for p in points])
    y = np.array([p.itl_p99_seconds for p in points], dtype=float)
    x_span, y_span = max(float(np.ptp(x)), 1e-9), max(float(np.ptp(y)), 1e-12)
    labels, anchor, now = [], None, None
    for i, p in enumerate(points):
        near = anchor is not None and (
            abs(x[i] - x[anchor]) <= FRONTIER_LABEL_SPAN[0] * x_span
            and abs(y[i] - y[anchor]) <= FRONTIER_LABEL_SPAN[1] * y_span
        )
        if near:
            first = points[anchor].max_num_batched_tokens
            labels[anchor] = f"{first}-{p.max_num_batched_tokens}"
            labels.append("")
        else:
            anchor = i
            labels.append(str(p.max_num_batched_tokens))
        if p.max_num_batched_tokens == current_budget:
            now = anchor
    if now is not None:
        labels[now] += " (now)"
    return labels


def _steps(histogram, *, first_lower_seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """Bucket edges and shares for an `hv` step line (the +Inf bucket and a 0 edge left out)."""
    finite = np.isfinite(histogram.upper_bounds)
    upper = histogram.upper_bounds[finite]
    lower = max(min(first_lower_seconds, upper[0] / 2), histogram.lower_bounds[0])
    counts = histogram.bucket_counts[finite]
    share = counts / histogram.count if histogram.count else np.zeros(counts.size)
    return np.concatenate([[lower], upper]), np.append(share, share[-1])


def trace_data(view: SchedulerView) -> list[dict]:
    """Data of every trace, in figure order; the widget copies these into its FigureWidget."""
    r = view.result
    ms = MILLISECOND
    vllm = r.itl_histogram()
    fine = r.itl_histogram(FINE_BUCKETS_SECONDS)
    vllm_x, vllm_y = _steps(vllm, first_lower_seconds=FINE_BUCKETS_SECONDS[0])
    fine_x, fine_y = _steps(fine, first_lower_seconds=FINE_BUCKETS_SECONDS[0])
    top = max(float(np.max(fine_y, initial=0.0)), 1e-3)

    begin, end = view.timeline_start_seconds, view.timeline_start_seconds + view.timeline_seconds
    in_window = (r.step_start_seconds >= begin) & (r.step_start_seconds < end)
    arrivals = r.workload.arrival_seconds
    arrivals = arrivals[(arrivals >= begin) & (arrivals < end)]

    points = view.frontier
    budget = view.config.max_num_batched_tokens
    labels = _frontier_text(points, current_budget=budget)
    summary = r.summary()
    now_x, now_y = summary.ttft_p99_seconds, summary.itl_p99_seconds
    places = _label_places([*(p.ttft_p99_seconds for p in points), now_x],
                           [*(p.itl_p99_seconds for p in points), now_y])  # fmt: skip
    on_frontier = any(p.max_num_batched_tokens == budget for p in points)
    chunk_matters = view.config.enable_chunked_prefill and not view.config.disaggregated
    return [
        # ITL share per bucket, drawn as steps as wide as each bucket: vLLM's, then fine.
        {"x": vllm_x / ms, "y": vllm_y},
        {"x": fine_x / ms, "y": fine_y},
        {"x": [view.floor_seconds / ms] * 2, "y": [0, top]},
        # Step durations over a slice of the window, and the arrivals in it.
        {
            "x": r.step_start_seconds[in_window],
            "y": r.step_duration_seconds[in_window] / ms,
        },
        {"x": arrivals, "y": np.zeros(arrivals.size)},
        # The frontier across budgets, and the current setting.
        {
            "x": [p.ttft_p99_seconds for p in points],
            "y": [p.itl_p99_seconds / ms for p in points],
            "text": labels,
            "textposition": places[:-1],
            "customdata": [p.max_num_batched_tokens for p in points],
            # without chunked prefill, or with prefill elsewhere, the budget barely moves the
            # run: the points are noise around one place, and a line through them would zigzag
            "mode": "lines+markers+text" if chunk_matters else "markers+text",
        },
        # the star: its label is the frontier's when the frontier holds the current budget
        {
            "x": [now_x],
            "y": [now_y / ms],
            "text": ["" if on_frontier else f"{budget} (now)"],
            "textposition": places[-1:],
        },
    ]


_SUBPLOT_TITLES = (
    "ITL histogram, vLLM buckets",
    "ITL histogram, fine buckets",
    "step durations (arrivals marked)",
    "TTFT p99 vs ITL p99 across token budgets",
)
# Panel (row, col) and style of every trace, in `trace_data` order.
_TRACE_STYLES = (
    (1, 1, dict(name="ITL share (vLLM bucket)", mode="lines", fill="tozeroy",
                line=dict(color=_FAST, shape="hv"))),
    (1, 2, dict(name="ITL share (fine bucket)", mode="lines", line=dict(color=_FAST, shape="hv"))),
    (1, 2, dict(name="bandwidth floor", mode="lines", line=dict(color="black", dash="dash"))),
    (2, 1, dict(name="step duration", mode="lines", line=dict(color=_SLOW, width=1))),
    (2, 1, dict(name="arrival", mode="markers",
                marker=dict(symbol="triangle-up", size=9, color=_ARRIVAL))),
    (2, 2, dict(name="token budget (tokens/step)", mode="lines+markers+text",
                line=dict(color="gray"))),
    (2, 2, dict(name="current setting", mode="markers+text",
                marker=dict(size=16, color=_SLOW, symbol="star"))),
)  # fmt: skip


def _label_axes(fig: go.Figure) -> None:
    """Axis titles (with units), scales and ranges of the four panels."""
    itl_range_ms = [np.log10(FINE_BUCKETS_SECONDS[0] / MILLISECOND), np.log10(5000)]
    fig.update_xaxes(type="log", range=itl_range_ms, title_text="ITL (ms), log scale", row=1, col=1)
    fig.update_yaxes(title_text="share of ITL observations", tickformat=".0%", rangemode="tozero",
                     row=1, col=1)  # fmt: skip
    fig.update_xaxes(type="log", range=itl_range_ms, title_text="ITL (ms), log scale", row=1, col=2)
    fig.update_yaxes(title_text="share of ITL observations", tickformat=".1%", rangemode="tozero",
                     row=1, col=2)  # fmt: skip
    fig.update_xaxes(title_text="simulated time (s)", row=2, col=1)
    fig.update_yaxes(title_text="step duration (ms)", rangemode="tozero", row=2, col=1)
    fig.update_xaxes(type="log", title_text="TTFT p99 (s), log scale", row=2, col=2)
    fig.update_yaxes(title_text="ITL p99 (ms)", rangemode="tozero", row=2, col=2)


def scheduler_figure(
    view: SchedulerView, *, width: int | None = None, height: int = 760
) -> go.Figure:
    """The whole notebook-02 figure: two ITL histograms, the step timeline, the frontier."""
    title = figure_title(view)
    fig = make_subplots(
        rows=2,
        cols=2,
        subplot_titles=_SUBPLOT_TITLES,
        horizontal_spacing=0.09,
        vertical_spacing=0.16,
    )
    for (row, col, style), data in zip(_TRACE_STYLES, trace_data(view), strict=True):
        fig.add_trace(go.Scatter(**{**style, **data}), row=row, col=col)
    fig.update_layout(
        title=top_title(title),
        margin=dict(l=60, r=20, t=title_margin_px(title), b=50),
        legend=FOOT_LEGEND,
    )
    _label_axes(fig)
    return responsive(fig, width=width, height=height)
