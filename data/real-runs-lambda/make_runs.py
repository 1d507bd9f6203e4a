"""Write `lambda.json` (format `itlkit-runs/1`) from result files of LambdaLabsML/vllm-benchmark.

Run: .venv/bin/python data/real-runs-lambda/make_runs.py ROOT [-o OUT.json]

ROOT holds the result files as `ROOT/<commit>/results/prompt_<N>/<G>xH100-80GB-SXM/<model>_tp<G>
_len<L>.json`: `benchmark_serving.py --save-result` files of vLLM 0.5.4 servers, each started
fresh for its run with `--max-model-len L --gpu-memory-utilization 0.95 --max-num-seqs 1024`
(and `--tensor-parallel-size G` above one GPU), then sent N ShareGPT prompts at once (no
`--request-rate`: inf) on `/v1/completions`. `README.md` beside this script gives the source of
every field and why. The files themselves carry no licence and are not copied here: only the
figures derived from them, with each file's commit, path and SHA-256. Deterministic: the same
files give the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

from itlkit.sim.client_figures import replied_figures, sharegpt_workload
from itlkit.sim.runs import FORMAT, parse_runs

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "lambda.json"
TRAINVAL = HERE.parent / "real-runs" / "real_runs_trainval.json"
REPO = "LambdaLabsML/vllm-benchmark"
LICENCE = "no licence file in the repository: only figures derived from the files are used"
NAME = re.compile(r"results/prompt_(\d+)/(\d)xH100-80GB-SXM/([\w.-]+)_tp(\d)_len(\d+)\.json$")
LEVELS = tuple(i / 20 for i in range(21))  # the quantile table of each length distribution
VERSION = "0.5.4"  # vllm/vllm-openai:v0.5.4 in benchmark_1x2x4x8x.sh and README.md


def _nemo_config() -> dict:
    """Mistral-Nemo-Instruct-2407's config.json as inference-sim's run trainval:62 carries it."""
    runs = json.loads(TRAINVAL.read_text())["runs"]
    return next(r["model"] for r in runs if r["id"] == "trainval:62")


# model_id in the file -> (the runs format's model, weight precision). Left out: Mixtral 8x7B
# and 8x22B, whose requests wait 1.4-2.1 s on a first gap or first token that no other model's
# do (the fused-MoE kernels compiling for new batch sizes on a fresh server, it seems: no file
# says), and Mistral Large 2407, whose config no file here carries.
MODELS = {
    "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8": ("llama-3.1-70b", "fp8"),
    "mistralai/Mistral-7B-Instruct-v0.3": ("mistral-7b-v0.3", "bf16"),
    "mistralai/Mistral-Nemo-Instruct-2407": (None, "bf16"),  # the config: `_nemo_config`
}

NOTES = [
    "a fresh server per run (benchmark.py starts vllm.entrypoints.openai.api_server for each "
    "task and stops it after), so no prompt was cached by an earlier run; vLLM 0.5.4 keeps "
    "no prefix cache by default",
    "ShareGPT prompts sent at once, outputs to EOS or the dataset's reply length (no "
    "--ignore-eos in this client): the lengths are each run's own, as quantile tables; prompts "
    "and outputs are drawn independently, where ShareGPT pairs them",
    "requests whose text came back empty (output_lens 0, ttfts 0.0: the first token was EOS) "
    "cost the server a prompt and one token; they count as 1-token outputs in the workload and "
    "are left out of the measured latencies, which the file's own means are not",
]


def read_result(path: Path, prompts: int) -> dict:
    doc = json.loads(path.read_text())
    missing = {"ttfts", "itls", "input_lens", "output_lens", "mean_tpot_ms", "date"} - set(doc)
    if missing:
        sys.exit(f"{path}: not a benchmark_serving result with per-request data "
                 f"(missing {', '.join(sorted(missing))})")  # fmt: skip
    if doc.get("num_prompts") != prompts or doc.get("completed") != prompts:
        sys.exit(f"{path}: expected {prompts} prompts, all completed")
    if doc.get("request_rate") != "inf" or doc.get("backend") != "vllm":
        sys.exit(f"{path}: expected a burst (request_rate inf) on the vllm backend")
    if not str(doc["date"]).startswith("202408"):
        sys.exit(f"{path}: dated {doc['date']}, not August 2024 (vLLM 0.5.4's runs)")
    return doc


def run(commit: str, rel: str, path: Path) -> dict | None:
    """The run of one result file; None (said on stderr) for a model this script has no
    config of."""
    prompts, gpus, _, tp, max_len = (int(x) if x.isdigit() else x
                                     for x in NAME.search(rel).groups())  # fmt: skip
    if gpus != tp:
        sys.exit(f"{rel}: {gpus} GPUs but TP {tp}")
    doc = read_result(path, prompts)
    if doc["model_id"] not in MODELS:
        print(f"{rel}: left out, no config of {doc['model_id']} here", file=sys.stderr)
        return None
    model, weights = MODELS[doc["model_id"]]
    slug = doc["model_id"].split("/")[1].lower()
    return {
        "id": f"lambda-{slug}-tp{tp}-len{max_len}-n{prompts}",
        "source": {
            "repo": REPO, "commit": commit, "path": rel,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "licence": LICENCE, "date": doc["date"],
        },
        "model": model if model is not None else _nemo_config(),
        "hf_model_id": doc["model_id"],
        "gpu": "h100-sxm",
        "gpu_description": "NVIDIA H100 80GB SXM (the result folder's name, H100-80GB-SXM), "
        f"{gpus} of one server",
        "gpus": gpus, "tp": tp, "weights_precision": weights, "kv_precision": "bf16",
        "engine": {
            "name": "vllm", "vllm_version": VERSION, "max_num_batched_tokens": None,
            "max_num_seqs": 1024, "max_model_len": max_len, "gpu_memory_utilization": 0.95,
            "chunked_prefill": None, "prefix_caching": None, "cpu_kv_offload": None,
            "block_size": None,
        },
        "interconnect": None,
        "workload": sharegpt_workload(doc, levels=LEVELS, request_rate="inf"),
        "measured": replied_figures(doc),
        "notes": NOTES,
    }  # fmt: skip


def build(root: Path) -> dict:
    files = sorted(p for p in root.rglob("*.json") if NAME.search(p.as_posix()))
    if not files:
        sys.exit(f"{root}: no result files named results/prompt_N/GxH100-80GB-SXM/...json")
    runs = []
    for path in files:
        rel = path.relative_to(root).as_posix()
        commit, rel = rel.split("/", 1)
        if (one := run(commit, rel, path)) is not None:
            runs.append(one)
    runs.sort(key=lambda r: (r["tp"], r["id"]))
    doc = {
        "format": FORMAT,
        "description": f"{len(runs)} real vLLM 0.5.4 bursts of ShareGPT prompts on 1-8 H100 "
        "80 GB SXM (data/real-runs-lambda/)",
        "source": {"repo": REPO, "licence": LICENCE},
        "defaults_for_null": {},
        "runs": runs,
    }
    parse_runs(doc, source="lambda.json")  # every run must read
    return doc


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=Path, help="the folder of <commit>/results/... files")
    parser.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    doc = build(args.root)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {len(doc['runs'])} runs to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
