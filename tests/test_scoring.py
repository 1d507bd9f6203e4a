"""The scoring table pinned by behaviour: each decisive number has a test that fails when it moves.

Expected values come from the scenarios' own scenario.json (what the simulator injected), from
the worked example (tests/_reference.py: a 2,048-token chunk step is 78.82 ms against a 15.05 ms
floor) and from datasheet arithmetic written out below, never from the code's output.
"""

import dataclasses
import json

import numpy as np
import pytest
from _reference import CHUNK_2048_MS

from itlkit.bundled import scenario_folder
from itlkit.diagnosis.evidence import timeline_from_frame
from itlkit.diagnosis.scoring import CAUSES, HEALTHY_BELOW, MIN_OBSERVATIONS, RULES, diagnose
from itlkit.metrics.histogram import Histogram
from itlkit.metrics.readers import read_scrape_folder
from itlkit.physics.roofline import Deployment
from itlkit.sim.scenarios import NOISE_LEVELS, SCENARIOS, scenario_subfolder

SCENARIO_DIR = scenario_folder()
FLOOR_MS = 15.05  # the worked example's decode floor (tests/test_roofline.py)


def _meta(name: str) -> dict:
    return json.loads((SCENARIO_DIR / name / "scenario.json").read_text())


@pytest.fixture(scope="module")
def timelines():
    return {n: timeline_from_frame(read_scrape_folder(SCENARIO_DIR / n)) for n in SCENARIOS}


def _diagnose(timeline, name):
    meta = _meta(name)
    deployment = Deployment.create(model=meta["model"], gpu=meta["gpu"])
    return diagnose(timeline, deployment, max_num_batched_tokens=meta["max_num_batched_tokens"])


def _scores(result) -> dict[str, float]:
    """Every cause's score; one the input cannot judge (`scoring.REQUIRES`) is not named: 0."""
    return {cause: 0.0 for cause in CAUSES} | {f.cause: f.score for f in result.findings}


# ---- the bundled scenarios: the injected cause high, every other low --------------------------
# Each incident at each noise level (clean, calibrated, noisy: itlkit.sim.scenarios.NOISE_LEVELS).
# The expected causes are scenario.json's, written by the generator from what it injected.
LEVEL_CASES = [(level, name) for level in NOISE_LEVELS for name in sorted(SCENARIOS)]

# Argued exceptions (data/scenarios/README.md, "What the noise blurs"): prefill interference
# in the mixed incident under the calibrated step model. Llama 3.1 8B's calibrated decode step
# on an H100 is 8-12 ms (6.3 ms floor / 0.786 + 0.6 ms host at ~9 running), right on vLLM's
# 10 ms bucket bound, so the fixed-factor split falls inside the fast mode; the windows' slow
# modes then come from their separated clusters (fingerprint._cluster_mode), which finds the
# prefill_interference incident's chunk steps (a cluster at ~14x the floor behind an empty
# bucket). In mixed, half the prompts are cached: with jitter the thinner chunk steps merge
# into the fast cluster's tail (0.1-3% per window, most windows one cluster), below the gates.
BLURRED = {
    (level, "mixed"): "in the mixed incident half the prompts are cached and the calibrated "
    "jitter merges the thinner chunk steps into the fast cluster's tail: most windows hold one "
    "cluster, and the rest a 0.1-3.5% slow share, below the slow-mode gates"
    for level in ("calibrated", "noisy")
}


def _level_meta(level: str, name: str) -> dict:
    return json.loads(
        (SCENARIO_DIR / scenario_subfolder(name, level) / "scenario.json").read_text()
    )


@pytest.fixture(scope="module")
def level_results():
    results = {}
    for level, name in LEVEL_CASES:
        meta = _level_meta(level, name)
        timeline = timeline_from_frame(
            read_scrape_folder(SCENARIO_DIR / scenario_subfolder(name, level))
        )
        deployment = Deployment.create(model=meta["model"], gpu=meta["gpu"])
        results[level, name] = diagnose(
            timeline, deployment, max_num_batched_tokens=meta["max_num_batched_tokens"]
        )
    return results


