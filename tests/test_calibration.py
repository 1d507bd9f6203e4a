"""Calibration (issue 10): constants used to simulate runs are recovered by the fit, runs files
and calibration files that cannot be used say so in one line, and `simulate --runs` reports
every run in the runs file's own terms.

Expected values come from the constants the test itself chose (identifiability), from the
fixture's own fields (data/real-runs, with its attribution) and from derivations written
here; never from a previous output of the fit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from _paths import (
    BUNDLED_CALIBRATION,
    DATA,
    REAL_RUNS,
    REAL_RUNS_DSTACK,
    REAL_RUNS_INFERENCEX,
    REAL_RUNS_LAMBDA,
    REAL_RUNS_LLMK8S,
    REAL_RUNS_MORE,
)

from itlkit.calibration.fit import calibrate
from itlkit.calibration.predict import predict_run
from itlkit.errors import ConfigError
from itlkit.physics.calibration import (
    Calibration,
    calibration_from_json,
    read_calibration,
    write_calibration,
)
from itlkit.physics.model_catalog import get_model
from itlkit.sim.run_workload import (
    PromptSet,
    fixed_count_arrivals,
    generated_tokens,
    prefix_cache_hits,
    prompt_set,
    run_workload,
)
from itlkit.sim.runs import Stage, read_runs

FIXTURE = REAL_RUNS / "real_runs_trainval.json"
RUNS = {run.id: run for run in read_runs(FIXTURE)}
CODEGEN = RUNS["trainval:20260217-155451-llama-2-7b-tp1-codegen"]
KNOWN = [run for run in RUNS.values() if run.workload.stages]


def itlkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "itlkit", *args], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def short(run, seconds: float = 40.0):
    """The run with each stage cut to `seconds` (same rates): a fast stand-in for the fit."""
    stages = tuple(Stage(s.rate_per_second, seconds) for s in run.workload.stages)
    return replace(run, workload=replace(run.workload, stages=stages))


def measured_as(run, calibration: Calibration, *, seed: int = 0):
    """The run with its measurements replaced by a simulation under `calibration`."""
    p = predict_run(run, calibration, seed=seed)
    measured = {**run.measured}
    for key in measured:
        if hasattr(p, key):
            measured[key] = getattr(p, key)
    quantiles = {q: p.itl_per_token_quantiles_seconds[q] for q in (0.5, 0.9, 0.99, 0.998)}
    return replace(run, measured=measured, itl_per_token_quantiles_seconds=quantiles)


# ---- the workload a run's client sent ------------------------------------------------------


def test_fixed_count_arrivals_fill_each_stage():
    stages = (Stage(5.0, 600.0), Stage(10.0, 600.0))
    t = fixed_count_arrivals(stages, seed=1)
    # inference-perf sends exactly rate x duration per stage: 3,000 then 6,000
    assert t.size == 9000
    assert np.sum(t < 600.0) == 3000 and t[0] == 0.0 and t[3000] == 600.0
    assert np.all(np.diff(t) >= 0) and t[-1] < 1200.0


def test_prefix_cache_serves_full_blocks_after_first_use_and_thrashes_when_too_small():
    # two prompts of 48 tokens, sharing a 20-token system prompt; blocks of 16 tokens.
    prompts = PromptSet(prompt_tokens=np.array([48, 48]), group=np.array([0, 0]), shared_tokens=20)
    order = np.array([0, 1, 0, 1])
    hits = prefix_cache_hits(prompts, order, capacity_blocks=100, block_size=16)
    # the last token is always computed, so (48 - 1) // 16 = 2 full blocks may be served, not 3;
    # prompt 1 finds the one shared block (20 // 16 = 1) that prompt 0 stored; the second round
    # finds both blocks of each.
    assert hits.tolist() == [0, 16, 32, 32]
    # 2 blocks of cache: each prompt's own block is evicted by the other's before it comes back
    # (s0 stays, being used by both), so only the shared block is ever a hit
    thrash = prefix_cache_hits(prompts, order, capacity_blocks=2, block_size=16)
    assert thrash.tolist() == [0, 16, 16, 16]


def test_prefix_cache_hits_are_remembered_per_prompt_set_and_capacity():
    # the same walk as above, asked again in another order: each answer is its own capacity's,
    # and an answer changed by its caller does not change the next one
    prompts = PromptSet(prompt_tokens=np.array([48, 48]), group=np.array([0, 0]), shared_tokens=20)
    order = np.array([0, 1, 0, 1])
    first = prefix_cache_hits(prompts, order, capacity_blocks=100, block_size=16)
    first[:] = -1
    assert prefix_cache_hits(prompts, order, capacity_blocks=2, block_size=16).tolist() == [
        0, 16, 16, 16]  # fmt: skip
    assert prefix_cache_hits(prompts, order, capacity_blocks=100, block_size=16).tolist() == [
        0, 16, 32, 32]  # fmt: skip
    # another prompt set of the same shape: 64-token prompts serve 3 blocks, not 2
    longer = replace(prompts, prompt_tokens=np.array([64, 64]))
    assert prefix_cache_hits(longer, order, capacity_blocks=100, block_size=16).tolist() == [
        0, 16, 48, 48]  # fmt: skip


def test_a_runs_system_prompt_hits_are_shared_by_its_group():
    run = short(CODEGEN, seconds=20.0)
    prompts = prompt_set(run)
    w = run_workload(run, capacity_blocks=10**6, seed=0)
    k = np.arange(w.num_requests)
    # request k sends prompt k mod 100; prompts come 10 to a system prompt
    np.testing.assert_array_equal(w.prefix_group, (k % 100) // 10)
    # of each request's cache hits, those inside the system prompt's full blocks are shared
    blocks = prompts.shared_tokens // 16 * 16
    assert blocks > 0
    np.testing.assert_array_equal(
        w.shared_prompt_tokens, np.minimum(w.cached_prompt_tokens, blocks)
    )
    assert w.shared_prompt_tokens[k >= 100].min() == blocks  # every prompt seen before


def test_ignore_eos_runs_generate_the_target_the_client_asked_for():
    # the codegen run counted a mean of 195.09 tokens against a target of 247 (README caveat)
    assert CODEGEN.workload.output_tokens_mean == pytest.approx(195.09044444444444)
    assert generated_tokens(CODEGEN) == 247
    counted = replace(CODEGEN, workload=replace(CODEGEN.workload, ignore_eos=False))
    assert generated_tokens(counted) == 195


# ---- simulate --runs -------------------------------------------------------------------------


def test_simulate_runs_prints_one_line_per_run_and_refuses_unknown_rates(tmp_path):
    doc = json.loads(FIXTURE.read_text())
    keep = {"trainval:64", "trainval:17"}  # one with known stages, one -lite (stages null)
    doc["runs"] = [run for run in doc["runs"] if run["id"] in keep]
    for run in doc["runs"]:
        if run["workload"]["stages"]:
            run["workload"]["stages"] = [{"rate_per_second": 6.0, "duration_seconds": 30.0}]
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(doc))
    done = itlkit("simulate", "--runs", str(path), "--json", "--calibration", "none")
    assert done.returncode == 0, done.stderr
    lines = {line["id"]: line for line in map(json.loads, done.stdout.splitlines())}
    assert set(lines) == keep
    lite = lines["trainval:17"]
    assert "arrival rates are unknown" in lite["error"] and "e2e_mean_seconds" not in lite
    qwen = lines["trainval:64"]
    assert qwen["unfinished"] == 0 and qwen["requests"] == 180  # 6/s x 30 s, drained
    # the harness's ITL mean: (E2E mean - TTFT mean) / (output tokens mean - 1)
    tokens = RUNS["trainval:64"].workload.output_tokens_mean
    itl = (qwen["e2e_mean_seconds"] - qwen["ttft_mean_seconds"]) / (tokens - 1)
    assert qwen["itl_mean_seconds"] == pytest.approx(itl, rel=1e-12)
    assert set(qwen["itl_per_token_quantiles_seconds"]) == {"0.5", "0.9", "0.99", "0.998"}
    assert qwen["ttft_p99_seconds"] >= qwen["ttft_mean_seconds"] > 0
    assert qwen["calibration"].startswith("uncalibrated")


def test_the_ttft_pipeline_adds_its_delay_to_first_and_last_token():
    run = short(RUNS["trainval:64"], 20.0)
    base = predict_run(run, Calibration())
    later = predict_run(run, Calibration(ttft_pipeline_seconds=0.010))
    assert later.ttft_mean_seconds == pytest.approx(base.ttft_mean_seconds + 0.010)
    assert later.e2e_mean_seconds == pytest.approx(base.e2e_mean_seconds + 0.010)
    assert later.itl_mean_seconds == pytest.approx(base.itl_mean_seconds)


def test_calibration_slows_the_steps_it_says():
    run = short(RUNS["trainval:64"], 20.0)
    base = predict_run(run, Calibration())
    host = predict_run(run, Calibration(host_seconds_per_step=0.002))
    # every step 2 ms longer: the per-token median moves by at least that (batches also grow)
    gap = host.itl_per_token_quantiles_seconds[0.5] - base.itl_per_token_quantiles_seconds[0.5]
    assert gap >= 0.002


# ---- identifiability -------------------------------------------------------------------------

TRUE = Calibration(
    efficiency=0.7,
    host_seconds_per_step=0.0015,
    host_seconds_per_sequence=20e-6,
    allreduce_seconds_per_call={"nvlink": 15e-6, "pcie": 15e-6},
    ttft_pipeline_steps=1.5,
    ttft_pipeline_seconds=0.004,
)


@pytest.fixture(scope="module")
def recovered():
    runs = [measured_as(short(run), TRUE) for run in KNOWN]
    return calibrate(runs, leave_one_out=False, prior_weight=0.0,
                     step_model=TRUE.step_model).calibration  # fmt: skip


# The engine step model: MFU is a constant of its own, seen through the runs' prefill.
TRUE_ENGINE = replace(TRUE, step_model="engine", mfu=0.6)


@pytest.fixture(scope="module")
def recovered_engine():
    runs = [measured_as(short(run), TRUE_ENGINE) for run in KNOWN]
    return calibrate(runs, leave_one_out=False, prior_weight=0.0).calibration


@pytest.mark.parametrize("key, tolerance", [
    ("efficiency", 0.02), ("host_seconds_per_step", 0.1), ("host_seconds_per_sequence", 0.15),
    ("mfu", 0.1),
])  # fmt: skip
def test_the_engine_fit_recovers_its_constants_and_the_mfu(recovered_engine, key, tolerance):
    assert recovered_engine.step_model == "engine"
    assert getattr(recovered_engine, key) == pytest.approx(getattr(TRUE_ENGINE, key), rel=tolerance)


@pytest.mark.parametrize("key, tolerance", [
    ("efficiency", 0.02), ("host_seconds_per_step", 0.1), ("host_seconds_per_sequence", 0.15),
    # the pipeline's seconds (4 ms) sit beside 1.5 steps of 7-25 ms in TTFTs of 20-70 ms: the
    # two are nearly collinear, so the seconds are the loosest constant
    ("ttft_pipeline_steps", 0.05), ("ttft_pipeline_seconds", 0.25),
])  # fmt: skip
def test_the_fit_recovers_the_constants_that_made_the_runs(recovered, key, tolerance):
    assert getattr(recovered, key) == pytest.approx(getattr(TRUE, key), rel=tolerance)


def test_the_fit_recovers_the_allreduce_latency(recovered):
    got = recovered.allreduce_seconds_per_call["nvlink"]
    assert got == pytest.approx(15e-6, rel=0.15)


def test_the_fit_recovers_a_step_jitter():
    truth = replace(TRUE, step_jitter=0.25)
    run = measured_as(short(CODEGEN, 60.0), truth)
    others = [measured_as(short(r), truth) for r in KNOWN if r.id != CODEGEN.id]
    fit = calibrate([run, *others], leave_one_out=False, prior_weight=0.0,
                    step_model=truth.step_model).calibration  # fmt: skip
    assert fit.step_jitter == pytest.approx(0.25, abs=0.05)
    assert fit.residuals[CODEGEN.id]["itl_token_p0.998"] == pytest.approx(0.0, abs=0.05)


@pytest.mark.parametrize("best", [0.0, 0.07, 0.33, 0.52, 0.6])
def test_the_jitter_search_finds_the_lowest_point_of_a_bowl(monkeypatch, best):
    # The search's loss, simulated per run, replaced by a bowl with a known bottom (and a flat
    # floor, as the simulated loss has, so a parabola is only an approximation of it): it must
    # land within the tolerance (+ what the bowl's flatness allows) wherever the bottom is, the
    # range's ends included, in at most 3 + JITTER_MORE evaluations.
    from itlkit.calibration import fit as fit_module

    calls = []

    def bowl(run, calibration, *, seed):
        calls.append(calibration.step_jitter)
        x = calibration.step_jitter - best
        return 30.0 + 400.0 * x * x + 900.0 * x**4

    monkeypatch.setattr(fit_module, "_jitter_error", bowl)
    monkeypatch.setattr(fit_module, "run_all", lambda f, *args: list(map(f, *args)))
    run = replace(KNOWN[0], itl_per_token_quantiles_seconds={0.5: 0.01})
    sigma = fit_module.fit_jitter([run], TRUE)
    assert sigma == pytest.approx(best, abs=0.01)
    assert len(calls) <= 3 + fit_module.JITTER_MORE


# ---- what cannot be fitted, and bad files ----------------------------------------------------


def test_data_too_thin_to_fit_is_refused():
    lite = [run for run in RUNS.values() if not run.workload.stages]
    with pytest.raises(ConfigError, match=r"only 0 of 7 runs can be simulated"):
        calibrate(lite)
    with pytest.raises(ConfigError, match=r"only 2 of 2 runs .* at least 3"):
        calibrate(KNOWN[:2])


def test_calibrate_cli_on_thin_data_is_one_line(tmp_path):
    doc = json.loads(FIXTURE.read_text())
    doc["runs"] = [run for run in doc["runs"] if not run["workload"]["stages"]]
    path = tmp_path / "lite.json"
    path.write_text(json.dumps(doc))
    done = itlkit("calibrate", str(path), "-o", str(tmp_path / "c.json"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "only 0 of 7 runs" in done.stderr


@pytest.mark.parametrize("edit, message", [
    (lambda r: r.update(gpu="h900"), r"run 'trainval:64': .*h900"),
    (lambda r: r.update(model="llama-9"), r"run 'trainval:64': model .*llama-9"),
    (lambda r: r["workload"].update(stages=[{"rate_per_second": -1, "duration_seconds": 5}]),
     r"run 'trainval:64': workload.stages\[0\].rate_per_second must be a finite number > 0"),
])  # fmt: skip
def test_runs_files_with_unknown_names_say_which_run(tmp_path, edit, message):
    import re

    doc = json.loads(FIXTURE.read_text())
    doc["runs"] = [run for run in doc["runs"] if run["id"] in ("trainval:64", "trainval:17")]
    edit(next(run for run in doc["runs"] if run["id"] == "trainval:64"))
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(doc))
    done = itlkit("calibrate", str(path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert re.search(message, done.stderr), done.stderr
    # simulate --runs: the bad run gets its error line, the others their own lines
    done = itlkit("simulate", "--runs", str(path), "--json", "--calibration", "none")
    assert done.returncode == 0, done.stderr
    lines = {line["id"]: line for line in map(json.loads, done.stdout.splitlines())}
    assert re.search(message, lines["trainval:64"]["error"]), lines["trainval:64"]
    assert "arrival rates are unknown" in lines["trainval:17"]["error"]


def test_calibration_files_round_trip_and_bad_ones_are_refused(tmp_path):
    path = tmp_path / "c.json"
    write_calibration(replace(TRUE, fitted_on=("a", "b")), path)
    back = read_calibration(path)
    assert back.efficiency == 0.7 and back.fitted_on == ("a", "b")
    assert back.allreduce_seconds_per_call == {"nvlink": 15e-6, "pcie": 15e-6}
    with pytest.raises(ConfigError, match="not a calibration file"):
        calibration_from_json({"format": "x"})
    with pytest.raises(ConfigError, match=r"efficiency = 3 is outside \[0.05, 1\]"):
        calibration_from_json({"format": "itlkit-calibration/1", "efficiency": 3})
    with pytest.raises(ConfigError, match="unknown keys speed"):
        calibration_from_json({"format": "itlkit-calibration/1", "speed": 3})
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    done = itlkit("simulate", "--calibration", str(bad), "--duration", "5")
    assert done.returncode == 2 and "bad.json:1: not valid JSON" in done.stderr


def test_the_bundled_calibration_says_what_it_was_fitted_on():
    from itlkit.cli._runs import load_calibration

    bundled = load_calibration("bundled")
    more = read_runs(REAL_RUNS_MORE / "real_world_more.json")
    inferencex = read_runs(REAL_RUNS_INFERENCEX / "inferencex.json")
    llmk8s = read_runs(REAL_RUNS_LLMK8S / "llmk8s.json")
    lambdas = read_runs(REAL_RUNS_LAMBDA / "lambda.json")
    dstack = read_runs(REAL_RUNS_DSTACK / "dstack.json")
    # the 6 simulable fixture runs (H100, vLLM 0.15.1), the 107 A100 / H100 64 GB bursts, the
    # 91 closed-loop SGLang DeepSeek-R1 runs of InferenceX, llm-k8s' 4 TP 8 runs on A100,
    # LambdaLabs' 14 vLLM 0.5.4 bursts on H100 SXM and dstack's 39 vLLM 0.6-0.7 runs
    assert bundled.is_calibrated
    assert set(bundled.fitted_on) == {
        r.id for r in (*KNOWN, *more, *inferencex, *llmk8s, *lambdas, *dstack)}  # fmt: skip
    assert bundled.step_model == "engine"
    # one cell per GPU family, V0 and SGLang apart, MoE apart, with >= 3 runs: A100 vLLM 0.8
    # and 0.10 dense (75) and MoE (10: gpt-oss), H100 vLLM 0.15 (6, its 2 MoE runs with its
    # dense ones), H100 V0 (58: 26 on the 64 GB card, 14 vLLM 0.5.4 and 18 vLLM 0.6.3 on SXM),
    # vLLM V0's DeepSeek-R1 on H200 (12) and MI300X (9), and SGLang's on each of six GPUs
    assert set(bundled.groups) == {
        "gpu:a100", "gpu:a100/MoE", "gpu:h100", "gpu:h100/V0", "gpu:h200/SGLang/MoE",
        "gpu:b200/SGLang/MoE", "gpu:b300/SGLang/MoE", "gpu:mi300x/SGLang/MoE",
        "gpu:mi325x/SGLang/MoE", "gpu:mi355x/SGLang/MoE", "gpu:h200/V0/MoE",
        "gpu:mi300x/V0/MoE"}  # fmt: skip
    # the H100 vLLM 0.15 corner's six runs show neither step model better beyond chance
    # (each predicts three of them better): the engine model, its MFU the global fit's, which
    # those mostly-decode runs cannot tell; SGLang's MI355X cell, whose 29 runs favour the
    # reference model on all but a few, keeps it
    h100 = bundled.groups["gpu:h100"]
    assert h100["step_model"] == "engine"
    assert h100["mfu"] == pytest.approx(bundled.mfu, rel=1e-3)
    assert bundled.groups["gpu:mi355x/SGLang/MoE"]["step_model"] == "reference"
    # the global constants are vLLM's: SGLang's runs are fitted in their cells only
    assert "170 vLLM runs" in bundled.undetermined["global_fit"]
    # no L40S runs, nor of its architecture: under vLLM V1 the newest release's V1 cell (no
    # release named); under V0 the global constants, with what a new source's runs came out as
    v1 = bundled.for_gpu("l40s")
    assert v1.group == "gpu:h100" and v1.scope.endswith(
        "vLLM V1 runs of the newest release (0.15.1; none named: a current vLLM assumed) on "
        "another architecture")  # fmt: skip
    l40s = bundled.for_gpu("l40s", "V0")
    assert l40s.efficiency == bundled.efficiency and l40s.group == ""
    itl = [e["itl_mean_seconds"] for e in bundled.leave_one_source_out.values()]
    assert l40s.describe().endswith(
        f"no gpu:l40s/V0 runs in it: its global constants; a source it was not fitted on came out "
        f"{min(itl):.0%} to {max(itl):.0%} off in mean ITL (leave-one-source-out)")  # fmt: skip
    # no H200 vLLM runs: the H100's (the same Hopper chip, other HBM)
    h200 = bundled.for_gpu("h200-sxm")
    assert h200.group == "gpu:h100" and h200.efficiency == bundled.groups["gpu:h100"]["efficiency"]
    assert h200.scope == ("no gpu:h200 runs in it: gpu:h100's constants, runs on a GPU of the "
                          "same architecture")  # fmt: skip
    # vLLM V1 serving an MoE on an H200 borrows the GPU side of vLLM V0's MoE cell there (vLLM's
    # fused-MoE kernels on the same GPU), its host side and pipeline from vLLM V1's H100 cell
    lent = bundled.for_gpu("h200-sxm", moe=True)
    v0, v1 = bundled.groups["gpu:h200/V0/MoE"], bundled.groups["gpu:h100"]
    assert lent.group == "gpu:h200/V0/MoE" and lent.efficiency == v0["efficiency"]
    assert lent.scope == ("no gpu:h200/MoE runs in it: gpu:h200/V0/MoE's constants, another "
                          "engine's runs on the same GPU family; the host side and the TTFT "
                          "pipeline gpu:h100's (its own engine's)")  # fmt: skip
    assert (lent.host_seconds_per_step, lent.ttft_pipeline_seconds) == (
        v1["host_seconds_per_step"], v1["ttft_pipeline_seconds"])  # fmt: skip
    # SGLang serving one keeps its own cell; vLLM V1 on a B200 has no V0 cell: SGLang's, but
    # for an MoE of many experts vLLM's on Hopper
    assert bundled.for_gpu("h200-sxm", "SGLang", moe=True).group == "gpu:h200/SGLang/MoE"
    assert bundled.for_gpu("b200", moe=True).group == "gpu:b200/SGLang/MoE"
    assert bundled.for_model("b200", get_model("gpt-oss-120b")).group == "gpu:h200/V0/MoE"
    assert bundled.for_gpu("h100-sxm").group == "gpu:h100"
    # gpt-oss-120b (128 experts) on an H100: the H200's V0 MoE cell (vLLM's fused-MoE kernels
    # on the same chip), its host side and TTFT pipeline from vLLM V1's H100 cell
    oss = bundled.for_model("h100-sxm", get_model("gpt-oss-120b"))
    assert oss.group == "gpu:h200/V0/MoE" and oss.efficiency == v0["efficiency"]
    assert oss.host_seconds_per_step == v1["host_seconds_per_step"]
    assert "another engine's runs on a GPU of the same architecture" in oss.scope
    assert set(bundled.leave_one_out) >= {"itl_mean_seconds", "ttft_mean_seconds"}
    assert set(bundled.leave_one_source_out) == {
        "inference-sim/sim-to-real-accuracy-validation", "dennislee22/vLLM-benchmarking",
        "FerranAgulloLopez/vLLMBatchingMemoryGap", "SemiAnalysisAI/InferenceX-app",
        "surajssd/llm-k8s", "LambdaLabsML/vllm-benchmark", "dstackai/benchmarks"}  # fmt: skip


def test_explain_shows_the_calibrated_step_beside_the_reference():
    from itlkit.cli._runs import load_calibration

    c = load_calibration("bundled").for_gpu("h100-sxm")  # explain's default GPU
    done = itlkit("explain", "--calibration", "bundled", "--json")
    assert done.returncode == 0, done.stderr
    values = json.loads(done.stdout)
    # the reference's floor stays (worked example: 4.79 + 10.26 = 15.05 ms at 64 x 4,096)
    assert round(values["floor_seconds"] * 1e3, 2) == 15.05
    # a calibrated decode step, memory-bound at 64 tokens: the floor / efficiency + host per
    # step + 64 x per sequence (TP 1: no all-reduce); the engine step model reads the weights
    # less the untied input embedding (128,256 x 4,096 bf16: gathered, not streamed)
    embedding_seconds = 128256 * 4096 * 2 / 3.35e12 if c.step_model == "engine" else 0.0
    expected = (
        (values["floor_seconds"] - embedding_seconds) / c.efficiency
        + c.host_seconds_per_step
        + 64 * c.host_seconds_per_sequence
    )
    assert values["calibrated_step_seconds"] == pytest.approx(expected, rel=1e-9)
    assert values["calibration"] == c.name
    text = itlkit("explain", "--calibration", "bundled").stdout
    assert "calibrated decode step" in text and "constants of gpu:h100" in text


# ---- calibrating on a `vllm bench serve` file ---------------------------------------------


def bench_file_from(path, result, delay_seconds: float, *, rate: float) -> None:
    """Write what `vllm bench serve --save-detailed` would have recorded of a simulated run:
    per request its lengths, TTFT (+ the pipeline delay), token gaps and start time."""
    arrival = result.workload.arrival_seconds
    ttfts, itls = [], []
    for i in range(result.workload.num_requests):
        times = result.token_times_seconds(i)
        ttfts.append(float(times[0] - arrival[i] + delay_seconds))
        itls.append(np.diff(times).tolist())
    doc = {
        "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": len(ttfts), "completed": len(ttfts), "failed": 0,
        "request_rate": rate, "duration": float(result.end_seconds),
        "input_lens": result.workload.prompt_tokens.tolist(),
        "output_lens": result.workload.output_tokens.tolist(),
        "ttfts": ttfts, "itls": itls, "errors": [""] * len(ttfts),
        "start_times": arrival.tolist(),
        "mean_ttft_ms": 1e3 * float(np.mean(ttfts)),
        "median_ttft_ms": 1e3 * float(np.median(ttfts)),
    }  # fmt: skip
    path.write_text(json.dumps(doc))


def test_one_bench_file_refits_the_efficiency_and_the_pipeline_seconds(tmp_path):
    from itlkit.physics.roofline import Deployment
    from itlkit.sim.scheduler import SchedulerConfig, simulate_deployment
    from itlkit.sim.workload import synthetic_workload

    truth = replace(TRUE, efficiency=0.62, ttft_pipeline_steps=0.0, ttft_pipeline_seconds=0.006)
    dep = replace(
        Deployment.create(model="llama-3.1-8b", gpu="h100-sxm"),
        host_overhead_seconds=truth.host_seconds_per_step,
        host_seconds_per_sequence=truth.host_seconds_per_sequence,
    )
    work = synthetic_workload(duration_seconds=60, rate_per_second=4.0, prompt_tokens=512,
                              output_tokens=128, seed=3)  # fmt: skip
    result = simulate_deployment(work, deployment=dep, efficiency=truth.efficiency,
                                 config=SchedulerConfig(max_num_batched_tokens=2048,
                                                        max_num_seqs=128))  # fmt: skip
    bench = tmp_path / "bench.json"
    bench_file_from(bench, result, truth.ttft_pipeline_seconds, rate=4.0)
    base = tmp_path / "base.json"
    write_calibration(replace(truth, efficiency=0.9, ttft_pipeline_seconds=0.0,
                              fitted_on=("earlier runs",), name="base"), base)  # fmt: skip
    out = tmp_path / "c.json"
    done = itlkit("calibrate", "--bench", str(bench), "--model", "llama-3.1-8b", "--gpu",
                  "h100-sxm", "--max-num-batched-tokens", "2048", "--max-num-seqs", "128",
                  "--base", str(base), "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    fitted = read_calibration(out)
    assert fitted.efficiency == pytest.approx(0.62, rel=0.02)
    assert fitted.ttft_pipeline_seconds == pytest.approx(0.006, rel=0.1)
    assert fitted.host_seconds_per_step == truth.host_seconds_per_step  # kept from the base
    assert "host_seconds_per_sequence" in fitted.undetermined
    assert "kept from the base calibration 'base'" in done.stdout


def test_a_summary_only_bench_file_cannot_calibrate(tmp_path):
    bench = tmp_path / "summary.json"
    bench.write_text(json.dumps({"completed": 10, "mean_itl_ms": 8.0, "median_ttft_ms": 30.0}))
    done = itlkit("calibrate", "--bench", str(bench), "-o", str(tmp_path / "c.json"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "--save-detailed" in done.stderr


# ---- calibrating on one incident's metrics, and diagnosing with a calibration ----------------


def test_one_incident_gives_back_the_engine_speed_it_was_simulated_at(tmp_path):
    folder = DATA.parent.parent / "data" / "scenarios" / "healthy"
    truth = json.loads((folder / "scenario.json").read_text())  # written at generation
    out = tmp_path / "c.json"
    done = itlkit("calibrate", "--scrapes", str(folder), "--gpu", truth["gpu"], "-o", str(out))
    assert done.returncode == 0, done.stderr
    fitted = read_calibration(out)
    assert fitted.efficiency == pytest.approx(truth["efficiency"], rel=0.03)
    assert fitted.host_seconds_per_step == pytest.approx(truth["host_overhead_seconds"], abs=2e-4)
    assert fitted.fitted_on == ("healthy",) and "allreduce_seconds_per_call" in fitted.undetermined
    assert "not determined: host_seconds_per_sequence" in done.stdout


def test_diagnose_judges_the_host_against_the_calibration_given(tmp_path):
    folder = DATA.parent.parent / "data" / "scenarios" / "healthy"
    path = tmp_path / "c.json"
    write_calibration(replace(TRUE, host_seconds_per_step=0.002, host_seconds_per_sequence=1e-5,
                              fitted_on=("mine",), name="mine"), path)  # fmt: skip
    done = itlkit("diagnose", str(folder), "--gpu", "h100-sxm", "--calibration", str(path),
                  "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    # a healthy host at the incident's batch: 2 ms + batch x 10 us
    assert doc["healthy_host_seconds"] == pytest.approx(0.002 + doc["batch_size"] * 1e-5)
    assert "healthy host: calibration 'mine': fitted on 1 run" in doc["assumptions"]


def test_the_fit_gives_the_same_answer_on_a_process_pool():
    from itlkit.calibration.parallel import workers

    runs = [short(run, 20.0) for run in KNOWN]
    serial = calibrate(runs, leave_one_out=False).calibration
    with workers(2):
        pooled = calibrate(runs, leave_one_out=False).calibration
    assert pooled.to_json() == serial.to_json()


def test_a_prediction_beyond_the_calibrations_runs_says_so():
    from itlkit.cli._runs import load_calibration

    bundled = load_calibration("bundled")
    # the global fit's vLLM runs: the fixture's open-loop stages, the bursts of the 107 and
    # dstack's closed loops (its DeepSeek-R1 runs); the closed loops of InferenceX are
    # SGLang's, in its cells
    assert bundled.coverage["model"] == ["MoE", "dense 10-40B", "dense < 10B", "dense > 40B"]
    assert bundled.coverage["client"] == ["burst", "closed loop", "open loop"]
    assert bundled.coverage["client@gpu:h200/SGLang/MoE"] == ["closed loop"]
    assert bundled.beyond(model="dense < 10B", client="open loop") == ""
    assert bundled.beyond(model="MoE", client="closed loop") == ""
    sglang = bundled.for_gpu("h200-sxm", "SGLang", moe=True)
    assert sglang.beyond(model="MoE", client="closed loop") == ""
    assert sglang.beyond(model="dense < 10B", client="burst") == (
        "no dense < 10B runs, no burst clients in it: expect a larger error"
    )
    # the H100 vLLM 0.15 cell: the fixture's open-loop stages only
    assert bundled.for_gpu("h100-sxm").beyond(model="MoE", client="closed loop") == (
        "no closed loop clients in it: expect a larger error"
    )
    done = itlkit("simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--num-prompts",
                  "20", "--max-concurrency", "4", "--prompt-tokens", "256", "--output-tokens",
                  "32", "--calibration", "bundled")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "constants of gpu:h100; no closed loop clients in it: expect a larger error" in (
        done.stdout
    )


def test_groups_run_from_a_runs_own_cell_to_its_gpu_family():
    from itlkit.physics.calibration import fit_keys, group_keys

    # its own engine's cells first (model class, then dense); then, between vLLM V1 and SGLang,
    # the other's on the same family, model class first; V0 is not borrowed whole
    assert group_keys("a100-80gb-sxm") == ("gpu:a100", "gpu:a100/SGLang")
    # then the same on the families of the same chip architecture (SIBLINGS), nearest first
    assert group_keys("h100-sxm", "V0") == ("gpu:h100/V0", "gpu:h200/V0", "gpu:h800/V0")
    assert group_keys("h100-sxm", "V0", moe=True)[:3] == (
        "gpu:h100/V0/MoE", "gpu:h100/V0", "gpu:h200/V0/MoE")  # fmt: skip
    # vLLM V1 serving an MoE: its own cells (where its kind of runs is fitted: `fit_keys`), then
    # a V0 MoE cell's GPU side (`Calibration.for_gpu`) before SGLang's cells
    # on its own GPU family only (an MoE of few wide experts, vLLM 0.15's Llama-4-Scout on H100,
    # came out twice as slow on the H200's V0 cell)
    assert group_keys("h200-sxm", moe=True)[:8] == (
        "gpu:h200/MoE", "gpu:h200", "gpu:h200/V0/MoE", "gpu:h200/SGLang/MoE", "gpu:h200/SGLang",
        "gpu:h100/MoE", "gpu:h100", "gpu:h100/SGLang/MoE")  # fmt: skip
    # ... but an MoE of many small experts takes vLLM's MoE cells of the whole architecture
    # (V1's, then V0's; its own family first) before any dense cell: the Hopper V0 cell's
    # DeepSeek-R1 (256 experts) is nearer gpt-oss-120b (128) on an H100 than dense models are
    # (then those of the earlier architecture: Ampere's)
    assert group_keys("h100-sxm", moe=True, many_experts=True)[:9] == (
        "gpu:h100/MoE", "gpu:h100/V0/MoE", "gpu:h200/MoE", "gpu:h200/V0/MoE", "gpu:h800/MoE",
        "gpu:h800/V0/MoE", "gpu:a100/MoE", "gpu:a100/V0/MoE", "gpu:h100")  # fmt: skip
    assert group_keys("h100-sxm", "SGLang", moe=True, many_experts=True) == group_keys(
        "h100-sxm", "SGLang", moe=True
    )  # SGLang's own cells keep their order
    assert group_keys("h100-sxm", many_experts=True) == group_keys("h100-sxm")  # not an MoE
    assert group_keys("h200-sxm", "SGLang", moe=True)[:4] == (
        "gpu:h200/SGLang/MoE", "gpu:h200/SGLang", "gpu:h200/MoE", "gpu:h200")  # fmt: skip
    assert group_keys("mi325x", "SGLang") == (
        "gpu:mi325x/SGLang", "gpu:mi325x", "gpu:mi300x/SGLang", "gpu:mi300x")  # fmt: skip
    assert fit_keys("mi355x", "SGLang", moe=True) == ("gpu:mi355x/SGLang/MoE", "gpu:mi355x/SGLang")


def test_an_moe_of_many_experts_takes_vllms_moe_cells_of_the_earlier_architecture():
    from itlkit.physics.calibration import architecture_of, earlier_families, group_keys

    # Blackwell, then Hopper, then Ampere; each vendor its own line; the newest first
    assert earlier_families("gpu:b300") == (
        "gpu:h100", "gpu:h200", "gpu:h800", "gpu:a100")  # fmt: skip
    assert earlier_families("gpu:h200") == ("gpu:a100",)
    assert earlier_families("gpu:a100") == ()
    assert earlier_families("gpu:mi355x")[:2] == ("gpu:mi300x", "gpu:mi325x")
    assert earlier_families("gpu:l40s") == () and architecture_of("gpu:l40s") == ""
    # vLLM V1 serving one on a B200: Blackwell's vLLM MoE cells, then Hopper's, then Ampere's,
    # each V1 before V0, all before Blackwell's dense and SGLang cells
    keys = group_keys("b200", moe=True, many_experts=True)
    assert keys[:8] == ("gpu:b200/MoE", "gpu:b200/V0/MoE", "gpu:b300/MoE", "gpu:b300/V0/MoE",
                        "gpu:gb200/MoE", "gpu:gb200/V0/MoE", "gpu:h100/MoE",
                        "gpu:h100/V0/MoE")  # fmt: skip
    assert keys.index("gpu:a100/V0/MoE") < keys.index("gpu:b200") < keys.index(
        "gpu:b200/SGLang/MoE")  # fmt: skip
    assert "gpu:h100" not in keys  # never another architecture's dense cell
    # a later architecture lends nothing to an earlier one; SGLang and few experts: unchanged
    assert not any(k.startswith(("gpu:h", "gpu:b")) for k in
                   group_keys("a100-80gb-sxm", moe=True, many_experts=True))  # fmt: skip
    assert group_keys("b200", "SGLang", moe=True, many_experts=True) == group_keys(
        "b200", "SGLang", moe=True)  # fmt: skip
    assert "gpu:h200/V0/MoE" not in group_keys("b200", moe=True)


def group_of(efficiency: float) -> dict:
    """A calibration group's constants, all but the efficiency at round values."""
    return {"efficiency": efficiency, "mfu": 0.5, "allreduce_seconds_per_call": {},
            "host_seconds_per_step": 0.0, "host_seconds_per_sequence": 0.0,
            "ttft_pipeline_steps": 0.0, "ttft_pipeline_seconds": 0.0,
            "network_bytes_per_second": 1e10, "step_model": "engine"}  # fmt: skip


