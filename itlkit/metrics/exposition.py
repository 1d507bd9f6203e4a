"""Write vLLM-style `/metrics` pages (Prometheus text format 0.0.4) from cumulative values.

The page layout per vLLM version follows `vllm/v1/metrics/loggers.py` of that era (see the
project's vllm-metrics spec §2–3); numbers are formatted by prometheus_client's own
`floatToGoString`, as vLLM's pages are. Used for the bundled synthetic examples, the benchmark
and the simulator's exports: anything written here reads back through `itlkit.metrics.readers`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from prometheus_client.utils import floatToGoString

from itlkit.metrics.histogram import Histogram
from itlkit.metrics.vllm_metrics import (
    ITERATION_TOKENS_BUCKETS,
    ITL_BUCKETS_SECONDS,
    REQUEST_LATENCY_BUCKETS_SECONDS,
    TTFT_BUCKETS_SECONDS,
)
from itlkit.units import lookup

INF = float("inf")
_TOKENS_1_2_5 = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000,
                 100000, INF)  # fmt: skip


@dataclass(frozen=True)
class Family:
    """One family on the page: exposed name, type, HELP text and default buckets."""

    name: str
    kind: str
    help: str
    buckets: tuple[float, ...] = ()


_G, _C, _H = "gauge", "counter", "histogram"
_COMMON_HEAD = [
    Family("vllm:num_requests_running", _G, "Number of requests in model execution batches."),
    Family("vllm:num_requests_waiting", _G, "Number of requests waiting to be processed."),
]
_GPU_CACHE = Family(
    "vllm:gpu_cache_usage_perc", _G, "GPU KV-cache usage. 1 means 100 percent usage."
)
_KV_CACHE = Family("vllm:kv_cache_usage_perc", _G, "KV-cache usage. 1 means 100 percent usage.")
_COUNTERS = [
    Family("vllm:prefix_cache_queries_total", _C,
           "Prefix cache queries, in terms of number of queried tokens."),
    Family("vllm:prefix_cache_hits_total", _C,
           "Prefix cache hits, in terms of number of cached tokens."),
    Family("vllm:num_preemptions_total", _C, "Cumulative number of preemption from the engine."),
    Family("vllm:prompt_tokens_total", _C, "Number of prefill tokens processed."),
    Family("vllm:generation_tokens_total", _C, "Number of generation tokens processed."),
]  # fmt: skip
_HISTS = [
    Family("vllm:request_prompt_tokens", _H, "Number of prefill tokens processed.", _TOKENS_1_2_5),
    Family("vllm:request_generation_tokens", _H, "Number of generation tokens processed.",
           _TOKENS_1_2_5),
    Family("vllm:iteration_tokens_total", _H, "Histogram of number of tokens per engine_step.",
           ITERATION_TOKENS_BUCKETS),
    Family("vllm:request_max_num_generation_tokens", _H,
           "Histogram of maximum number of requested generation tokens.", _TOKENS_1_2_5),
    Family("vllm:request_params_n", _H, "Histogram of the n request parameter.",
           (1, 2, 5, 10, 20, INF)),
    Family("vllm:request_params_max_tokens", _H, "Histogram of the max_tokens request parameter.",
           _TOKENS_1_2_5),
    Family("vllm:time_to_first_token_seconds", _H, "Histogram of time to first token in seconds.",
           TTFT_BUCKETS_SECONDS),
]  # fmt: skip
_TPOT = Family("vllm:time_per_output_token_seconds", _H,
               "Histogram of time per output token in seconds.", ITL_BUCKETS_SECONDS)  # fmt: skip
_TPOT_DEPRECATED = Family(
    _TPOT.name, _H,
    "Histogram of time per output token in seconds.DEPRECATED: Use "
    "vllm:inter_token_latency_seconds instead.", ITL_BUCKETS_SECONDS,
)  # fmt: skip
_ITL = Family("vllm:inter_token_latency_seconds", _H,
              "Histogram of inter-token latency in seconds.", ITL_BUCKETS_SECONDS)  # fmt: skip
_TAIL = [
    Family("vllm:request_time_per_output_token_seconds", _H,
           "Histogram of time_per_output_token_seconds per request.", ITL_BUCKETS_SECONDS),
    Family("vllm:e2e_request_latency_seconds", _H, "Histogram of e2e request latency in seconds.",
           REQUEST_LATENCY_BUCKETS_SECONDS),
    Family("vllm:request_queue_time_seconds", _H,
           "Histogram of time spent in WAITING phase for request.",
           REQUEST_LATENCY_BUCKETS_SECONDS),
    Family("vllm:request_inference_time_seconds", _H,
           "Histogram of time spent in RUNNING phase for request.",
           REQUEST_LATENCY_BUCKETS_SECONDS),
    Family("vllm:request_prefill_time_seconds", _H,
           "Histogram of time spent in PREFILL phase for request.",
           REQUEST_LATENCY_BUCKETS_SECONDS),
    Family("vllm:request_decode_time_seconds", _H,
           "Histogram of time spent in DECODE phase for request.",
           REQUEST_LATENCY_BUCKETS_SECONDS),
]  # fmt: skip

# Pages by vLLM version era (loggers.py): 0.9 has TPOT and both KV gauges; 0.11 emits ITL and the
# deprecated TPOT with identical values; 0.12 has ITL only.
PAGES: dict[str, tuple[Family, ...]] = {
    "0.9": (*_COMMON_HEAD, _GPU_CACHE, _KV_CACHE, *_COUNTERS, *_HISTS, _TPOT, *_TAIL[1:]),
    "0.11": (*_COMMON_HEAD, _KV_CACHE, *_COUNTERS, *_HISTS, _TPOT_DEPRECATED, _ITL, *_TAIL),
    "0.12": (*_COMMON_HEAD, _KV_CACHE, *_COUNTERS, *_HISTS, _ITL, *_TAIL),
}
# An info gauge (value 1) on every V1 page; labels come from vLLM's CacheConfig.
CACHE_CONFIG_LABELS = (
    ("block_size", "16"),
    ("cache_dtype", "auto"),
    ("enable_prefix_caching", "True"),
    ("gpu_memory_utilization", "0.9"),
    ("num_cpu_blocks", "None"),
    ("num_gpu_blocks", "27710"),
    ("swap_space", "4"),
)
# The same observations feed the old and new names of one metric.
_ALIASES = {
    "vllm:time_per_output_token_seconds": "vllm:inter_token_latency_seconds",
    "vllm:gpu_cache_usage_perc": "vllm:kv_cache_usage_perc",
}


@dataclass(frozen=True)
class EngineState:
    """Cumulative metric values of one vLLM engine at one instant, keyed by exposed name.

    Histograms are keyed by family name; ITL under `vllm:inter_token_latency_seconds` and KV use
    under `vllm:kv_cache_usage_perc` also feed their older names. Missing families render empty.
    """

    histograms: dict[str, Histogram] = field(default_factory=dict)
    values: dict[str, float] = field(default_factory=dict)
    success_by_reason: dict[str, float] = field(default_factory=dict)


def escape_label_value(value: str) -> str:
    """A label value as the text format requires: backslash, double quote and newline escaped.

    Unescaped, a model name read from a config.json could close its quote and forge samples.
    """
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: list[tuple[str, str]], *, sort: bool) -> str:
    if sort:
        pairs = sorted(pairs)
    return "{" + ",".join(f'{k}="{escape_label_value(v)}"' for k, v in pairs) + "}"


def _empty(buckets) -> Histogram:
    return Histogram.create(upper_bounds=buckets, cumulative_counts=np.zeros(len(buckets)), sum=0.0)


_PROCESS_LINES = (
    "# HELP python_gc_objects_collected_total Objects collected during gc",
    "# TYPE python_gc_objects_collected_total counter",
    'python_gc_objects_collected_total{generation="0"} 12345.0',
    "# HELP process_resident_memory_bytes Resident memory size in bytes.",
    "# TYPE process_resident_memory_bytes gauge",
    "process_resident_memory_bytes 5.453083e+09",
)


def _histogram_lines(fam: Family, h: Histogram, base: list, *, sort: bool) -> list[str]:
    """One engine's `_bucket`, `_count` and `_sum` samples of a histogram family."""
    out = []
    for le, c in zip(h.upper_bounds, h.cumulative_counts, strict=True):
        lab = _labels([*base, ("le", floatToGoString(le))], sort=sort)
        out.append(f"{fam.name}_bucket{lab} {floatToGoString(c)}")
    lab = _labels(base, sort=sort)
    out.append(f"{fam.name}_count{lab} {floatToGoString(h.count)}")
    out.append(f"{fam.name}_sum{lab} {floatToGoString(h.sum)}")
    return out


