"""data/real-runs-recipes/: the real vLLM runs pasted in the vLLM project's recipes
(vllm-project/recipes, Apache-2.0): DeepSeek-R1 on 8 MI300X, Llama 3.3 70B (FP8, MXFP4) on one
MI355X and Qwen2.5-VL-7B on 4 A100 80 GB. Held out of the bundled calibration: they measure it.

Expected figures are each block's printed "Serving Benchmark Result" and the client command
above it, transcribed here by hand from the recipe at the cited commit; never an output of
itlkit.
"""

from __future__ import annotations

import json

import pytest
from _paths import REAL_RUNS_RECIPES

from itlkit.sim.runs import read_runs

RUNS = {run.id: run for run in read_runs(REAL_RUNS_RECIPES / "recipes.json")}
# id: (model, GPU, TP, weights, prompts, slots (None: a burst), input-len, output-len,
#      Mean TTFT ms, Mean ITL ms, Total input tokens)
PRINTED = {
    # DeepSeek/AMD_GPU/README.md @ cbb075bc lines 59-83, @ b7d325e0 lines 95-119
    "B02": ("deepseek-v3", "mi300x", 8, "fp8", 500, 128, 3200, 800, 7585.82, 80.02, 1597574),
    "B03": ("deepseek-v3", "mi300x", 8, "fp8", 500, 256, 3200, 800, 18547.34, 124.24, 1597574),
    # Llama/Llama3.3-70B-ROCm.md @ 584c0c64 lines 270-298 (FP8-KV), 303-331 (MXFP4)
    "B21": ("llama-3.3-70b", "mi355x", 1, "fp8", 128, 64, 8192, 1024, 11639.66, None, None),
    "B22": ("llama-3.3-70b", "mi355x", 1, "fp4", 128, 64, 8192, 1024, 10128.30, None, None),
    # Qwen/Qwen2.5-VL.md @ 335e3bf5 lines 99-119: 16 prompts of 8000/1000 at once
    "B33": ("qwen2.5-7b", "a100-80gb-sxm", 4, "bf16", 16, None, 8000, 1000, 1979.73, 9.39,
            127945),
}  # fmt: skip


def test_every_kept_block_is_a_run():
    assert set(RUNS) == set(PRINTED)


@pytest.mark.parametrize("key", list(PRINTED))
def test_each_run_is_its_printed_block(key):
    model, gpu, tp, weights, prompts, slots, _, out, ttft_ms, itl_ms, inputs = PRINTED[key]
    run = RUNS[key]
    assert (run.model.slug, run.gpu, run.tp, run.weights_precision) == (model, gpu, tp, weights)
    w = run.workload
    assert (w.num_prompts, w.max_concurrency, w.ignore_eos) == (prompts, slots, True)
    assert w.client == ("burst" if slots is None else "closed loop")
    assert w.output_distribution.tokens == out
    assert run.measured["ttft_mean_seconds"] == pytest.approx(ttft_ms / 1e3)
    if itl_ms is not None:  # every request generated `out` tokens: the pooled ITL is the mean
        assert run.measured["itl_mean_seconds"] == pytest.approx(itl_ms / 1e3, abs=5e-6)
    if inputs is not None:  # prompts at the measured mean (the tokenizer re-counts random text)
        assert w.prompt_distribution.tokens == pytest.approx(inputs / prompts, abs=0.5)
    # the client printed no p90: none is invented
    assert "ttft_p90_seconds" not in run.measured


def test_every_block_found_is_kept_or_left_out_with_a_reason():
    doc = json.loads((REAL_RUNS_RECIPES / "transcribed.json").read_text())
    blocks = doc["blocks"]
    assert len(blocks) == 55
    left_out = [b for b in blocks if b.get("reasons")]
    assert all(r["key"] and r["why"] for b in left_out for r in b["reasons"])
    runs = json.loads((REAL_RUNS_RECIPES / "recipes.json").read_text())
    refused = runs["left_out"]["runs_refused"]
    assert len(left_out) + len(refused) + len(runs["runs"]) == 55
