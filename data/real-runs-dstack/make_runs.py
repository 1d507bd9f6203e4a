"""Write `dstack.json` (format `itlkit-runs/1`) from the vLLM results of dstackai/benchmarks.

Run: .venv/bin/python data/real-runs-dstack/make_runs.py ROOT [-o OUT.json]

ROOT holds the source files as `ROOT/<commit>/<path>`, read with `git show COMMIT:PATH` from
a clone of github.com/dstackai/benchmarks (Apache-2.0; README.md beside this script gives the
commands):

* `7f37e669.../Deepseek-R1/raw_data/online_results.csv`: one row per online run of
  DeepSeek-R1 on 8 H200 or 8 MI300X, measured by the repository's copy of SGLang's
  `bench_serving.py` (random 3,200-token prompts, closed loop of C slots, or the
  generated-shared-prefix dataset). The vLLM rows become runs; the server settings are the
  dstack tasks of `Deepseek-R1/README.md` at the same commit (`DSR1_SERVERS`).
* `06c957ab.../comparison/h100sxm5_vs_mi300x/raw_data/*serving*/*.json` and
  `680cd21e.../nvidia/8xh100/raw_data{,2}/*.json`: `benchmark_serving.py --save-result` files
  (every request's TTFT and gaps) of Llama-3.1-405B-FP8 on 8 H100 SXM or 8 MI300X, ShareGPT
  prompts at 16, 32 or 1000 requests/s; the H100 sweep's engine flags per file are in
  `680cd21e.../nvidia/8xh100/charts/qps_output.csv`.

Every choice and its source (file, commit, lines) is in README.md. Deterministic: the same
files give the same bytes.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import re
import sys
from collections import Counter
from pathlib import Path

from itlkit.errors import ConfigError
from itlkit.sim.client_figures import replied_figures, sharegpt_workload
from itlkit.sim.runs import FORMAT, parse_runs
from itlkit.sim.runs_writer import convert, left_out_section

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "dstack.json"
REPO = "dstackai/benchmarks"
LICENCE = "Apache-2.0 (LICENSE at each commit read): figures derived from the files, cited"
DSR1_COMMIT = "7f37e6697725e58dd09b9ef190b62ce19f01d45e"  # branch deepseek-r1-benchmark
MAIN_COMMIT = "06c957ab51572ca18db9c1f4bb254a9eb86df4d7"  # main, 2025-09-24
SWEEP_COMMIT = "680cd21e7b198f9b63299cd7b20e3cec1f089c6c"  # last commit with the H100 sweep
DSR1_CSV = "Deepseek-R1/raw_data/online_results.csv"
DSR1_README = "Deepseek-R1/README.md"
CLIENT = "Deepseek-R1/bench_serving.py"  # SGLang's bench_serving.py as dstack ran it
CLIENT_LINES = "157-178, 677-745, 785-836, 977-1012, 1450-1463, 1485-1490"
COMPARISON = "comparison/h100sxm5_vs_mi300x/raw_data/"
COMPARISON_README = "comparison/h100sxm5_vs_mi300x/README.md"
SWEEP = "nvidia/8xh100/"
SWEEP_CSV = SWEEP + "charts/qps_output.csv"
LEVELS = tuple(i / 20 for i in range(21))  # the quantile table of each length distribution

# Why a source row or file is not a run, in the order they are tested.
REASONS = {
    "not_vllm": "served by SGLang or TensorRT-LLM, not vLLM (this folder converts vLLM runs)",
    "failed": "the benchmark failed: 17 of 1,000 requests completed, no token measured",
    "multi_step_scheduling": "vLLM's multi-step scheduling (--num-scheduler-steps 5, 10 or 15), "
    "which itlkit does not simulate",
    "settings_impossible": "the recorded flags are ones vLLM refuses (a 512-token budget without "
    "chunked prefill at max_model_len 91,680): the real budget is not known",
    "settings_not_recorded": "no row of the sweep's settings table names the file",
    "duplicate": "the same bytes as a file kept under another path",
    "file_unavailable": "listed at the commit, but its blob is in neither the snapshot nor the "
    "file index read here",
    "inconsistent": "the row's TPOT mean strays from (E2E mean - TTFT mean) / (output - 1)",
}

# Files the commits list but no copy read here holds (`git cat-file` finds no blob; the file
# index has no such path): Llama-3.1-405B-Instruct-FP8-KV (amd) on 8 MI300X at TP 8, on 4 MI300X,
# and as two FP8 servers on 8 MI300X ("2fp8"). No serve command for this model is published.
UNAVAILABLE = tuple(
    f"{COMPARISON}{folder}/{name}"
    for folder, names in {
        "8xMi300x-serving-quark": (
            "amd-amd-vllm-16.0qps-Meta-Llama-3.1-405B-Instruct-FP8-KV-20241119-151215.json",
            "amd-amd-vllm-32.0qps-Meta-Llama-3.1-405B-Instruct-FP8-KV-20241119-152715.json",
            "amd-amd-vllm-1000.0qps-Meta-Llama-3.1-405B-Instruct-FP8-KV-20241119-152127.json",
        ),
        "4Mi300x-serving-quark": (
            "1fp8-4-gpu-vllm-16.0qps-Meta-Llama-3.1-405B-Instruct-FP8-KV-20241125-081119.json",
            "1fp8-4-gpu-vllm-32.0qps-Meta-Llama-3.1-405B-Instruct-FP8-KV-20241125-081533.json",
            "1fp8-4-gpu-vllm-1000.0qps-Meta-Llama-3.1-405B-Instruct-FP8-KV-20241125-082036.json",
        ),
        "8Mi300x-2fp8-serving-quark": (
            "2fp8-vllm-16.0qps-Meta-Llama-3.1-405B-Instruct-FP8-KV-20241122-112037.json",
            "2fp8-vllm-32.0qps-Meta-Llama-3.1-405B-Instruct-FP8-KV-20241122-113454.json",
            "2fp8-vllm-1000.0qps-Meta-Llama-3.1-405B-Instruct-FP8-KV-20241122-113704.json",
        ),
    }.items()
    for name in names
)

# How far the row's TPOT mean may stray from the format's ITL mean before it is left out: with
# every request generating the same count, the two are equal (the largest gap is 7e-10).
TPOT_IDENTITY = 0.005

# DeepSeek-R1's config.json: max_position_embeddings 163840, torch_dtype bfloat16, FP8 (e4m3,
# 128 x 128 blocks) weights; every architecture field equals the catalog's deepseek-v3.
DSR1_CONTEXT_TOKENS = 163_840


def source_entry(commit: str, path: str, data: bytes, **more) -> dict:
    return {"repo": REPO, "commit": commit, "path": path,
            "sha256": hashlib.sha256(data).hexdigest(), "licence": LICENCE, **more}  # fmt: skip


def launch_source(lines: str, path: str = DSR1_README, commit: str = DSR1_COMMIT) -> dict:
    return {"repo": REPO, "commit": commit, "path": path, "lines": lines}


# --- DeepSeek-R1 on 8 H200 and 8 MI300X (Deepseek-R1/raw_data/online_results.csv) ---------

_H200_VERSION_SOURCE = (
    "README lines 105-108 (`vLLM Version: 0.7.4.dev181+gf35f8e22`): a nightly wheel installed "
    "over vllm/vllm-openai:v0.7.3 (lines 263, 269-270): vLLM commit "
    "f35f8e2242db224a92a14e084d502eec67d56da9, 181 commits after v0.7.3 and on main by "
    "2025-03-03 (a build of it dated d20250303 is in vllm-project/vllm#14209), before v0.8.0; "
    "0.7.3's row of itlkit's table gives the defaults (V0). V0: VLLM_USE_V1 defaults to 0 in "
    "v0.7.3 (vllm/envs.py 503-504), "
    "and DeepSeek-R1 still started a V0 engine at 0.7.4.dev497 (vllm-project/vllm#14921, "
    "2025-03-17)"
)
_MI300X_VERSION_SOURCE = (
    "README lines 134-137 (`vLLM Version: 0.7.3.dev138+g21f6ca217`), image "
    "rocm/vllm-dev:vllm-ds3-staging-0217 (line 284): ROCm's build between v0.7.2 and v0.7.3, "
    "whose source was not read; 0.7.2's row of itlkit's table gives the defaults (V0)"
)
_MLA_CHUNKING = (
    "off: DeepSeek's MLA in the V0 engine runs without chunked prefill by default. v0.7.3 forces "
    "it off (vllm/config.py 3327-3335, VllmConfig.__post_init__); v0.8.0 leaves it off by default "
    "(vllm/engine/arg_utils.py 1612-1614, _set_default_args_v0: 'Chunked prefill not supported "
    "for Multimodal or MLA in V0'); vllm-project/vllm#12639 (2025-02-21) removed the forcing and "
    "kept V0's default off. So the long-context default (chunked above 32,768 tokens) does not "
    "apply, and the budget is max(max_model_len, 2048) (vllm/config.py 1536 @ v0.7.3)"
)
_PREFIX_CACHE_COMMAND = (
    "the README's prefix-caching launch (line 273): `vllm serve deepseek-ai/DeepSeek-R1 "
    "--enable-prefix-caching --trust-remote-code --tensor-parallel-size 8 "
    "--enable-chunked-prefill`: chunked prefill at V0's 2,048-token budget "
    "(vllm/config.py 1532 @ v0.7.3)"
)

_H200_ENGINE = {
    "name": "vllm", "vllm_version": "0.7.3",
    "vllm_version_as_stated": "0.7.4.dev181+gf35f8e22",
    "vllm_version_source": _H200_VERSION_SOURCE,
    "image": "vllm/vllm-openai:v0.7.3 + `pip install vllm --pre --extra-index-url "
    "https://wheels.vllm.ai/nightly`",
    "max_model_len": DSR1_CONTEXT_TOKENS,
    "max_model_len_source": "no --max-model-len: the checkpoint's "
    "max_position_embeddings (deepseek-ai/DeepSeek-R1 config.json)",
}  # fmt: skip
_H200_GPU = {"gpu": "h200-sxm",
             "gpu_description": "NVIDIA H200 SXM5 141GB x 8 (README lines 17-22)"}  # fmt: skip
_NOT_GIVEN = {"max_num_batched_tokens": None, "max_num_seqs": None,
              "gpu_memory_utilization": None}  # fmt: skip


def _h200_server(*, chunked: bool, source: str, launch: str, lines: str, flags: list) -> dict:
    """The H200 server of the DeepSeek-R1 rows: random (prefix cache off, no chunking) or
    shared-prefix (both on)."""
    return {
        **_H200_GPU,
        "engine": {
            **_H200_ENGINE,
            "chunked_prefill": chunked, "chunked_prefill_source": source, **_NOT_GIVEN,
            "prefix_caching": chunked, "block_size": None,
            "environment": ["VLLM_ATTENTION_BACKEND=FLASHMLA"],
            "launch": launch, "launch_source": launch_source(lines),
        },
        "flags": flags,
    }  # fmt: skip


# (gpu, dataset) -> the server of those rows: engine fields (itlkit's names) and where read.
DSR1_SERVERS = {
    ("h200", "random"): _h200_server(
        chunked=False, source=_MLA_CHUNKING, lines="258-278", flags=["nightly_build"],
        launch="vllm serve deepseek-ai/DeepSeek-R1 --trust-remote-code --tensor-parallel-size 8",
    ),
    ("h200", "generated-shared-prefix"): _h200_server(
        chunked=True, source=_PREFIX_CACHE_COMMAND, lines="272-273",
        flags=["nightly_build", "shared_prefix"],
        launch="vllm serve deepseek-ai/DeepSeek-R1 --enable-prefix-caching --trust-remote-code "
        "--tensor-parallel-size 8 --enable-chunked-prefill",
    ),
    ("mi300x", "random"): {
        "gpu": "mi300x", "gpu_description": "AMD Instinct MI300X 192GB x 8 (README lines 9-15)",
        "engine": {
            "name": "vllm", "vllm_version": "0.7.2",
            "vllm_version_as_stated": "0.7.3.dev138+g21f6ca217",
            "vllm_version_source": _MI300X_VERSION_SOURCE,
            "image": "rocm/vllm-dev:vllm-ds3-staging-0217",
            "max_model_len": 32_768, "max_model_len_source": "--max-model-len 32768",
            "chunked_prefill": False, "chunked_prefill_source": _MLA_CHUNKING + "; nor does "
            "v0.7.3 chunk long contexts on ROCm (vllm/engine/arg_utils.py 1175-1186)",
            **_NOT_GIVEN, "prefix_caching": False, "block_size": None,
            "environment": ["VLLM_FP8_PADDING=0", "VLLM_USE_TRITON_FLASH_ATTN=0"],
            "launch": "vllm serve deepseek-ai/DeepSeek-R1 --tensor-parallel-size 8 "
            "--trust-remote-code --max-model-len 32768",
            "launch_source": launch_source("279-295"),
        },
        "flags": ["rocm_fork"],
    },
}  # fmt: skip

DSR1_NOTES = {
    "client": "dstack's copy of SGLang's bench_serving.py (Deepseek-R1/bench_serving.py @ "
    f"{DSR1_COMMIT[:8]}): --backend vllm posts to /v1/completions, streamed, temperature 0, "
    "ignore_eos true unless --disable-ignore-eos (lines 158-178); --max-concurrency C is a "
    "semaphore of C slots over requests all sent at t = 0 (--request-rate default inf, lines "
    "977-984, 1450-1456)",
    "random": "--dataset-name random --random-input 3200 --random-output L "
    "--random-range-ratio 1: lengths drawn as randint(int(3200 x 1), 3201) and "
    "randint(int(L x 1), L + 1), so every prompt is 3,200 tokens and every output L (lines "
    "677-694); the prompt is ShareGPT text cut or repeated to 3,200 token ids, then decoded "
    "(lines 740-745): the server re-tokenises that text, a count the CSV does not give",
    "warmup": "before the measured requests the client sends the first prompt once with "
    "max_tokens min(L, 32) and waits for it (lines 987-1009)",
    "same_prompts": "--seed defaults to 1 (line 1485): every run on a server sends the same 500 "
    "prompts; with prefix caching off (V0's default) no run finds an earlier run's prompts",
    "gsp": "--dataset-name generated-shared-prefix --gsp-num-groups 10 --gsp-prompts-per-group "
    "50 --gsp-system-prompt-len 2000 --gsp-question-len 1200 --gsp-output-len 800: 500 prompts "
    "'system prompt + \\n\\n + question' of random vocabulary tokens, decoded, each sent once in "
    "shuffled order (lines 785-836); itlkit sends them group by group (same hits per group "
    "from an LRU that holds the 10 system prompts). The prompt count is the client tokenizer's "
    "of the decoded text (CSV total_input_tokens / completed); the growth over 3,200 is "
    "re-tokenisation, which stretches system prompt and question alike "
    "(prompt_template_tokens 0)",
    "gsp_cache": "the gsp prompts are cached by the client in a pickle keyed by the parameters "
    "(lines 772-782, 796-800): the 64- and 32-slot runs report the same input total (1,636,216) "
    "and the 128-slot run another (1,636,038); which runs followed which on the same server, and "
    "so which prompts an earlier run left in the prefix cache, is not published "
    "(prompts_sent_before 0)",
    "p90": "the CSV has no p90: ttft_p90_seconds and e2e_p90_seconds are null",
    "itl": "itl_mean_seconds is the format's (E2E mean - TTFT mean) / (output - 1); with every "
    "request generating the same count it equals the CSV's TPOT mean. The CSV's ITL statistics "
    "are the client's gaps between non-empty streamed chunks (itl_per_token_quantiles_seconds: "
    "median and p99)",
    "kv": "KV cache dtype auto: bfloat16, the checkpoint's torch_dtype (its FP8 covers weights)",
}
DSR1_FLAG_NOTES = {
    "nightly_build": "a nightly vLLM between releases: defaults from the release before "
    "(engine.vllm_version), DeepSeek-specific settings given explicitly; "
    "VLLM_ATTENTION_BACKEND=FLASHMLA, whose kernels itlkit does not model (FlashMLA needs "
    "16-token blocks raised to 64, which this launch does not ask for: block_size stays null)",
    "shared_prefix": "SGLang's generated-shared-prefix prompts (10 system prompts x 50 "
    "questions), with the prefix cache on",
    "rocm_fork": "ROCm's vLLM build (rocm/vllm-dev image), assumed to default like upstream "
    "0.7.2/0.7.3",
    "p90_not_published": "no p90 in the source: null",
}


def read_dsr1_rows(data: bytes) -> list[tuple[int, dict]]:
    """The CSV's rows with their line numbers (the header is line 1)."""
    text = data.decode("utf-8-sig")
    rows = csv.DictReader(io.StringIO(text))
    return [(i + 2, row) for i, row in enumerate(rows)]


