"""The diagnosis against the golden scenarios (data/scenarios) and against thin or bad input."""

import dataclasses
import itertools
import json
import math
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from itlkit.bundled import scenario_folder
from itlkit.diagnosis.evidence import timeline_from_frame
from itlkit.diagnosis.scoring import CAUSES, HEALTHY_BELOW, diagnose
from itlkit.errors import EvidenceError, SourceError
from itlkit.metrics.histogram import Histogram
from itlkit.metrics.readers import read_paths, read_scrape_folder
from itlkit.physics.roofline import Deployment
from itlkit.sim.scenarios import (
    NOISE_LEVELS,
    SCENARIOS,
    at_level,
    scenario_subfolder,
    write_scenario,
)

SCENARIO_DIR = scenario_folder()


def _meta(name: str) -> dict:
    return json.loads((SCENARIO_DIR / name / "scenario.json").read_text())


def _deployment(meta: dict) -> Deployment:
    return Deployment.create(model=meta["model"], gpu=meta["gpu"])


@pytest.fixture(scope="module")
def timelines():
    return {
        name: timeline_from_frame(read_scrape_folder(SCENARIO_DIR / name)) for name in SCENARIOS
    }


def _diagnose(timelines, name, **kwargs):
    meta = _meta(name)
    return diagnose(
        timelines[name],
        _deployment(meta),
        max_num_batched_tokens=meta["max_num_batched_tokens"],
        **kwargs,
    )


def test_every_scenario_is_bundled_with_its_true_causes():
    # the clean level at the top, each other noise level in a folder of its own
    levels = {lv.folder for lv in NOISE_LEVELS.values() if lv.folder}
    assert {p.name for p in SCENARIO_DIR.iterdir() if p.is_dir()} == set(SCENARIOS) | levels
    for level, name in itertools.product(NOISE_LEVELS, SCENARIOS):
        meta = json.loads(
            (SCENARIO_DIR / scenario_subfolder(name, level) / "scenario.json").read_text()
        )
        assert meta["synthetic"] is True
        assert meta["noise"] == level
        assert tuple(meta["causes"]) == SCENARIOS[name].causes
        assert set(meta["causes"]) <= set(CAUSES)
        assert meta["injection"]
        if NOISE_LEVELS[level].calibrated:
            assert meta["calibration"]["efficiency"] == meta["efficiency"]
            assert meta["step_jitter"] > 0
        else:
            assert meta["calibration"] is None and meta["step_jitter"] == 0


@pytest.mark.parametrize("name", [n for n in SCENARIOS if len(SCENARIOS[n].causes) == 1])
def test_single_cause_scenarios_rank_the_true_cause_first(timelines, name):
    result = _diagnose(timelines, name)
    assert result.top.cause == SCENARIOS[name].causes[0]
    assert result.top.score >= HEALTHY_BELOW
    assert not result.healthy
    assert all(e for e in result.top.evidence)
    assert result.top.fixes


def test_mixed_scenario_puts_both_causes_on_top(timelines):
    result = _diagnose(timelines, "mixed")
    top_two = {f.cause for f in result.findings[:2]}
    assert top_two == {"prefill_interference", "batch_or_context_growth"}
    assert all(f.score >= HEALTHY_BELOW for f in result.findings[:2])


def test_healthy_scenario_gets_a_healthy_verdict(timelines):
    result = _diagnose(timelines, "healthy")
    assert result.healthy
    assert max(f.score for f in result.findings) < HEALTHY_BELOW
    assert result.verdict.startswith("No cause stands out")


def test_interference_evidence_carries_the_numbers(timelines):
    result = _diagnose(timelines, "prefill_interference")
    text = " ".join(result.top.evidence)
    assert "slow mode" in text and "r = +" in text
    fix = result.top.fixes[0]
    assert "max_num_batched_tokens" in fix.action
    # The budget fix is priced by the step model: a 4,096-token prompt in 512-token chunks.
    assert "8 chunked steps" in fix.price
    # The floor is the step model's, at the batch the running gauge reported.
    floor = result.floor_seconds
    assert 0.005 < floor < 0.010


