"""data/real-runs-scicom/: real vLLM 0.14.1 runs of gpt-oss-120b and Qwen3-32B at TP 8 on 8 B200,
H100 SXM and H200 SXM (Scicom-AI-Enterprise-Organization/llm-benchmaxxing, no licence: derived
figures only). Held out of the calibration: they measure it.

Expected figures are the result files' own summaries (`mean_ttft_ms`, `mean_tpot_ms`) at commit
c776cb0e, transcribed here by hand, and the files' dates, which order the runs on each server.
"""

from __future__ import annotations

import pytest
from _paths import REAL_RUNS_SCICOM

from itlkit.sim.run_workload import run_workload
from itlkit.sim.runs import read_runs

RUNS = {run.id.removeprefix("scicom-"): run for run in read_runs(REAL_RUNS_SCICOM / "scicom.json")}
# id: (mean_ttft_ms, mean_tpot_ms) of runpod_<gpu>/<model>/..._TP8_DP1_CTX<I>_C100_P100_O128.json
PRINTED = {
    "qwen3-32b-h100-sxm-tp8-random-1024-128-c100": (1296.4654911800608, 16.539995006535282),
    "qwen3-32b-h100-sxm-tp8-random-4096-128-c100": (2479.7260081799686, 27.708607636927567),
    "gpt-oss-120b-h200-sxm-tp8-random-1024-128-c100": (1257.5490267761052, 17.12450573778176),
    "gpt-oss-120b-h200-sxm-tp8-random-15000-128-c100": (4364.815474208444, 41.93432807526368),
}


def test_thirty_runs_of_two_models_on_three_gpus():
    assert len(RUNS) == 30
    assert {(r.model.slug, r.gpu, r.tp) for r in RUNS.values()} == {
        (m, g, 8) for m in ("gpt-oss-120b", "qwen3-32b") for g in ("b200", "h100-sxm", "h200-sxm")
    }


@pytest.mark.parametrize("key", list(PRINTED))
def test_a_run_is_its_files_summary(key):
    ttft_ms, tpot_ms = PRINTED[key]
    run = RUNS[key]
    assert run.measured["ttft_mean_seconds"] == pytest.approx(ttft_ms / 1e3)
    # every request generated 128 tokens (ignore_eos): the format's ITL mean is the TPOT mean
    assert run.measured["itl_mean_seconds"] == pytest.approx(tpot_ms / 1e3, rel=1e-6)
    assert run.workload.max_concurrency == 100 and run.workload.num_prompts == 100
    assert "ttft_p90_seconds" not in run.measured  # the client prints no p90


def test_each_run_finds_the_start_of_its_prompts_from_the_run_before():
    # each server ran 1,024, 2,048, 4,096, 8,192 and 15,000 tokens in that order (the files'
    # dates), under seed 0: the 4,096-token prompts begin with the 2,048-token run's
    first = RUNS["qwen3-32b-h100-sxm-tp8-random-1024-128-c100"]
    later = RUNS["qwen3-32b-h100-sxm-tp8-random-4096-128-c100"]
    assert first.workload.prompts_sent_before == 0
    assert (later.workload.prompts_sent_before, later.workload.prefix_tokens_sent_before) == (
        100, 2048)  # fmt: skip
    w = run_workload(later, capacity_blocks=10**6)
    assert (w.cached_prompt_tokens[1:] == 2048).all()  # 128 full blocks of each prompt's start


@pytest.mark.parametrize("tokens", [1024, 2048, 4096, 8192, 15000])
def test_gpt_oss_on_b200_is_priced_by_vllms_moe_cell_of_hopper(tokens):
    from itlkit.calibration.predict import predict, simulate_run
    from itlkit.cli._runs import load_calibration

    # No vLLM MoE run on Blackwell is calibrated: vLLM 0.14.1 serving gpt-oss-120b (128
    # experts) on 8 B200 takes the Hopper V0 MoE cell's GPU side (`group_keys`: an earlier
    # architecture's vLLM MoE cell before the SGLang cell of its own). Measured: the runs' own
    # mean TPOT (ignore_eos, 128 tokens each: the ITL mean). On the SGLang cell these came out
    # 51-56 % fast, on it 11-23 %; these runs showed the rule, so this guards it rather than
    # proving it
    run = RUNS[f"gpt-oss-120b-b200-tp8-random-{tokens}-128-c100"]
    calibration = load_calibration("bundled")
    assert calibration.for_run(run).group == "gpu:h200/V0/MoE"
    predicted = predict(run, simulate_run(run, calibration), calibration).itl_mean_seconds
    assert predicted == pytest.approx(run.measured["itl_mean_seconds"], rel=0.3)
