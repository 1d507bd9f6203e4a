"""Write `scicom.json` (format `itlkit-runs/1`) from the vLLM results of
Scicom-AI-Enterprise-Organization/llm-benchmaxxing: a HELD-OUT test set (never fitted on).

Run: .venv/bin/python data/real-runs-scicom/make_runs.py ROOT [-o OUT.json]

ROOT holds the source files as `ROOT/<commit>/<path>`, read from a clone of
github.com/Scicom-AI-Enterprise-Organization/llm-benchmaxxing (no LICENSE file: this folder
keeps only derived figures, with each file's commit, path and SHA-256; no file is copied):

    C=c776cb0ede1cc5869010ef6f570fe9850a6f7c36
    git ls-tree -r --name-only $C |
      grep -E '^benchmarks/runpod_(b200|h100sxm|h200sxm)/.*\\.(json|txt)$' |
      while read p; do mkdir -p "ROOT/$C/$(dirname "$p")"; git show "$C:$p" > "ROOT/$C/$p"; done

Every `benchmarks/runpod_*/<model>/*_TP{t}_DP{d}_CTX{I}_C{C}_P{P}_O{O}.json` is a
`vllm bench serve --save-result` summary (37 keys, no per-request lists); the `.txt` beside it
is the client's console log (its argparse Namespace and printed table). The blobs are the same
at HEAD (36be1ae1) as at c776cb0e. Every choice and its source is in README.md. Deterministic:
the same files give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path

from itlkit.errors import ConfigError
from itlkit.sim.runs import FORMAT, parse_runs
from itlkit.sim.runs_writer import convert, left_out_section

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "scicom.json"
REPO = "Scicom-AI-Enterprise-Organization/llm-benchmaxxing"
COMMIT = "c776cb0ede1cc5869010ef6f570fe9850a6f7c36"  # 2026-01-29, "Added benchmark results..."
LICENCE = ("none: the repository has no LICENSE file (setup.py lists an MIT classifier only); "
           "derived figures only, each file cited by commit, path and SHA-256")  # fmt: skip
NOTEBOOK_COMMIT = (
    "7f61bd9beb23b1d2dd44fe545015cf57e4e08bcb"  # branch temporary-param-disable-flashinfer
)
NOTEBOOK = "benchmarking-session-1/run.ipynb"
RUNNER = "benchmaq/runner.py"
NAME = re.compile(r"_TP(\d+)_DP(\d+)_CTX(\d+)_C(\d+)_P(\d+)_O(\d+)\.json$")
CONTEXTS = (1024, 2048, 4096, 8192, 15000)  # the order each server ran them in

GPUS = {  # directory -> (itlkit slug, what is written)
    "runpod_b200": ("b200", "B200 (directory runpod_b200; benchmarks/README.md: 'GPUs: 8 GPUs "
                    "per test', vLLM on RunPod)"),
    "runpod_h100sxm": ("h100-sxm", "H100 SXM (directory runpod_h100sxm; benchmarks/README.md: "
                       "'GPUs: 8 GPUs per test', vLLM on RunPod)"),
    "runpod_h200sxm": ("h200-sxm", "H200 SXM (directory runpod_h200sxm; benchmarks/README.md: "
                       "'GPUs: 8 GPUs per test', vLLM on RunPod)"),
}  # fmt: skip
MODELS = {  # directory -> catalog slug, weights precision, label, flags
    "gpt-oss-120b": ("gpt-oss-120b", "int4", "mxfp4 (read as int4)", ["mxfp4_as_int4"]),
    "Qwen3-32B": ("qwen3-32b", "bf16", "bf16", []),
}

REASONS = {
    "data_parallel": "--data-parallel-size 2 (TP4 x DP2): two engines behind vLLM's load "
    "balancer, which itlkit does not simulate",
    "no_config": "GLM-4.7 / GLM-4.7-FP8 (Glm4MoeForCausalLM): not in itlkit's catalog, and no "
    "copy of the checkpoint's own config.json was found to give inline (only test fixtures and "
    "partial tables in unrelated repositories)",
    "failed": "the benchmark failed: 0 of 100 requests completed (connection refused)",
}

FLAG_NOTES = {
    "mxfp4_as_int4": "gpt-oss-120b's MXFP4 expert weights are read as int4 (0.5 byte per "
    "weight); its attention and embeddings are bf16 upstream",
    "finetune_same_architecture": "the H200 runs served Scicom-intl/gpt-oss-120b-Malaysian-"
    "Reasoning-SFT-v0.1 (the file's model_id), a fine-tune of gpt-oss-120b with the same "
    "architecture (GptOssForCausalLM, as vLLM resolved it in the notebook's start-up log)",
    "checkpoint_path_only": "model_id is a local path (/workspace/...): which checkpoint was "
    "downloaded there is not recorded",
    "version_from_client_and_notebook": "vLLM 0.14.1: the client's log lines match 0.14.1's "
    "source, and the team's notebook installed vllm==0.14.1 on the pods; requirements.txt at "
    "the results commit pins 0.11.0 (not what ran). No result log prints a server version",
    "server_flags_not_published": "the YAML that started each server is not in the "
    "repository: only the runner's fixed flags are known (gpu_memory_utilization 0.9 is passed "
    "always); max_num_seqs and max_num_batched_tokens are null (release defaults; 100 slots)",
    "max_model_len_assumed": "engine.max_model_len 16,000 is the campaign's one published "
    "--max-model-len (an earlier gpt-oss attempt on B200), not this server's (not published)",
    "first_run_cold": "the first context size on each server ran with no warm-up request "
    "(ready check skipped, --num-warmups 0): its TTFT includes any first-request start-up cost",
    "prefix_overlap_between_runs": "the five context sizes ran one after another on one server "
    "(the files' dates, minutes apart, in CONTEXTS order) with --seed 0 and a fixed length: "
    "request i's random prompt is token ids offset_i + i + arange(input_len) with offsets drawn "
    "from the seed (vllm/benchmarks/datasets.py lines 620-622 and 651-653 of the 0.14.1 wheel), "
    "so at a larger context it begins with the smaller run's prompt, which the prefix cache (on "
    "by default) still holds: workload.prompts_sent_before = the prompts, "
    "prefix_tokens_sent_before = the previous context. The measured TTFT says so: at 2,048 "
    "tokens it equals the 1,024 run's on every server and model (half of each prompt new), "
    "and doubles with each doubling after",
    "p90_not_published": "no p90 in the source: null",
}

NOTES = [
    "client (the .txt's Namespace, benchmaq/runner.py lines 433-454 @ c776cb0e): "
    "`vllm bench serve --backend vllm --endpoint /v1/completions --dataset-name random "
    "--random-input-len I "
    "--random-output-len 128 --num-prompts 100 --max-concurrency 100 --request-rate inf "
    "--ignore-eos --percentile-metrics ttft,tpot,itl,e2el --save-result`; random_range_ratio 0.0 "
    "in the Namespace (the default: vllm/benchmarks/datasets.py 1535 @ v0.14.1), logged as "
    "'Sampling input_len from [I, I] and output_len from [128, 128]': every prompt I tokens "
    "(total_input_tokens / completed = I), every output 128; seed 0; num_warmups 0 and "
    "ready_check_timeout_sec 0 ('Skipping endpoint ready check.'): no request before the "
    "measured 100 (vllm/benchmarks/serve.py 642-690 @ v0.14.1)",
    "itl_mean_seconds is the format's (E2E mean - TTFT mean) / (128 - 1); with every request at "
    "128 tokens it equals the file's TPOT mean. itl_per_token_quantiles_seconds are the file's "
    "median and p99 ITL (gaps between streamed chunks); itl_client_mean_seconds its mean ITL",
    "KV cache dtype auto (bfloat16): kv_cache_dtype=auto in the notebook's engine log",
]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def namespace(log: str) -> dict:
    """A few fields of the client's argparse Namespace, as written in the .txt log."""
    line = next(x for x in log.splitlines() if x.startswith("Namespace("))
    keys = (
        "seed",
        "num_prompts",
        "dataset_name",
        "random_input_len",
        "random_output_len",
        "random_range_ratio",
        "random_prefix_len",
        "ignore_eos",
        "max_concurrency",
        "request_rate",
        "num_warmups",
        "ready_check_timeout_sec",
        "endpoint",
        "backend",
    )
    out = {}
    for key in keys:
        m = re.search(rf"\b{key}=('[^']*'|[^,)]*)", line)
        out[key] = m.group(1).strip("'") if m else None
    return out


