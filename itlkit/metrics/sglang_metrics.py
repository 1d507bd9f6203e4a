"""SGLang's Prometheus metrics: the names itlkit reads, and what each version's latency means.

SGLang serves `/metrics` with `--enable-metrics`. Read from SGLang's source (Apache-2.0):
- 0.3.5 (first Prometheus support): `python/sglang/srt/metrics/metrics_collector.py`,
  `managers/scheduler.py` @ 5bc2508b80a438dda141c757af5b443db65defe9 (label `name`, not
  `model_name`);
- 0.3.6: `python/sglang/srt/metrics/collector.py`, `managers/tokenizer_manager.py` (upstream
  "Simplify prometheus metrics (#1981)", 1929c067, 2024-11-10);
- current: `python/sglang/srt/observability/metrics_collector.py` @
  44cedc2b9c7dd31d9acae4498ea4fa0d3665feed (`TokenizerMetricsCollector`: request histograms;
  `SchedulerMetricsCollector`: gauges and counters labelled `engine_type`, `tp_rank`, `pp_rank`).
Summarised, with the lines read, in `tests/data/sglang/metric-definitions.md`.

Only `sglang:inter_token_latency_seconds` is an inter-token latency. Its observation differs from
vLLM's: a streamed chunk of k tokens after `interval` seconds adds k observations of interval / k
to the buckets and the whole interval to `_sum` (`observe_inter_token_latency`), so the
histogram is per token. `sglang:time_per_output_token_seconds` is not an ITL in any version: in
0.3.5 it is the wall time of each decode iteration, once per running request, and prefill
iterations record nothing (so prefill stalls cannot show in it); in 0.3.6 it is each request's
running average since its first token. itlkit never reads it as one (`TPOT_MEANINGS`).
"""

from __future__ import annotations

SGLANG_PREFIX = "sglang:"

# itlkit's metric key -> SGLang's family names, newest first (a page holds one of them).
NAMES: dict[str, tuple[str, ...]] = {
    "itl": ("sglang:inter_token_latency_seconds",),
    "ttft": ("sglang:time_to_first_token_seconds",),
    "e2e": ("sglang:e2e_request_latency_seconds",),
    "running": ("sglang:num_running_reqs", "sglang:num_requests_running"),
    "waiting": ("sglang:num_queue_reqs", "sglang:num_requests_waiting"),
    "kv_usage": ("sglang:token_usage",),
    "preemptions": ("sglang:num_retracted_requests_total",),
    "prompt_tokens": ("sglang:prompt_tokens_total",),
    "generation_tokens": ("sglang:generation_tokens_total",),
}

# The histogram that looks like an ITL and is not one, by version.
NOT_AN_ITL = "sglang:time_per_output_token_seconds"
TPOT_MEANINGS = {
    "0.3.5": "the wall time of each decode iteration, observed once per running request; "
    "iterations that run a prefill record nothing, so a prefill stall cannot show in it",
    "0.3.6": "each request's running average since its first token (plus one observation of "
    "E2E / tokens at its end)",
}


# What a histogram read from SGLang means beside vLLM's (said with every reading of it).
READING_NOTES = {
    "sglang:inter_token_latency_seconds": "SGLang's ITL is per token: a streamed chunk of k "
    "tokens adds k observations of its gap / k (and the whole gap to _sum), so a gap that carried "
    "several tokens is diluted in the quantiles; vLLM counts one observation per chunk",
    "sglang:time_to_first_token_seconds": "SGLang 0.3.5's TTFT starts when the request is "
    "scheduled (its queueing is a histogram of its own); later releases' at arrival, as vLLM's",
}


# Said with a diagnosis of SGLang metrics until SGLang's own schedule is modelled (issue 21).
DIAGNOSIS_NOTE = (
    "SGLang metrics, judged with vLLM's causes: SGLang runs prefill and decode in separate batches "
    "by default (--enable-mixed-chunk mixes them), so a prefill shows as every stream's stall "
    "behind a whole prefill batch, and its retractions (sglang:num_retracted_requests_total) "
    "stand for vLLM's preemptions"
)


def reading_notes(families) -> tuple[str, ...]:
    """What the SGLang families among `families` mean beside vLLM's, one line each."""
    return tuple(READING_NOTES[f] for f in sorted(set(families)) if f in READING_NOTES)


def engine_of(family: str) -> str:
    """The serving engine a metric family belongs to: "sglang" or "vllm"."""
    return "sglang" if family.startswith(SGLANG_PREFIX) else "vllm"


def metrics_version(families) -> str:
    """SGLang's metric generation that wrote these families: "current" (it has
    `sglang:inter_token_latency_seconds`), "0.3.5" (the gauge `sglang:num_requests_running`),
    "0.3.6" (`sglang:num_running_reqs` beside the TPOT histogram), else "0.3.5 or 0.3.6"."""
    families = set(families)
    if "sglang:inter_token_latency_seconds" in families:
        return "current"
    if "sglang:num_requests_running" in families:
        return "0.3.5"
    return "0.3.6" if "sglang:num_running_reqs" in families else "0.3.5 or 0.3.6"


def not_an_itl_message(families) -> str:
    """Why SGLang metrics without an ITL histogram hold none itlkit can read."""
    version = metrics_version(families)
    meaning = TPOT_MEANINGS.get(version) or (
        f"(0.3.5) {TPOT_MEANINGS['0.3.5']}, or (0.3.6) {TPOT_MEANINGS['0.3.6']}"
    )
    return (
        f"this SGLang page ({version} metrics) has {NOT_AN_ITL} but no "
        f"sglang:inter_token_latency_seconds; in SGLang {version} that histogram is {meaning}: "
        "not an inter-token latency, so itlkit does not read it as one"
    )