@pytest.mark.parametrize(
    ("level", "name"),
    [
        pytest.param(*case, marks=pytest.mark.xfail(strict=True, reason=BLURRED[case]))
        if case in BLURRED
        else case
        for case in LEVEL_CASES
    ],
)
def test_injected_causes_score_high_and_the_others_low(level_results, level, name):
    meta = _level_meta(level, name)
    assert meta["noise"] == level
    injected = set(meta["causes"])  # what the simulator was told to do
    scores = _scores(level_results[level, name])
    for cause in CAUSES:
        if cause in injected:
            assert scores[cause] >= 0.7, (cause, scores)
        else:
            assert scores[cause] <= 0.3, (cause, scores)


@pytest.mark.parametrize(("level", "name"), sorted(BLURRED))
def test_blurred_interference_names_nothing_wrong_and_keeps_its_cluster(level_results, level, name):
    """What holds where the interference margin does not (BLURRED): no wrong cause above 0.3,
    growth (the mixed incident's other cause) still >= 0.7, and the chunk steps are still in
    the page: ITL p99 >= 5x the fast mode (a 2,048-token chunk step is ~10x a decode step by
    the step model); half the prompts are cached and the chunks thin out into the tail of one
    cluster."""
    result = level_results[level, name]
    scores = _scores(result)
    injected = set(_level_meta(level, name)["causes"])
    assert "prefill_interference" in injected
    for cause in CAUSES:
        if cause not in injected:
            assert scores[cause] <= 0.3, (cause, scores)
    for cause in injected - {"prefill_interference"}:
        assert scores[cause] >= 0.7, (cause, scores)
    fp = result.fingerprint
    assert fp.itl_quantiles_seconds[0.99] >= 5 * fp.fast_mode_seconds
    # the cause of the blur: few windows resolve a slow mode, and those only a thin one, short
    # of the 5% share at which interference's shape gate gives full credit (`scoring.RULES`)
    resolved = fp.slow_share_by_window[np.isfinite(fp.slow_share_by_window)]
    assert resolved.size == 0 or np.median(resolved) < 0.05, resolved


def test_preemption_recompute_is_not_read_as_prefill_interference(timelines):
    """The preemption scenario has a real slow mode (~4x, 13% of observations): preempted
    requests are recomputed by prefill chunks of prompt + generated tokens, riding in decode
    steps. The root cause is preemption, and its fix (cap max_num_seqs) removes them; a smaller
    token budget would not. What tells them apart is the arrivals: a step carrying one arriving
    256-token prompt adds 256 x 2 x 8.03e9 = 4.1 TFLOP, 8.3 ms at 50% of the H100's 989 TFLOP/s,
    to a ~24 ms decode step: ~1.35x, nowhere near the slow mode. For prefill_interference's
    4,096-token prompts the chunk fills the 2,048 budget: ~66 ms on a ~7.5 ms step, ~9x."""
    preempted = _diagnose(timelines["preemption"], "preemption")
    interfered = _diagnose(timelines["prefill_interference"], "prefill_interference")
    assert preempted.fingerprint.arrival_chunk_factor < 1.5
    assert interfered.fingerprint.arrival_chunk_factor > 6
    assert _scores(preempted)["prefill_interference"] <= 0.3


# ---- the verdict threshold ----------------------------------------------------------------------
def _thin(h: Histogram, total: float) -> Histogram:
    scale = total / h.count if h.count else 0.0
    return Histogram.create(
        upper_bounds=h.upper_bounds,
        cumulative_counts=np.round(h.cumulative_counts * scale),
        sum=h.sum * scale,
    )


@pytest.mark.parametrize("observations", [240, 245])
def test_under_half_the_minimum_observations_nothing_is_named(timelines, observations):
    # Scores scale by observations / MIN_OBSERVATIONS; with a threshold of one half, even a
    # perfect score (1.0) stays under it below 250 observations: 240 / 500 = 0.48 < 0.5.
    t = timelines["prefill_interference"]
    per_window = observations / len(t)
    thin = dataclasses.replace(
        t,
        itl=tuple(_thin(h, per_window) for h in t.itl),
        itl_total=_thin(t.itl_total, observations),
    )
    result = _diagnose(thin, "prefill_interference")
    assert MIN_OBSERVATIONS == 500
    assert result.healthy, _scores(result)
    assert result.verdict.startswith("No cause stands out (every score < 0.5)")
    # The cause is still ranked first: it was thinned, not removed.
    assert result.top.cause == "prefill_interference"


def test_full_evidence_names_the_cause_at_the_threshold(timelines):
    result = _diagnose(timelines["prefill_interference"], "prefill_interference")
    assert HEALTHY_BELOW == 0.5
    assert result.verdict.startswith("Most likely: prefill chunks ride in decode steps")


