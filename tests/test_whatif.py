"""What-if replays of the golden incidents: calibration first, then the trade-offs."""

import dataclasses
import json
import re

import pytest

from itlkit.bundled import scenario_folder
from itlkit.diagnosis.evidence import timeline_from_frame
from itlkit.diagnosis.scoring import diagnose
from itlkit.diagnosis.whatif import calibrate, current_setting, predict
from itlkit.errors import ConfigError
from itlkit.metrics.readers import read_paths, read_scrape_folder
from itlkit.physics.roofline import Deployment

SCENARIOS = scenario_folder()
H100_8B = dict(model="llama-3.1-8b", gpu="h100-sxm")


def _diagnosed(name):
    timeline = timeline_from_frame(read_scrape_folder(SCENARIOS / name))
    return diagnose(timeline, Deployment.create(**H100_8B), max_num_batched_tokens=2048)


@pytest.fixture(scope="module")
def interference():
    return _diagnosed("prefill_interference")


@pytest.fixture(scope="module")
def preemption():
    return _diagnosed("preemption")


def _truth(name):
    return json.loads((SCENARIOS / name / "scenario.json").read_text())


@pytest.mark.parametrize("name", ["prefill_interference", "batch_or_context_growth", "healthy"])
def test_calibration_recovers_the_servers_speed_from_its_metrics(name):
    # The scenarios ran at 60% of the roofline; only the scrapes are given to the calibration.
    speed = calibrate(_diagnosed(name))
    assert speed.efficiency == pytest.approx(_truth(name)["efficiency"], abs=0.05)
    assert speed.host_overhead_seconds == 0


def test_calibration_recovers_host_overhead_from_its_metrics():
    speed = calibrate(_diagnosed("host_overhead"))
    truth = _truth("host_overhead")
    assert speed.host_overhead_seconds == pytest.approx(truth["host_overhead_seconds"], rel=0.1)


def test_replay_of_current_settings_matches_what_was_observed(interference):
    # Before any knob turns, the replay must land near the metrics it was rebuilt from.
    baseline = predict(interference, current_setting(interference))
    observed = interference.timeline.itl_total
    assert baseline.itl_quantile(0.5) == pytest.approx(observed.quantile(0.5), rel=0.25)
    assert baseline.itl_quantile(0.99) == pytest.approx(observed.quantile(0.99), rel=0.25)
    ttft = interference.timeline.ttft_total.quantile(0.99)
    assert baseline.ttft_quantile(0.99) == pytest.approx(ttft, rel=0.5)


def test_smaller_budget_trades_itl_p99_for_ttft(interference):
    baseline = predict(interference, current_setting(interference))
    small = predict(
        interference, dataclasses.replace(current_setting(interference), max_num_batched_tokens=512)
    )
    assert small.itl_quantile(0.99) < baseline.itl_quantile(0.99) / 2
    assert small.ttft_quantile(0.99) > baseline.ttft_quantile(0.99)


def test_disaggregation_removes_the_slow_mode(interference):
    split = predict(
        interference, dataclasses.replace(current_setting(interference), disaggregated=True)
    )
    assert split.itl_quantile(0.99) < 2 * interference.fast_mode_seconds


def test_kv_room_ends_preemption(preemption):
    baseline = predict(preemption, current_setting(preemption))
    assert baseline.preemptions > 0
    fp8 = predict(preemption, dataclasses.replace(current_setting(preemption), kv_precision="fp8"))
    assert fp8.preemptions < baseline.preemptions  # twice the KV room, fewer evictions
    # The diagnosis' own fix: cap max_num_seqs where prompt + full output of every running
    # request fits in the KV budget. Then nothing is ever evicted.
    fix = next(f for f in preemption.findings if f.cause == "preemption").fixes[0]
    cap = int(re.search(r"cap max_num_seqs at ~(\d+)", fix.action).group(1))
    capped = predict(preemption, dataclasses.replace(current_setting(preemption), max_num_seqs=cap))
    assert capped.preemptions == 0


def test_a_single_scrape_cannot_be_replayed():
    last = sorted((SCENARIOS / "healthy").glob("metrics-*.prom"))[-1]
    result = diagnose(timeline_from_frame(read_paths([last])), Deployment.create(**H100_8B))
    with pytest.raises(ConfigError, match="needs a scrape series"):
        predict(result, current_setting(result))
