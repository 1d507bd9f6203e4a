"""Notebook 06's capacity planner driven from Python: the target sliders re-rank without
simulating, the traffic slider sweeps again, a chosen configuration opens as notebook 02's
views, and the plan exports. Prices here are the test's own (relative: an H100-hour is twice an
A100-hour); the figures' numbers come from the sweep the planner holds."""

import pytest

from itlkit.physics.calibration import UNCALIBRATED
from itlkit.plan.frontier import ranked
from itlkit.plan.prices import PriceTable
from itlkit.plan.space import Space
from itlkit.widgets.plan import CapacityPlanner

PRICES = PriceTable({"h100-sxm": 4.0, "a100-80gb-sxm": 2.0, "l40s": 1.0}, {}, "test", "test")


@pytest.fixture
def planner():
    space = Space(gpus=("h100-sxm", "a100-80gb-sxm", "l40s"), tps=(1, 2), replicas=(1, 2))
    lengths = dict(prompt_tokens=1000, output_tokens=200)
    return CapacityPlanner(space, model="llama-3.1-8b", prices=PRICES, calibration=UNCALIBRATED,
                           duration_seconds=30, **lengths)  # fmt: skip


def _trace(fig, name, panel=0):
    return [t for t in fig.data if t.name == name][panel]


def test_the_figure_shows_the_sweep_and_the_cheapest_that_meets(planner):
    best = ranked(planner.results, planner.slo(), "cost_per_hour")[0]
    assert best.candidate.label() in planner.figure.layout.title.text.replace("<br>", " ")
    ringed = _trace(planner.figure, "best")
    assert list(ringed.x) == [best.cost_per_hour]
    target = _trace(planner.figure, "SLO target")
    assert set(target.y) == {50.0}  # ms
    assert planner.chosen.options[0][0].startswith(best.candidate.label())


def test_the_title_names_the_targets_it_judged_by(planner):
    from itlkit.plan.space import Slo
    from itlkit.plots.plan import figure_title

    # the defaults, 50 ms and 1 s; a target moved shows in the title, whichever candidate wins
    title = planner.figure.layout.title.text.replace("<br>", " ")
    assert "meets ITL p99 ≤ 50 ms and TTFT p99 ≤ 1 s:" in title
    planner.itl.value = 45.0
    planner.ttft.value = 2.5
    title = planner.figure.layout.title.text.replace("<br>", " ")
    assert "ITL p99 ≤ 45 ms and TTFT p99 ≤ 2.5 s:" in title
    # a microsecond each: nothing meets them
    none = figure_title(planner.results, Slo(itl_p99_seconds=1e-6, ttft_p99_seconds=1e-6))
    assert none.replace("<br>", " ").startswith(
        "no candidate meets ITL p99 ≤ 0.001 ms and TTFT p99 ≤ 1e-06 s")  # fmt: skip
    # only a TTFT target: only it is named
    assert "meets TTFT p99 ≤ 2.5 s:" in figure_title(planner.results, Slo(ttft_p99_seconds=2.5))


def test_a_tighter_itl_target_reranks_without_simulating(planner):
    held = planner.results
    planner.itl.value = 20.0
    assert planner.results is held  # no new sweep
    assert set(_trace(planner.figure, "SLO target").y) == {20.0}
    meets = [r for r in held if r.meets(planner.slo())]
    assert all(r.outcome.itl_p99_seconds <= 0.020 for r in meets)
    if meets:
        cheapest = min(r.cost_per_hour for r in meets)
        assert list(_trace(planner.figure, "best").x) == [cheapest]


def test_more_traffic_sweeps_again_and_the_plan_exports(planner, tmp_path):
    held = planner.results
    planner.rate.value = 16.0
    assert planner.results is not held
    assert all(r.outcome is None or r.outcome.output_tokens_per_second > 0
               for r in planner.results)  # fmt: skip
    path = planner.export(tmp_path / "plan.md")
    text = path.read_text()
    assert "16 requests/s" in text and "## Frontier: cost against ITL p99" in text
    assert "plan written to" in planner.status.value


def test_choosing_a_configuration_opens_its_notebook_02_views(planner):
    assert len(planner.chosen.options) >= 2  # 50 ms / 1 s: several H100 and A100 layouts meet
    before = planner.detail.layout.title.text
    planner.chosen.value = planner.chosen.options[1][1]
    assert planner.detail.layout.title.text != before
    assert "ITL p50" in planner.detail.layout.title.text