def ms(row: dict, key: str) -> float:
    return float(row[key]) / 1e3


def dsr1_measured(row: dict, output_tokens: int) -> dict:
    """The row's client statistics in the format's keys, seconds (no p90 published)."""
    itl_mean = (ms(row, "mean_e2e_latency_ms") - ms(row, "mean_ttft_ms")) / (output_tokens - 1)
    return {
        "e2e_mean_seconds": ms(row, "mean_e2e_latency_ms"),
        "e2e_p50_seconds": ms(row, "median_e2e_latency_ms"),
        "e2e_p90_seconds": None,
        "e2e_p99_seconds": ms(row, "p99_e2e_latency_ms"),
        "ttft_mean_seconds": ms(row, "mean_ttft_ms"),
        "ttft_p50_seconds": ms(row, "median_ttft_ms"),
        "ttft_p90_seconds": None,
        "ttft_p99_seconds": ms(row, "p99_ttft_ms"),
        "itl_mean_seconds": itl_mean,
        "tpot_mean_seconds": ms(row, "mean_tpot_ms"),
        "tpot_p50_seconds": ms(row, "median_tpot_ms"),
        "tpot_p99_seconds": ms(row, "p99_tpot_ms"),
        "itl_per_token_quantiles_seconds": {
            "0.5": ms(row, "median_itl_ms"),
            "0.99": ms(row, "p99_itl_ms"),
        },
        "itl_client_mean_seconds": ms(row, "mean_itl_ms"),
        "requests": int(row["completed"]),
        "duration_seconds": float(row["duration"]),
        "client_mean_concurrency": float(row["concurrency"]),
        "stages": None,
    }