def _family_lines(
    fam: Family,
    engines: dict[str, EngineState],
    *,
    model_name: str,
    sorted_labels: bool,
    created_seconds: float,
) -> list[str]:
    """HELP, TYPE and every engine's samples of one family, then its `_created` gauge family."""
    out = [f"# HELP {fam.name} {fam.help}", f"# TYPE {fam.name} {fam.kind}"]
    name = _ALIASES.get(fam.name, fam.name)
    created: list[str] = []
    for engine, state in engines.items():
        base = [("model_name", model_name), ("engine", engine)]
        lab = _labels(base, sort=sorted_labels)
        if fam.kind == "histogram":
            h = state.histograms.get(name) or _empty(fam.buckets)
            out += _histogram_lines(fam, h, base, sort=sorted_labels)
            created.append(f"{fam.name}_created{lab} {floatToGoString(created_seconds)}")
        else:
            out.append(f"{fam.name}{lab} {floatToGoString(state.values.get(name, 0.0))}")
            if fam.kind == "counter":
                created.append(
                    f"{fam.name.removesuffix('_total')}_created{lab} "
                    f"{floatToGoString(created_seconds)}"
                )
    if created:
        created_name = created[0].split("{", 1)[0]
        out.append(f"# HELP {created_name} {fam.help}")
        out.append(f"# TYPE {created_name} gauge")
        out += created
    return out