def test_for_gpu_takes_the_nearest_group_it_has():
    groups = {"gpu:h200": group_of(0.8), "gpu:h200/SGLang/MoE": group_of(0.4),
              "gpu:h200/SGLang": group_of(0.7), "gpu:a100/V0": group_of(0.6)}  # fmt: skip
    cal = Calibration(efficiency=0.9, fitted_on=("x",), groups=groups)
    assert cal.for_gpu("h200-sxm").efficiency == 0.8
    assert cal.for_gpu("h200-sxm", "SGLang").efficiency == 0.7
    assert cal.for_gpu("h200-sxm", "SGLang", moe=True).efficiency == 0.4
    # vLLM serving an MoE: no MoE cell of its own, so its engine's dense cell on the family (where
    # its MoE runs are fitted when too few for a cell of their own: `fit_keys`) before SGLang's
    # MoE cell; without that dense cell, SGLang's MoE cell
    assert cal.for_gpu("h200-sxm", moe=True).group == "gpu:h200"
    no_dense = replace(cal, groups={k: v for k, v in groups.items() if k != "gpu:h200"})
    assert no_dense.for_gpu("h200-sxm", moe=True).group == "gpu:h200/SGLang/MoE"
    # V0 takes nothing from V1 or SGLang, and lends nothing: the global fit
    assert cal.for_gpu("h200-sxm", "V0").group == "" and cal.for_gpu("a100-80gb-sxm").group == ""
    other = cal.for_gpu("b200", moe=True)
    assert other.efficiency == 0.9 and other.scope.startswith("no gpu:b200/MoE runs in it")


