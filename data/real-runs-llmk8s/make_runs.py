"""Write `llmk8s.json` (format `itlkit-runs/1`) from four result files of surajssd/llm-k8s.

Run: .venv/bin/python data/real-runs-llmk8s/make_runs.py QPS_01.json QPS_04.json QPS_16.json
     QPS_INF.json [-o OUT.json]

The inputs are `vllm benchmark_serving.py --save-result` files of one server (Llama-3.3-70B-
Instruct, TP 8 on one Azure Standard_ND96asr_v4: 8 x A100 40 GB SXM4, vLLM 0.8.3), run one after
another at 1, 4, 16 and inf requests/s, each with 200 ShareGPT prompts drawn from seed 0. Their
per-request `ttfts`, `itls`, `input_lens` and `output_lens` give each run's client statistics
and the length distributions; `README.md` beside this script gives the source of every other
field and why. Deterministic: the same four files give the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from itlkit.sim.client_figures import client_latencies, e2e_seconds, length_quantiles
from itlkit.sim.runs import FORMAT, parse_runs

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "llmk8s.json"
REPO = "surajssd/llm-k8s"
COMMIT = "58b61c59450e06073120a8ad166c1e9c333851a7"
FOLDER = "results_serving_meta-llama-Llama-3.3-70B-Instruct/01_tp8_pp1"
NAME = "serving_meta-llama-Llama-3.3-70B-Instruct_tp8_pp1_sharegpt_qps_{}.json"
LICENCE = "Apache-2.0 (LICENSE at the commit); the figures are used with their source"
RATES = ("01", "04", "16", "inf")  # the order the script ran them in (benchmark-script-run.sh)
PROMPTS = 200  # --num-prompts
LEVELS = tuple(i / 20 for i in range(21))  # the quantile table of each length distribution

SERVER = {
    "model": "llama-3.3-70b",
    "hf_model_id": "meta-llama/Llama-3.3-70B-Instruct",
    "gpu": "a100-40gb-sxm",
    "gpu_description": "Azure Standard_ND96asr_v4 (`gpu_type` in the run's .commands file): 8 x "
    "NVIDIA A100 40GB SXM4 with NVLink 3 through NVSwitch; the card is the SKU's, not stated",
    "gpus": 8,
    "tp": 8,
    "weights_precision": "bf16",
    "kv_precision": "bf16",
    # configs/llama-3-3-70b-instruct/one-node-four-gpus/k8s/deployment.yaml at COMMIT:
    # image vllm/vllm-openai:v0.8.3, --tensor-parallel-size 8 --pipeline-parallel-size 1
    # --distributed-executor-backend mp --enable-prefix-caching; the rest vLLM 0.8.3's defaults
    "engine": {
        "name": "vllm",
        "vllm_version": "0.8.3",
        "max_num_batched_tokens": None,
        "max_num_seqs": None,
        "max_model_len": None,
        "gpu_memory_utilization": None,
        "chunked_prefill": None,
        "prefix_caching": True,
        "cpu_kv_offload": None,
        "block_size": None,
    },
    "interconnect": "nvlink",
}

NOTES = [
    "the client reached the server through a Kubernetes Service from another pod: its TTFT "
    "includes that hop",
    "one server ran the four rates one after another (benchmark-script-run.sh), each with "
    "--seed 0's 200 ShareGPT prompts (the same input_lens in every file): the runs after the "
    "first find them in the prefix cache (workload.prompts_sent_before)",
    "outputs stop at EOS (no --ignore-eos): the lengths are each run's own, as a quantile table; "
    "prompts and outputs are drawn independently, where ShareGPT pairs them",
]


def read_result(path: Path) -> dict:
    doc = json.loads(path.read_text())
    missing = {"ttfts", "itls", "input_lens", "output_lens", "mean_tpot_ms"} - set(doc)
    if missing:
        sys.exit(f"{path}: not a benchmark_serving result with per-request data "
                 f"(missing {', '.join(sorted(missing))})")  # fmt: skip
    if doc.get("num_prompts") != PROMPTS or doc.get("completed") != PROMPTS:
        sys.exit(f"{path}: expected {PROMPTS} prompts, all completed")
    return doc


def measured(doc: dict) -> dict:
    """The client's statistics from its per-request records (seconds)."""
    ttft = np.asarray(doc["ttfts"], dtype=float)
    return {
        **client_latencies(ttft, e2e_seconds(ttft, doc["itls"]), doc["output_lens"]),
        "tpot_mean_seconds": doc["mean_tpot_ms"] / 1e3,
        "itl_per_token_quantiles_seconds": {"0.5": doc["median_itl_ms"] / 1e3,
                                            "0.99": doc["p99_itl_ms"] / 1e3},
        "requests": int(doc["completed"]), "duration_seconds": float(doc["duration"]),
        "stages": None,
    }  # fmt: skip


def run(rate: str, path: Path, doc: dict, first: bool) -> dict:
    out, inp = doc["output_lens"], doc["input_lens"]
    return {
        "id": f"llmk8s-llama-3.3-70b-tp8-qps-{rate}",
        "source": {
            "repo": REPO,
            "commit": COMMIT,
            "path": f"{FOLDER}/{NAME.format(rate)}",
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "licence": LICENCE,
            "date": doc["date"],
        },
        **SERVER,
        "workload": {
            "name": "sharegpt",
            "arrival": "vllm-bench",
            "num_prompts": PROMPTS,
            "request_rate_per_second": "inf" if rate == "inf" else float(rate),
            "burstiness": 1.0,
            "prompt_tokens_mean": float(np.mean(inp)),
            "output_tokens_mean": float(np.mean(out)),
            "output_tokens_mean_source": "measured",
            "output_tokens_target": None,
            "ignore_eos": False,
            "prompt_tokens_distribution": length_quantiles(inp, LEVELS),
            "output_tokens_distribution": length_quantiles(out, LEVELS),
            "prompts_sent_before": 0 if first else PROMPTS,
            "stages": None,
            "api": "completions",
            "streaming": True,
        },
        "measured": measured(doc),
        "notes": NOTES,
    }


def build(paths: list[Path]) -> dict:
    docs = [read_result(p) for p in paths]
    if len({tuple(d["input_lens"]) for d in docs}) != 1:
        sys.exit("the four files must hold the same prompts (one seed): their input_lens differ")
    runs = [run(rate, p, d, first=i == 0) for i, (rate, p, d) in
            enumerate(zip(RATES, paths, docs, strict=True))]  # fmt: skip
    doc = {
        "format": FORMAT,
        "description": "4 real vLLM 0.8.3 runs of Llama-3.3-70B-Instruct, TP 8 on 8 x A100 "
        "40 GB SXM4, ShareGPT prompts at 1, 4, 16 and inf requests/s (data/real-runs-llmk8s/)",
        "source": {"repo": REPO, "commit": COMMIT, "folder": FOLDER, "licence": LICENCE},
        "defaults_for_null": {},
        "runs": runs,
    }
    parse_runs(doc, source="llmk8s.json")  # every run must read
    return doc


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs=4, type=Path, help="the qps 01, 04, 16, inf files")
    parser.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    doc = build(args.results)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(doc['runs'])} runs to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