def dsr1_workload(row: dict) -> dict:
    conc, prompts = int(row["max_concurrency"]), int(row["completed"])
    out = {"name": row["dataset_name"], "arrival": "vllm-bench", "num_prompts": prompts,
           "request_rate_per_second": "inf", "max_concurrency": conc}  # fmt: skip
    if row["dataset_name"] == "random":
        prompt, output = int(row["random_input_len"]), int(row["random_output_len"])
        out |= {"prompt_tokens_distribution": {"kind": "fixed", "tokens": prompt},
                "random_range_ratio": float(row["random_range_ratio"])}  # fmt: skip
    else:  # generated-shared-prefix: README lines 333-341
        output = int(row["total_output_tokens"]) // prompts
        out |= {"system_prompts": 10, "prompts_per_system_prompt": 50,
                "system_prompt_tokens": 2000, "question_tokens": 1200,
                "prompt_tokens_mean": int(row["total_input_tokens"]) / prompts,
                "prompt_template_tokens": 0.0}  # fmt: skip
    return out | {
        "output_tokens_distribution": {"kind": "fixed", "tokens": output},
        "output_tokens_mean": float(output),
        "output_tokens_mean_source": "ignore_eos: every request generates its max_tokens (the "
        "CSV's total_output_tokens / completed is this count exactly)",
        "output_tokens_target": output, "ignore_eos": True,
        "prompts_sent_before": 0, "warmup_requests": 1,
        "api": "completions", "streaming": True, "stages": None,
    }  # fmt: skip


