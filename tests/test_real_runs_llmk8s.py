"""data/real-runs-llmk8s/: 4 real vLLM 0.8.3 runs of Llama-3.3-70B at TP 8 on 8 A100 40 GB
(surajssd/llm-k8s @ 58b61c59, Apache-2.0), as the runs format reads them, and the bundled
calibration on them.

Expected figures are the client's own printed summary in the source's console log
(`results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1/benchmark-script-run.sh`),
transcribed here by hand, and the server's flags from its deployment.yaml.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from _paths import REAL_RUNS_LLMK8S

from itlkit.calibration.predict import predict_run
from itlkit.physics.calibration import load_calibration
from itlkit.sim.runs import read_runs

RUNS = {run.id.rsplit("-", 1)[1]: run for run in read_runs(REAL_RUNS_LLMK8S / "llmk8s.json")}
DOCS = {run["id"].rsplit("-", 1)[1]: run
        for run in json.loads((REAL_RUNS_LLMK8S / "llmk8s.json").read_text())["runs"]}  # fmt: skip
# the console's summary per rate: mean TTFT (ms), mean TPOT (ms), generated tokens
PRINTED = {"01": (65.26, 24.56, 42722), "04": (50.33, 27.08, 42449),
           "16": (59.58, 31.58, 42770), "inf": (360.36, 39.06, 42398)}  # fmt: skip
PROMPT_TOKENS = 42659  # "Total input tokens", the same in every run (seed 0's 200 prompts)


def test_the_four_runs_are_the_servers_as_published():
    assert set(RUNS) == set(PRINTED)
    for rate, run in RUNS.items():
        ttft_ms, tpot_ms, generated = PRINTED[rate]
        assert run.measured["ttft_mean_seconds"] * 1e3 == pytest.approx(ttft_ms, abs=0.005)
        assert DOCS[rate]["measured"]["tpot_mean_seconds"] * 1e3 == pytest.approx(
            tpot_ms, abs=0.005
        )
        assert run.workload.output_tokens_mean == pytest.approx(generated / 200)
        assert run.workload.prompt_tokens_mean == pytest.approx(PROMPT_TOKENS / 200)
        # --tensor-parallel-size 8 --enable-prefix-caching on vllm/vllm-openai:v0.8.3
        assert (run.gpu, run.tp, run.model.slug) == ("a100-40gb-sxm", 8, "llama-3.3-70b")
        assert run.prefix_caching and run.workload.arrival == "vllm-bench"
        assert run.workload.num_prompts == 200 and not run.workload.ignore_eos
    # the first run's prompts are new; the three after it resend seed 0's same 200
    assert [RUNS[r].workload.prompts_sent_before for r in ("01", "04", "16", "inf")] == [
        0, 200, 200, 200]  # fmt: skip
    # vLLM 0.8.3's defaults on an A100, as itlkit's version table gives them
    assumed = " ".join(RUNS["01"].engine_assumptions)
    assert "max_num_batched_tokens 2,048" in assumed and "max_num_seqs 1,024" in assumed


def test_the_bundled_calibration_predicts_them_from_the_a100_cell():
    calibration = load_calibration("bundled")
    for rate, run in RUNS.items():
        scope = calibration.for_run(run)
        assert scope.group == "gpu:a100"
        predicted = predict_run(run, calibration)
        itl = predicted.itl_mean_seconds / run.measured["itl_mean_seconds"] - 1
        assert abs(itl) < 0.15, (rate, itl)
    # the runs that found their prompts cached answer in tens of ms, as measured (50-60 ms)
    for rate in ("04", "16"):
        predicted = predict_run(RUNS[rate], calibration)
        assert predicted.ttft_mean_seconds == pytest.approx(
            RUNS[rate].measured["ttft_mean_seconds"], rel=0.35
        )


def test_the_converter_refuses_files_it_cannot_read(tmp_path):
    spec = importlib.util.spec_from_file_location("make_llmk8s", REAL_RUNS_LLMK8S / "make_runs.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"num_prompts": 200, "completed": 200, "mean_tpot_ms": 1.0}))
    with pytest.raises(SystemExit, match="missing input_lens, itls, output_lens, ttfts"):
        make.read_result(summary)
