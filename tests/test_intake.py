"""The API server's intake wait that `simulate --runs` states for bursts (issue 20).

The range of seconds per prompt token is checked against the real runs it was read from: pairs
of bursts of one server whose prompts the prefix cache held, their measured TTFT means as the
runs files carry them (dennislee22's table; surajssd/llm-k8s' client summary). The waits of a
burst are derived by hand from its count and prompt length.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from _paths import REAL_RUNS, REAL_RUNS_LLMK8S, REAL_RUNS_MORE

from itlkit.calibration.intake import (
    INTAKE_RANGE_SECONDS_PER_PROMPT_TOKEN,
    intake_caveat,
    intake_wait_seconds,
)
from itlkit.cli import main
from itlkit.sim.runs import read_runs

MORE = {run.id: run for run in read_runs(REAL_RUNS_MORE / "real_world_more.json")}
LLMK8S = {run.id.rsplit("-", 1)[1]: run for run in read_runs(REAL_RUNS_LLMK8S / "llmk8s.json")}
LOW, HIGH = INTAKE_RANGE_SECONDS_PER_PROMPT_TOKEN
# llm-k8s' cached burst as if its server ran a release whose intake the simulation leaves out
LATER = replace(LLMK8S["inf"], vllm_version="vLLM 0.15.1")


def _growth_per_token(ttft_before_seconds: float, prompts_before: int, burst) -> float:
    """Seconds per prompt token ahead: the burst's TTFT mean over a smaller one's, per token of
    the (n - 1) / 2 more prompts ahead of its mean request."""
    ahead = (burst.workload.num_prompts - 1) / 2 - (prompts_before - 1) / 2
    growth = burst.measured["ttft_mean_seconds"] - ttft_before_seconds
    return growth / (ahead * burst.workload.prompt_tokens)


def _pair(small: str, large: str) -> float:
    before = MORE[small]
    return _growth_per_token(
        before.measured["ttft_mean_seconds"], before.workload.num_prompts, MORE[large]
    )


def test_the_range_spans_the_cached_bursts_it_was_read_from():
    # dennislee22: D3 (10 prompts, 185.12 ms), D6 (50, 432.37 ms), D9 (100, 681.41 ms) on
    # 2 A100 40 GB; D19 (10, 111.47 ms), D22 (50, 279.73 ms); D48 (20, 195.24 ms), D49 (30,
    # 241.74 ms) on A100 80 GB: all below the uncached floor, so their prompts were cached
    pairs = [("D3", "D6"), ("D6", "D9"), ("D19", "D22"), ("D48", "D49")]
    slopes = [_pair(a, b) for a, b in pairs]
    # llm-k8s: the burst of 200 (360.36 ms) against the 4 req/s run of the same cached prompts
    # (50.33 ms), where a request rarely waits for another
    slopes.append(_growth_per_token(LLMK8S["04"].measured["ttft_mean_seconds"], 1, LLMK8S["inf"]))
    assert min(slopes) == pytest.approx(8.23e-6, rel=0.01)  # D19 -> D22
    assert max(slopes) == pytest.approx(14.6e-6, rel=0.01)  # llm-k8s
    assert LOW <= min(slopes) and max(slopes) <= HIGH
    # the range is no wider than what it spans, within a microsecond
    assert min(slopes) - LOW < 1e-6 and HIGH - max(slopes) < 1e-6


def test_a_burst_waits_behind_the_prompts_sent_before_it():
    # 200 prompts of 213 tokens (42,659 in all, rounded): the mean request waits for 99.5 of them
    low, high = intake_wait_seconds(LATER)
    tokens = 199 / 2 * 213
    assert low == pytest.approx(tokens * 8e-6) and high == pytest.approx(tokens * 15e-6)
    assert (low, high) == pytest.approx((0.16955, 0.31790), abs=1e-5)
    # one prompt waits for none (its own intake is in the fitted fixed TTFT)
    assert intake_wait_seconds(replace(MORE["D13"], vllm_version=None)) == (0.0, 0.0)


def test_none_where_the_simulation_takes_the_prompts_in():
    # vLLM 0.8.3 and 0.10.1.1: simulated (`sim.intake`), so nothing is left to say
    assert intake_wait_seconds(LLMK8S["inf"]) is None
    assert intake_wait_seconds(MORE["D9"]) is None


def test_only_vllm_bursts_of_known_length_have_one():
    assert intake_wait_seconds(replace(LLMK8S["01"], vllm_version=None)) is None  # an open loop
    assert intake_wait_seconds(replace(LATER, serving_engine="sglang")) is None
    closed = replace(LATER.workload, max_concurrency=8)
    assert intake_wait_seconds(replace(LATER, workload=closed)) is None
    unknown = replace(LATER.workload, prompt_tokens_mean=None, prompt_distribution=None)
    assert intake_wait_seconds(replace(LATER, workload=unknown)) is None


def test_the_caveat_is_said_from_half_the_predicted_ttft():
    high = intake_wait_seconds(LATER)[1]
    assert intake_caveat(LATER, 2 * high) is not None
    assert intake_caveat(LATER, 2 * high * 1.001) is None
    line = intake_caveat(LATER, 0.198)
    assert "200 prompts of about 213 tokens" in line and "8-15 us per prompt token" in line
    assert "170-318 ms" in line and "(198 ms)" in line
    assert intake_caveat(replace(MORE["D13"], vllm_version=None), 0.035) is None


def test_simulate_runs_states_it_where_the_simulation_leaves_it_out(capsys, tmp_path):
    doc = json.loads((REAL_RUNS_LLMK8S / "llmk8s.json").read_text())
    for run in doc["runs"]:
        run["engine"]["vllm_version"] = "0.15.1"
    later = tmp_path / "later.json"
    later.write_text(json.dumps(doc))
    assert main(["simulate", "--runs", str(later)]) == 0
    lines = {json.loads(line)["id"].rsplit("-", 1)[1]: json.loads(line)
             for line in capsys.readouterr().out.splitlines()}  # fmt: skip
    assert [rate for rate, line in lines.items() if "intake" in line] == ["inf"]
    # as published (vLLM 0.8.3) the simulation takes the prompts in: no line
    assert main(["simulate", "--runs", str(REAL_RUNS_LLMK8S / "llmk8s.json")]) == 0
    assert '"intake"' not in capsys.readouterr().out
    # the held-out H100 runs (open loops) never carry one
    assert main(["simulate", "--runs", str(REAL_RUNS / "real_runs_trainval.json")]) == 0
    assert '"intake"' not in capsys.readouterr().out