def dsr1_run_id(row: dict) -> str:
    gpu, conc = row["GPU"], row["max_concurrency"]
    if row["dataset_name"] == "random":
        return f"dstack-dsr1-{gpu}-vllm-tp8-random-{row['random_input_len']}-" \
               f"{row['random_output_len']}-c{conc}"  # fmt: skip
    return f"dstack-dsr1-{gpu}-vllm-tp8-shared-prefix-c{conc}"


def dsr1_run(line: int, row: dict, source: dict) -> dict:
    server = DSR1_SERVERS[(row["GPU"], "random" if row["dataset_name"] == "random"
                           else "generated-shared-prefix")]  # fmt: skip
    workload = dsr1_workload(row)
    output = workload["output_tokens_target"]
    flags = [*server["flags"], "p90_not_published"]
    notes = [DSR1_NOTES[k] for k in ("client", "warmup", "p90", "itl", "kv")]
    notes += [DSR1_NOTES[k] for k in (("random", "same_prompts") if row["dataset_name"] ==
                                      "random" else ("gsp", "gsp_cache"))]  # fmt: skip
    stated = ("GPU", "backend", "dataset_name", "max_concurrency", "random_input_len",
              "random_output_len", "random_range_ratio", "completed")  # fmt: skip
    return {
        "id": dsr1_run_id(row),
        "source": {**source, "table": "dsr1-online", "line": line,
                   "row": {k: row[k] for k in stated},
                   "client": {**launch_source(CLIENT_LINES, CLIENT), "licence": "Apache-2.0"}},
        "model": "deepseek-v3",
        "hf_model_id": "deepseek-ai/DeepSeek-R1",
        "gpu": server["gpu"], "gpu_description": server["gpu_description"],
        "gpus": 8, "tp": 8, "ep": 1,
        "weights_precision": "fp8",
        "weights_precision_label": "FP8 e4m3, 128 x 128 blocks (config.json quantization_config)",
        "kv_precision": "bf16",
        "interconnect": None,
        "engine": server["engine"],
        "workload": workload,
        "measured": dsr1_measured(row, output),
        "flags": flags,
        "notes": [DSR1_FLAG_NOTES[f] for f in flags] + notes,
    }  # fmt: skip