def test_mbu_fit_is_reported_and_plausible_for_a_60_percent_server(timelines):
    # Scenarios run at 60% of the roofline's speed; vLLM's 10-25 ms bucket blurs the fit.
    result = _diagnose(timelines, "prefill_interference")
    low, high = result.mbu_range
    assert low <= 0.6 <= high
    assert 0.35 < result.mbu_fit <= 1.0


# ---- robustness --------------------------------------------------------------------------------
def _coarsen(h: Histogram, keep: np.ndarray) -> Histogram:
    return Histogram.create(
        upper_bounds=h.upper_bounds[keep], cumulative_counts=h.cumulative_counts[keep], sum=h.sum
    )


def test_coarser_buckets_never_give_a_confident_wrong_verdict(timelines):
    for name in ("prefill_interference", "host_overhead", "batch_or_context_growth"):
        t = timelines[name]
        bounds = t.itl_total.upper_bounds
        keep = np.isin(bounds, [0.025, 0.1, 0.5, 2.5, np.inf])  # 5 buckets instead of 20
        coarse = dataclasses.replace(
            t,
            itl=tuple(_coarsen(h, keep) for h in t.itl),
            itl_total=_coarsen(t.itl_total, keep),
        )
        result = _diagnose({name: coarse}, name)
        confident = [f.cause for f in result.findings if f.score >= HEALTHY_BELOW]
        assert not confident or confident[0] == name, (name, confident)


def test_few_observations_scale_scores_down_and_say_so(tmp_path, timelines):
    src = SCENARIO_DIR / "prefill_interference"
    for path in sorted(src.glob("metrics-*.prom"))[:2]:
        shutil.copy(path, tmp_path)
    t = timeline_from_frame(read_scrape_folder(tmp_path))
    few = dataclasses.replace(
        t,
        itl=tuple(_thin(h, 200) for h in t.itl),
        itl_total=_thin(t.itl_total, 200),
    )
    result = diagnose(few, _deployment(_meta("prefill_interference")), max_num_batched_tokens=2048)
    assert any("only 200 ITL observations" in n for n in result.notes)
    assert all(f.score <= 0.4 for f in result.findings)


def _thin(h: Histogram, total: int) -> Histogram:
    scale = total / h.count
    counts = np.round(h.cumulative_counts * scale)
    return Histogram.create(
        upper_bounds=h.upper_bounds, cumulative_counts=counts, sum=h.sum * scale
    )


def test_poisson_noise_keeps_the_ranking(timelines):
    rng = np.random.default_rng(7)
    for name in ("prefill_interference", "preemption", "host_overhead"):
        t = timelines[name]
        noisy = []
        for h in t.itl:
            per_bucket = rng.poisson(np.maximum(h.bucket_counts, 0) * 0.2).astype(float)
            noisy.append(
                Histogram.create(
                    upper_bounds=h.upper_bounds,
                    cumulative_counts=np.cumsum(per_bucket),
                    sum=h.sum * 0.2,
                )
            )
        total = Histogram.create(
            upper_bounds=t.itl_total.upper_bounds,
            cumulative_counts=np.sum([h.cumulative_counts for h in noisy], axis=0),
            sum=t.itl_total.sum * 0.2,
        )
        result = _diagnose({name: dataclasses.replace(t, itl=tuple(noisy), itl_total=total)}, name)
        assert result.top.cause == name


# ---- bad input ---------------------------------------------------------------------------------
def test_single_scrape_has_no_time_axis_and_says_so():
    last = sorted((SCENARIO_DIR / "prefill_interference").glob("metrics-*.prom"))[-1]
    t = timeline_from_frame(read_paths([last]))
    assert not t.has_time_axis
    result = diagnose(t, Deployment.create(model="llama-3.1-8b", gpu="h100-sxm"))
    assert any("single scrape" in n for n in result.notes)
    growth = next(f for f in result.findings if f.cause == "batch_or_context_growth")
    assert growth.score == 0
    assert "without a time axis" in growth.evidence[0]


