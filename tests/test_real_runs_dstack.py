"""data/real-runs-dstack/: real vLLM runs published by dstackai/benchmarks (Apache-2.0):
DeepSeek-R1 at TP 8 on 8 H200 and 8 MI300X (vLLM 0.7.x, V0; closed loops of SGLang's
bench_serving.py) and Llama-3.1-405B-FP8 at TP 8 on 8 H100 SXM (vLLM 0.6.3, Poisson ShareGPT).

Expected figures are the source's own, transcribed here by hand: the rows of
`Deepseek-R1/raw_data/online_results.csv` @ 7f37e669 (GPU, max_concurrency, random_output_len,
mean_ttft_ms, mean_tpot_ms) and the summaries of the comparison's three H100 result files @
06c957ab (mean_ttft_ms over every request, mean_tpot_ms, empty replies, total_input_tokens);
the servers' flags from the README beside them. Never an output of itlkit.
"""

from __future__ import annotations

import importlib.util
import json

import pytest
from _paths import REAL_RUNS_DSTACK

from itlkit.sim.runs import read_runs

RUNS = {run.id.removeprefix("dstack-"): run for run in read_runs(REAL_RUNS_DSTACK / "dstack.json")}
DOCS = {doc["id"].removeprefix("dstack-"): doc
        for doc in json.loads((REAL_RUNS_DSTACK / "dstack.json").read_text())["runs"]}  # fmt: skip
# (gpu, slots, output tokens): (mean_ttft_ms, mean_tpot_ms), CSV lines 2-7, 20-25, 41-51
DSR1 = {
    ("mi300x", 128, 800): (22245.64614, 109.0719536),
    ("mi300x", 64, 800): (12233.66578, 77.96798761),
    ("mi300x", 32, 800): (7110.186408, 61.93423014),
    ("mi300x", 16, 800): (4261.061847, 55.57127128),
    ("mi300x", 8, 800): (2231.22975, 50.87484791),
    ("mi300x", 4, 800): (1259.239487, 46.20285759),
    ("h200", 128, 800): (66811.62239, 71.85856239),
    ("h200", 64, 800): (14164.37107, 65.61773396),
    ("h200", 32, 800): (7650.775142, 51.66990612),
    ("h200", 16, 800): (3368.606197, 49.60112449),
    ("h200", 8, 800): (1765.745119, 31.28089729),
    ("h200", 4, 800): (975.6508477, 25.72997376),
    ("h200", 128, 1600): (116121.7992, 73.86396926),
    ("h200", 128, 3200): (250207.2416, 76.04368982),
    ("h200", 128, 6400): (1059605.396, 133.1230548),
    ("mi300x", 128, 1600): (22502.75001, 102.5909757),
    ("mi300x", 128, 3200): (22143.35855, 103.1311934),
    ("mi300x", 128, 6400): (28339.55226, 127.9427978),
}
# request rate: (mean_ttft_ms over all 1,000 requests, mean_tpot_ms, empty replies)
LLAMA = {
    16: (1486.3937409630162, 106.53889521346393, 379),
    32: (9375.633242372, 110.04953441690681, 378),
    1000: (18688.458913764, 110.61500707252182, 378),
}


def _dsr1(gpu: str, slots: int, tokens: int):
    return RUNS[f"dsr1-{gpu.split('-')[0]}-vllm-tp8-random-3200-{tokens}-c{slots}"]