def dsr1_runs(data: bytes) -> tuple[list[dict], Counter, list[dict]]:
    source = source_entry(DSR1_COMMIT, DSR1_CSV, data)
    runs, left_out, refused = [], Counter(), []
    for line, row in read_dsr1_rows(data):
        if row["backend"] != "vllm":
            left_out["not_vllm"] += 1
            continue
        run = dsr1_run(line, row, source)
        m = run["measured"]
        if abs(m["tpot_mean_seconds"] / m["itl_mean_seconds"] - 1) > TPOT_IDENTITY:
            left_out["inconsistent"] += 1
            refused.append({"id": run["id"], "reason": REASONS["inconsistent"]})
            continue
        runs.append(run)
    return runs, left_out, refused


# --- Llama-3.1-405B-FP8 on 8 H100 SXM (per-request result files) --------------------------

RESULT = re.compile(r"(?:nvidia-)?vllm-(\d+)\.0qps-Llama-3\.1-405B-FP8-(\d{8}-\d{6})\.json$")
H100_VERSION_SOURCE = (
    f"{COMPARISON_README} line 123 and {SWEEP}README.md line 122 (`vLLM Version: "
    "0.6.3.post2.dev308+gb489fc3c`, collect_env): the nightly wheel of line 495, built between "
    "v0.6.3.post1 and v0.6.4, both in itlkit's row 0.6.1 to 0.6.4.post1 (V0), given as 0.6.3 "
    "(itlkit reads '0.6.3.post1' but `Run.release` cannot re-read the label it makes of it)"
)
H100_NOTES = [
    "client: vLLM's benchmarks/benchmark_serving.py `--backend vllm --model "
    "meta-llama/Llama-3.1-405B-FP8 --dataset-name sharegpt --request-rate=QPS` "
    f"({COMPARISON_README} lines 499-506): 1,000 ShareGPT prompts on /v1/completions, streamed, "
    "Poisson arrivals at QPS (1000: a near-burst), default seed, no --ignore-eos: outputs stop at "
    "EOS or the dataset's reply length",
    "server: `vllm serve meta-llama/Llama-3.1-405B-FP8 --tensor-parallel-size 8 --max-model-len "
    f"91680` ({COMPARISON_README} lines 492-497) with the sweep's flags of the file's row in "
    f"{SWEEP_CSV} (num-scheduler-step, enable-chunked-prefill, max-num-batched-tokens, "
    "max-num-seqs, max-seq-len-to-capture, enable-prefix-caching); the README's command "
    "names none of them, the table names max-num-seqs 512 for the files the comparison reuses",
    "378 or 379 of the 1,000 requests came back empty in every file, H100 and MI300X alike "
    "(output_lens 0, ttfts 0.0, no gaps, no error; the same prompts each time, on average 384 "
    "prompt tokens against 112 for the others): the greedy reply of this base checkpoint ends "
    "at once. They count as 1-token outputs in the workload and are left out of the measured "
    "latencies (the file's own TTFT mean counts their zeros)",
    "prompt and output lengths are the file's own, as quantile tables drawn independently "
    "(ShareGPT pairs them: here the empty replies follow the longer prompts)",
    "weights: the checkpoint's FP8 (per its name; which layers it keeps at 16 bits was not "
    "read); KV cache dtype auto (bfloat16)",
]


