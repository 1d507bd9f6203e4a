"""Write `real_world_more.json` (format `itlkit-runs/1`) from the transcribed table `runs.json`.

Run: .venv/bin/python data/real-runs-more/make_runs.py PATH/TO/runs.json [-o OUT.json]

`runs.json` is the project's shared fixture `shared/fixtures/real_world_more/runs/runs.json`
(format "real-runs-table/1"): 107 measured vLLM runs, one row each, figures transcribed from
two public repositories with the source of each row. This script turns every row into one run
of the runs format, as `README.md` beside it describes (every choice and its reason). It is
deterministic: the same table gives the same bytes. The file it writes is committed, so that no
test reads the shared folder.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from itlkit.physics.engine_memory import GIB, vllm_kv_cache
from itlkit.physics.hardware import get_gpu
from itlkit.physics.hf_config import model_from_hf_dict
from itlkit.physics.model_catalog import get_model
from itlkit.physics.roofline import Deployment
from itlkit.units import kv_precision, weight_precision

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "real_world_more.json"
TABLE_FORMAT = "real-runs-table/1"
FIXTURE = "shared/fixtures/real_world_more/runs/runs.json"

# The upstream repositories, keyed by the folder name that starts each row's `source`.
SOURCES = {
    "05_dennislee22_a100_vllm01011": {
        "repo": "dennislee22/vLLM-benchmarking",
        "commit": "b474d1e053c35c9aef8c02aae4efbc0d8675f033",
        "path": "README.md",
        "licence": "none stated upstream (no LICENSE file): the figures are used with their "
        "source; the upstream files are not copied into this project",
    },
    "08_bsc_memgap_h100_64gb_vllm_v0": {
        "repo": "FerranAgulloLopez/vLLMBatchingMemoryGap",
        "commit": "a9186347e6146b4547ed25674b4e9034eb1e9abf",
        "path": "benchmarks/definitive_results/background/",
        "licence": "Apache-2.0",
        "paper": "Mind the Memory Gap: Unveiling GPU Bottlenecks in Large-Batch LLM Inference "
        "(arXiv 2503.08311)",
    },
}

# The row's `engine` text -> the vLLM release the runs format names. The BSC fork is vLLM main
# d2b1bf55 (2024-10-18), between v0.6.3 and v0.6.3.post1: V0, whose defaults are 0.6.3's.
VLLM_VERSIONS = {
    "vLLM 0.10.1.1 (V1)": "0.10.1.1",
    "vLLM V0 (main 2024-10-18, 0.5.2.dev1210+g6f078ea3c)": "0.6.3",
}

# max_model_len: every dennislee22 start-up log and the author's serve line (run-vllm.py) give
# 16384; the BSC server's argument Namespace gives 2048.
MAX_MODEL_LEN = {"05_dennislee22_a100_vllm01011": 16384, "08_bsc_memgap_h100_64gb_vllm_v0": 2048}

# gpu_memory_utilization as the source states it (None: not stated), per dennislee22 test.
STATED_SHARE = {
    "Test 1": (0.5, "log file name vllm-7B-2gpuA10040GB-0.5GRAM-diff-nodes.log"),
    "Test 2": (0.25, "start-up log, non-default args"),
    "Test 3": (0.5, "log file name vllm-7B-2gpuA10080GB-0.5GRAM-same-node.log"),
    "Test 4": (0.25, "log file name vllm-7B-1gpuA10080GB-0.25GRAM.log"),
    "Test 5": (0.5, "log file name vllm-7B-1gpuA10080GB-0.5GRAM.log"),
    "Test 6": (None, "not stated (no start-up log for this test)"),
    "Test 7": (None, "not stated (no start-up log for this test)"),
    "Test 8": (None, "not stated (no start-up log for this test)"),
    "Test 9": (0.8, "start-up log, non-default args"),
    "bsc": (0.9, "server_out_0.log argument Namespace"),
}

# The catalog has gained the BSC card since runs.json mapped it onto the 80 GB H100.
GPU_FOR_FLAG = {"h100_64gb_not_in_catalog": "h100-64gb"}
HF_IDS = {"Qwen2.5-32B": "Qwen/Qwen2.5-32B", "gpt-oss-120b": "openai/gpt-oss-120b"}

# What each of runs.json's flags means for a simulation of the row (one line each).
FLAG_NOTES = {
    "tp_across_nodes": "tensor parallelism across two or more nodes (Ray): the all-reduce "
    "crosses the network (interconnect: network)",
    "gpu_40gb_vs_80gb_unresolved": "the README says A100 80GB, the start-up log's file name "
    "A100 40GB; a100-40gb-sxm as in runs.json (its logged KV cache, 11.03 GiB per GPU at "
    "share 0.5, fits the 40 GB card)",
    "mxfp4_as_int4": "gpt-oss-120b's MXFP4 expert weights are read as int4 (0.5 byte per "
    "weight); its attention and embeddings are bf16 upstream",
    "early_eos_outputs_vary": "outputs stop at EOS (benchmark_serving sends no --ignore-eos): "
    "lengths vary per request; the simulation gives every request the measured mean",
    "output_len_not_given": "the README does not give --random-output-len for this row; the "
    "measured mean is used",
    "failed_requests": "some requests failed (measured.requests_failed); the statistics are over "
    "the successful ones, while the simulation finishes every request sent",
    "sharegpt_mean_lengths": "ShareGPT prompts and outputs vary per request; their "
    "distribution is not published (summaries only), so every request gets the measured means",
    "v0_engine": "vLLM V0 without chunked prefill runs each admitted prompt in a prefill-only "
    "step while the decodes wait; so does itlkit's engine for a V0 run (prefill-only steps)",
    "h100_64gb_not_in_catalog": "H100 SXM5 64 GB (HBM2e): itlkit's h100-64gb (bandwidth "
    "flagged, 2 TB/s an upper bound) instead of runs.json's h100-sxm mapping",
}

# Measured statistics the runs format requires but these sources do not publish, and the bound
# given in their place.
BOUNDS = {
    "e2e_p90_seconds": "the benchmark duration (every request sent at t = 0 ended within it): "
    "an upper bound, not a measurement",
    "e2e_p99_seconds": "the benchmark duration: an upper bound, not a measurement",
    "ttft_p90_seconds": "the TTFT p99: an upper bound, not a measurement",
}


def seconds(ms: float) -> float:
    """A client figure in ms, in seconds (rounded to 1e-12 s, below the sources' precision)."""
    return round(ms / 1e3, 12)


def upstream_source(row: dict) -> dict:
    """The row's upstream repository, commit, file and licence, and where it was transcribed."""
    folder, _, rest = row["source"].partition("/")
    if folder not in SOURCES:
        raise ValueError(f"row {row['id']}: unknown source folder {folder!r}")
    out = {**SOURCES[folder], "table": row["table"], "row": row["id"],
           "source_as_transcribed": row["source"], "transcribed_in": FIXTURE}  # fmt: skip
    if folder.startswith("08_bsc"):
        out["path"] = SOURCES[folder]["path"] + rest
    else:
        out["section"] = rest.removeprefix("README.md, ")
    return out


def model_entry(row: dict, configs: dict) -> tuple[object, str, object]:
    """(the runs file's `model` value, the served checkpoint, the itlkit `Model`)."""
    name = row["itlkit_model"]
    if name.startswith("config:"):
        config = configs[name.removeprefix("config:")]
        hf_id = config["_name_or_path"]
        model = model_from_hf_dict(config, where=f"runs.json configs.{name}", slug=name[7:])
        return {"name": hf_id, "config": config}, hf_id, model
    model = get_model(name)
    return name, HF_IDS.get(row["model_as_stated"], model.hf_id), model


def memory_share(row: dict, model, gpu: str) -> float:
    """The gpu_memory_utilization at which itlkit sizes the KV cache the source logged.

    The runs format has no field for a logged KV cache size; vLLM sizes it from this share
    (`physics.engine_memory`): share x CUDA total = weights + activations + KV. Solved for the
    share and rounded up to 1e-4, so the KV cache is the logged one to within ~0.2 %."""
    weights = weight_precision(row["weights_precision"])
    kv_cache = kv_precision(row["kv_precision"])
    dep = Deployment(model=model, gpu=get_gpu(gpu), weights=weights, kv=kv_cache, tp=row["tp"])
    memory = vllm_kv_cache(dep)
    kv = row["kv"]
    if "kv_tokens" in kv:
        kv_bytes = kv["kv_tokens"] * memory.kv_bytes_per_token
    else:
        kv_bytes = kv["kv_gib_per_gpu"] * GIB
    share = (memory.weight_bytes + memory.overhead_bytes + kv_bytes) / memory.total_bytes
    return math.ceil(round(share * 1e4, 6)) / 1e4


def stated_share(row: dict) -> tuple[float | None, str]:
    if row["table"] == "E":
        return STATED_SHARE["bsc"]
    test = row["source"].split(", ", 1)[1].split(":", 1)[0]
    return STATED_SHARE[test]


def engine_entry(row: dict, model, gpu: str) -> dict:
    folder = row["source"].split("/", 1)[0]
    stated, where = stated_share(row)
    if row["engine"] not in VLLM_VERSIONS:
        raise ValueError(f"row {row['id']}: unknown engine {row['engine']!r}")
    return {
        "name": "vllm",
        "vllm_version": VLLM_VERSIONS[row["engine"]],
        "engine_as_stated": row["engine"],
        "max_num_batched_tokens": row["max_num_batched_tokens"],
        "max_num_batched_tokens_source": row["max_num_batched_tokens_source"],
        "max_num_seqs": row["max_num_seqs"],
        "max_num_seqs_source": row["max_num_seqs_source"],
        "max_model_len": MAX_MODEL_LEN[folder],
        "gpu_memory_utilization": memory_share(row, model, gpu),
        "gpu_memory_utilization_stated": stated,
        "gpu_memory_utilization_source": f"stated: {where}; the value used reproduces the "
        f"logged KV cache ({row['kv']['source']}) in itlkit's memory model",
        "kv_cache_logged": row["kv"],
        "chunked_prefill": row["chunked_prefill"],
        "prefix_caching": row["table"] == "B",
        "cpu_kv_offload": None,
        "block_size": 16,
    }


def workload_entry(row: dict) -> dict:
    w = row["workload"]
    if w["kind"] != "burst" or w["rate"] != "inf":
        raise ValueError(f"row {row['id']}: not a burst ({w['kind']}, rate {w['rate']})")
    sharegpt = w["nominal_in"] is None
    return {
        "name": "sharegpt" if sharegpt else "random",
        "arrival": "vllm-bench",
        "num_prompts": w["n_sent"],
        "request_rate_per_second": "inf",
        "prompt_tokens_mean": w["mean_in_measured"],
        "prompt_tokens_distribution": {"kind": "fixed", "tokens": w["prompt_tokens"]},
        "prompt_tokens_nominal": w["nominal_in"],
        "output_tokens_mean": w["mean_out_measured"],
        "output_tokens_mean_source": "measured",
        "output_tokens_distribution": {"kind": "fixed", "tokens": w["output_tokens"]},
        "output_tokens_target": w["nominal_out"],
        "lengths_source": "the client's measured means (total tokens / successful requests), "
        + ("ShareGPT: per-request lengths not published"
           if sharegpt else "for --random-input-len / --random-output-len as nominal"),
        "api": "completions",
        "ignore_eos": False,
        "streaming": True,
    }  # fmt: skip


def measured_entry(row: dict) -> dict:
    m = row["measured"]
    out_mean = row["workload"]["mean_out_measured"]
    ttft, tpot, itl = m["ttft_ms"], m["tpot_ms"], m["itl_ms"]
    duration = round(m["duration_s"], 12)
    # vllm bench's ITL mean pools every gap: sum(e2e - ttft) / sum(output - 1), so the
    # format's identity itl_mean = (e2e_mean - ttft_mean) / (output_mean - 1) gives e2e_mean.
    e2e_mean = seconds(ttft["mean"]) + seconds(itl["mean"]) * (out_mean - 1)
    measured = {
        "e2e_mean_seconds": round(e2e_mean, 12),
        "e2e_p90_seconds": duration,
        "e2e_p99_seconds": duration,
        "ttft_mean_seconds": seconds(ttft["mean"]),
        "ttft_p50_seconds": seconds(ttft["p50"]),
        "ttft_p90_seconds": seconds(ttft["p99"]),
        "ttft_p99_seconds": seconds(ttft["p99"]),
        "itl_mean_seconds": seconds(itl["mean"]),
        "itl_per_token_quantiles_seconds": {
            "0.5": seconds(itl["p50"]),
            "0.99": seconds(itl["p99"]),
        },
        "tpot_mean_seconds": seconds(tpot["mean"]),
        "tpot_p50_seconds": seconds(tpot["p50"]),
        "tpot_p99_seconds": seconds(tpot["p99"]),
        "requests": m["n_ok"],
        "requests_failed": row["workload"]["n_sent"] - m["n_ok"],
        "duration_seconds": duration,
        "total_prompt_tokens": m["total_in_tokens"],
        "total_output_tokens": m["total_out_tokens"],
        "derived": {"e2e_mean_seconds": "ttft_mean + itl_mean x (output_tokens_mean - 1)"},
        "upper_bounds_not_measured": sorted(BOUNDS),
        "stages": None,
    }
    if "max_preemptions_total" in m:
        measured["preemptions_total"] = m["max_preemptions_total"]
    return measured


# One GPU per pod, pods on one node: the source's Tests 2, 3, 6 and 8. NCCL between two containers
# gets no NVLink peer access unless they share IPC, so the all-reduce is priced over PCIe; the runs
# agree: 200 requests of 1,024 + 1,024 tokens take 48.97 ms per output token at TP2 (D27) and
# 29.54 ms at TP1 (D43).
PODS_ON_ONE_NODE = "pods host"
SAME_NODE = "in the same node"
POD_NOTE = ("one GPU per pod, the pods on one node: NCCL between containers has no NVLink peer "
            "access, so TP's all-reduce is priced over PCIe (interconnect: pcie)")  # fmt: skip


def interconnect(row: dict, section: str) -> str | None:
    """The link TP's all-reduce crosses, where the source's setup says (else the GPU's own)."""
    if "tp_across_nodes" in row["flags"]:
        return "network"
    if row["tp"] > 1 and PODS_ON_ONE_NODE in section and SAME_NODE in section:
        return "pcie"
    return None


def run_from_row(row: dict, configs: dict) -> dict:
    """One runs.json row as one run of the runs format."""
    model, hf_id, arch = model_entry(row, configs)
    gpu = next((GPU_FOR_FLAG[f] for f in row["flags"] if f in GPU_FOR_FLAG), row["itlkit_gpu"])
    notes = [f"flags (runs.json): {', '.join(row['flags'])}"] if row["flags"] else []
    notes += [FLAG_NOTES[flag] for flag in row["flags"]]
    notes.append(f"deployment as stated: {row['serve']}")
    source = upstream_source(row)
    link = interconnect(row, source.get("section", ""))
    if link == "pcie":
        notes.append(POD_NOTE)
    return {
        "id": row["id"],
        "source": source,
        "model": model,
        "model_as_stated": row["model_as_stated"],
        "model_source": row["config_source"],
        "hf_model_id": hf_id,
        "gpu": gpu,
        "gpu_description": row["gpu_as_stated"],
        "gpu_in_runs_json": row["itlkit_gpu"],
        "gpus": row["tp"],
        "tp": row["tp"],
        **({"interconnect": link} if link else {}),
        "weights_precision": row["weights_precision"],
        "weights_precision_label": "mxfp4 (read as int4)"
        if "mxfp4_as_int4" in row["flags"] else row["weights_precision"],
        "kv_precision": row["kv_precision"],
        "engine": engine_entry(row, arch, gpu),
        "workload": workload_entry(row),
        "measured": measured_entry(row),
        "flags": list(row["flags"]),
        "notes": notes,
    }  # fmt: skip


def convert(table: dict) -> dict:
    """The whole runs file for a parsed runs.json."""
    if table.get("format", "").split(" ")[0] != TABLE_FORMAT:
        raise ValueError(f"not a {TABLE_FORMAT} table: format {table.get('format')!r}")
    runs = [run_from_row(row, table["configs"]) for row in table["rows"]]
    return {
        "format": "itlkit-runs/1",
        "description": f"{len(runs)} real vLLM serving runs of vllm bench serve bursts (every "
        "request sent at t = 0), converted by make_runs.py from the transcribed table "
        f"{FIXTURE}: {table['description']}",
        "source": {name: dict(s) for name, s in sorted(SOURCES.items())},
        "definitions": {
            **{f"{k} (runs.json)": v for k, v in table["definitions"].items()},
            "itl_mean_seconds": "vllm bench's mean of every gap between streamed chunks, pooled "
            "over requests (one token per chunk here): equal to (e2e_mean - ttft_mean) / "
            "(output_tokens_mean - 1), the format's definition",
            "itl_per_token_quantiles_seconds": "vllm bench's median and p99 ITL (per gap, pooled)",
            "tpot_*_seconds": "per request (e2e - ttft) / (output tokens - 1), then mean, p50, p99 "
            "over requests",
            "upper_bounds_not_measured": "statistics the format requires that the source does "
            "not publish; each holds an upper bound instead",
            **{f"{k} (upper bound)": v for k, v in BOUNDS.items()},
        },
        "runs": runs,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", type=Path, help="runs.json (format real-runs-table/1)")
    parser.add_argument("-o", "--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    doc = convert(json.loads(args.table.read_text(encoding="utf-8")))
    text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
    args.out.write_text(text, encoding="utf-8")
    print(f"{args.out}: {len(doc['runs'])} runs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
