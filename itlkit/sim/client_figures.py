"""What a benchmark client measured, from its per-request records, in the runs format's terms.

A `benchmark_serving.py` / `vllm bench serve` result saved with its per-request lists (`ttfts`,
`itls`, `input_lens`, `output_lens`) gives a real run's `measured` figures and the length
distributions of its `workload`. The converters of real sources (`data/real-runs-*/make_runs.py`)
and `calibration.bench_runs` compute them here, so every source's figures mean the same thing.
"""

from __future__ import annotations

import numpy as np


def length_quantiles(tokens, levels) -> dict:
    """Lengths as the runs format's quantile table: whole tokens at `levels` (0 to 1)."""
    values = np.asarray(tokens, dtype=float)
    return {"kind": "quantiles", "levels": list(levels),
            "tokens": [round(float(np.quantile(values, q))) for q in levels]}  # fmt: skip


def e2e_seconds(ttft_seconds, gaps_seconds_per_request) -> np.ndarray:
    """Each request's end-to-end latency: its TTFT plus the sum of its inter-token gaps."""
    gaps = np.array([sum(g) for g in gaps_seconds_per_request], dtype=float)
    return np.asarray(ttft_seconds, dtype=float) + gaps


def client_latencies(ttft_seconds, e2e_seconds, output_tokens) -> dict[str, float]:
    """The client's TTFT and E2E mean, p90 and p99 over the requests given, and the runs
    format's ITL mean: (E2E mean - TTFT mean) / (output tokens mean - 1), seconds."""
    ttft = np.asarray(ttft_seconds, dtype=float)
    e2e = np.asarray(e2e_seconds, dtype=float)
    tokens = np.asarray(output_tokens, dtype=float)
    q = lambda values, level: float(np.quantile(values, level))  # noqa: E731
    return {
        "e2e_mean_seconds": float(e2e.mean()), "e2e_p90_seconds": q(e2e, 0.9),
        "e2e_p99_seconds": q(e2e, 0.99),
        "ttft_mean_seconds": float(ttft.mean()), "ttft_p90_seconds": q(ttft, 0.9),
        "ttft_p99_seconds": q(ttft, 0.99),
        "itl_mean_seconds": float((e2e.mean() - ttft.mean()) / (tokens.mean() - 1)),
    }  # fmt: skip


def replied_figures(result: dict) -> dict:
    """A `benchmark_serving.py --save-result` file's statistics over the requests that got text
    back, in seconds. An empty reply (`output_lens` 0, `ttfts` 0.0: the first token was EOS)
    costs the server a prompt and one token but has no latency to measure; it is counted in
    `requests_empty` and left out of the rest. The ITL quantiles are over every gap, and the
    TPOT mean is the file's own."""
    out = np.asarray(result["output_lens"], dtype=float)
    got = out > 0
    ttft = np.asarray(result["ttfts"], dtype=float)
    e2e = e2e_seconds(ttft, result["itls"])
    gaps = np.concatenate([np.asarray(g, dtype=float) for g in result["itls"]])
    return {
        **client_latencies(ttft[got], e2e[got], out[got]),
        "tpot_mean_seconds": result["mean_tpot_ms"] / 1e3,
        "itl_per_token_quantiles_seconds": {"0.5": float(np.quantile(gaps, 0.5)),
                                            "0.99": float(np.quantile(gaps, 0.99))},
        "requests": int(got.sum()), "requests_empty": int((~got).sum()),
        "duration_seconds": float(result["duration"]), "stages": None,
    }  # fmt: skip


def sharegpt_workload(result: dict, *, levels, request_rate) -> dict:
    """The runs format's workload of a `benchmark_serving.py --dataset-name sharegpt` result
    with per-request lists: its prompt and output lengths as quantile tables at `levels` (an
    empty reply ran one token), outputs to EOS (no --ignore-eos), `request_rate` as sent
    ("inf": a burst)."""
    out = np.maximum(np.asarray(result["output_lens"]), 1)
    return {
        "name": "sharegpt", "arrival": "vllm-bench", "num_prompts": result["num_prompts"],
        "request_rate_per_second": request_rate, "burstiness": 1.0,
        "prompt_tokens_mean": float(np.mean(result["input_lens"])),
        "output_tokens_mean": float(out.mean()), "output_tokens_mean_source": "measured",
        "output_tokens_target": None, "ignore_eos": False,
        "prompt_tokens_distribution": length_quantiles(result["input_lens"], levels),
        "output_tokens_distribution": length_quantiles(out, levels),
        "prompts_sent_before": 0, "stages": None, "api": "completions", "streaming": True,
    }  # fmt: skip
