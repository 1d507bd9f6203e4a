"""The uncached-prefill floor of a run's TTFT (issue 20) and the TTFT pipeline fitted beside it.

Expected values are derived here by hand from Qwen2-7B-Instruct's config.json (as the runs
file gives it) and the A100's datasheet peak (312 TFLOP/s dense BF16), and from a pipeline the
test chose; never from an earlier output of the code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from _paths import REAL_RUNS, REAL_RUNS_MORE

from itlkit.calibration import groups
from itlkit.calibration.fit import (
    PIPELINE_MAX_TTFT_SECONDS,
    RunFeatures,
    resolves_pipeline,
    solve_pipeline,
)
from itlkit.calibration.ttft_floor import (
    prefill_flops_per_token,
    served_from_cache,
    ttft_floor_seconds,
)
from itlkit.physics.calibration import BOUNDS, INTERCONNECTS, Calibration
from itlkit.sim.lengths import Uniform
from itlkit.sim.runs import read_runs

MORE = {run.id: run for run in read_runs(REAL_RUNS_MORE / "real_world_more.json")}
TRAINVAL = read_runs(REAL_RUNS / "real_runs_trainval.json")
# dennislee22 row D36: Qwen2-7B-Instruct, one A100 80 GB, one 1,024-token prompt, TTFT 36.46 ms
D36 = MORE["D36"]

# Qwen2-7B: hidden 3584, 28 layers, MLP 18944, 28 query heads and 4 KV heads of 128.
# Per layer: q 3584x3584 + bias 3584; k and v 3584x512 + bias 512 each; o 3584x3584;
# gate, up and down 3 x 3584x18944; two RMSNorms 2 x 3584.
ATTENTION = (3584 * 3584 + 3584) + 2 * (3584 * 512 + 512) + 3584 * 3584
PER_LAYER = ATTENTION + 3 * 3584 * 18944 + 2 * 3584
# 28 layers and the final norm; the embedding (a gather) and the LM head (logits only for the
# sampled position) are not a prompt token's matmuls.
FLOPS_PER_TOKEN = 2 * (28 * PER_LAYER + 3584)
A100_BF16 = 312e12


def test_per_token_flops_leave_out_embedding_and_lm_head():
    assert PER_LAYER == 233_057_792
    assert prefill_flops_per_token(D36) == FLOPS_PER_TOKEN == 13_051_243_520


# D36 on a server without the prefix cache: its one prompt must be computed
UNCACHED = replace(D36, prefix_caching=False)


def test_one_prompt_floor_is_its_matmuls_at_dense_peak():
    # 1,024 x 13.05 GFLOP at 312 TFLOP/s: 42.8 ms, where the server answered in 36.5 ms
    floor = ttft_floor_seconds(UNCACHED)
    assert floor == pytest.approx(1024 * FLOPS_PER_TOKEN / A100_BF16, rel=1e-12)
    assert floor == pytest.approx(0.04283, abs=1e-5)
    assert served_from_cache(UNCACHED)
    slower = replace(UNCACHED, measured={**D36.measured, "ttft_mean_seconds": 0.050})
    assert not served_from_cache(slower)
    # a run that says an earlier run sent its prompts has no uncached floor: it is not
    # screened out as served from a cache it does not state
    said = replace(UNCACHED, workload=replace(D36.workload, prompts_sent_before=1))
    assert ttft_floor_seconds(said) is None and not served_from_cache(said)


def test_the_ready_check_prompt_waits_for_nothing():
    # vllm bench serve sent D36's one prompt before measuring, and the prefix cache (on) kept
    # it: no prefill is owed, so the 36.5 ms TTFT is no sign of an earlier run's prompts
    assert ttft_floor_seconds(D36) == 0.0 and not served_from_cache(D36)


def test_a_burst_waits_on_average_for_half_its_prompts_and_tp_splits_the_work():
    one = ttft_floor_seconds(UNCACHED)
    burst = replace(UNCACHED, workload=replace(D36.workload, num_prompts=10))
    # FCFS over 10 equal prompts: request i waits for i + 1 prompts, mean (1 + ... + 10) / 10
    assert ttft_floor_seconds(burst) == pytest.approx(5.5 * one, rel=1e-12)
    assert ttft_floor_seconds(replace(burst, tp=2)) == pytest.approx(2.75 * one, rel=1e-12)
    # with request 0's prompt cached by the ready check: i prompts, mean (0 + ... + 9) / 10
    warm = replace(burst, prefix_caching=True)
    assert ttft_floor_seconds(warm) == pytest.approx(4.5 * one, rel=1e-12)
    # a closed loop of 4 requests: at least a prompt each, request 0's cached (3 / 4 prompt)
    loop = replace(warm, workload=replace(warm.workload, num_prompts=4, max_concurrency=2))
    assert ttft_floor_seconds(loop) == pytest.approx(0.75 * one, rel=1e-12)
    drawn = replace(burst.workload, prompt_distribution=Uniform(512, 1536))
    # drawn lengths: serving the shortest first beats FCFS, so the floor keeps one prompt
    assert ttft_floor_seconds(replace(burst, workload=drawn)) == pytest.approx(one, rel=1e-12)


def test_no_floor_where_the_run_shares_its_own_prefixes():
    repeats = replace(UNCACHED, workload=replace(D36.workload, repeat_share=0.3))
    assert ttft_floor_seconds(repeats) is None and not served_from_cache(repeats)
    # inference-perf's fixed prompt list (system prompts shared by many questions)
    assert all(ttft_floor_seconds(run) is None for run in TRAINVAL if run.workload.cycles_prompts)


def test_the_runs_that_beat_the_floor_are_the_repeated_seed_ones():
    cached = sorted(run.id for run in MORE.values() if served_from_cache(run))
    # every one is a dennislee22 row (vllm bench serve with its default --seed: the same random
    # prompts as the test before it on the same server); the runs file's README counts ~16
    assert cached and all(MORE[i].source == "dennislee22/vLLM-benchmarking" for i in cached)
    assert 8 <= len(cached) <= 20 and "D48" in cached
    assert not any(served_from_cache(run) for run in TRAINVAL)


# ---- the TTFT pipeline beside the floor -----------------------------------------------------


def _features(engine_seconds: float, first_step_seconds: float) -> RunFeatures:
    return RunFeatures(gpu_seconds=0.01, compute_seconds=0.0, network_seconds=0.0,
                       pcie_seconds=0.0, link_calls=(0.0,) * len(INTERCONNECTS),
                       sequences=1.0, rest_seconds=0.0, ttft_engine_seconds=engine_seconds,
                       first_step_seconds=first_step_seconds)  # fmt: skip


def _pipeline_runs(steps: float, seconds: float):
    """Nine trainval runs whose measured TTFT is the engine's plus the chosen pipeline, and one
    whose TTFT is ten times that (a run the model cannot explain)."""
    runs, feats = [], []
    for k, run in enumerate(TRAINVAL[:10]):
        engine, first = 0.05 + 0.01 * k, 0.02 + 0.003 * k
        ttft = engine + steps * first + seconds
        ttft *= 10.0 if k == 0 else 1.0
        runs.append(replace(run, measured={**run.measured, "ttft_mean_seconds": ttft}))
        feats.append(_features(engine, first))
    return runs, feats


def test_pipeline_follows_the_majority_not_one_wild_run():
    runs, feats = _pipeline_runs(steps=1.0, seconds=0.030)
    steps, seconds = solve_pipeline(runs, feats)
    # least absolute deviations: the nine consistent runs fix both constants, to within the 1 %
    # relative error below which a run counts as fitted
    assert steps == pytest.approx(1.0, rel=0.01) and seconds == pytest.approx(0.030, rel=0.01)
    # where least squares of the same relative errors is dragged by the wild run
    m = np.array([run.measured["ttft_mean_seconds"] for run in runs])
    a = np.array([[f.first_step_seconds, 1.0] for f in feats]) / m[:, None]
    y = 1.0 - np.array([f.ttft_engine_seconds for f in feats]) / m
    ls_seconds = np.linalg.lstsq(a, y, rcond=None)[0][1]
    assert abs(ls_seconds - 0.030) > 0.01


def test_pipeline_leaves_out_runs_the_prefix_cache_served():
    runs, feats = _pipeline_runs(steps=1.0, seconds=0.030)
    # six runs whose TTFT beat their floor, each measured at half the engine's uncached TTFT:
    # a majority that would pull the pipeline to zero for every other run
    cached = [run for run in MORE.values() if served_from_cache(run)][:6]
    assert len(cached) == 6
    runs = [*runs[1:5], *cached]
    feats = [*feats[1:5], *(_features(2.0 * r.measured["ttft_mean_seconds"], 0.02) for r in cached)]
    steps, seconds = solve_pipeline(runs, feats)
    assert steps == pytest.approx(1.0, rel=0.01) and seconds == pytest.approx(0.030, rel=0.01)


def test_pipeline_seconds_are_the_median_gap_not_the_mean():
    # no first-token step time, every TTFT 1 s: the relative errors are (seconds - gap) / 1 s,
    # whose least absolute deviations is the median gap (50 ms); least squares takes the
    # mean (196 ms)
    gaps = (0.01, 0.02, 0.05, 0.30, 0.60)
    runs = [
        replace(run, measured={**run.measured, "ttft_mean_seconds": 1.0}) for run in TRAINVAL[:5]
    ]
    feats = [_features(1.0 - gap, 0.0) for gap in gaps]
    steps, seconds = solve_pipeline(runs, feats)
    assert steps == 0.0 and seconds == pytest.approx(0.05, abs=0.005)


def test_simulate_runs_says_when_the_measured_ttft_beats_the_floor(tmp_path):
    doc = json.loads((REAL_RUNS_MORE / "real_world_more.json").read_text())
    doc["runs"] = [run for run in doc["runs"] if run["id"] in ("D37", "D48")]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(doc))
    done = subprocess.run([sys.executable, "-m", "itlkit", "simulate", "--runs", str(path),
                           "--json", "--calibration", "none"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = {line["id"]: line for line in map(json.loads, done.stdout.splitlines())}
    # D48: a burst of 20 prompts of 1,023 tokens, request 0's cached by the ready check: the
    # mean request waits for 9.5 prompts, 9.5 x 1,023 x 13.05 GFLOP / 312 TFLOP/s = 407 ms,
    # where the server answered in 195 ms
    assert "195 ms" in lines["D48"]["caveat"] and "below the 407 ms" in lines["D48"]["caveat"]
    assert "caveat" not in lines["D37"]  # 10 prompts in 504 ms: above its 193 ms floor


# ---- which runs can tell the pipeline's size -------------------------------------------------


def _queued_runs(count: int, *, ttft_seconds: float = 60.0):
    """Runs of a burst that waited `ttft_seconds` on average, the engine's TTFT 5% short of it:
    their relative errors pull the pipeline up, which their TTFT cannot resolve."""
    runs = [replace(run, measured={**run.measured, "ttft_mean_seconds": ttft_seconds})
            for run in TRAINVAL[:count]]  # fmt: skip
    return runs, [_features(0.95 * ttft_seconds, 0.03) for _ in runs]


def test_only_runs_of_short_ttft_resolve_the_pipeline():
    runs, _ = _queued_runs(2, ttft_seconds=PIPELINE_MAX_TTFT_SECONDS)
    assert resolves_pipeline(runs[0])
    longer = replace(runs[0], measured={**runs[0].measured, "ttft_mean_seconds": 2.001})
    assert not resolves_pipeline(longer)
    cached = next(run for run in MORE.values() if served_from_cache(run))
    assert cached.measured["ttft_mean_seconds"] < 2 and not resolves_pipeline(cached)


def test_queued_runs_alone_keep_the_fallback_pipeline():
    runs, feats = _queued_runs(6)
    fallback = Calibration(ttft_pipeline_steps=0.5, ttft_pipeline_seconds=0.021)
    assert solve_pipeline(runs, feats, fallback=fallback) == (0.5, 0.021)
    # the global fit has no fallback: it takes them, and their 5% pull drives the steps to 10
    steps, _ = solve_pipeline(runs, feats)
    assert steps == BOUNDS["ttft_pipeline_steps"][1]


def test_queued_runs_do_not_move_a_pipeline_short_runs_fix():
    short, short_feats = _pipeline_runs(steps=1.0, seconds=0.030)
    queued, queued_feats = _queued_runs(10)
    runs, feats = [*short[1:6], *queued], [*short_feats[1:6], *queued_feats]
    steps, seconds = solve_pipeline(runs, feats, fallback=Calibration())
    assert steps == pytest.approx(1.0, rel=0.01) and seconds == pytest.approx(0.030, rel=0.01)


def test_one_or_two_short_runs_fit_the_seconds_alone():
    short, short_feats = _pipeline_runs(steps=1.0, seconds=0.030)
    queued, queued_feats = _queued_runs(6)
    fallback = Calibration(ttft_pipeline_steps=1.0, ttft_pipeline_seconds=0.5)
    runs, feats = [*short[1:3], *queued], [*short_feats[1:3], *queued_feats]
    # the steps kept (1.0), the seconds the two short runs' mean gap once those steps are taken
    assert solve_pipeline(runs, feats, fallback=fallback) == pytest.approx((1.0, 0.030))


def test_a_cell_of_queued_runs_takes_the_global_pipeline(monkeypatch):
    runs, feats = _queued_runs(6)
    start = Calibration(ttft_pipeline_steps=0.0, ttft_pipeline_seconds=0.021)
    monkeypatch.setattr(
        groups, "fit_step_terms", lambda runs, start, **_: (start, feats, {}, {}, 1)
    )
    monkeypatch.setattr(groups, "held_out_errors", lambda *args, **kwargs: {})
    cal, *_ = groups._fit_group(runs, start, seed=0, prior_weight=0.1)
    assert (cal.ttft_pipeline_steps, cal.ttft_pipeline_seconds) == (0.0, 0.021)
    # and its held-out folds take the re-solved global one (here the queued runs' own, at 10
    # steps), where the group's features alone (the engine 5% over) would solve for 0
    over = [_features(1.05 * run.measured["ttft_mean_seconds"], 0.03) for run in runs]
    folds = groups.refit_without(
        runs, {run.id: f for run, f in zip(runs, feats, strict=True)},
        {"gpu:h100": {run.id: f for run, f in zip(runs, over, strict=True)}},
        set(), replace(start, groups={"gpu:h100": groups.group_values(start)}), 0.1,
    )  # fmt: skip
    group = folds.group_calibration("gpu:h100")
    assert (group.ttft_pipeline_steps, group.ttft_pipeline_seconds) == (
        folds.ttft_pipeline_steps, folds.ttft_pipeline_seconds)  # fmt: skip
    assert folds.ttft_pipeline_steps == BOUNDS["ttft_pipeline_steps"][1]
    assert solve_pipeline(runs, over)[0] == 0.0