# ---- preemption: the counter alone names it, the gaps alone do not -----------------------------
def test_a_rising_preemption_counter_alone_names_preemption(timelines):
    """vLLM increments num_preemptions_total only when the scheduler evicts a running request
    because the KV cache cannot hold its next tokens: the counter is the cause by definition, even
    when no multi-second gap landed in a bucket."""
    t = timelines["healthy"]
    preemptions = np.zeros(len(t))
    preemptions[len(t) // 2] = 3
    result = _diagnose(dataclasses.replace(t, preemptions=preemptions), "healthy")
    assert result.fingerprint.gap_observations == 0  # healthy: nothing above 1 s
    assert result.top.cause == "preemption"
    assert not result.healthy


def test_multi_second_gaps_without_the_counter_do_not_name_preemption(timelines):
    # Without the counter a gap could be anything (a GC pause, a stalled client connection).
    t = timelines["preemption"]
    result = _diagnose(dataclasses.replace(t, preemptions=np.full(len(t), np.nan)), "preemption")
    assert result.fingerprint.gap_observations > 5
    assert _scores(result)["preemption"] < HEALTHY_BELOW


# ---- the slow-mode factor -----------------------------------------------------------------------
FINE_BOUNDS = np.concatenate([np.arange(1, 401) * 1e-3, [1.0, np.inf]])  # 1 ms buckets to 400 ms


def _bimodal(*, count: float, slow_share: float, fast_ms: float, slow_ms: float) -> Histogram:
    """`count` observations in the 1 ms bucket ending at fast_ms, slow_share of them at slow_ms."""
    per_bucket = np.zeros(FINE_BOUNDS.size)
    per_bucket[np.searchsorted(FINE_BOUNDS, fast_ms * 1e-3 - 1e-9)] = count * (1 - slow_share)
    per_bucket[np.searchsorted(FINE_BOUNDS, slow_ms * 1e-3 - 1e-9)] = count * slow_share
    sum_seconds = count * 1e-3 * ((1 - slow_share) * fast_ms + slow_share * slow_ms)
    return Histogram.create(
        upper_bounds=FINE_BOUNDS, cumulative_counts=np.cumsum(per_bucket), sum=sum_seconds
    )


def _incident(t, *, slow_over_fast: float):
    """prefill_interference's traffic with a synthetic second mode whose share follows arrivals
    exactly (r = 1), at slow_over_fast times a 20 ms fast mode (above every window's floor)."""
    arrivals = t.first_tokens_per_second
    shares = 0.02 + 0.2 * arrivals / np.nanmax(arrivals)
    itl = tuple(
        _bimodal(count=20_000, slow_share=s, fast_ms=20, slow_ms=20 * slow_over_fast)
        for s in shares
    )
    total = Histogram.create(
        upper_bounds=FINE_BOUNDS,
        cumulative_counts=np.sum([h.cumulative_counts for h in itl], axis=0),
        sum=sum(h.sum for h in itl),
    )
    return _diagnose(dataclasses.replace(t, itl=itl, itl_total=total), "prefill_interference")


def test_a_slow_mode_at_the_chunk_step_ratio_is_interference(timelines):
    # The worked example: a step carrying a 2,048-token chunk takes 78.82 ms on a 15.05 ms floor.
    result = _incident(timelines["prefill_interference"], slow_over_fast=CHUNK_2048_MS / FLOOR_MS)
    assert _scores(result)["prefill_interference"] >= 0.7


def test_a_slow_mode_at_2_4x_is_not_named(timelines):
    # Doubling the batch at most doubles the floor (weights + batch x KV), so a second mode at
    # 2x can be a batch that grew inside one window. A mode at 2.4x (2 x 20 + 8 ms, interpolated
    # in its bucket at ~47.5 ms over a ~19.3 ms p25: ~2.46x) is under half way from 2x to 3x.
    result = _incident(timelines["prefill_interference"], slow_over_fast=2.4)
    assert 2.3 < result.fingerprint.slow_mode_factor < 2.5
    assert _scores(result)["prefill_interference"] < HEALTHY_BELOW


def test_every_rule_has_a_reason_and_a_known_cause():
    for rule in RULES:
        assert rule.cause in CAUSES
        assert len(rule.reason) > 15, rule
        assert rule.low != rule.high or rule.feature is None, rule
