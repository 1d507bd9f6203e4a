"""data/real-runs-lambda/: real vLLM 0.5.4 bursts of ShareGPT prompts on 1, 2, 4 and 8 H100 80 GB
SXM (LambdaLabsML/vllm-benchmark, no licence: derived figures only), as the runs format reads
them, and the bundled calibration on them.

Expected figures are each result file's own summary (`mean_ttft_ms`, `mean_tpot_ms`,
`total_input_tokens`) and its count of empty replies, transcribed here by hand, and the server's
flags from the source's benchmark.py; never an output of itlkit.
"""

from __future__ import annotations

import importlib.util
import json
import statistics

import pytest
from _paths import REAL_RUNS_LAMBDA

from itlkit.calibration.predict import predict_run
from itlkit.physics.calibration import load_calibration
from itlkit.sim.runs import read_runs

RUNS = {run.id.removeprefix("lambda-"): run for run in read_runs(REAL_RUNS_LAMBDA / "lambda.json")}
# id: (prompts, empty replies, the file's mean_ttft_ms over every request, its mean_tpot_ms,
# total_input_tokens)
PRINTED = {
    "meta-llama-3.1-70b-instruct-fp8-tp1-len4000-n40": (40, 12, 627.0, 46.21, 9790),
    "mistral-7b-instruct-v0.3-tp1-len4000-n40": (40, 2, 242.72, 13.09, 9349),
    "mistral-nemo-instruct-2407-tp1-len4000-n40": (40, 13, 184.0, 19.83, 8995),
    "meta-llama-3.1-70b-instruct-fp8-tp2-len32000-n40": (40, 12, 637.3, 24.62, 9790),
    "mistral-7b-instruct-v0.3-tp2-len4000-n10": (10, 1, 45.55, 6.87, 1585),
    "mistral-7b-instruct-v0.3-tp2-len4000-n40": (40, 2, 156.23, 11.02, 9349),
    "mistral-nemo-instruct-2407-tp2-len8000-n10": (10, 3, 38.75, 9.0, 1391),
    "mistral-nemo-instruct-2407-tp2-len8000-n40": (40, 13, 143.08, 14.51, 8995),
    "meta-llama-3.1-70b-instruct-fp8-tp4-len2000-n40": (40, 11, 265.13, 28.11, 9790),
    "mistral-7b-instruct-v0.3-tp4-len16000-n40": (40, 2, 149.52, 8.83, 9349),
    "mistral-nemo-instruct-2407-tp4-len4000-n40": (40, 13, 119.25, 10.85, 8995),
    "meta-llama-3.1-70b-instruct-fp8-tp8-len4000-n40": (40, 11, 257.75, 21.16, 9790),
    "mistral-7b-instruct-v0.3-tp8-len4000-n40": (40, 2, 147.16, 8.28, 9349),
    "mistral-nemo-instruct-2407-tp8-len4000-n40": (40, 13, 110.57, 9.81, 8995),
}


def test_the_runs_are_the_files_as_published():
    assert set(RUNS) == set(PRINTED)
    for key, run in RUNS.items():
        prompts, empty, ttft_ms, _, prompt_tokens = PRINTED[key]
        # the file's mean counts each empty reply's TTFT as 0; the run's leaves them out
        got = prompts - empty
        assert run.measured["ttft_mean_seconds"] * got / prompts == pytest.approx(
            ttft_ms / 1e3, abs=5e-6
        )
        assert run.workload.prompt_tokens_mean * prompts == pytest.approx(prompt_tokens)
        assert run.workload.num_prompts == prompts and run.workload.client == "burst"
        tp = int(key.split("-tp")[1].split("-")[0])
        assert (run.gpu, run.tp, run.vllm_version) == ("h100-sxm", tp, "vLLM 0.5.4")
        assert run.weights_precision == ("fp8" if "fp8" in key else "bf16")
        assert run.gpu_memory_utilization == 0.95 and run.max_num_seqs == 1024
        # vLLM 0.5.4's V0 defaults: no chunked prefill up to 32,768 tokens, a budget of
        # max(max_model_len, 2,048), no prefix cache
        length = int(key.split("-len")[1].split("-")[0])
        assert run.engine == "V0" and not run.chunked_prefill and not run.prefix_caching
        assert run.max_num_batched_tokens == max(length, 2048)


def test_the_file_tpot_is_kept_as_printed():
    runs = json.loads((REAL_RUNS_LAMBDA / "lambda.json").read_text())["runs"]
    docs = {doc["id"].removeprefix("lambda-"): doc for doc in runs}
    for key, doc in docs.items():
        # transcribed to two decimals of a millisecond
        assert doc["measured"]["tpot_mean_seconds"] * 1e3 == pytest.approx(
            PRINTED[key][3], abs=0.006
        )
        # an empty reply ran one token: the output table starts at 1 where a file has them
        assert doc["workload"]["output_tokens_distribution"]["tokens"][0] >= 1


def test_the_bundled_calibration_no_longer_multiplies_their_ttft():
    # before, the gpu:h100/V0 cell's TTFT pipeline (10 steps, fitted on bursts that waited a
    # minute or more) made these bursts' TTFT 1.75 to 7.2 times the measured (median 3.9)
    calibration = load_calibration("bundled")
    ratios = [predict_run(run, calibration).ttft_mean_seconds / run.measured["ttft_mean_seconds"]
              for run in RUNS.values()]  # fmt: skip
    assert max(ratios) < 2.0
    assert statistics.median(abs(r - 1) for r in ratios) < 0.35


def test_the_converter_refuses_files_it_cannot_read(tmp_path):
    spec = importlib.util.spec_from_file_location("make_lambda", REAL_RUNS_LAMBDA / "make_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(SystemExit, match="no result files"):
        module.build(tmp_path)
    folder = tmp_path / "c0ffee" / "results" / "prompt_10" / "2xH100-80GB-SXM"
    folder.mkdir(parents=True)
    (folder / "Mistral-7B-Instruct-v0.3_tp2_len4000.json").write_text('{"num_prompts": 10}')
    with pytest.raises(SystemExit, match="not a benchmark_serving result"):
        module.build(tmp_path)