def test_a_gpu_without_runs_borrows_a_sibling_architectures_cell_before_the_global_one():
    groups = {"gpu:h100": group_of(0.8), "gpu:mi300x/SGLang/MoE": group_of(0.5),
              "gpu:b300": group_of(0.7)}  # fmt: skip
    cal = Calibration(efficiency=0.9, fitted_on=("x",), groups=groups)
    assert cal.for_gpu("h200-sxm").efficiency == 0.8  # Hopper
    assert cal.for_gpu("mi325x", "SGLang", moe=True).efficiency == 0.5  # CDNA 3
    assert cal.for_gpu("gb200-gpu").efficiency == 0.7  # Blackwell
    assert cal.for_gpu("mi325x", "SGLang", moe=True).scope.endswith(
        "runs on a GPU of the same architecture"
    )
    assert "another engine's runs on a GPU of the same architecture;" in (
        cal.for_gpu("mi325x", moe=True).scope
    )
    # no sibling: the global constants; a family's own cell before any sibling's
    assert cal.for_gpu("a100-80gb-sxm").efficiency == 0.9
    assert cal.for_gpu("l40s").efficiency == 0.9
    groups["gpu:h200"] = group_of(0.6)
    own = Calibration(efficiency=0.9, fitted_on=("x",), groups=groups)
    assert own.for_gpu("h200-sxm").efficiency == 0.6 and own.for_gpu("h200-sxm").scope == ""


