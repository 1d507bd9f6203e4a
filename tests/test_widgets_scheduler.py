"""Notebook 02's wiring, driven from Python (move a control, read the figure) and in a browser.

Expected numbers come from the worked example (shared/spec/worked-example.txt): a step carrying a
2,048-token chunk beside the running decodes takes ~79 ms, one with a 512-token chunk ~29 ms.
"""

import numpy as np
import plotly.graph_objects as go
import pytest
from _lab import KERNEL_READY, TITLE_CONTAINS

from itlkit.physics.roofline import Deployment
from itlkit.plots.scheduler import scheduler_figure, scheduler_view
from itlkit.sim.scheduler import SchedulerConfig
from itlkit.widgets.scheduler import SchedulerExplorer


@pytest.fixture(scope="module")
def explorer():
    return SchedulerExplorer(window_seconds=60)


def _trace(fig, name):
    return next(t for t in fig.data if t.name == name)


def test_initial_figure_shows_the_slow_mode_near_79ms(explorer):
    fig = explorer.figure
    assert isinstance(fig, go.FigureWidget)
    steps = np.asarray(_trace(fig, "step duration").y)  # ms
    # A step with a ~2,048-token slice: the slice's GEMMs (68.6 ms in the worked example) plus
    # the KV read of fewer than 64 streams at 4K (10.3 ms), so between 68.6 and 79 ms.
    assert 68.6 < steps.max() < 79.5
    fine = _trace(fig, "ITL share (fine bucket)")
    x, y = np.asarray(fine.x), np.asarray(fine.y)
    slow = (x >= 60) & (x < 100)
    assert y[slow].sum() > 0.02  # a second hump, several times the floor
    assert "ITL p50" in fig.layout.title.text and "TTFT p99" in fig.layout.title.text


def test_every_axis_and_slider_label_carries_a_unit(explorer):
    fig = explorer.figure
    titles = [fig.layout[a].title.text for a in fig.layout if a.startswith(("xaxis", "yaxis"))]
    assert len(titles) == 8
    for title in titles:
        assert "(" in title or "share" in title, title
    for control in explorer.controls:
        if hasattr(control, "continuous_update"):
            assert "(" in control.description, control.description
            assert control.continuous_update is False


def test_budget_slider_moves_the_slow_mode_and_the_star(explorer):
    before = explorer.figure.layout.title.text
    frontier = _trace(explorer.figure, "token budget (tokens/step)")
    explorer.budget.value = 512
    fig = explorer.figure
    assert fig.layout.title.text != before
    assert "budget 512 tokens/step" in fig.layout.title.text
    steps = np.asarray(_trace(fig, "step duration").y)
    assert steps.max() < 0.5 * 79
    star = _trace(fig, "current setting")
    point = list(frontier.customdata).index(512)  # its label reads "512 (now)"
    assert star.x[0] == pytest.approx(frontier.x[point])
    assert star.y[0] == pytest.approx(frontier.y[point])
    explorer.budget.value = 2048


def test_new_traffic_redraws_the_run_then_its_frontier(explorer):
    frontier_before = list(_trace(explorer.figure, "token budget (tokens/step)").y)
    explorer.rate.value = 2.0
    fig = explorer.figure
    assert "2 req/s" in fig.layout.title.text
    frontier = _trace(fig, "token budget (tokens/step)")
    assert list(frontier.y) != frontier_before and len(frontier.y) == 7
    star = _trace(fig, "current setting")
    point = list(frontier.customdata).index(2048)
    assert (star.x[0], star.y[0]) == (frontier.x[point], frontier.y[point])
    explorer.rate.value = 3.0


def test_disaggregation_removes_the_slow_steps(explorer):
    explorer.disaggregated.value = True
    steps = np.asarray(_trace(explorer.figure, "step duration").y)
    assert steps.max() < 25  # ms: decode steps only, near the floor
    explorer.disaggregated.value = False


def test_a_setting_vllm_rejects_shows_an_error_and_keeps_the_plot(explorer):
    data_before = np.asarray(_trace(explorer.figure, "step duration").y)
    explorer.max_num_seqs.value = 1024
    explorer.budget.value = 256
    assert "Cannot run" in explorer.status.value
    np.testing.assert_array_equal(_trace(explorer.figure, "step duration").y, data_before)
    explorer.budget.value = 2048
    explorer.max_num_seqs.value = 256
    assert "Cannot run" not in explorer.status.value