def read_sweep_settings(data: bytes) -> dict[str, tuple[int, dict]]:
    """File stem -> (line, row) of the sweep's settings table."""
    rows = csv.DictReader(io.StringIO(data.decode("utf-8-sig")))
    return {row["filename"].removesuffix(".json"): (i + 2, row) for i, row in enumerate(rows)}


def settings_reason(row: dict) -> str | None:
    """Why a sweep row's server cannot be expressed, or None."""
    if int(row["num-scheduler-step"]) > 1:
        return "multi_step_scheduling"
    if row["enable-chunked-prefill"] == "FALSE" and int(row["max-num-batched-tokens"]) < 91680:
        return "settings_impossible"
    return None


def h100_engine(line: int, row: dict) -> dict:
    return {
        "name": "vllm", "vllm_version": "0.6.3",
        "vllm_version_as_stated": "0.6.3.post2.dev308+gb489fc3c",
        "vllm_version_source": H100_VERSION_SOURCE,
        "image": "nvcr.io/nvidia/pytorch:23.10-py3 + the nightly vllm-1.0.0.dev wheel "
        f"({COMPARISON_README} lines 494-495)",
        "max_model_len": 91_680, "max_model_len_source": f"{COMPARISON_README} line 496",
        "chunked_prefill": row["enable-chunked-prefill"] == "TRUE",
        "max_num_batched_tokens": int(row["max-num-batched-tokens"]),
        "max_num_seqs": int(row["max-num-seqs"]),
        "prefix_caching": row["enable-prefix-caching"] == "TRUE",
        "gpu_memory_utilization": None, "block_size": None,
        "num_scheduler_steps": int(row["num-scheduler-step"]),
        "max_seq_len_to_capture": int(row["max-seq-len-to-capture"]),
        "settings_source": {**launch_source(str(line), SWEEP_CSV, SWEEP_COMMIT)},
    }  # fmt: skip