@pytest.mark.parametrize(("gpu", "slots", "tokens"), list(DSR1))
def test_each_deepseek_run_is_its_csv_row(gpu, slots, tokens):
    run = _dsr1(gpu, slots, tokens)
    ttft_ms, tpot_ms = DSR1[(gpu, slots, tokens)]
    assert run.measured["ttft_mean_seconds"] == pytest.approx(ttft_ms / 1e3)
    # every request generated `tokens` (ignore_eos): the format's ITL mean is the client's TPOT
    # (E2E - TTFT) / (tokens - 1) over requests of one length is the TPOT mean (to 7e-10 here)
    assert run.measured["itl_mean_seconds"] == pytest.approx(tpot_ms / 1e3, rel=1e-6)
    # SGLang's bench_serving prints no p90: none is invented
    assert "ttft_p90_seconds" not in run.measured and "e2e_p90_seconds" not in run.measured
    w = run.workload
    assert (w.client, w.max_concurrency, w.num_prompts, w.ignore_eos) == ("closed loop", slots,
                                                                         500, True)  # fmt: skip
    assert w.prompt_distribution.tokens == 3200 and w.output_distribution.tokens == tokens


def test_the_deepseek_servers_are_vllm_0_7_v0_without_chunked_prefill():
    for gpu, slots, tokens in DSR1:
        run = _dsr1(gpu, slots, tokens)
        assert (run.model.slug, run.tp, run.weights_precision) == ("deepseek-v3", 8, "fp8")
        assert run.engine == "V0" and not run.chunked_prefill and not run.prefix_caching
        # V0 without chunked prefill: a budget of max(max_model_len, 2,048), the H200's context
        # the checkpoint's 163,840, the MI300X's --max-model-len 32768
        budget = 163840 if gpu == "h200" else 32768
        assert run.max_num_batched_tokens == budget == run.max_model_len
        assert run.max_num_seqs == 256 and run.gpu == ("h200-sxm" if gpu == "h200" else gpu)


def test_the_shared_prefix_runs_cache_their_system_prompts():
    shared = [run for key, run in RUNS.items() if "shared-prefix" in key]
    assert len(shared) == 3
    for run in shared:
        assert run.prefix_caching and run.chunked_prefill and run.max_num_batched_tokens == 2048


@pytest.mark.parametrize("rate", list(LLAMA))
def test_the_comparison_s_llama_runs_are_their_files(rate):
    (key,) = [key for key in RUNS if key.startswith(f"llama405b-fp8-h100-tp8-qps{rate}-20241109")]
    run = RUNS[key]
    ttft_ms, tpot_ms, empty = LLAMA[rate]
    # the file's mean counts each empty reply's TTFT as 0; the run's leaves them out
    got = 1000 - empty
    assert run.measured["ttft_mean_seconds"] * got / 1000 == pytest.approx(ttft_ms / 1e3)
    assert DOCS[key]["measured"]["tpot_mean_seconds"] == pytest.approx(tpot_ms / 1e3)
    assert run.workload.prompt_tokens_mean * 1000 == pytest.approx(215196)
    assert run.workload.request_rate_per_second == rate
    # the sweep table's row for these files: chunked prefill, a 512-token budget, 512 sequences
    assert (run.engine, run.chunked_prefill, run.max_num_batched_tokens, run.max_num_seqs) == (
        "V0", True, 512, 512)  # fmt: skip
    assert (run.model.slug, run.tp, run.weights_precision, run.gpu) == (
        "llama-3.1-405b", 8, "fp8", "h100-sxm")  # fmt: skip


def test_the_converter_leaves_out_what_it_cannot_express():
    spec = importlib.util.spec_from_file_location("make_dstack", REAL_RUNS_DSTACK / "make_runs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    doc = {"completed": 17, "num_prompts": 1000}
    assert module.file_reason("misc/x-no-rpc-1000qps.json", doc, "d", {}, {}) == "failed"
    doc = {"completed": 1000, "num_prompts": 1000}
    amd = "comparison/h100sxm5_vs_mi300x/raw_data/8xMi300x-serving-meta/amd-meta-vllm-16qps.json"
    assert module.file_reason(amd, doc, "d", {}, {}) == "multi_step_scheduling"
    assert module.file_reason("a/nvidia-vllm-16qps.json", doc, "d", {"d": "b"}, {}) == "duplicate"
    assert module.file_reason("a/nvidia-vllm-16qps.json", doc, "e", {}, {}) == (
        "settings_not_recorded")  # fmt: skip