def measured(doc: dict, output: int) -> dict:
    s = lambda key: doc[key] / 1e3  # noqa: E731 - ms to s
    return {
        "e2e_mean_seconds": s("mean_e2el_ms"), "e2e_p50_seconds": s("median_e2el_ms"),
        "e2e_p90_seconds": None, "e2e_p99_seconds": s("p99_e2el_ms"),
        "ttft_mean_seconds": s("mean_ttft_ms"), "ttft_p50_seconds": s("median_ttft_ms"),
        "ttft_p90_seconds": None, "ttft_p99_seconds": s("p99_ttft_ms"),
        "itl_mean_seconds": (s("mean_e2el_ms") - s("mean_ttft_ms")) / (output - 1),
        "tpot_mean_seconds": s("mean_tpot_ms"), "tpot_p50_seconds": s("median_tpot_ms"),
        "tpot_p99_seconds": s("p99_tpot_ms"),
        "itl_per_token_quantiles_seconds": {"0.5": s("median_itl_ms"), "0.99": s("p99_itl_ms")},
        "itl_client_mean_seconds": s("mean_itl_ms"),
        "requests": doc["completed"], "duration_seconds": doc["duration"],
        "stages": None,
    }  # fmt: skip


def engine() -> dict:
    return {
        "name": "vllm", "vllm_version": "0.14.1",
        "vllm_version_source": (
            "no result log prints the server version. (1) The client is 0.14.1: the failed "
            "runs' tracebacks name vllm/benchmarks/serve.py:886 (calculate_metrics) and every "
            "log datasets.py:612 ('Sampling input_len ...'), the lines of those calls in the "
            "0.14.1 wheel (gd7de043d5), not 0.11.0's (670, 508); the Namespace has no_reranker, "
            "an option 0.11.0 lacks. The runner starts `vllm serve` and `vllm bench serve` in "
            f"the same environment ({RUNNER} @ c776cb0e). (2) {NOTEBOOK} @ "
            f"{NOTEBOOK_COMMIT[:8]} (2026-01-29, branch feature/temporary-param-disable-"
            "flashinfer): the pods' dependencies ['pyyaml', 'requests', 'vllm==0.14.1', "
            "'huggingface_hub'] and a server log 'vLLM API server version 0.14.1' (01-28 03:57). "
            "requirements.txt and setup.py at the results commit pin vllm==0.11.0"),
        "max_model_len": 16_000,
        "max_model_len_source": "ASSUMED (flag max_model_len_assumed): the runs' YAML is not "
        f"published; 16,000 is the --max-model-len of the campaign's one published command "
        f"(B200 gpt-oss attempt of 01-28, {NOTEBOOK} @ {NOTEBOOK_COMMIT[:8]}); the runs' "
        "largest request, 15,128 tokens, fits it",
        "chunked_prefill": True,
        "chunked_prefill_source": "V1 default; the notebook's 0.14.1 log: 'Chunked prefill is "
        "enabled with max_num_batched_tokens=8192' (B200)",
        "max_num_batched_tokens": None, "max_num_seqs": None,
        "gpu_memory_utilization": 0.9,
        "gpu_memory_utilization_source": f"{RUNNER} lines 525, 557-565 @ c776cb0e: "
        "`--gpu-memory-utilization` from the YAML, default 0.9 (the notebook's command: 0.9)",
        "prefix_caching": True,
        "prefix_caching_source": "V1 default (notebook engine log: enable_prefix_caching=True)",
        "block_size": None,
        "launch": "vllm serve MODEL --port 8000 --tensor-parallel-size 8 "
        "--pipeline-parallel-size 1 --gpu-memory-utilization G [--max-model-len L] "
        "[--max-num-seqs S] [--dtype D] [--disable-log-requests] (the YAML's values not "
        "published)",
        "launch_source": {"repo": REPO, "commit": COMMIT, "path": RUNNER, "lines": "351-375"},
    }  # fmt: skip


