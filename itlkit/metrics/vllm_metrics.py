"""vLLM's Prometheus metric names across versions, and the default bucket lists.

Source: vllm-project/vllm `vllm/v1/metrics/loggers.py` (v0.8 … v0.12 eras) and
`vllm/v1/metrics/buckets.py` @ 139b1c3f, as summarised in the project's vllm-metrics spec.
Each logical metric lists its exposed family names, newest first: when a scrape carries both
(v0.10.2–v0.11 emit ITL under two names with identical values) only the first one present is read.
Default bucket lists are used only to bin exact samples (benchmark files); scrapes carry their own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from itlkit.metrics.sglang_metrics import NAMES as SGLANG_NAMES
from itlkit.metrics.sglang_metrics import NOT_AN_ITL as SGLANG_NOT_AN_ITL
from itlkit.units import lookup

INF = float("inf")


@dataclass(frozen=True)
class VllmMetric:
    """One logical vLLM metric: its exposed names (newest first), kind, unit and meaning."""

    key: str
    names: tuple[str, ...]
    kind: str  # "histogram", "counter" or "gauge"
    unit: str  # "seconds", "tokens", "requests", "fraction", "events"
    help: str


_METRICS = [
    VllmMetric(
        "itl",
        ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "histogram",
        "seconds",
        "engine step spacing seen by one request (renamed from TPOT by vLLM PR #24110)",
    ),
    VllmMetric(
        "sglang_tpot",
        (SGLANG_NOT_AN_ITL,),
        "histogram",
        "seconds",
        "SGLang's time_per_output_token: not an ITL (0.3.5: decode-iteration time per running "
        "request, prefill iterations unrecorded; 0.3.6: each request's running average)",
    ),
    VllmMetric(
        "ttft",
        ("vllm:time_to_first_token_seconds",),
        "histogram",
        "seconds",
        "time from arrival to the first token",
    ),
    VllmMetric(
        "e2e",
        ("vllm:e2e_request_latency_seconds",),
        "histogram",
        "seconds",
        "arrival to finish",
    ),
    VllmMetric(
        "tpot",
        ("vllm:request_time_per_output_token_seconds",),
        "histogram",
        "seconds",
        "per finished request: decode time / (generated tokens − 1)",
    ),
    VllmMetric(
        "queue",
        ("vllm:request_queue_time_seconds",),
        "histogram",
        "seconds",
        "WAITING phase per request",
    ),
    VllmMetric(
        "prefill",
        ("vllm:request_prefill_time_seconds",),
        "histogram",
        "seconds",
        "first scheduled to first token",
    ),
    VllmMetric(
        "decode",
        ("vllm:request_decode_time_seconds",),
        "histogram",
        "seconds",
        "first token to last token",
    ),
    VllmMetric(
        "inference",
        ("vllm:request_inference_time_seconds",),
        "histogram",
        "seconds",
        "first scheduled to last token",
    ),
    VllmMetric(
        "iteration_tokens",
        ("vllm:iteration_tokens_total",),
        "histogram",
        "tokens",
        "prompt + generation tokens per engine step as the frontend sees them",
    ),
    VllmMetric(
        "running",
        ("vllm:num_requests_running",),
        "gauge",
        "requests",
        "requests in the running batch",
    ),
    VllmMetric(
        "waiting",
        ("vllm:num_requests_waiting",),
        "gauge",
        "requests",
        "requests waiting to be scheduled",
    ),
    VllmMetric(
        "kv_usage",
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        "gauge",
        "fraction",
        "KV-cache usage, 1 = full (renamed in vLLM 0.9)",
    ),
    VllmMetric(
        "preemptions",
        ("vllm:num_preemptions_total",),
        "counter",
        "events",
        "cumulative preemptions",
    ),
    VllmMetric(
        "prompt_tokens",
        ("vllm:prompt_tokens_total",),
        "counter",
        "tokens",
        "prefill tokens, added when a request's prefill completes",
    ),
    VllmMetric(
        "generation_tokens",
        ("vllm:generation_tokens_total",),
        "counter",
        "tokens",
        "generated tokens",
    ),
    VllmMetric(
        "prefix_cache_queries",
        ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "counter",
        "tokens",
        "prompt tokens looked up in the prefix cache (renamed from gpu_prefix_cache_* in 0.9.2)",
    ),
    VllmMetric(
        "prefix_cache_hits",
        ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "counter",
        "tokens",
        "prompt tokens served from the prefix cache",
    ),
    # Only the _sum and _count of the per-request token histograms: exact mean prompt and output
    # lengths of finished requests (a recomputed prompt is not counted twice here).
    VllmMetric(
        "request_prompt_tokens_sum",
        ("vllm:request_prompt_tokens_sum",),
        "counter",
        "tokens",
        "prompt tokens of finished requests (the vllm:request_prompt_tokens histogram's _sum)",
    ),
    VllmMetric(
        "request_prompt_tokens_count",
        ("vllm:request_prompt_tokens_count",),
        "counter",
        "requests",
        "finished requests (the vllm:request_prompt_tokens histogram's _count)",
    ),
    VllmMetric(
        "request_generation_tokens_sum",
        ("vllm:request_generation_tokens_sum",),
        "counter",
        "tokens",
        "generated tokens of finished requests (vllm:request_generation_tokens _sum)",
    ),
    VllmMetric(
        "request_success",
        ("vllm:request_success_total",),
        "counter",
        "requests",
        "finished requests by finished_reason",
    ),
    # vLLM's speculative-decoding counters (`SpecDecodingProm`, vllm/v1/spec_decode/metrics.py @
    # 016a8587edb04ae53c913a1da9355a07dc0ca4ae): drafts proposed, draft tokens, accepted tokens,
    # and accepted tokens per draft position (label `position`, from 0)
    VllmMetric(
        "spec_drafts",
        ("vllm:spec_decode_num_drafts_total",),
        "counter",
        "events",
        "speculative drafts (one per request per step that drafted)",
    ),
    VllmMetric(
        "spec_accepted",
        ("vllm:spec_decode_num_accepted_tokens_total",),
        "counter",
        "tokens",
        "draft tokens accepted",
    ),
    VllmMetric(
        "spec_accepted_per_position",
        ("vllm:spec_decode_num_accepted_tokens_per_pos_total",),
        "counter",
        "tokens",
        "draft tokens accepted at each position (label position)",
    ),
    VllmMetric(
        "spec_accept_length",
        (),
        "gauge",
        "tokens",
        "SGLang: mean tokens per speculative step (accepted drafts + the bonus token)",
    ),
    VllmMetric(
        "forward_seconds",
        (),
        "counter",
        "seconds",
        "GPU seconds by forward mode (label category): SGLang's, with its device timer on; "
        "vLLM has no such counter",
    ),
]
# SGLang exposes some of the same quantities under its own names (`metrics.sglang_metrics`): a
# page holds one engine's, so they are read as the same metric, the family naming the engine.
_METRICS = [
    replace(m, names=(*m.names, *SGLANG_NAMES.get(m.key, ())))
    for m in _METRICS
]  # fmt: skip
METRICS: dict[str, VllmMetric] = {m.key: m for m in _METRICS}
SECONDS_HISTOGRAMS = tuple(  # the latency histograms a user picks (SGLang's TPOT is only refused)
    k
    for k, m in METRICS.items()
    if m.kind == "histogram" and m.unit == "seconds" and k != "sglang_tpot"
)

# vllm/v1/metrics/buckets.py @ 139b1c3f (unchanged since vLLM PR #15202); +Inf appended.
ITL_BUCKETS_SECONDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
                       5.0, 7.5, 10.0, 20.0, 40.0, 80.0, INF)  # fmt: skip
TTFT_BUCKETS_SECONDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                        5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, INF)  # fmt: skip
REQUEST_LATENCY_BUCKETS_SECONDS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
                                   40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
                                   INF)  # fmt: skip
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, INF)


def family(key: str, engine: str = "vllm") -> str:
    """The name `engine` ("vllm" or "sglang") exposes metric `key` under (its newest)."""
    names = metric(key).names
    return next((n for n in names if n.startswith(f"{engine}:")), names[0])


def metric(key: str) -> VllmMetric:
    """The logical metric called `key` (itl, ttft, e2e, running, …); unknown keys list the valid."""
    return lookup("metric", key, METRICS)
