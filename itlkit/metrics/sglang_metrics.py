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
    "forward_seconds": ("sglang:gpu_execution_seconds_total",),
    # mean tokens per speculative step, accepted drafts + the bonus token (its HELP text;
    # observability/metrics_collector.py @ 44cedc2b)
    "spec_accept_length": ("sglang:spec_accept_length",),
}
# `sglang:gpu_execution_seconds_total{category}`: "forward_" + the batch's ForwardMode, recorded
# only with SGLANG_ENABLE_METRICS_DEVICE_TIMER=1 (scheduler_metrics_mixin.py
# `record_forward_metrics` @ 44cedc2b; ForwardMode in model_executor/forward_batch_info.py @
# 271a25bc): a prefill batch alone is EXTEND, one the decodes ride in (--enable-mixed-chunk) MIXED.
FORWARD_CATEGORIES = {"extend": "forward_extend", "decode": "forward_decode",
                      "mixed": "forward_mixed"}  # fmt: skip

# Default bucket bounds of the current release's request histograms (`TokenizerMetricsCollector`,
# python/sglang/srt/observability/metrics_collector.py @ 44cedc2b9c7dd31d9acae4498ea4fa0d3665feed;
# `--bucket-inter-token-latency` and its siblings replace them). +Inf is added by the client.
ITL_BUCKETS_SECONDS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035,
                       0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0,
                       6.0, 8.0)  # fmt: skip
TTFT_BUCKETS_SECONDS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS_SECONDS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
                       600, 1200, 1800, 2400)  # fmt: skip
# Labels of the scheduler's gauges and counters (`SchedulerMetricsCollector`, same file), as a
# single-GPU "unified" (not disaggregated) server writes them.
SCHEDULER_LABELS = ("engine_type", "tp_rank", "pp_rank", "moe_ep_rank")

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


# Said with every diagnosis of SGLang metrics (`itlkit.diagnosis.sglang` words its findings).
DIAGNOSIS_NOTE = (
    "SGLang metrics: SGLang runs a prefill batch alone before the running batch decodes (unless "
    "--enable-mixed-chunk), so its prefill shows as every stream's stall behind whole prefill "
    "batches, judged by the streams' time in stalls rather than a count of slow steps; its "
    "retractions (sglang:num_retracted_requests_total) are judged as vLLM's preemptions"
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


NO_KNOWN_ITL = (
    "this page has SGLang's metrics but not sglang:inter_token_latency_seconds, the one SGLang "
    "histogram itlkit reads as an ITL (its meaning read in SGLang's source, per token); another "
    "release's latency histograms are not read as one, since what they count is not known here"
)


def not_an_itl_message(families) -> str:
    """Why SGLang metrics without an ITL histogram hold none itlkit can read."""
    version = metrics_version(families)
    meaning = TPOT_MEANINGS.get(version) or (
        f"(0.3.5) {TPOT_MEANINGS['0.3.5']}, or (0.3.6) {TPOT_MEANINGS['0.3.6']}"
    )
    later = (
        "; the releases after 0.3.6 that kept it (before the ITL histogram replaced it) compute "
        "it otherwise (sgl-project/sglang#2674), which itlkit has not read, so a page of theirs "
        "has the same families and an unknown meaning"
        if version == "0.3.6"
        else ""
    )
    return (
        f"this SGLang page ({version} metrics) has {NOT_AN_ITL} but no "
        f"sglang:inter_token_latency_seconds; in SGLang {version} that histogram is {meaning}"
        f"{later}: not read as an inter-token latency either way"
    )
