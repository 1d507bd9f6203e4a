"""Build recipes.json (format "itlkit-runs/1") from transcribed.json: the kept result blocks of
vllm-project/recipes, one run each.

Run: .venv/bin/python data/real-runs-recipes/make_runs.py [transcribed.json] [-o recipes.json]

Deterministic: the same transcription gives the same bytes. Every run written is read back with
itlkit's runs reader; a kept block the reader refuses (a deployment vLLM could not start, say) is
moved to `left_out.runs_refused` with the reader's one-line reason.
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from itlkit.sim.runs import OPTIONAL_MEASURED_KEYS, RunError, parse_runs
from itlkit.sim.runs_writer import write_runs

HERE = Path(__file__).resolve().parent
MS = 1e-3  # the client prints milliseconds

# How the format's precision names read the checkpoints' (why: the run's flags and notes).
WEIGHTS = {"fp8": "fp8", "bf16": "bf16", "mxfp4": "fp4"}
MXFP4_NOTE = (
    "MXFP4 weights and activations (AMD Quark, 'MXFP4 for MI350/MI355'): 0.5 byte per weight, "
    "matmuls at the GPU's FP4 rate where it has one (vLLM's QuarkW4A4MXFP4 runs AITER's FP4 GEMM "
    "on the MI355X). The 8-bit scale per 32 weights (0.03 byte) and the layers the checkpoint "
    "keeps at higher precision are not counted"
)


# ---- measured ---------------------------------------------------------------------------------
def figure_seconds(figures: dict, label: str) -> float | None:
    """A latency figure in seconds ("Mean TTFT (ms)" -> 0.xxx), None where not printed."""
    value = figures.get(label)
    return None if value is None else round(value * MS, 9)


def output_tokens_mean(figures: dict) -> float:
    return figures["Total generated tokens"] / figures["Successful requests"]


def e2e_mean_seconds(figures: dict, ttft: float, itl_client: float) -> tuple[float, bool]:
    """(mean E2E, derived?): printed, else TTFT mean + ITL mean x (output mean - 1), exact for
    one token per streamed chunk (vllm bench's ITL pools every gap of every request)."""
    printed = figure_seconds(figures, "Mean E2EL (ms)")
    if printed is not None:
        return printed, False
    return ttft + itl_client * (output_tokens_mean(figures) - 1), True


def measured(figures: dict) -> dict:
    """The format's measured fields (seconds) from the printed block; what it does not print
    (every p90, an E2E p99 without --percentile-metrics e2el) is null."""
    ttft = figure_seconds(figures, "Mean TTFT (ms)")
    ttft_p99 = figure_seconds(figures, "P99 TTFT (ms)")
    itl_client = figure_seconds(figures, "Mean ITL (ms)")
    e2e, derived = e2e_mean_seconds(figures, ttft, itl_client)
    e2e_p99 = figure_seconds(figures, "P99 E2EL (ms)")
    duration = figures["Benchmark duration (s)"]
    out = {
        "e2e_mean_seconds": round(e2e, 9),
        "e2e_p50_seconds": figure_seconds(figures, "Median E2EL (ms)"),
        "e2e_p90_seconds": None,
        "e2e_p99_seconds": e2e_p99,
        "ttft_mean_seconds": ttft,
        "ttft_p50_seconds": figure_seconds(figures, "Median TTFT (ms)"),
        "ttft_p90_seconds": None,
        "ttft_p99_seconds": ttft_p99,
        # the format's ITL mean: (E2E mean - TTFT mean) / (output mean - 1)
        "itl_mean_seconds": round((e2e - ttft) / (output_tokens_mean(figures) - 1), 12),
        "itl_mean_client_seconds": itl_client,
        "itl_per_token_quantiles_seconds": {
            "0.5": figure_seconds(figures, "Median ITL (ms)"),
            "0.99": figure_seconds(figures, "P99 ITL (ms)"),
        },
        "tpot_mean_seconds": figure_seconds(figures, "Mean TPOT (ms)"),
        "tpot_p50_seconds": figure_seconds(figures, "Median TPOT (ms)"),
        "tpot_p99_seconds": figure_seconds(figures, "P99 TPOT (ms)"),
        "requests": figures["Successful requests"],
        "requests_failed": figures.get("Failed requests", 0),
        "duration_seconds": duration,
        "total_prompt_tokens": figures["Total input tokens"],
        "total_output_tokens": figures["Total generated tokens"],
    }
    if derived:
        out["derived"] = {"e2e_mean_seconds": "ttft_mean + itl_mean_client x (output mean - 1)"}
    return {k: v for k, v in out.items() if v is not None or k in OPTIONAL_MEASURED_KEYS}


# ---- workload ---------------------------------------------------------------------------------
def request_rate(client: dict):
    """vllm bench serve's --request-rate: none given or a huge one (>= 10,000/s) is a burst."""
    rate = client["request_rate"]
    return "inf" if rate is None or rate >= 10_000 else rate


def output_fields(client: dict, figures: dict) -> dict:
    """With --ignore-eos every request generates --random-output-len; else the measured mean."""
    mean = output_tokens_mean(figures)
    if client["ignore_eos"]:
        target = client["output_len"]
        if mean != target:
            raise SystemExit(f"--ignore-eos run generated {mean} tokens a request, not {target}")
        return {
            "output_tokens_mean": target,
            "output_tokens_mean_source": "--ignore-eos: --random-output-len for every request "
            "(total generated / successful requests equals it)",
            "output_tokens_distribution": {"kind": "fixed", "tokens": target},
        }
    return {
        "output_tokens_mean": mean,
        "output_tokens_mean_source": "measured",
        "output_tokens_distribution": {"kind": "fixed", "tokens": round(mean)},
    }


def workload(client: dict, figures: dict) -> dict:
    if client["dataset"] != "random" or client["range_ratio"] is not None:
        raise SystemExit(f"no mapping for the client {client}")
    prompt_mean = figures["Total input tokens"] / figures["Successful requests"]
    rate = request_rate(client)
    return {
        "name": "random",
        "arrival": "vllm-bench",
        "num_prompts": client["num_prompts"],
        "request_rate_per_second": rate,
        "request_rate_source": "not given: vllm bench serve's default is inf (all at t = 0)"
        if client["request_rate"] is None
        else f"--request-rate {client['request_rate']}",
        "max_concurrency": client["max_concurrency"],
        "prompt_tokens_mean": prompt_mean,
        "prompt_tokens_distribution": {"kind": "fixed", "tokens": round(prompt_mean)},
        "prompt_tokens_nominal": client["input_len"],
        **output_fields(client, figures),
        "output_tokens_target": client["output_len"],
        "lengths_source": "--dataset-name random without --random-range-ratio: range ratio 0, "
        "every request the same lengths (vllm/benchmarks/datasets.py, transcribed.json's "
        "random_dataset_source); the prompt is the measured mean (total input tokens / "
        "successful requests), --random-input-len less the special tokens and re-tokenisation",
        "api": "completions",
        "ignore_eos": client["ignore_eos"],
        "streaming": True,
    }


# ---- deployment -------------------------------------------------------------------------------
def model_fields(model: dict) -> dict:
    return {
        "model": model["catalog"],
        "model_source": model["check"],
        "hf_model_id": model["hf_id"],
    }


def engine(run: dict) -> dict:
    """The serve command's settings; null where it sets none (the release's default, which
    itlkit fills and lists), except max_model_len: vLLM then takes the model's context."""
    given = run["engine"]
    out = {
        "name": "vllm",
        "vllm_version": run["vllm_version"],
        "vllm_version_source": run["vllm_version_source"],
        "image": run["image"],
        "max_num_batched_tokens": given["max_num_batched_tokens"],
        "max_num_seqs": given["max_num_seqs"],
        "max_model_len": given["max_model_len"],
        "gpu_memory_utilization": given["gpu_memory_utilization"],
        "block_size": given["block_size"],
        "chunked_prefill": given["chunked_prefill"],
        "prefix_caching": given["prefix_caching"],
        "kv_cache_dtype": run["kv_cache_dtype"] or "auto",
    }
    if given["max_model_len"] is None:
        out["max_model_len"] = run["model"]["max_position_embeddings"]
        out["max_model_len_source"] = (
            "not set by the serve command: vLLM takes the model's max_position_embeddings, "
            + run["model"]["max_position_embeddings_source"]
        )
    for key in ("prefix_caching_source", "async_scheduling", "vllm_use_v1"):
        if key in given:
            out[key] = given[key]
    return out


def precisions(run: dict) -> dict:
    """Weights as the format names them; KV fp8 where --kv-cache-dtype fp8, else the default
    (auto: the model's dtype, bfloat16 for every kept checkpoint)."""
    weights, kv = run["weights_precision"], run["kv_cache_dtype"]
    kv_label = f"--kv-cache-dtype {kv}" if kv else "auto (the model's dtype, bfloat16)"
    return {
        "weights_precision": WEIGHTS[weights],
        "weights_precision_label": weights.upper(),
        "kv_precision": "fp8" if kv == "fp8" else "bf16",
        "kv_precision_label": kv_label,
    }


# ---- flags and notes --------------------------------------------------------------------------
def flags(run: dict, record: dict, out_measured: dict) -> list[str]:
    found = []
    if run["weights_precision"] == "mxfp4":
        found.append("mxfp4_w4a4")
    if "release current at the commit date" in run["vllm_version_source"]:
        found.append("vllm_version_from_commit_date")
    if "from the main branch" in run["vllm_version_source"]:
        found.append("vllm_built_from_main")
    if run["gpu"]["name_in_file"] == "MI355":
        found.append("gpu_named_mi355")
    if "SXM or PCIe is not written" in run["gpu"]["why"]:
        found.append("a100_form_factor_assumed")
    if "derived" in out_measured:
        found.append("e2e_mean_derived")
    if run["engine"].get("block_size") == 1:
        found.append("block_size_1")
    if run.get("doubts"):
        found.append("doubtful")
    return found


FLAG_NOTES = {
    "mxfp4_w4a4": MXFP4_NOTE,
    "vllm_version_from_commit_date": "the vLLM release is not written: the release current at "
    "the commit date is taken (engine.vllm_version_source); the engine defaults itlkit fills "
    "are that release's",
    "vllm_built_from_main": "vLLM was built from main (not a release): its defaults may be "
    "newer than the named release's",
    "gpu_named_mi355": "the file writes 'MI355'; taken as the Instinct MI355X (288 GB)",
    "a100_form_factor_assumed": "A100 80 GB form factor not written; SXM (NVLink) taken",
    "e2e_mean_derived": "no E2E printed: e2e_mean_seconds = TTFT mean + ITL mean x (output "
    "mean - 1) (exact for one token per streamed chunk); no E2E quantile",
    "block_size_1": "--block-size 1 (ROCm MLA): the prefix-cache replay walks one-token blocks",
    "doubtful": "doubtful, kept as written (the notes that follow say why)",
}


def notes(run: dict, found: list[str], record: dict) -> list[str]:
    out = [FLAG_NOTES[flag] for flag in found]
    out += [f"doubt: {doubt}" for doubt in run.get("doubts", [])]
    if run["engine"].get("async_scheduling"):
        out.append(
            "the server passes --async-scheduling, which itlkit's step model does not "
            "price (a calibration carries the host's time per step)"
        )
    if run["engine"].get("prefix_caching") is False:
        out.append(
            "prefix caching off (--no-enable-prefix-caching, or the file's benchmarking "
            "instruction: engine.prefix_caching_source)"
        )
    out.append(f"GPU: {run['gpu']['why']}")
    out.append("the client prints no p90: measured p90s are null")
    if record["figures"].get("Failed requests"):
        out.append(f"{record['figures']['Failed requests']} requests failed")
    return out


# ---- one run ----------------------------------------------------------------------------------
def source(record: dict, run: dict) -> dict:
    cited = record["cited"]
    return {
        "repo": "vllm-project/recipes",
        "commit": cited["commit"],
        "committed": cited["committed"],
        "path": cited["path"],
        "lines": cited["quotes"]["block"]["lines"],
        "licence": "Apache-2.0",
        "table": run["table"],
        "block": record["id"],
        "block_hash": record["hash"],
        "first_seen": record["first_seen"],
        "cited_lines": {role: q["lines"] for role, q in cited["quotes"].items()},
        "transcribed_in": "data/real-runs-recipes/transcribed.json",
    }


def label(run: dict) -> str:
    client = run["client"]
    conc = client["max_concurrency"]
    how = f"concurrency {conc}" if conc else "all at once"
    return (
        f"{run['model']['hf_id']}, {run['gpu']['count']} x {run['gpu']['itlkit']} TP "
        f"{run['tp']}, random {client['input_len']}/{client['output_len']}, "
        f"{client['num_prompts']} prompts, {how}"
    )


def make_run(record: dict) -> dict:
    run, figures = record["run"], record["figures"]
    out_measured = measured(figures)
    found = flags(run, record, out_measured)
    return {
        "id": record["id"],
        "label": label(run),
        "source": source(record, run),
        **model_fields(run["model"]),
        "gpu": run["gpu"]["itlkit"],
        "gpu_description": run["gpu"]["name_in_file"],
        "gpus": run["gpu"]["count"],
        "tp": run["tp"],
        **precisions(run),
        "engine": engine(run),
        "workload": workload(run["client"], figures),
        "client_command": run["client"],
        "measured": out_measured,
        "flags": found,
        "notes": notes(run, found, record),
    }


# ---- the file ---------------------------------------------------------------------------------
def left_out(records: list[dict]) -> dict:
    counts = collections.Counter(r["reasons"][0]["key"] for r in records)
    return {
        "counts_by_main_reason": dict(sorted(counts.items())),
        "blocks": [
            {
                "block": r["id"],
                "path": r["first_seen"]["path"],
                "commit": r["first_seen"]["commit"],
                "lines": r["first_seen"]["lines"],
                "reasons": [x["key"] for x in r["reasons"]],
            }
            for r in records
        ],
        "runs_refused": [],
    }


def build(transcription: dict) -> dict:
    blocks = transcription["blocks"]
    runs = [make_run(b) for b in blocks if b["status"] == "kept"]
    doc = {
        "format": "itlkit-runs/1",
        "description": "Real vLLM runs transcribed from the 'Serving Benchmark Result' blocks "
        "of vllm-project/recipes (all history), one run per kept block; see README.md",
        "source": {
            "repo": "vllm-project/recipes",
            "licence": "Apache-2.0",
            "main_head": transcription["source"]["main_head"],
        },
        "definitions": {
            "itl_mean_seconds": "(e2e_mean - ttft_mean) / (output_tokens_mean - 1), the "
            "format's definition; equal to vllm bench's pooled Mean ITL "
            "(itl_mean_client_seconds) for one token per chunk",
            "itl_per_token_quantiles_seconds": "vllm bench's Median and P99 ITL (every gap, "
            "pooled over requests)",
            "tpot_*_seconds": "vllm bench's TPOT: per request (E2E - TTFT) / (output - 1), then "
            "mean, median, p99 over requests",
            "null": "a statistic the client did not print (every p90; an E2E p99 without "
            "--percentile-metrics e2el)",
        },
        "runs": runs,
        "left_out": left_out([b for b in blocks if b["status"] == "left_out"]),
    }
    refuse_unreadable(doc)
    return doc


def refuse_unreadable(doc: dict) -> None:
    """Move the runs itlkit's reader refuses to left_out.runs_refused, with its reason."""
    read = parse_runs(doc, source="recipes.json", lenient=True)
    refused = {r.id: r.message for r in read if isinstance(r, RunError)}
    doc["left_out"]["runs_refused"] = [
        {"run": run["id"], "label": run["label"], "reason": refused[run["id"]]}
        for run in doc["runs"]
        if run["id"] in refused
    ]
    doc["runs"] = [run for run in doc["runs"] if run["id"] not in refused]
    parse_runs(doc, source="recipes.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transcription", nargs="?", type=Path, default=HERE / "transcribed.json")
    parser.add_argument("-o", "--output", type=Path, default=HERE / "recipes.json")
    args = parser.parse_args()
    doc = build(json.loads(args.transcription.read_text(encoding="utf-8")))
    write_runs(doc, args.output)
    refused = len(doc["left_out"]["runs_refused"])
    print(f"{len(doc['runs'])} runs ({refused} kept blocks refused by the reader) -> {args.output}")


if __name__ == "__main__":
    main()