def test_an_earlier_architectures_v0_moe_cell_lends_its_gpu_side_with_a_v1_host_side():
    groups = {"gpu:h200/V0/MoE": {**group_of(0.43), "host_seconds_per_step": 0.004},
              "gpu:b200/SGLang/MoE": group_of(0.71), "gpu:a100/MoE": group_of(0.63),
              "gpu:h100": {**group_of(0.79), "host_seconds_per_step": 0.0006,
                           "ttft_pipeline_seconds": 0.006}}  # fmt: skip
    coverage = {"version@gpu:h100": ["0.15.1"], "version@gpu:a100/MoE": ["0.10.1.1"]}
    cal = Calibration(efficiency=0.9, fitted_on=("x",), groups=groups, coverage=coverage)
    oss = cal.for_gpu("b200", moe=True, many_experts=True, release=(0, 14, 1))
    # the GPU side of vLLM's fused-MoE kernels on Hopper, not SGLang's on Blackwell, nor the
    # A100's (the nearer architecture first)
    assert oss.group == "gpu:h200/V0/MoE" and oss.efficiency == 0.43
    # the host side and TTFT pipeline of vLLM V1: the dense cell of the nearest release, not
    # the A100 MoE cell that `group_keys` also lists, nor V0's
    assert (oss.host_seconds_per_step, oss.ttft_pipeline_seconds) == (0.0006, 0.006)
    assert oss.scope == ("no gpu:b200/MoE runs in it: gpu:h200/V0/MoE's constants, vLLM's MoE "
                         "runs on an earlier architecture (Hopper; this GPU is Blackwell); the "
                         "host side and the TTFT pipeline gpu:h100's (vLLM V1 of release "
                         "0.15.1)")  # fmt: skip
    # an MoE of few experts, and SGLang, keep Blackwell's SGLang cell
    assert cal.for_gpu("b200", moe=True, release=(0, 14, 1)).group == "gpu:b200/SGLang/MoE"
    assert cal.for_gpu("b200", "SGLang", moe=True, many_experts=True).efficiency == 0.71