def h100_run(source: dict, doc: dict, line: int, row: dict, table: str) -> dict:
    rate, date = int(doc["request_rate"]), doc["date"]
    return {
        "id": f"dstack-llama405b-fp8-h100-tp8-qps{rate}-{date}",
        "source": {**source, "table": table, "date": date},
        "model": "llama-3.1-405b",
        "hf_model_id": doc["model_id"],
        "gpu": "h100-sxm",
        "gpu_description": "NVIDIA H100 80GB HBM3 x 8, NVLink NV18 (collect_env, "
        f"{COMPARISON_README} lines 27-35, 127-135)",
        "gpus": 8, "tp": 8, "weights_precision": "fp8", "kv_precision": "bf16",
        "interconnect": None,
        "engine": h100_engine(line, row),
        "workload": sharegpt_workload(doc, levels=LEVELS, request_rate=float(doc["request_rate"])),
        "measured": replied_figures(doc),
        "flags": [],
        "notes": H100_NOTES,
    }  # fmt: skip


def result_files(root: Path) -> list[tuple[str, str, Path]]:
    """(commit, path, file) of every serving result under ROOT, in path order."""
    out = []
    for commit, under in ((MAIN_COMMIT, COMPARISON), (SWEEP_COMMIT, SWEEP)):
        for file in sorted((root / commit / under).rglob("*.json")):
            path = file.relative_to(root / commit).as_posix()
            if "qps" in path:
                out.append((commit, path, file))
    return out