def test_metrics_without_the_itl_histogram(tmp_path):
    page = tmp_path / "metrics-20261202T150000Z.prom"
    page.write_text(
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{model_name="m",engine="0"} 3.0\n'
    )
    with pytest.raises(EvidenceError, match="no ITL histogram"):
        timeline_from_frame(read_paths([page]))


def test_bucket_layout_change_mid_series_names_the_file(tmp_path):
    files = sorted((SCENARIO_DIR / "healthy").glob("metrics-*.prom"))[:6]
    for i, path in enumerate(files):
        text = path.read_text()
        if i >= 3:  # a restart with custom buckets: le="0.025" disappears
            text = "\n".join(
                line
                for line in text.splitlines()
                if not ("inter_token_latency_seconds_bucket" in line and 'le="0.025"' in line)
            )
        (tmp_path / path.name).write_text(text)
    with pytest.raises(SourceError, match=r"metrics-.*\.prom.*le=0\.025"):
        timeline_from_frame(read_scrape_folder(tmp_path))


def test_deployment_that_does_not_fit_is_noted(timelines):
    result = diagnose(
        timelines["healthy"], Deployment.create(model="llama-3.1-405b", gpu="h100-sxm")
    )
    assert any("does not fit in GPU memory" in n for n in result.notes)


def test_wrong_deployment_is_flagged_not_trusted(timelines):
    # Telling itlkit the service ran a 70B model on one A100 puts the floor far above what was
    # measured: no real step beats the floor, so the deployment must be wrong.
    result = diagnose(
        timelines["prefill_interference"],
        Deployment.create(model="llama-3.1-70b", gpu="a100-80gb-sxm", tp=2),
        max_num_batched_tokens=2048,
    )
    assert any("are faster than the" in n and "bandwidth floor" in n for n in result.notes)


# ---- the generator and the CLI -----------------------------------------------------------------
# A bundled page is the generator's when every line names the same sample with the same labels
# and timestamp, every count (buckets, _count, counters, request gauges) is equal, and every float
# (a _sum, the KV-usage fraction) agrees to 1e-9 relative. Why floats can differ at all: a _sum
# adds up to ~10^6 step times, each a product of float terms and a jitter factor exp(x) from the
# C library, whose last bit may differ between C libraries (glibc with or without FMA, macOS);
# every factor differs by at most an ulp (1.1e-16 relative), so the products do too, and a sum of
# positive terms each off by e relative is off by at most e plus its own rounding (n ulps for n
# terms): under 1e-9 for n < 10^7. The events stay in the same order (a step boundary would have
# to fall within an ulp of an arrival), so the counts are exact. numpy's own exp is not used: its
# AVX-512 kernel differs from the C library's in the last bit (see step_jitter_factors).
FLOAT_REL_TOLERANCE = 1e-9
_FLOAT_SAMPLES = ("_sum", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")


def _samples(text: str) -> list[tuple[str, float]]:
    """(everything before the value, value) of each sample line; comments as they are."""
    rows = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            rows.append((line, 0.0))
            continue
        head, value = line.rsplit(" ", 1)
        rows.append((head, float(value)))
    return rows


def _same_page(fresh: str, bundled: str) -> list[str]:
    """What differs between two pages beyond the float tolerance (empty: the same page)."""
    a, b = _samples(fresh), _samples(bundled)
    if len(a) != len(b):
        return [f"{len(a)} lines against {len(b)}"]
    wrong = []
    for (name_a, x), (name_b, y) in zip(a, b, strict=True):
        name = name_a.split("{", 1)[0]
        floating = name.endswith("_sum") or name in _FLOAT_SAMPLES
        same = (
            math.isclose(x, y, rel_tol=FLOAT_REL_TOLERANCE, abs_tol=1e-12) if floating else x == y
        )
        if name_a != name_b or not same:
            wrong.append(f"{name_a} {x!r} against {name_b} {y!r}")
    return wrong


@pytest.mark.parametrize(("level", "name"), list(itertools.product(NOISE_LEVELS, SCENARIOS)))
def test_bundled_scenario_files_match_the_generator(tmp_path, level, name):
    # deterministic, the jittered levels too (the jitter's seed is the scenario's); every one,
    # since two checked let the jittered ones fall behind an engine change by a last digit
    folder = write_scenario(at_level(SCENARIOS[name], level), tmp_path)
    bundled = sorted((SCENARIO_DIR / scenario_subfolder(name, level)).glob("metrics-*.prom"))
    fresh = sorted(folder.glob("metrics-*.prom"))
    assert [p.name for p in fresh] == [p.name for p in bundled]
    for a, b in zip(fresh, bundled, strict=True):
        assert _same_page(a.read_text(), b.read_text()) == [], b.name


def test_page_comparison_allows_float_noise_and_nothing_else():
    page = 'x_bucket{le="0.1"} 3\nx_count 3\nx_sum 0.25\nvllm:kv_cache_usage_perc 0.5\n'
    assert _same_page(page, page.replace("0.25", "0.25000000000000006")) == []
    assert _same_page(page, page.replace("0.25", "0.2500001")) != []  # a real change
    assert _same_page(page, page.replace("x_count 3", "x_count 4")) != []  # counts are exact
    assert _same_page(page, page.replace('le="0.1"', 'le="0.2"')) != []
    assert _same_page(page, page + "x_sum 1\n") != []


def test_step_jitter_does_not_depend_on_the_cpu(tmp_path):
    # numpy's array exp takes an AVX-512 kernel where the CPU has one; the jitter must not.
    code = (
        "import sys; from itlkit.sim.scheduler import step_jitter_factors as f; "
        "sys.stdout.write(f(0.35, seed=5).tobytes().hex())"
    )
    env = {**os.environ, "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR AVX512F"}
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, env=env)  # fmt: skip
    assert plain.returncode == 0, plain.stderr
    from itlkit.sim.scheduler import step_jitter_factors

    assert plain.stdout == step_jitter_factors(0.35, seed=5).tobytes().hex()