def test_a_v1_deployment_without_a_cell_on_its_architecture_takes_the_nearest_release():
    groups = {"gpu:h100": group_of(0.8), "gpu:a100": group_of(0.7), "gpu:h100/V0": group_of(0.5),
              "gpu:a100/MoE": group_of(0.4), "gpu:h200/SGLang/MoE": group_of(0.3)}  # fmt: skip
    coverage = {"version@gpu:h100": ["0.15.1"], "version@gpu:a100": ["0.8.3", "0.10.1.1"],
                "version@gpu:h100/V0": ["0.6.3"], "version@gpu:a100/MoE": ["0.10.1.1"]}  # fmt: skip
    cal = Calibration(efficiency=0.9, fitted_on=("x",), groups=groups, coverage=coverage)
    # vLLM 0.14 on a B200 (no Blackwell cell): 0.15 is one minor release away, 0.10 four
    b200 = cal.for_gpu("b200", release=(0, 14, 1))
    assert b200.group == "gpu:h100" and b200.efficiency == 0.8
    assert b200.scope == ("no gpu:b200 runs in it, nor of its architecture: gpu:h100's constants, "
                          "vLLM V1 runs of the release nearest 0.14.1 (0.15.1) on another "
                          "architecture")  # fmt: skip
    assert cal.for_gpu("b200", release=(0, 11, 0)).group == "gpu:a100"  # 0.10 nearer than 0.15
    assert cal.for_gpu("l40s", release=(0, 8, 5)).group == "gpu:a100"  # 0.8.3: same minor
    # an MoE takes V1 MoE cells only; the V0 cell of 0.6.3 is never the nearest V1 release
    assert cal.for_gpu("b200", moe=True, release=(0, 15, 0)).group == "gpu:a100/MoE"
    assert cal.for_gpu("b200", release=(0, 6, 3)).group == "gpu:a100"
    # no release named: the newest release's (0.15.1); V0, SGLang or a cell on its
    # architecture: as before
    assert cal.for_gpu("b200").group == "gpu:h100" and "newest release (0.15.1" in (
        cal.for_gpu("b200").scope)  # fmt: skip
    assert cal.for_gpu("b200", "V0", release=(0, 6, 3)).group == ""
    assert replace(cal, coverage={}).for_gpu("b200", release=(0, 14, 0)).group == ""  # unknown
    assert cal.for_gpu("b200", "SGLang", release=(0, 15, 0)).group == ""
    assert cal.for_gpu("h200-sxm", release=(0, 10, 0)).group == "gpu:h100"  # its sibling's
    assert cal.for_gpu("h200-sxm", moe=True, release=(0, 10, 0)).group == "gpu:h200/SGLang/MoE"
    # a tie goes to the cell of more runs
    tied = replace(
        cal,
        coverage={**coverage, "version@gpu:h100": ["0.12.0"]},
        group_leave_one_out={"gpu:h100": {"runs": 13}, "gpu:a100": {"runs": 75}},
    )
    assert tied.for_gpu("b200", release=(0, 11, 0)).group == "gpu:a100"


