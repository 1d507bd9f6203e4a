"""Write `inferencex.json` (format `itlkit-runs/1`) from InferenceX's benchmark fixture.

Run: .venv/bin/python data/real-runs-inferencex/make_runs.py BENCHMARKS.json [MORE.json ...]
     [--fixture-commit SHA] [-o OUT.json]

Each BENCHMARKS.json is a version of the InferenceX dashboard's benchmark API snapshot,
`packages/app/cypress/fixtures/api/benchmarks.json` of SemiAnalysisAI/InferenceX-app: one row per
measured point (hardware, framework, model, precision, parallelism, ISL/OSL, concurrency, engine
image, client latencies in seconds, date, GitHub Actions run). A known version is recognised by
its SHA-256 (`FIXTURES`); any other needs `--fixture-commit`. The rows that itlkit can express
(single-node SGLang or vLLM, no speculative decoding, a catalog GPU and model, no expert or
data parallelism) become closed-loop runs: the newest row of each configuration, with the
server's launch settings read from the InferenceX benchmark scripts at the master commit of the
row's date (`RECIPES`, file and commit per entry). Every choice and its reason is in
`README.md` beside this script. Deterministic: the same fixtures give the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from itlkit.errors import ConfigError
from itlkit.sim.runs import FORMAT, parse_runs

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "inferencex.json"

APP_REPO = "SemiAnalysisAI/InferenceX-app"
FIXTURE_PATH = "packages/app/cypress/fixtures/api/benchmarks.json"
BENCH_REPO = "SemiAnalysisAI/InferenceX"
LICENCES = {
    APP_REPO: "GPL-3.0 (LICENSE at the fixture's commit): only figures are taken, with their "
    "source; no file of the repository is copied into this project",
    BENCH_REPO: "Apache-2.0 (LICENSE at every recipe commit): settings are read from its "
    "scripts and cited; no script is copied",
}

# The fixture versions read so far, by the SHA-256 of the file's bytes at its commit. Both
# commits are SemiAnalysisAI/InferenceX-app's (squash-merged PRs); this project read them from the
# public fork vngcloud/InferenceX-app, which carries the upstream history unchanged.
FIXTURES = {
    "787d4157e78d7c85e6877dfaee3d2a8384c9ecc108852a960313fa79fa8626ea": {
        "commit": "cac6246e9fef70841e48e1434cbf10bb9a2802a8",
        "committed": "2026-05-05",
        "title": "ci: e2e mock api fixtures (#318)",
    },
    "f46823a76cb63248705329f327e1494df02b4dfa4df0898b7ee084c75c20bd52": {
        "commit": "528c4146b8f502fcbce8df7870a935a970cbae25",
        "committed": "2026-06-14",
        "title": "chore(e2e): refresh Cypress fixtures so MiniMax M3 appears in dropdown (#458)",
    },
}
READ_FROM = "git mirror of the public fork vngcloud/InferenceX-app (upstream commits unchanged)"

# The fixture's names -> itlkit's catalog names.
GPUS = {"h100": "h100-sxm", "h200": "h200-sxm", "b200": "b200", "b300": "b300",
        "mi300x": "mi300x", "mi325x": "mi325x", "mi355x": "mi355x"}  # fmt: skip
# The fixture's model keys are InferenceX's database keys: gpt-oss-120b is `gptoss120b` (not the
# scripts' `gptoss` prefix), as availability.json of InferenceX-app@3a600f1d lists it.
MODELS = {"dsr1": "deepseek-v3", "gptoss120b": "gpt-oss-120b", "llama70b": "llama-3.3-70b"}
ENGINES = ("sglang", "vllm")
# The fixture's precision -> (itlkit weights precision, flag). FP4 (MXFP4 on AMD, NVFP4 on NVIDIA)
# is itlkit's fp4: W4A4, at the GPU's FP4 rate where it has one.
PRECISIONS = {"bf16": ("bf16", None), "fp8": ("fp8", None), "fp4": ("fp4", "fp4_w4a4")}

# From InferenceX #666 (8d81e0bf, 2026-02-19) every single-node row is launched by
# benchmarks/single_node/<model>_<precision>_<gpu>.sh and measured by benchmark_lib.sh's
# run_benchmark_serving with the repository's own utils/bench_serving client and
# --num-prompts CONC x 10. Before, the runner scripts chose 10, 20 or 50 x CONC prompts and
# cloned kimbochen/bench_serving; which runner ran a row is not recorded.
HARNESS_FROM = "2026-02-19"
# .github/workflows/benchmark-tmpl.yml: `RANDOM_RANGE_RATIO: 0.8` at every recipe commit below.
RANGE_RATIO = 0.8
PROMPTS_PER_SLOT = 10  # --num-prompts $((CONC * 10)) in every recipe script below
WARMUPS_PER_SLOT = 2  # benchmark_lib.sh: --num-warmups $((2 * max_concurrency))

# Why a row is left out, in the order they are tested.
REASONS = {
    "multi_node_or_disaggregated": "multi-node or prefill/decode-disaggregated serving (Dynamo, "
    "MoRI)",
    "framework": "served by another framework (TensorRT-LLM, ATOM)",
    "speculative_decoding": "speculative decoding (spec_method mtp)",
    "gpu_not_in_catalog": "GPU not in itlkit's catalog (GB300)",
    "model_not_in_catalog": "model not in itlkit's catalog",
    "precision": "precision itlkit has no equivalent for",
    "expert_or_data_parallel": "expert parallelism > 1 or data-parallel attention (not in "
    "itlkit's Deployment)",
    "superseded": "the same configuration measured again at a later date (newest kept)",
    "duplicate": "the same row in an earlier fixture version",
    "before_harness": f"dated before {HARNESS_FROM}: older harness, prompts per slot unknown",
    "no_recipe": "no launch settings read for this hardware, model and date",
    "inconsistent": "the row's figures disagree with its recipe (`CONSISTENCY`)",
    "refused": "itlkit's runs reader refuses it",
}


# --- the servers' launch settings, read from SemiAnalysisAI/InferenceX ---------------------


@dataclass(frozen=True)
class Recipe:
    """One benchmark script at the master commit of a row's date: the image and checkpoint its
    config names (.github/configs/*-master.yaml) and its SGLang flags per (tp, isl, osl, conc)."""

    commit: str
    script: str
    image: str
    checkpoint: str
    launch: Callable[..., dict]
    env: tuple[str, ...] = ()


def h200_dsr1_fp8(*, tp: int, isl: int, osl: int, conc: int) -> dict:
    """dsr1_fp8_h200.sh: 1k/1k at 512 running requests and CUDA graphs, else 256; no
    --kv-cache-dtype (auto: the checkpoint's bf16)."""
    running = 512 if (isl, osl) == (1024, 1024) else 256
    return {"max_running_requests": running, "cuda_graph_max_bs": running,
            "chunked_prefill_size": 32768, "max_prefill_tokens": 32768,
            "mem_fraction_static": 0.82, "kv_cache_dtype": "auto",
            "attention_backend": "flashinfer", "stream_interval": 10}  # fmt: skip


def b200_dsr1_fp8(*, tp: int, isl: int, osl: int, conc: int) -> dict:
    """dsr1_fp8_b200.sh (dsr1_fp8_b300.sh reuses it): TP8 at 128 running requests, TP4 (8k/1k
    only) at 32 with 0.95 of memory and 8,192-token chunks."""
    if tp == 8:
        shape = {"max_running_requests": 128, "cuda_graph_max_bs": 128,
                 "mem_fraction_static": 0.82, "chunked_prefill_size": 32768,
                 "max_prefill_tokens": 32768,
                 "scheduler_recv_interval": 30 if conc >= 16 else 10}  # fmt: skip
    elif tp == 4 and (isl, osl) == (8192, 1024):
        shape = {"max_running_requests": 32, "cuda_graph_max_bs": 32, "mem_fraction_static": 0.95,
                 "chunked_prefill_size": 8192, "max_prefill_tokens": 8192,
                 "scheduler_recv_interval": 10}  # fmt: skip
    else:
        raise ConfigError(f"the script exits for TP {tp} at {isl}/{osl}")
    return {**shape, "kv_cache_dtype": "fp8_e4m3", "attention_backend": "trtllm_mla",
            "stream_interval": 30, "ep_size": 1, "moe_runner_backend": "flashinfer_trtllm",
            "quantization": "fp8", "enable_flashinfer_allreduce_fusion": True}  # fmt: skip


def mi30x_dsr1_fp8(*, tp: int, isl: int, osl: int, conc: int) -> dict:
    """dsr1_fp8_mi300x.sh and dsr1_fp8_mi325x.sh (the same flags)."""
    return {"mem_fraction_static": 0.8, "cuda_graph_max_bs": 128,
            "chunked_prefill_size": 131072, "max_prefill_tokens": 131072,
            "num_continuous_decode_steps": 4, "kv_cache_dtype": "fp8_e4m3",
            "attention_backend": "aiter"}  # fmt: skip


def mi355x_dsr1_fp4(*, tp: int, isl: int, osl: int, conc: int) -> dict:
    """dsr1_fp4_mi355x.sh: PREFILL_SIZE 196608, 32768 for 8k/1k above 32 slots."""
    prefill = 32768 if (isl, osl) == (8192, 1024) and conc > 32 else 196608
    return {"chunked_prefill_size": prefill, "max_prefill_tokens": prefill,
            "mem_fraction_static": 0.8, "num_continuous_decode_steps": 4,
            "cuda_graph_max_bs": 128, "attention_backend": "aiter",
            "kv_cache_dtype": "fp8_e4m3"}  # fmt: skip


def mi355x_dsr1_fp8(steps: int) -> Callable[..., dict]:
    """dsr1_fp8_mi355x.sh: CUDA graphs up to the concurrency; `steps` continuous decode steps
    (4, then 8 from a2180b61, 2026-05-03)."""

    def launch(*, tp: int, isl: int, osl: int, conc: int) -> dict:
        return {"chunked_prefill_size": 196608, "max_prefill_tokens": 196608,
                "mem_fraction_static": 0.8, "num_continuous_decode_steps": steps,
                "kv_cache_dtype": "fp8_e4m3", "cuda_graph_max_bs": conc,
                "attention_backend": "aiter"}  # fmt: skip

    return launch


SN = "benchmarks/single_node/"
R1 = "deepseek-ai/DeepSeek-R1-0528"
R1_MXFP4 = "amd/DeepSeek-R1-0528-MXFP4-Preview"
# The environment each script exports before the launch.
H200_ENV = ("TORCH_CUDA_ARCH_LIST=9.0",)
B200_ENV = ("SGL_ENABLE_JIT_DEEPGEMM=false", "SGLANG_ENABLE_FLASHINFER_GEMM=true")
MI30X_ENV = ("SGLANG_USE_AITER=1", "SGLANG_AITER_MLA_PERSIST=1")
MI355X_FP4_ENV = ("SGLANG_USE_AITER=1", "ROCM_QUICK_REDUCE_QUANTIZATION=INT4")
MI355X_FP8_ENV = (*MI355X_FP4_ENV[:1], "RCCL_MSCCL_ENABLE=0", *MI355X_FP4_ENV[1:])
# (hardware, framework, model, precision) -> {row date: Recipe}. Each commit is the last
# first-parent commit of InferenceX master on or before that date (UTC); its config's image is
# the row's image in every entry.
RECIPES = {
    ("h200", "sglang", "dsr1", "fp8"): {
        "2026-03-25": Recipe("12ba0ae07289e3212840f8f59913ddee97b07f73", SN + "dsr1_fp8_h200.sh",
                             "lmsysorg/sglang:v0.5.9-cu130", R1, h200_dsr1_fp8, H200_ENV),
        "2026-05-17": Recipe("2fc18b7594beb9dc13f0b437f0c60f9c77af0875", SN + "dsr1_fp8_h200.sh",
                             "lmsysorg/sglang:v0.5.12-cu130", R1, h200_dsr1_fp8, H200_ENV),
    },
    ("b200", "sglang", "dsr1", "fp8"): {
        "2026-03-25": Recipe("12ba0ae07289e3212840f8f59913ddee97b07f73", SN + "dsr1_fp8_b200.sh",
                             "lmsysorg/sglang:v0.5.9-cu130", R1, b200_dsr1_fp8, B200_ENV),
        "2026-05-22": Recipe("d4948f9937486c4d2f6b1643c4115a4c09eb976f", SN + "dsr1_fp8_b200.sh",
                             "lmsysorg/sglang:v0.5.12-cu130", R1, b200_dsr1_fp8, B200_ENV),
    },
    ("b300", "sglang", "dsr1", "fp8"): {
        "2026-04-17": Recipe("dd9c285b31409ac34f35ccc25ba5ac3af234df13", SN + "dsr1_fp8_b300.sh",
                             "lmsysorg/sglang:v0.5.10.post1-cu130", R1, b200_dsr1_fp8, B200_ENV),
        "2026-05-22": Recipe("d4948f9937486c4d2f6b1643c4115a4c09eb976f", SN + "dsr1_fp8_b300.sh",
                             "lmsysorg/sglang:v0.5.12-cu130", R1, b200_dsr1_fp8, B200_ENV),
    },
    ("mi300x", "sglang", "dsr1", "fp8"): {
        "2026-02-27": Recipe("f267602ff7825dc02eaf81f512f50f380d6d39f9",
                             SN + "dsr1_fp8_mi300x.sh", "lmsysorg/sglang:v0.5.9-rocm700-mi30x",
                             R1, mi30x_dsr1_fp8, MI30X_ENV),
        "2026-05-18": Recipe("f3dbc40c99a6dad45f76adecbc1f460cac36f039",
                             SN + "dsr1_fp8_mi300x.sh", "lmsysorg/sglang:v0.5.12-rocm700-mi30x",
                             R1, mi30x_dsr1_fp8, MI30X_ENV),
    },
    ("mi325x", "sglang", "dsr1", "fp8"): {
        "2026-02-27": Recipe("f267602ff7825dc02eaf81f512f50f380d6d39f9",
                             SN + "dsr1_fp8_mi325x.sh", "lmsysorg/sglang:v0.5.9-rocm700-mi30x",
                             R1, mi30x_dsr1_fp8, MI30X_ENV),
        "2026-05-18": Recipe("f3dbc40c99a6dad45f76adecbc1f460cac36f039",
                             SN + "dsr1_fp8_mi325x.sh", "lmsysorg/sglang:v0.5.12-rocm700-mi30x",
                             R1, mi30x_dsr1_fp8, MI30X_ENV),
    },
    ("mi355x", "sglang", "dsr1", "fp4"): {
        "2026-02-27": Recipe("f267602ff7825dc02eaf81f512f50f380d6d39f9",
                             SN + "dsr1_fp4_mi355x.sh", "lmsysorg/sglang:v0.5.9-rocm700-mi35x",
                             R1_MXFP4, mi355x_dsr1_fp4, MI355X_FP4_ENV),
        "2026-06-11": Recipe("263aace86de68d8ea24d5f83d289958c61c922e9",
                             SN + "fixed_seq_len/dsr1_fp4_mi355x.sh",
                             "lmsysorg/sglang:v0.5.12-rocm700-mi35x", R1_MXFP4, mi355x_dsr1_fp4,
                             MI355X_FP4_ENV),
    },
    ("mi355x", "sglang", "dsr1", "fp8"): {
        "2026-03-05": Recipe("ade7c0015d7ab081802b603abf3ef53fa3c4b7ab",
                             SN + "dsr1_fp8_mi355x.sh", "lmsysorg/sglang:v0.5.9-rocm700-mi35x",
                             R1, mi355x_dsr1_fp8(4), MI355X_FP8_ENV),
        "2026-05-03": Recipe("425ecbe0b24395acd96e063697b5120bab99e7ed",
                             SN + "dsr1_fp8_mi355x.sh", "lmsysorg/sglang:v0.5.9-rocm700-mi35x",
                             R1, mi355x_dsr1_fp8(8), MI355X_FP8_ENV),
        "2026-05-27": Recipe("bfad6df76985d1bf9ae20e914a5f81862bd3397c",
                             SN + "dsr1_fp8_mi355x.sh", "lmsysorg/sglang:v0.5.12-rocm700-mi35x",
                             R1, mi355x_dsr1_fp8(8), MI355X_FP8_ENV),
    },
}  # fmt: skip

# SGLang's context length when --context-length is not given: the checkpoint's
# max_position_embeddings (deepseek-ai/DeepSeek-R1-0528 config.json: 163840).
CONTEXT_TOKENS = {"dsr1": 163840}
# The SGLang flags itlkit's runs format reads, by their format names (`sim.runs`).
SGLANG_FORMAT_KEYS = ("chunked_prefill_size", "max_prefill_tokens", "max_running_requests",
                      "mem_fraction_static")  # fmt: skip

# How far a row's figures may stray from what its recipe implies before it is left out: its mean
# ITL against stream interval x mean TPOT (a chunk of N tokens per gap), and its mean E2E against
# TTFT + TPOT x (mean output - 1). Every kept row is within them (largest 4.4 %, 1.5 %).
CONSISTENCY = {"itl_per_chunk": 0.05, "e2e_identity": 0.03}

# What each flag means for a simulation of the run (one line each).
FLAG_NOTES = {
    "fp4_w4a4": "FP4 weights and activations (W4A4): 0.5 byte per weight, matmuls at the GPU's "
    "FP4 rate where it has one (AITER's FP4 GEMM on the MI355X); the block scales and the layers "
    "the checkpoint keeps at higher precision are not counted",
    "stream_interval": "SGLang streams every N tokens (--stream-interval N): the client's ITL is "
    "per chunk of N tokens (measured.itl_per_chunk_seconds), so itl_mean_seconds holds the "
    "per-request TPOT mean and no per-token ITL quantiles are given",
    "continuous_decode_steps": "--num-continuous-decode-steps N: SGLang runs N decode steps per "
    "scheduler pass, so an arriving request waits up to N steps for admission; itlkit "
    "schedules at every step",
    "scheduler_recv_interval": "--scheduler-recv-interval N: the scheduler takes new requests "
    "every N passes; itlkit admits at every step",
    "p90_not_published": "this fixture row has no p90: ttft_p90_seconds and e2e_p90_seconds hold "
    "the p99 (an upper bound, listed in measured.upper_bounds_not_measured)",
}
RADIX_NOTE = ("--disable-radix-cache: SGLang's prefix cache is off; itlkit's SGLang engine keeps "
              "it on, which the distinct random prompts never hit")  # fmt: skip
WARMUP_NOTE = ("the client first sends 2 x CONC warm-up requests (--num-warmups) and waits for "
               "them; the measured requests start on a warm, empty server")  # fmt: skip


# --- reading the fixture ------------------------------------------------------------------


def fixture_source(data: bytes, commit: str | None) -> dict:
    """The repository, commit and path of a fixture file, known by its SHA-256, else `commit`."""
    digest = hashlib.sha256(data).hexdigest()
    known = FIXTURES.get(digest)
    if known is None and commit is None:
        raise ConfigError(f"unknown fixture version (sha256 {digest}); give --fixture-commit")
    if known is not None and commit not in (None, known["commit"]):
        raise ConfigError(f"this file is {APP_REPO}@{known['commit']}, not {commit}")
    out = {"repo": APP_REPO, "commit": commit or known["commit"], "path": FIXTURE_PATH,
           "sha256": digest, "licence": LICENCES[APP_REPO]}  # fmt: skip
    if known is not None:
        out |= {"committed": known["committed"], "title": known["title"], "read_from": READ_FROM}
    return out


def config_key(row: dict) -> tuple:
    """The configuration a row measures: hardware, engine, model, precision, parallelism,
    lengths and concurrency."""
    return tuple(row[k] for k in ("hardware", "framework", "model", "precision", "spec_method",
                                  "prefill_tp", "decode_tp", "decode_ep", "decode_dp_attention",
                                  "isl", "osl", "conc"))  # fmt: skip


def structural_reason(row: dict) -> str | None:
    """Why itlkit cannot express this row's configuration at all (None: it can)."""
    if row["disagg"] or row["is_multinode"]:
        return "multi_node_or_disaggregated"
    if row["framework"] not in ENGINES:
        return "framework"
    if row["spec_method"] != "none":
        return "speculative_decoding"
    if row["hardware"] not in GPUS:
        return "gpu_not_in_catalog"
    if row["model"] not in MODELS:
        return "model_not_in_catalog"
    if row["precision"] not in PRECISIONS:
        return "precision"
    ep = (row["prefill_ep"], row["decode_ep"])
    if ep != (1, 1) or row["prefill_dp_attention"] or row["decode_dp_attention"]:
        return "expert_or_data_parallel"
    if row["prefill_tp"] != row["decode_tp"]:
        return "expert_or_data_parallel"
    return None


def newest(rows: list[tuple[dict, dict]]) -> tuple[dict, list[str]]:
    """The newest of one configuration's rows (ties: the later fixture), and why each other one
    was left out ("duplicate" when it is the same measurement, else "superseded")."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0]["date"], i))
    keep, _ = rows[order[-1]]
    reasons = []
    for i in order[:-1]:
        row = rows[i][0]
        same = row["run_url"] == keep["run_url"] and row["metrics"] == keep["metrics"]
        reasons.append("duplicate" if same else "superseded")
    return keep, reasons


# --- one run --------------------------------------------------------------------------------


def run_id(row: dict) -> str:
    return (f"{row['hardware']}-{row['model']}-{row['precision']}-{row['framework']}-"
            f"tp{row['decode_tp']}-{row['isl']}-{row['osl']}-c{row['conc']}")  # fmt: skip


def uniform(tokens: int) -> dict:
    """bench_serving's random lengths: integers from int(L x ratio) to L, inclusive
    (`sample_uniform` in utils/bench_serving/benchmark_serving.py)."""
    return {"kind": "uniform", "low_tokens": int(tokens * RANGE_RATIO), "high_tokens": tokens}


def workload_entry(row: dict) -> dict:
    conc, isl, osl = row["conc"], row["isl"], row["osl"]
    out = uniform(osl)
    return {
        "name": "random",
        "arrival": "vllm-bench",
        "num_prompts": conc * PROMPTS_PER_SLOT,
        "request_rate_per_second": "inf",
        "max_concurrency": conc,
        "prompt_tokens_distribution": uniform(isl),
        "prompt_tokens_nominal": isl,
        "output_tokens_distribution": out,
        "output_tokens_mean": (out["low_tokens"] + out["high_tokens"]) / 2,
        "output_tokens_mean_source": "the output distribution's mean: --ignore-eos, so every "
        "request generates the max_tokens it drew; the fixture publishes no token counts",
        "output_tokens_target": osl,
        "random_range_ratio": RANGE_RATIO,
        "warmup_requests": WARMUPS_PER_SLOT * conc,
        "api": "completions",
        "ignore_eos": True,
        "streaming": True,
    }


def measured_entry(row: dict, stream_interval: int) -> tuple[dict, list[str]]:
    """The row's client statistics in the format's keys (seconds), and the flags they need."""
    m = row["metrics"]
    flags = []
    bounds = []

    def p90(name: str) -> float:
        if f"p90_{name}" in m:
            return m[f"p90_{name}"]
        bounds.append(f"{'e2e' if name == 'e2el' else name}_p90_seconds")
        return m[f"p99_{name}"]

    out = {
        "e2e_mean_seconds": m["mean_e2el"],
        "e2e_p50_seconds": m["median_e2el"],
        "e2e_p90_seconds": p90("e2el"),
        "e2e_p99_seconds": m["p99_e2el"],
        "ttft_mean_seconds": m["mean_ttft"],
        "ttft_p50_seconds": m["median_ttft"],
        "ttft_p90_seconds": p90("ttft"),
        "ttft_p99_seconds": m["p99_ttft"],
    }
    tpot = {"mean": m["mean_tpot"], "p50": m["median_tpot"], "p90": m.get("p90_tpot"),
            "p99": m["p99_tpot"], "p99.9": m.get("p99.9_tpot")}  # fmt: skip
    itl = {"mean": m["mean_itl"], "p50": m["median_itl"], "p90": m.get("p90_itl"),
           "p99": m["p99_itl"], "p99.9": m.get("p99.9_itl")}  # fmt: skip
    levels = {"p50": "0.5", "p90": "0.9", "p99": "0.99", "p99.9": "0.999"}
    if stream_interval == 1:
        out["itl_mean_seconds"] = itl["mean"]
        out["itl_per_token_quantiles_seconds"] = {
            levels[k]: v for k, v in itl.items() if k in levels and v is not None
        }
    else:
        flags.append("stream_interval")
        out["itl_mean_seconds"] = tpot["mean"]
        out["itl_per_token_quantiles_seconds"] = {}
        out["itl_per_chunk_seconds"] = {k: v for k, v in itl.items() if v is not None}
        out["stream_interval_tokens"] = stream_interval
    for k, v in tpot.items():
        if v is not None:
            out[f"tpot_{k.replace('.', '')}_seconds"] = v  # tpot_mean ... tpot_p999_seconds
    throughput = {"tput_per_gpu": "total", "input_tput_per_gpu": "input",
                  "output_tput_per_gpu": "output"}  # fmt: skip
    for key, kind in throughput.items():
        if key in m:
            out[f"{kind}_tokens_per_second_per_gpu"] = m[key]
    if bounds:
        flags.append("p90_not_published")
        out["upper_bounds_not_measured"] = sorted(bounds)
    out["stages"] = None
    return out, flags


def engine_entry(row: dict, recipe: Recipe, settings: dict) -> dict:
    """The SGLang run's engine in the format's SGLang names; every other flag beside them."""
    version = recipe.image.split(":")[1].split("-")[0]
    engine = {"name": "sglang", "sglang_version": version, "image": recipe.image}
    engine |= {k: settings[k] for k in SGLANG_FORMAT_KEYS if k in settings}
    engine |= {
        "enable_mixed_chunk": False,
        "max_model_len": CONTEXT_TOKENS[row["model"]],
        "max_model_len_source": "SGLang's context length without --context-length: the "
        "checkpoint's max_position_embeddings",
        "disable_radix_cache": True,
    }
    engine |= {k: v for k, v in sorted(settings.items()) if k not in SGLANG_FORMAT_KEYS}
    engine["environment"] = list(recipe.env)
    engine["launch_source"] = {"repo": BENCH_REPO, "commit": recipe.commit,
                               "path": recipe.script, "licence": LICENCES[BENCH_REPO]}  # fmt: skip
    return engine


def run_from_row(row: dict, fixture: dict, recipe: Recipe) -> dict:
    """One fixture row as one closed-loop run of the runs format."""
    tp, conc, isl, osl = row["decode_tp"], row["conc"], row["isl"], row["osl"]
    settings = recipe.launch(tp=tp, isl=isl, osl=osl, conc=conc)
    weights, precision_flag = PRECISIONS[row["precision"]]
    kv = "bf16" if settings["kv_cache_dtype"] == "auto" else "fp8"
    measured, flags = measured_entry(row, settings.get("stream_interval", 1))
    if precision_flag:
        flags.insert(0, precision_flag)
    if settings.get("num_continuous_decode_steps", 1) > 1:
        flags.append("continuous_decode_steps")
    if "scheduler_recv_interval" in settings:
        flags.append("scheduler_recv_interval")
    stated = ("hardware", "framework", "model", "precision", "spec_method", "decode_tp",
              "decode_ep", "isl", "osl", "conc")  # fmt: skip
    source = {**fixture, "table": fixture["commit"][:8], "run_url": row["run_url"],
              "date": row["date"], "image": row["image"],
              "row": {k: row[k] for k in stated}}  # fmt: skip
    return {
        "id": run_id(row),
        "source": source,
        "model": MODELS[row["model"]],
        "model_as_stated": row["model"],
        "hf_model_id": recipe.checkpoint,
        "gpu": GPUS[row["hardware"]],
        "gpu_as_stated": row["hardware"],
        "gpus": tp,
        "tp": tp,
        "ep": 1,
        "weights_precision": weights,
        "weights_precision_label": row["precision"],
        "kv_precision": kv,
        "kv_precision_label": settings["kv_cache_dtype"],
        "engine": engine_entry(row, recipe, settings),
        "workload": workload_entry(row),
        "measured": measured,
        "flags": flags,
        "notes": [FLAG_NOTES[f] for f in flags] + [RADIX_NOTE, WARMUP_NOTE],
    }


def inconsistency(row: dict, run: dict) -> str | None:
    """Why the row's figures disagree with its recipe (another unit, another streaming), or None."""
    m, w = row["metrics"], run["workload"]
    interval = run["engine"].get("stream_interval", 1)
    chunk = m["mean_itl"] / (interval * m["mean_tpot"]) - 1
    if abs(chunk) > CONSISTENCY["itl_per_chunk"]:
        return f"mean ITL is {chunk:+.1%} off {interval} x mean TPOT"
    e2e = (m["mean_ttft"] + m["mean_tpot"] * (w["output_tokens_mean"] - 1)) / m["mean_e2el"] - 1
    if abs(e2e) > CONSISTENCY["e2e_identity"]:
        return f"TTFT + TPOT x (mean output - 1) is {e2e:+.1%} off the mean E2E"
    return None


def refusal(run: dict) -> str | None:
    """itlkit's runs reader's one-line error for this run, or None when it reads it."""
    try:
        parse_runs({"format": FORMAT, "runs": [run]}, source="inferencex")
    except ConfigError as exc:
        return str(exc)
    return None


# --- the whole file -------------------------------------------------------------------------


def convert(fixtures: list[tuple[list[dict], dict]]) -> dict:
    """The runs file for parsed fixture versions (oldest first), each with its `fixture_source`."""
    left_out: Counter = Counter()
    refused = []
    configs: dict[tuple, list] = {}
    for rows, source in fixtures:
        for row in rows:
            reason = structural_reason(row)
            if reason:
                left_out[reason] += 1
            else:
                configs.setdefault(config_key(row), []).append((row, source))
    runs = []
    for key in sorted(configs, key=lambda k: tuple(map(str, k))):
        row, reasons = newest(configs[key])
        left_out.update(reasons)
        source = next(s for r, s in configs[key] if r is row)
        if row["date"] < HARNESS_FROM:
            left_out["before_harness"] += 1
            continue
        recipe = RECIPES.get(key[:4], {}).get(row["date"])
        if recipe is None or recipe.image != row["image"]:
            left_out["no_recipe"] += 1
            refused.append({"id": run_id(row), "date": row["date"], "reason": REASONS["no_recipe"]})
            continue
        run = run_from_row(row, source, recipe)
        problem = inconsistency(row, run)
        if problem:
            left_out["inconsistent"] += 1
            refused.append({"id": run["id"], "date": row["date"], "reason": problem})
            continue
        problem = refusal(run)
        if problem:
            left_out["refused"] += 1
            refused.append({"id": run["id"], "date": row["date"], "reason": problem})
            continue
        runs.append(run)
    runs.sort(key=lambda r: r["id"])
    rows_read = sum(len(rows) for rows, _ in fixtures)
    engines = sorted({r["engine"]["name"] for r in runs})
    models = sorted({r["hf_model_id"] for r in runs})
    gpus = sorted({r["gpu"] for r in runs})
    return {
        "format": FORMAT,
        "description": f"{len(runs)} real closed-loop runs ({', '.join(engines)}) of "
        f"{', '.join(models)} on {', '.join(gpus)} from InferenceX (SemiAnalysis), converted by "
        f"make_runs.py from {len(fixtures)} version(s) of the InferenceX dashboard's benchmark "
        f"fixture ({rows_read} rows read); see README.md for every choice",
        "source": {
            "fixtures": [dict(s) for _, s in fixtures],
            "recipes": {
                "repo": BENCH_REPO,
                "licence": LICENCES[BENCH_REPO],
                "client": "benchmarks/benchmark_lib.sh run_benchmark_serving and "
                "utils/bench_serving/benchmark_serving.py at each run's recipe commit",
            },
        },
        "definitions": {
            "ttft/e2e/tpot/itl": "InferenceX's bench_serving client (a copy of vLLM's "
            "benchmark_serving): mean, median (p50), p90, p99, p99.9, in seconds as the fixture "
            "holds them; TTFT and E2E count from the send",
            "tpot_*_seconds": "per request (e2e - ttft) / (output tokens - 1), then over requests",
            "itl_mean_seconds": "stream interval 1: the client's mean gap between streamed "
            "chunks, one token each, pooled over requests; stream interval N > 1: the TPOT mean "
            "(the client's gaps are per chunk of N tokens)",
            "itl_per_chunk_seconds": "the client's ITL statistics where a chunk holds N tokens",
            "*_tokens_per_second_per_gpu": "the fixture's throughput per GPU (tput_per_gpu, "
            "input_tput_per_gpu, output_tput_per_gpu)",
            "upper_bounds_not_measured": "statistics the format requires that the row does not "
            "publish; each holds the row's p99 (an upper bound)",
        },
        "left_out": {
            "rows_read": rows_read,
            "runs_kept": len(runs),
            "counts": {key: left_out[key] for key in REASONS if left_out[key]},
            "reasons": {key: REASONS[key] for key in REASONS if left_out[key]},
            "runs_refused": refused,
        },
        "runs": runs,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("fixtures", type=Path, nargs="+", help="benchmarks.json versions")
    parser.add_argument("--fixture-commit", help="the commit of a fixture this script does not "
                        "know by its SHA-256 (all such files)")  # fmt: skip
    parser.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    fixtures = []
    for path in args.fixtures:
        data = path.read_bytes()
        fixtures.append((json.loads(data), fixture_source(data, args.fixture_commit)))
    fixtures.sort(key=lambda f: f[1].get("committed", "9999"))  # oldest first: ties keep newer
    doc = convert(fixtures)
    text = json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {len(doc['runs'])} runs; left out {doc['left_out']['counts']}",
          file=sys.stderr)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