def test_figure_builder_is_pure_and_complete():
    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    view = scheduler_view(
        dep,
        rate_per_second=2,
        prompt_tokens=2048,
        output_tokens=128,
        config=SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=128),
        window_seconds=30,
    )
    fig = scheduler_figure(view)
    assert len(fig.data) == 7
    budgets = list(_trace(fig, "token budget (tokens/step)").customdata)
    assert budgets == [256, 512, 1024, 2048, 4096, 8192, 16384]  # every stop of the slider


# ---- in a real JupyterLab (headless Chromium; see tests/test_browser.py for the recipe) --------


@pytest.mark.browser
def test_budget_slider_redraws_notebook_02_in_jupyterlab(
    page, lab_server, page_errors, artifacts_dir
):
    try:
        page.goto(lab_server.lab_url("02_chunked_prefill.ipynb"))
        page.wait_for_function(
            "() => window.jupyterapp && document.querySelector('.jp-Notebook .jp-Cell')",
            timeout=60_000,
        )
        page.wait_for_function(KERNEL_READY, timeout=90_000)
        page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
        page.wait_for_function(TITLE_CONTAINS, arg="budget 2048 tokens/step", timeout=90_000)
        page.evaluate("() => { window.jupyterapp.shell.collapseLeft(); }")
        page.locator(".itlkit-budget .noUi-handle").first.focus()
        page.keyboard.press("ArrowLeft")
        page.wait_for_function(TITLE_CONTAINS, arg="budget 1024 tokens/step", timeout=30_000)
    finally:
        page.screenshot(path=artifacts_dir / "jupyterlab_02_chunked_prefill.png")
    assert not page_errors, f"uncaught errors in the page: {page_errors}"


def test_moving_the_rate_survives_the_browsers_echo(explorer):
    """Issue 12 item 9: every rate step raised a ValueError in plotly's widget protocol."""
    from _frontend import echo_trace_deltas

    echo_trace_deltas(explorer.figure)
    explorer.rate.value = 3.25
    echo_trace_deltas(explorer.figure)  # raised "truth value of an array ... is ambiguous"
    explorer.rate.value = 3.0
    echo_trace_deltas(explorer.figure)


def test_overload_is_said_with_its_numbers():
    """Issue 12: at 6 requests/s the queue grows without bound (TTFT p99 ~ a minute) and
    nothing said so."""
    from itlkit.plots.scheduler import figure_title, overloaded, waiting_at_end
    from itlkit.widgets.scheduler import status_html

    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    config = SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=256)
    common = dict(prompt_tokens=4096, output_tokens=768, config=config, window_seconds=120)
    calm = scheduler_view(dep, rate_per_second=3, frontier=(), **common)
    busy = scheduler_view(dep, rate_per_second=6, frontier=(), **common)
    assert not overloaded(calm) and "OVERLOADED" not in figure_title(calm)
    assert overloaded(busy) and waiting_at_end(busy) > 60
    title = figure_title(busy)
    assert "OVERLOADED: arrivals exceed what the engine can serve" in title
    assert f"{waiting_at_end(busy)} requests waiting" in title
    ttft = busy.result.summary().ttft_p99_seconds
    assert ttft > 20 and f"TTFT p99 {ttft:.0f} s" in title
    assert "OVERLOADED" in status_html(busy) and "OVERLOADED" not in status_html(calm)


@pytest.mark.parametrize("chunked, disaggregated", [(False, False), (True, True)])
def test_frontier_labels_never_stack_when_the_budget_barely_matters(chunked, disaggregated):
    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    config = SchedulerConfig(
        max_num_batched_tokens=2048,
        max_num_seqs=256,
        enable_chunked_prefill=chunked,
        disaggregated=disaggregated,
    )
    view = scheduler_view(dep, rate_per_second=3, prompt_tokens=4096, output_tokens=768,
                          config=config, window_seconds=60)  # fmt: skip
    frontier = _trace(scheduler_figure(view), "token budget (tokens/step)")
    assert len(frontier.x) == 7
    assert "lines" not in frontier.mode  # no zigzag line through noise
    _assert_labels_apart(frontier)