def sent_before(ctx: int, prompts: int) -> dict:
    """What the server's prefix cache holds of this run's prompts: the previous context's run
    sent each prompt's start (`prefix_overlap_between_runs`); the first run, nothing."""
    previous = CONTEXTS[: CONTEXTS.index(ctx)]
    if not previous:
        return {"prompts_sent_before": 0}
    return {"prompts_sent_before": prompts, "prefix_tokens_sent_before": previous[-1]}


def run_for(path: str, data: bytes, log: bytes, gpu_dir: str, model_dir: str) -> dict:
    doc = json.loads(data)
    tp, _dp, ctx, conc, prompts, out = map(int, NAME.search(path).groups())
    slug, weights, label, flags = MODELS[model_dir]
    gpu, description = GPUS[gpu_dir]
    flags = list(flags)
    if doc["model_id"].startswith("Scicom-intl/"):
        flags.append("finetune_same_architecture")
    elif doc["model_id"].startswith("/"):
        flags.append("checkpoint_path_only")
    flags += ["version_from_client_and_notebook", "server_flags_not_published",
              "max_model_len_assumed",
              "prefix_overlap_between_runs", "p90_not_published"]  # fmt: skip
    if ctx == 1024:
        flags.append("first_run_cold")
    prompt = doc["total_input_tokens"] / doc["completed"]
    output = doc["total_output_tokens"] / doc["completed"]
    ns = namespace(log.decode("utf-8"))
    return {
        "id": f"scicom-{slug}-{gpu}-tp{tp}-random-{ctx}-{out}-c{conc}",
        "source": {
            "repo": REPO,
            "commit": COMMIT,
            "path": path,
            "sha256": sha256(data),
            "licence": LICENCE,
            "date": doc["date"],
            "log": {"path": path[:-5] + ".txt", "sha256": sha256(log)},
            "client_namespace": ns,
        },
        "model": slug,
        "hf_model_id": doc["model_id"],
        "gpu": gpu,
        "gpu_description": description,
        "gpus": 8,
        "tp": tp,
        "ep": 1,
        "weights_precision": weights,
        "weights_precision_label": label,
        "kv_precision": "bf16",
        "interconnect": None,
        "engine": engine(),
        "workload": {
            "name": "random",
            "arrival": "vllm-bench",
            "num_prompts": prompts,
            "request_rate_per_second": "inf",
            "max_concurrency": conc,
            "prompt_tokens_distribution": {"kind": "fixed", "tokens": round(prompt)},
            "prompt_tokens_mean": prompt,
            "random_range_ratio": float(ns["random_range_ratio"]),
            "output_tokens_distribution": {"kind": "fixed", "tokens": out},
            "output_tokens_mean": output,
            "output_tokens_mean_source": "the file's total_output_tokens / completed",
            "output_tokens_target": out,
            "ignore_eos": True,
            **sent_before(ctx, prompts),
            "warmup_requests": 0,
            "api": "completions",
            "streaming": True,
            "stages": None,
        },
        "measured": measured(doc, out),
        "flags": flags,
        "notes": [FLAG_NOTES[f] for f in flags] + NOTES,
    }