def test_the_calibration_records_each_cells_vllm_releases():
    from types import SimpleNamespace

    from itlkit.calibration.fit import release_versions
    from itlkit.cli._runs import load_calibration
    from itlkit.sim.versions import parse_vllm_version

    runs = [SimpleNamespace(release=parse_vllm_version(v)) for v in
            ("0.10.1.1", "0.8.3", "0.10.1.1", "V1", "0.15.1")]  # fmt: skip
    runs.append(SimpleNamespace(release=None))
    assert release_versions(runs) == ["0.8.3", "0.10.1.1", "0.15.1"]  # by release, not as text
    bundled = load_calibration("bundled")
    assert bundled.coverage["version@gpu:h100"] == ["0.15.1"]
    assert bundled.coverage["version@gpu:a100"] == ["0.8.3", "0.10.1.1"]
    qwen = bundled.for_model("b200", get_model("qwen3-32b"), "V1", parse_vllm_version("0.14.1"))
    assert qwen.group == "gpu:h100"
    assert bundled.for_model("b200", get_model("qwen3-32b")).group == "gpu:h100"  # the newest


def test_a_held_out_fold_knows_only_its_training_runs_releases(monkeypatch):
    from types import SimpleNamespace

    from itlkit.calibration import groups as groups_module
    from itlkit.sim.versions import parse_vllm_version

    # the held-out source's release must not make its own cell "nearest" in its fold
    monkeypatch.setattr(groups_module, "_solve", lambda *a, **k: (Calibration(), {}))
    runs = [SimpleNamespace(id=i, release=parse_vllm_version(v), gpu=g)
            for i, v, g in (("a", "0.15.1", "h200-sxm"), ("b", "0.10.1.1", "h100-sxm"),
                            ("c", "0.8.3", "a100-80gb-sxm"))]  # fmt: skip
    cells = {"gpu:h100": {"a": None, "b": None}, "gpu:a100": {"c": None}}
    cal = Calibration(groups={"gpu:h100": group_of(0.8), "gpu:a100": group_of(0.7)})
    fold = groups_module.refit_without(runs, {}, cells, {"a"}, cal, prior_weight=1.0)
    assert fold.coverage == {
        "version@gpu:h100": ["0.10.1.1"],
        "version@gpu:a100": ["0.8.3"],
        "gpu@gpu:h100": ["h100-sxm"],
        "gpu@gpu:a100": ["a100-80gb-sxm"],
    }


def test_a_group_is_a_cell_with_runs_of_its_own():
    from types import SimpleNamespace

    from itlkit.calibration.groups import by_group

    Run = SimpleNamespace
    moe = SimpleNamespace(is_moe=True)
    dense = SimpleNamespace(is_moe=False)
    runs = [Run(id=f"a{i}", gpu="a100-80gb-sxm", engine="V1", model=dense) for i in range(4)]
    runs += [Run(id=f"m{i}", gpu="a100-80gb-sxm", engine="V1", model=moe) for i in range(2)]
    runs += [Run(id=f"h{i}", gpu="h200-sxm", engine="V1", model=moe) for i in range(3)]
    runs += [Run(id=f"s{i}", gpu="h200-sxm", engine="SGLang", model=moe) for i in range(2)]
    groups = {key: sorted(r.id for r in members) for key, members in by_group(runs).items()}
    # the 2 A100 MoE runs are fewer than MIN_RUNS (3): they join vLLM's dense A100 cell; the
    # 2 SGLang runs then have SGLang's dense H200 cell, still 2: no group, the global fit
    assert groups == {"gpu:a100": ["a0", "a1", "a2", "a3", "m0", "m1"],
                      "gpu:h200/MoE": ["h0", "h1", "h2"]}  # fmt: skip
    assert by_group(runs[:4]) == {}  # every run in one cell: the global fit is that group