def _assert_labels_apart(frontier) -> None:
    """Labelled points are apart, on the plotted scales, by more than a label on one axis:
    a 5-character label is about 40 x 16 px of the 330 x 200 px panel, 12% of its log-TTFT
    span across and 8% of its ITL span up."""
    x, y = np.log10(frontier.x), np.array(frontier.y)
    x_span, y_span = np.ptp(x), np.ptp(y)
    shown = [(a, b) for a, b, t in zip(x, y, frontier.text, strict=True) if t]
    for i, (x1, y1) in enumerate(shown):
        for x2, y2 in shown[i + 1 :]:
            assert abs(x1 - x2) > 0.12 * x_span or abs(y1 - y2) > 0.08 * y_span
    # a label right of its point ends before the rightmost point (else it runs off the plot)
    for a, text, where in zip(x, frontier.text, frontier.textposition, strict=True):
        assert not text or where.endswith("left") or a + 0.12 * x_span <= x.max()


def test_frontier_labels_of_points_close_on_the_plot_merge_into_one():
    """At 3.25 req/s (notebook 02 at 1,280 px) the 8,192 and 16,384 budgets land ~1% of the
    panel apart, and their labels printed over each other ("81923284")."""
    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    config = SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=256)
    view = scheduler_view(dep, rate_per_second=3.25, prompt_tokens=4096, output_tokens=768,
                          config=config, window_seconds=120)  # fmt: skip
    frontier = _trace(scheduler_figure(view), "token budget (tokens/step)")
    _assert_labels_apart(frontier)
    assert "8192-16384" in frontier.text


def test_a_redraw_says_recomputing_while_it_runs(explorer):
    seen = []
    explorer.busy.observe(lambda change: seen.append(change["new"]), names="value")
    explorer.rate.value = 3.5
    explorer.rate.value = 3.0
    assert "recomputing" in seen[0] and seen[-1] == "" and explorer.busy.value == ""


def test_the_calibrated_step_model_slows_every_step_by_at_least_one_over_its_efficiency():
    from itlkit.cli._runs import load_calibration

    ex = SchedulerExplorer(window_seconds=30, rate_per_second=2.0)
    raw = ex.result.summary().itl_p50_seconds
    ex.step_model.value = "bundled"
    c = load_calibration("bundled").for_gpu("h100-sxm")  # the explorer's GPU's constants
    calibrated = ex.result.summary().itl_p50_seconds
    # a memory-bound decode step of the engine model: the weights less the gathered input
    # embedding (128,256 x 4,096 x 2 B at 3.35 TB/s), and the KV, / efficiency, plus host time;
    # batches only grow when steps slow down
    embedding_seconds = 128256 * 4096 * 2 / 3.35e12
    assert calibrated >= (raw - embedding_seconds) / c.efficiency
    # the title wraps long lines (plots._style.wrap): read it as one line
    title = ex.figure.layout.title.text.replace("</sub><br><sub>", " ").replace("<br>", " ")
    assert f"calibration {c.name}" in title
    ex.step_model.value = "none"
    assert ex.result.summary().itl_p50_seconds == raw
    assert "calibration" not in ex.figure.layout.title.text


# ---- the simulator's clients, spread lengths and repeated prompts ------------------------------
# Each control is moved on a fresh explorer (60 s at 3 requests/s of 4,096 + 768 tokens, about
# 185 requests) and checked on the workload the simulation ran.


def _shown(control) -> bool:
    return control.layout.display != "none"


def test_a_closed_loop_never_runs_more_requests_than_its_slots():
    ex = SchedulerExplorer(window_seconds=60)
    assert ex.result.step_running.max() > 4  # the open loop runs dozens at once
    assert not _shown(ex.max_concurrency) and _shown(ex.rate)
    ex.client.value = "closed"
    assert _shown(ex.max_concurrency) and _shown(ex.rate)
    ex.max_concurrency.value = 4
    r = ex.result
    assert r.workload.max_concurrency == 4
    # A request takes ~768 decode steps (> 4 s); the client wants 3/s: every slot stays taken.
    assert r.step_running.max() == 4
    assert "at most 4 in flight" in ex.figure.layout.title.text
    sent = int(r.arrived.sum())
    assert sent < 0.5 * r.workload.num_requests  # the slots hold the client back
    assert f"client: closed loop, at most 4 in flight: sent {sent} of" in ex.status.value