def _cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "itlkit", "diagnose", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_json_ranks_causes():
    result = _cli(str(SCENARIO_DIR / "preemption"), "--max-num-batched-tokens", "2048", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["causes"][0]["cause"] == "preemption"
    scores = [c["score"] for c in out["causes"]]
    assert scores == sorted(scores, reverse=True)
    assert all(0 <= s <= 1 for s in scores)
    # every cause the page can judge: without speculative counters, not speculation's cost
    assert {c["cause"] for c in out["causes"]} == set(CAUSES) - {"speculation_cost"}
    assert out["floor_seconds"] > 0
    assert out["itl"]["p50_seconds"] <= out["itl"]["p99_seconds"]
    assert all(isinstance(e, str) for c in out["causes"] for e in c["evidence"])


def test_cli_names_host_overhead_in_the_noisy_incident_on_its_gpu():
    folder = SCENARIO_DIR / scenario_subfolder("host_overhead", "noisy")
    meta = json.loads((folder / "scenario.json").read_text())
    result = _cli(str(folder), "--gpu", meta["gpu"], "--json")
    assert result.returncode == 0, result.stderr
    scores = {c["cause"]: c["score"] for c in json.loads(result.stdout)["causes"]}
    assert scores.pop("host_overhead") >= 0.7
    assert max(scores.values()) <= 0.3


def test_cli_postmortem_text():
    # the scenario's GPU (scenario.json): without it every cause scores its lowest over the
    # plausible GPUs, and on an L4 (300 GB/s) a 31 ms step of an 8B model is not host-bound
    result = _cli(str(SCENARIO_DIR / "host_overhead"), "--gpu", "h100-sxm")
    assert result.returncode == 0, result.stderr
    assert "verdict      Most likely: host overhead" in result.stdout
    assert "Nsight Systems" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give scrape PATHs or --prometheus URL"),
        (["/nonexistent/folder"], "/nonexistent/folder"),
        ([str(SCENARIO_DIR / "healthy"), "--gpu", "h1000"], "valid GPUs"),
        (
            [str(SCENARIO_DIR / "healthy"), "--window", "0"],
            "--window: '0' is not a window in seconds",
        ),
    ],
)
def test_cli_bad_input(args, message):
    result = _cli(*args)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