def test_the_global_constants_are_vllms():
    from types import SimpleNamespace

    from itlkit.calibration.fit import global_runs

    vllm = [SimpleNamespace(id=f"v{i}", serving_engine="vllm") for i in range(3)]
    sglang = [SimpleNamespace(id=f"s{i}", serving_engine="sglang") for i in range(5)]
    # three vLLM runs (MIN_RUNS) fit the global constants alone; with two, every run does
    assert global_runs(vllm + sglang) == vllm
    assert global_runs(vllm[:2] + sglang) == vllm[:2] + sglang


def test_a_link_no_run_crossed_takes_the_constant_lent_for_it():
    from types import SimpleNamespace

    from itlkit.calibration.fit import RunFeatures, lent_links, solve_step_terms

    # three runs, two over NVLink (TP), one on one GPU: PCIe and the network are never crossed
    def feats(gpu_seconds, calls):
        return RunFeatures(gpu_seconds=gpu_seconds, compute_seconds=0.0, network_seconds=0.0,
                           pcie_seconds=0.0,
                           link_calls=(calls, 0.0, 0.0), sequences=8.0, rest_seconds=0.0,
                           ttft_engine_seconds=0.1, first_step_seconds=0.02)  # fmt: skip

    f = [feats(0.010, 64.0), feats(0.020, 128.0), feats(0.015, 0.0)]
    # measured as efficiency 0.8 (of the GPU time and the all-reduce calls' 20 us each), 1 ms
    # per step and 10 us per sequence
    itl = [(x.gpu_seconds + 20e-6 * x.link_calls[0]) / 0.8 + 1e-3 + 10e-6 * 8 for x in f]
    runs = [SimpleNamespace(id=str(i), measured={"itl_mean_seconds": v}) for i, v in enumerate(itl)]
    alone, _, why = solve_step_terms(runs, f, prior_weight=0.0)
    assert alone["allreduce_seconds_per_call.nvlink"] == pytest.approx(20e-6, rel=1e-6)
    assert alone["allreduce_seconds_per_call.pcie"] == alone["allreduce_seconds_per_call.nvlink"]
    assert alone["network_bytes_per_second"] == 12.5e9  # 100 Gb/s, said so
    # the global fit saw PCIe and a network: its constants are lent, NVLink's is the group's own
    lent = {"allreduce_seconds_per_call.pcie": 60e-6, "network_bytes_per_second": 2e9}
    got, _, why = solve_step_terms(runs, f, prior_weight=0.0, lent=lent)
    assert got["allreduce_seconds_per_call.pcie"] == 60e-6
    assert got["network_bytes_per_second"] == 2e9
    assert got["allreduce_seconds_per_call.network"] == got["allreduce_seconds_per_call.nvlink"]
    assert got["allreduce_seconds_per_call.nvlink"] == pytest.approx(20e-6, rel=1e-6)
    assert "global constant" in why["allreduce_seconds_per_call.pcie"]
    # what a fit lends is what it determined: here NVLink's latency, not PCIe's or the network's
    assert set(lent_links(alone, why)) == {"allreduce_seconds_per_call.nvlink"}


def test_the_bundled_groups_borrow_the_links_their_runs_never_crossed():
    # which links each group's runs crossed comes from the runs files; a group that never
    # crossed PCIe or a network between nodes carries the global constants for them
    from itlkit.calibration.groups import by_group
    from itlkit.calibration.predict import run_deployment

    files = (FIXTURE, REAL_RUNS_MORE / "real_world_more.json",
             REAL_RUNS_INFERENCEX / "inferencex.json",
             REAL_RUNS_LLMK8S / "llmk8s.json")  # fmt: skip
    cal = read_calibration(BUNDLED_CALIBRATION)
    runs = [r for p in files for r in read_runs(p) if r.id in cal.fitted_on]
    crossed = {key: {run_deployment(r).link_kind for r in members if r.tp > 1}
               for key, members in by_group(runs).items()}  # fmt: skip
    assert any("pcie" not in links for links in crossed.values())
    for key, links in crossed.items():
        group = cal.groups[key]
        for link in ("pcie", "network"):
            if link not in links:
                assert group["allreduce_seconds_per_call"][link] == (
                    cal.allreduce_seconds_per_call[link]), (key, link)  # fmt: skip
        if "network" not in links:
            assert group["network_bytes_per_second"] == cal.network_bytes_per_second, key
        if "pcie" not in links:
            assert group["pcie_bandwidth_share"] == cal.pcie_bandwidth_share, key


def test_the_pcie_bandwidth_share_is_recovered_from_runs_over_pcie():
    from types import SimpleNamespace

    from itlkit.calibration.fit import RunFeatures, solve_step_terms, thin_solver

    # four runs: all-reduce bytes over PCIe worth 0, 2, 6 and 10 ms at the datasheet bandwidth,
    # measured as if the link reached 30 % of it, all traffic at efficiency 0.8 (the step
    # prices link bytes over the efficiency too), 1 ms of host time per step, 10 us per sequence
    def feats(gpu_seconds, pcie_seconds, sequences):
        return RunFeatures(gpu_seconds=gpu_seconds, compute_seconds=0.0, network_seconds=0.0,
                           pcie_seconds=pcie_seconds, link_calls=(0.0, 0.0, 0.0),
                           sequences=sequences, rest_seconds=0.0, ttft_engine_seconds=0.1,
                           first_step_seconds=0.02)  # fmt: skip

    f = [feats(0.010, 0.0, 8.0), feats(0.012, 0.002, 16.0), feats(0.015, 0.006, 4.0),
         feats(0.020, 0.010, 32.0)]  # fmt: skip
    itl = [(x.gpu_seconds + x.pcie_seconds / 0.3) / 0.8 + 1e-3 + 10e-6 * x.sequences for x in f]
    runs = [SimpleNamespace(id=str(i), measured={"itl_mean_seconds": v}) for i, v in enumerate(itl)]
    got, _, why = solve_step_terms(runs, f, prior_weight=0.0)
    assert got["pcie_bandwidth_share"] == pytest.approx(0.3, rel=1e-6)
    assert got["efficiency"] == pytest.approx(0.8, rel=1e-6) and "pcie_bandwidth_share" not in why
    # from two runs, the thin solve refits the efficiency (and host per step) around a base
    # that holds the share
    base = Calibration(pcie_bandwidth_share=0.3, host_seconds_per_sequence=10e-6, mfu=0.8)
    thin, _, _ = thin_solver(base)(runs[2:], f[2:])
    assert thin["efficiency"] == pytest.approx(0.8, rel=1e-6)
    # the global fit leaves the share at the datasheet's, its bytes still priced: runs measured
    # at the datasheet's bandwidth give back efficiency 0.8
    at_datasheet = [SimpleNamespace(id=str(i), measured={"itl_mean_seconds": (
        x.gpu_seconds + x.pcie_seconds) / 0.8 + 1e-3 + 10e-6 * x.sequences})
        for i, x in enumerate(f)]  # fmt: skip
    kept, _, why = solve_step_terms(at_datasheet, f, prior_weight=0.0, pcie_share=False)
    assert kept["efficiency"] == pytest.approx(0.8, rel=1e-6)
    assert kept["pcie_bandwidth_share"] == 1.0 and "cell only" in why["pcie_bandwidth_share"]
    # no run over PCIe: the datasheet's bandwidth, said so
    none, _, why = solve_step_terms(runs[:1] * 3, f[:1] * 3, prior_weight=0.0)
    assert none["pcie_bandwidth_share"] == 1.0 and "PCIe" in why["pcie_bandwidth_share"]