def test_a_closed_loops_arrivals_are_its_send_times():
    """With every slot taken, the client sends each next request when one finishes: every
    arrival marked in the timeline (the middle of the window) is a finish time."""
    ex = SchedulerExplorer(window_seconds=60, client="closed", max_concurrency=4)
    r = ex.result
    marked = np.asarray(_trace(ex.figure, "arrival").x)
    assert marked.size >= 4
    finishes = r.finish_seconds[~np.isnan(r.finish_seconds)]
    assert np.isin(marked, finishes).all()
    # the Poisson times the client wanted are other times (3/s: ~45 in 15 s, not ~12)
    ex.client.value = "open"
    assert not np.isin(np.asarray(_trace(ex.figure, "arrival").x), finishes).any()


def test_a_burst_sends_the_sliders_requests_at_t_0():
    ex = SchedulerExplorer(window_seconds=60)
    ex.client.value = "burst"
    assert _shown(ex.burst_requests) and not _shown(ex.rate) and not _shown(ex.max_concurrency)
    ex.burst_requests.value = 50
    w = ex.result.workload
    assert w.num_requests == 50 and not w.arrival_seconds.any()
    marked = np.asarray(_trace(ex.figure, "arrival").x)
    assert marked.size == 50 and not marked.any()  # the timeline starts at the burst
    assert "a burst of 50 at t = 0" in ex.figure.layout.title.text
    assert "burst: 50 requests sent at t = 0" in ex.status.value
    assert ex.result.step_running.max() == 50


def test_a_uniform_spread_draws_lengths_within_it():
    ex = SchedulerExplorer(window_seconds=60)
    assert not _shown(ex.spread_percent)
    ex.spread.value = "uniform"
    assert _shown(ex.spread_percent)
    ex.spread_percent.value = 50
    w = ex.result.workload
    prompt, output = 4096, 768
    assert w.prompt_tokens.min() >= 0.5 * prompt and w.prompt_tokens.max() <= 1.5 * prompt
    assert w.output_tokens.min() >= 0.5 * output and w.output_tokens.max() <= 1.5 * output
    # ~185 uniform draws reach within 5 % of both ends
    assert w.prompt_tokens.min() < 0.55 * prompt and w.prompt_tokens.max() > 1.45 * prompt
    assert w.output_tokens.min() < 0.55 * output and w.output_tokens.max() > 1.45 * output
    assert "lengths uniform ± 50%" in ex.status.value


def test_a_lognormal_spread_keeps_the_mean_and_spreads_the_lengths():
    ex = SchedulerExplorer(window_seconds=60, spread_percent=50)
    ex.spread.value = "lognormal"
    w = ex.result.workload
    # sigma 0.5: standard deviation sqrt(e^0.25 - 1) = 53 % of the mean; the mean of ~185
    # draws lies within 4 % (one standard error) of 4,096 about two times in three, 15 % here
    assert w.prompt_tokens.mean() == pytest.approx(4096, rel=0.15)
    assert w.output_tokens.mean() == pytest.approx(768, rel=0.15)
    assert w.prompt_tokens.std() > 0.35 * 4096
    assert "lognormal lengths (sigma 0.5)" in ex.status.value


def test_repeated_prompts_are_served_from_the_prefix_cache_at_their_share():
    ex = SchedulerExplorer(window_seconds=60)
    assert not ex.result.workload.cached_prompt_tokens.any()
    ex.repeat_share.value = 0.4
    w = ex.result.workload
    n = w.num_requests
    cached = w.cached_prompt_tokens
    # request k > 0 repeats with probability 0.4 (repeat_prompts): 0.4 (n - 1) / n of them,
    # with a binomial standard deviation of 0.036 at n = 185; the prefix cache (all of the KV
    # cache, ~115 such prompts) keeps nearly every prompt they repeat
    assert np.mean(cached > 0) == pytest.approx(0.4 * (n - 1) / n, abs=0.08)
    assert not (cached % 16).any() and (cached < w.prompt_tokens).all()  # whole 16-token blocks
    assert "40% resend an earlier prompt" in ex.status.value