def _success_lines(
    engines: dict[str, EngineState], *, model_name: str, sorted_labels: bool
) -> list[str]:
    """`vllm:request_success_total` by finished reason (vLLM writes it after generation tokens)."""
    out = [
        "# HELP vllm:request_success_total Count of successfully processed requests.",
        "# TYPE vllm:request_success_total counter",
    ]
    for engine, state in engines.items():
        for reason in ("stop", "length", "abort"):
            pairs = [("model_name", model_name), ("engine", engine), ("finished_reason", reason)]
            lab = _labels(pairs, sort=sorted_labels)
            value = state.success_by_reason.get(reason, 0.0)
            out.append(f"vllm:request_success_total{lab} {floatToGoString(value)}")
    return out


def _info_lines(
    engines: dict[str, EngineState], *, version: str, model_name: str, sorted_labels: bool
) -> list[str]:
    """`vllm:engine_sleep_state` (0.11 on) and `vllm:cache_config_info`, one per engine."""
    out = []
    if version != "0.9":  # sleep mode metrics arrived in ~0.11 (vllm-metrics spec §2)
        out.append(
            "# HELP vllm:engine_sleep_state Engine sleep state."  # gist; exact HELP not verified
        )
        out.append("# TYPE vllm:engine_sleep_state gauge")
        for engine in engines:
            for state, value in (("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0)):
                pairs = [("model_name", model_name), ("engine", engine), ("sleep_state", state)]
                out.append(f"vllm:engine_sleep_state{_labels(pairs, sort=sorted_labels)} {value}")
    out.append("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig")
    out.append("# TYPE vllm:cache_config_info gauge")
    for engine in engines:
        pairs = [*CACHE_CONFIG_LABELS, ("engine", engine)]
        out.append(f"vllm:cache_config_info{_labels(pairs, sort=sorted_labels)} 1.0")
    return out


def render_vllm_metrics(
    engines: dict[str, EngineState],
    *,
    model_name: str,
    version: str = "0.11",
    sorted_labels: bool = False,
    created_seconds: float = 1.7648e9,
    process_families: bool = True,
    info_families: bool = False,
) -> str:
    """A /metrics page as vLLM `version` writes it (`sorted_labels`: multiprocess-mode order).

    `info_families` adds `vllm:cache_config_info` and (0.11 on) `vllm:engine_sleep_state`; off by
    default so that pages written before they existed here stay byte-identical.
    """
    page = lookup("vLLM page version", version, PAGES)
    label_options = dict(model_name=model_name, sorted_labels=sorted_labels)
    out: list[str] = list(_PROCESS_LINES) if process_families else []
    for fam in page:
        out += _family_lines(fam, engines, created_seconds=created_seconds, **label_options)
        if fam.name == "vllm:generation_tokens_total":
            out += _success_lines(engines, **label_options)
    if info_families:
        out += _info_lines(engines, version=version, **label_options)
    return "\n".join(out) + "\n"