def test_a_pcie_deployment_moves_its_bytes_at_the_calibrated_share():
    from itlkit.physics.roofline import Deployment

    # two A100 80 GB SXM in pods of one GPU each, TP over PCIe Gen4 x16: 64 GB/s both ways
    dep = Deployment.create(model="llama-3.1-8b", gpu="a100-80gb-sxm", tp=2, interconnect="pcie")
    assert dep.link_kind == "pcie" and dep.link_bytes_per_second == 32e9
    applied = Calibration(pcie_bandwidth_share=0.25).apply(dep)
    assert applied.link_bytes_per_second == 8e9
    with pytest.raises(ConfigError, match="pcie_bandwidth_share"):
        Calibration(pcie_bandwidth_share=0.0)


def test_a_calibration_file_written_before_the_pcie_share_still_reads(tmp_path):
    doc = json.loads(BUNDLED_CALIBRATION.read_text())
    for group in doc["groups"].values():
        del group["pcie_bandwidth_share"]
    del doc["pcie_bandwidth_share"]
    old = calibration_from_json(doc)
    assert old.pcie_bandwidth_share == 1.0
    assert old.group_calibration("gpu:a100").pcie_bandwidth_share == 1.0


def test_a_cell_lent_across_engines_keeps_the_borrowers_own_ttft_pipeline():
    # the TTFT pipeline (API server, tokenizer, the first token's way out) is the engine's own:
    # vLLM serving an MoE on an H200 takes the step constants of SGLang's MoE cell and the
    # pipeline of the nearest vLLM cell (the sibling H100's), else of the global fit (vLLM's)
    sglang_moe = group_of(0.4) | {"ttft_pipeline_steps": 0.42, "ttft_pipeline_seconds": 0.14}
    h100 = group_of(0.8) | {"ttft_pipeline_steps": 1.05, "ttft_pipeline_seconds": 0.007}
    groups = {
        "gpu:h200/SGLang/MoE": sglang_moe,
        "gpu:h100": h100,
        "gpu:b200/SGLang/MoE": sglang_moe,
    }
    cal = Calibration(efficiency=0.9, ttft_pipeline_steps=2.0, ttft_pipeline_seconds=0.02,
                      fitted_on=("x",), groups=groups)  # fmt: skip
    vllm = cal.for_gpu("h200-sxm", moe=True)
    assert (vllm.efficiency, vllm.ttft_pipeline_steps, vllm.ttft_pipeline_seconds) == (
        0.4,
        1.05,
        0.007,
    )
    assert vllm.scope.endswith("the TTFT pipeline gpu:h100's (its own engine's)")
    blackwell = cal.for_gpu("b200", moe=True)  # no vLLM cell on Blackwell: the global pipeline
    assert (blackwell.efficiency, blackwell.ttft_pipeline_steps) == (0.4, 2.0)
    assert blackwell.ttft_pipeline_seconds == 0.02
    assert blackwell.scope.endswith("the TTFT pipeline the global fit's (vLLM's runs)")
    # a V0 MoE cell on the family: vLLM V1 takes its GPU side (vLLM's fused-MoE kernels), and
    # the host side and pipeline of vLLM V1 (V0's scheduler and detokenizer share the model's
    # process: a heavier host), from the nearest V1 cell, else the global fit
    v0 = group_of(0.45) | {"host_seconds_per_step": 4e-3, "host_seconds_per_sequence": 1e-6,
                           "ttft_pipeline_steps": 0.0, "ttft_pipeline_seconds": 0.79}  # fmt: skip
    h100 = h100 | {"host_seconds_per_step": 6e-4, "host_seconds_per_sequence": 3e-6}
    with_v0 = replace(cal, groups={**groups, "gpu:h200/V0/MoE": v0, "gpu:h100": h100})
    v1 = with_v0.for_gpu("h200-sxm", moe=True)
    assert (v1.group, v1.efficiency, v1.host_seconds_per_step, v1.host_seconds_per_sequence,
            v1.ttft_pipeline_steps, v1.ttft_pipeline_seconds) == (
        "gpu:h200/V0/MoE", 0.45, 6e-4, 3e-6, 1.05, 0.007)  # fmt: skip
    assert v1.scope.endswith("another engine's runs on the same GPU family; the host side and "
                             "the TTFT pipeline gpu:h100's (its own engine's)")  # fmt: skip
    alone = replace(cal, groups={"gpu:h200/V0/MoE": v0}, host_seconds_per_step=1e-4)
    v1 = alone.for_gpu("h200-sxm", moe=True)  # no V1 cell in reach: the global fit's
    assert (v1.host_seconds_per_step, v1.ttft_pipeline_seconds) == (1e-4, 0.02)
    assert alone.for_gpu("h200-sxm", "V0", moe=True).host_seconds_per_step == 4e-3  # its own
    assert alone.for_gpu("h200-sxm", "SGLang", moe=True).group == ""  # V0 lends to V1 only
    # SGLang borrowing vLLM's cell: no SGLang cell in reach, the lender's pipeline stays
    sglang = cal.for_gpu("h200-sxm", "SGLang")
    assert (sglang.efficiency, sglang.ttft_pipeline_steps) == (0.8, 1.05)
    assert "TTFT pipeline" not in sglang.scope
    # the engine's own cell: nothing replaced
    own = cal.for_gpu("h200-sxm", "SGLang", moe=True)
    assert (own.ttft_pipeline_steps, own.scope) == (0.42, "")


def test_a_prediction_from_its_own_cell_says_how_far_off_that_cells_runs_came_out(tmp_path):
    from itlkit.calibration.groups import group_values

    cell = group_values(Calibration(efficiency=0.7))
    cal = Calibration(
        fitted_on=("a", "b", "c", "d"),
        groups={"gpu:a100": cell, "gpu:h100": cell},
        group_leave_one_out={"gpu:a100": {"runs": 4, "itl_mean_seconds": 0.036,
                                          "ttft_mean_seconds": 0.1234}},
    )  # fmt: skip
    own = cal.for_gpu("a100-80gb-sxm").describe()
    assert own.endswith(
        "constants of gpu:a100 (its 4 runs, each predicted by constants fitted "
        "without it, came out mean ITL 3.6%, mean TTFT 12.3% off at the median)"
    )
    # a cell lent to another GPU states no such figure: its runs are not the borrower's
    known = replace(cal, group_leave_one_out={"gpu:h100": {"runs": 4, "itl_mean_seconds": 0.05}})
    lent = known.for_gpu("h200-sxm")
    assert "came out" not in lent.describe() and "no gpu:h200 runs in it" in lent.describe()
    assert lent.own_error() == {} and known.for_gpu("h100-sxm").own_error()["runs"] == 4
    # a file written before the figures were kept says nothing of them
    assert cal.for_gpu("h100-sxm").describe().endswith("constants of gpu:h100")
    # simulate --runs gives them as numbers too: an H100 run from the H100 cell (4 runs, the
    # ITL 5% and the TTFT 8% off), an L40S run from the global constants (no figure of a cell)
    errors = {"runs": 4, "itl_mean_seconds": 0.05, "ttft_mean_seconds": 0.08}
    write_calibration(replace(cal, group_leave_one_out={"gpu:h100": errors}),
                      path := tmp_path / "cal.json")  # fmt: skip
    doc = json.loads(FIXTURE.read_text())
    doc["runs"] = [run for run in doc["runs"] if run["id"] == "trainval:64"]
    doc["runs"][0]["workload"]["stages"] = [{"rate_per_second": 2.0, "duration_seconds": 10.0}]
    doc["runs"].append({**doc["runs"][0], "id": "on-l40s", "gpu": "l40s"})
    (runs := tmp_path / "runs.json").write_text(json.dumps(doc))
    done = itlkit("simulate", "--runs", str(runs), "--calibration", str(path))
    lines = {line["id"]: line for line in map(json.loads, done.stdout.splitlines())}
    assert lines["trainval:64"]["calibration_leave_one_out"] == errors
    assert "mean ITL 5.0%, mean TTFT 8.0% off" in lines["trainval:64"]["calibration_scope"]
    assert "calibration_leave_one_out" not in lines["on-l40s"], lines["on-l40s"]
    # and the figures must be numbers by metric
    with pytest.raises(ConfigError, match="group_leave_one_out has the wrong shape"):
        calibration_from_json({"format": "itlkit-calibration/1",
                               "group_leave_one_out": {"gpu:a100": 0.1}})  # fmt: skip