def test_the_frontier_follows_the_client():
    ex = SchedulerExplorer(window_seconds=60)
    before = list(_trace(ex.figure, "token budget (tokens/step)").y)
    ex.client.value = "closed"
    frontier = _trace(ex.figure, "token budget (tokens/step)")
    assert list(frontier.y) != before and len(frontier.y) == 7
    star = _trace(ex.figure, "current setting")
    point = list(frontier.customdata).index(2048)
    assert (star.x[0], star.y[0]) == (frontier.x[point], frontier.y[point])
    # Every budget's point is the closed loop run afresh at that budget: the client's wanted
    # times held back by that run's finishes, not the send times of the run at 2048 (which
    # moved the ITL p99 of the 256, 512, 1,024 and 16,384 budgets by 0.03-0.2 ms).
    for budget, x, y in zip(frontier.customdata, frontier.x, frontier.y, strict=True):
        config = SchedulerConfig(max_num_batched_tokens=int(budget), max_num_seqs=256)
        alone = scheduler_view(ex.deployment, config=config, window_seconds=60, frontier=(),
                               **ex.traffic()).result.summary()  # fmt: skip
        expected = (alone.ttft_p99_seconds, alone.itl_p99_seconds * 1e3)  # ms
        assert (x, y) == pytest.approx(expected, rel=1e-9), budget  # the same runs
    # and the budget alone reuses it
    ex.budget.value = 1024
    assert list(_trace(ex.figure, "token budget (tokens/step)").y) == list(frontier.y)


@pytest.mark.parametrize(
    "control, value",
    [("max_concurrency", 8), ("spread", "uniform"), ("spread_percent", 20), ("repeat_share", 0.5)],
)
def test_the_frontier_follows_every_traffic_control(control, value):
    ex = SchedulerExplorer(window_seconds=60, client="closed", spread="lognormal")
    before = list(_trace(ex.figure, "token budget (tokens/step)").x)
    getattr(ex, control).value = value
    assert list(_trace(ex.figure, "token budget (tokens/step)").x) != before


def test_a_closed_loop_with_disaggregated_prefill_says_why_it_cannot_run():
    ex = SchedulerExplorer(window_seconds=30, client="closed")
    before = np.asarray(_trace(ex.figure, "step duration").y)
    ex.disaggregated.value = True
    assert "Cannot run" in ex.status.value and "closed-loop client" in ex.status.value
    np.testing.assert_array_equal(_trace(ex.figure, "step duration").y, before)


def test_the_engine_choice_runs_sglangs_prefill_batches_alone():
    # 4,096-token prompts at a 2,048-token budget: SGLang runs a prompt as two prefill batches
    # back to back, alone, before the running streams decode (itlkit/sim/sglang.py cites its
    # scheduler), so a stream decoding when a prompt arrives waits at least both batches; vLLM
    # carries the decodes in each chunk's step instead
    from itlkit.physics.roofline import step_seconds

    e = SchedulerExplorer(window_seconds=60)
    vllm = e.result
    e.engine.value = "sglang"
    sglang = e.result
    assert sglang.config.prefill_only_steps and not vllm.config.prefill_only_steps
    assert not ((sglang.step_prefill_tokens > 0) & (sglang.step_decode_tokens > 0)).any()
    batch = step_seconds(e.deployment, decode_tokens=0, prefill_tokens=2048, kv_tokens=0)
    assert sglang.summary().itl_p99_seconds >= 2 * batch > vllm.summary().itl_p99_seconds
    assert "prefill batches alone" in e.figure.layout.title.text
    e.engine.value = "sglang-mixed"  # --enable-mixed-chunk schedules as vLLM does
    assert e.result.summary().itl_p99_seconds == vllm.summary().itl_p99_seconds


def test_speculation_controls_simulate_verification_steps():
    # Light traffic: steps stay memory-bound, so TPOT falls by about the tokens a step emits
    # (1 + .7 + .49 + .343 = 2.533 with k = 3 at 0.7 a draft), less the EAGLE head's passes.
    e = SchedulerExplorer(window_seconds=60, rate_per_second=0.5, prompt_tokens=512,
                          output_tokens=256)  # fmt: skip
    assert e.spec_acceptance.layout.display == "none" and e.speculation() is None
    plain = e.result.itl_views().mean("request_tpot")
    e.spec_method.value = "ngram"
    e.spec_k.value = 3
    assert e.spec_acceptance.layout.display is None
    assert e.result.token_events is not None
    assert e.speculation().tokens_per_step == pytest.approx(2.533)
    assert plain / e.result.itl_views().mean("request_tpot") == pytest.approx(2.533, rel=0.1)
    assert "tokens a step (speculation)" in e.status.value and "2.53" in e.status.value
    # the frontier is the speculative deployment's too: its budgets were simulated again
    assert e._view.frontier and e._frontier_key[-1] == e.speculation()
    e.spec_method.value = "eagle"  # the head's measured passes cost ~1 ms each
    assert e.result.itl_views().mean("request_tpot") > plain / 2.533 * 1.1