def llama_runs(root: Path) -> tuple[list[dict], Counter, list[dict]]:
    settings = read_sweep_settings((root / SWEEP_COMMIT / SWEEP_CSV).read_bytes())
    runs, left_out, listed, seen = [], Counter(), [], {}
    for commit, path, file in result_files(root):
        data = file.read_bytes()
        doc = json.loads(data)
        digest = hashlib.sha256(data).hexdigest()
        reason = file_reason(path, doc, digest, seen, settings)
        if reason:
            left_out[reason] += 1
            listed.append({"commit": commit, "path": path, "reason": reason})
            continue
        seen[digest] = path
        line, row = settings[stem(path)]
        table = "llama405b-comparison" if path.startswith(COMPARISON) else "llama405b-sweep"
        runs.append(h100_run(source_entry(commit, path, data), doc, line, row, table))
    for path in UNAVAILABLE:
        left_out["file_unavailable"] += 1
        listed.append({"commit": MAIN_COMMIT, "path": path, "reason": "file_unavailable"})
    return runs, left_out, listed


def stem(path: str) -> str:
    """The sweep table's name of a result file (the comparison prefixes `nvidia-`)."""
    return Path(path).stem.removeprefix("nvidia-")


def file_reason(path: str, doc: dict, digest: str, seen: dict, settings: dict) -> str | None:
    """Why a result file is not a run (None: it is one)."""
    if doc["completed"] < doc["num_prompts"]:
        return "failed"
    if "Mi300x" in path or "amd-meta" in path:
        # 8xMi300x-serving-meta (`_RPC`: VLLM_RPC_TIMEOUT=30000) and misc/ (`no-rpc`: the same
        # server without it): --num-scheduler-step 15 (comparison README lines 487-489)
        return "multi_step_scheduling"
    if digest in seen:
        return "duplicate"
    if stem(path) not in settings:
        return "settings_not_recorded"
    return settings_reason(settings[stem(path)][1])


# --- the whole file -----------------------------------------------------------------------


def refusal(run: dict) -> str | None:
    try:
        parse_runs({"format": FORMAT, "runs": [run]}, source="dstack")
    except ConfigError as exc:
        return str(exc)
    return None


def build(root: Path) -> dict:
    dsr1_path = root / DSR1_COMMIT / DSR1_CSV
    dsr1, dsr1_out, refused = dsr1_runs(dsr1_path.read_bytes())
    llama, llama_out, files_left_out = llama_runs(root)
    runs, left_out = [], dsr1_out + llama_out
    for run in dsr1 + llama:
        problem = refusal(run)
        if problem:
            left_out["refused"] += 1
            refused.append({"id": run["id"], "reason": problem})
        else:
            runs.append(run)
    runs.sort(key=lambda r: r["id"])
    reasons = {**REASONS, "refused": "itlkit's runs reader refuses it"}
    return {
        "format": FORMAT,
        "description": f"{len(runs)} real vLLM runs from dstackai/benchmarks: DeepSeek-R1 on 8 "
        "H200 and 8 MI300X (closed loops of SGLang's bench_serving.py), Llama-3.1-405B-FP8 on 8 "
        "H100 SXM (vLLM benchmark_serving.py, Poisson ShareGPT); see README.md",
        "source": {
            "repo": REPO,
            "licence": LICENCE,
            "commits": [DSR1_COMMIT, MAIN_COMMIT, SWEEP_COMMIT],
        },
        "defaults_for_null": {},
        "left_out": left_out_section(left_out, reasons, files_left_out, refused),
        "runs": runs,
    }


def main(argv=None) -> int:
    return convert(build, description=__doc__.splitlines()[0], default_out=DEFAULT_OUT,
                   argv=argv)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