def reason_for(path: str, doc: dict, model_dir: str) -> str | None:
    dp = int(NAME.search(path).group(2))
    if dp > 1:
        return "data_parallel"
    if model_dir not in MODELS:
        return "no_config"
    if doc["completed"] < doc["num_prompts"]:
        return "failed"
    return None


def refusal(run: dict) -> str | None:
    try:
        parse_runs({"format": FORMAT, "runs": [run]}, source="scicom")
    except ConfigError as exc:
        return str(exc)
    return None


def build(root: Path) -> dict:
    base = root / COMMIT
    runs, left_out, files, refused = [], Counter(), [], []
    for file in sorted(base.glob("benchmarks/runpod_*/*/*.json")):
        path = file.relative_to(base).as_posix()
        gpu_dir, model_dir = file.parent.parent.name, file.parent.name
        data = file.read_bytes()
        doc = json.loads(data)
        reason = reason_for(path, doc, model_dir)
        if reason:
            left_out[reason] += 1
            files.append({"commit": COMMIT, "path": path, "sha256": sha256(data),
                          "reason": reason})  # fmt: skip
            continue
        run = run_for(path, data, file.with_suffix(".txt").read_bytes(), gpu_dir, model_dir)
        problem = refusal(run)
        if problem:
            left_out["refused"] += 1
            refused.append({"id": run["id"], "reason": problem})
            continue
        runs.append(run)
    runs.sort(key=lambda r: r["id"])
    reasons = {**REASONS, "refused": "itlkit's runs reader refuses it"}
    return {
        "format": FORMAT,
        "description": f"{len(runs)} real vLLM 0.14.1 runs from {REPO} (held out: never fitted "
        "on): gpt-oss-120b and Qwen3-32B at TP8 on 8 B200, 8 H100 SXM and 8 H200 SXM, vllm "
        "bench serve random 1,024-15,000-token prompts, 128 outputs, 100 requests in 100 slots; "
        "see README.md",
        "source": {
            "repo": REPO,
            "licence": LICENCE,
            "commits": [COMMIT, NOTEBOOK_COMMIT],
            "held_out": True,
        },
        "defaults_for_null": {},
        "left_out": left_out_section(left_out, reasons, files, refused),
        "runs": runs,
    }


def main(argv=None) -> int:
    return convert(build, description=__doc__.splitlines()[0], default_out=DEFAULT_OUT,
                   argv=argv)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
