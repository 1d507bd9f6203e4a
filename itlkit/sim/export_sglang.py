"""Export a simulated run as SGLang would have exposed it: `/metrics` pages in SGLang's names.

The current release's families (python/sglang/srt/observability/metrics_collector.py and
scheduler_metrics_mixin.py @ 44cedc2b9c7dd31d9acae4498ea4fa0d3665feed), with its default bucket
bounds (`itlkit.metrics.sglang_metrics`) and labels: the request histograms by `model_name`, the
scheduler's gauges and counters also by `engine_type`, `tp_rank`, `pp_rank`, `moe_ep_rank`. Pages
are written by prometheus_client itself (its metric families and `generate_latest`), as SGLang's
server writes them.

What each family holds, from the simulated steps:
- `sglang:inter_token_latency_seconds`: a streamed chunk of k tokens after a gap adds k
  observations of gap / k. The simulated engine emits one token per request per step, so k = 1:
  each observation is the gap since the request's previous token (a step, or a stall).
- `sglang:time_to_first_token_seconds`, `sglang:e2e_request_latency_seconds`: from arrival.
- gauges `sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:token_usage`,
  `sglang:num_used_tokens`: the step in progress at the scrape (zero while idle).
- counters `sglang:num_retracted_requests_total` (SGLang's preemption),
  `sglang:prompt_tokens_total`, `sglang:generation_tokens_total`,
  `sglang:realtime_tokens_total{mode}` (prompt tokens computed, served from the cache, decoded),
  and `sglang:gpu_execution_seconds_total{category}` by forward
  mode (`forward_extend`, `forward_decode`, `forward_mixed`), which SGLang records only with
  SGLANG_ENABLE_METRICS_DEVICE_TIMER=1: written with `device_timer=True`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.openmetrics.exposition import ALLOWUTF8
from prometheus_client.openmetrics.exposition import generate_latest as openmetrics_latest
from prometheus_client.utils import floatToGoString

from itlkit.metrics.histogram import Histogram
from itlkit.metrics.sglang_metrics import (
    E2E_BUCKETS_SECONDS,
    ITL_BUCKETS_SECONDS,
    SCHEDULER_LABELS,
    TTFT_BUCKETS_SECONDS,
)
from itlkit.sim.export import (
    DEFAULT_MODEL_NAME,
    DEFAULT_START_UNIX_SECONDS,
    check_writable,
    cumulative,
    cumulative_histograms,
    scrape_times,
    step_gauge,
    write_pages,
)
from itlkit.sim.results import SimulationResult

_HISTOGRAMS = (
    ("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds."),
    ("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds."),
    ("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds"),
)
_GAUGES = (
    ("sglang:num_running_reqs", "The number of running requests."),
    ("sglang:num_used_tokens", "The number of used tokens."),
    ("sglang:token_usage", "The token usage."),
    ("sglang:num_queue_reqs", "The number of requests in the waiting queue."),
    ("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
)
_COUNTERS = (
    ("sglang:num_retracted_requests", "The number of retracted requests."),
    ("sglang:prompt_tokens", "Number of prefill tokens processed."),
    ("sglang:generation_tokens", "Number of generation tokens processed."),
)
_REALTIME = ("sglang:realtime_tokens", "Total number of tokens processed, updated in real time.")
_EXECUTION = ("sglang:gpu_execution_seconds", "Total time that GPU is busy executing a workload.")


def sglang_scrape_states(result: SimulationResult, times_seconds: np.ndarray) -> list[dict]:
    """The cumulative value of every exported family at each scrape time."""
    r, w, times = result, result.workload, np.asarray(times_seconds, dtype=float)
    ends, done = r.step_end_seconds, r.finished
    got_first = ~np.isnan(r.first_token_seconds)
    itl_at = np.concatenate([ends, r.gap_end_seconds])
    itl = np.concatenate([r.step_duration_seconds, r.gap_itl_seconds])
    itl_weights = np.concatenate([r.step_itl_observations, np.ones(r.gap_itl_seconds.size)])
    first = r.first_token_seconds[got_first]
    finish = r.finish_seconds[done]
    histograms = {
        "sglang:time_to_first_token_seconds": cumulative_histograms(
            times, first, first - w.arrival_seconds[got_first], np.ones(first.size),
            TTFT_BUCKETS_SECONDS),
        "sglang:inter_token_latency_seconds": cumulative_histograms(
            times, itl_at, itl, itl_weights, ITL_BUCKETS_SECONDS),
        "sglang:e2e_request_latency_seconds": cumulative_histograms(
            times, finish, finish - w.arrival_seconds[done], np.ones(finish.size),
            E2E_BUCKETS_SECONDS),
    }  # fmt: skip
    gauge = step_gauge(r, times)
    scheduled = ~np.isnan(r.first_scheduled_seconds)
    cached = w.cached_prompt_tokens[scheduled]
    decoding = r.step_decode_tokens > 0
    prefilling = r.step_prefill_tokens > 0
    step_seconds = r.step_duration_seconds
    values = {
        "sglang:num_running_reqs": gauge(r.step_running),
        "sglang:num_used_tokens": gauge(r.step_kv_tokens),
        "sglang:token_usage": gauge(r.step_kv_tokens / r.kv_capacity_tokens),
        "sglang:num_queue_reqs": gauge(r.step_waiting),
        "sglang:max_total_num_tokens": np.full(times.size, float(r.kv_capacity_tokens)),
        "sglang:num_retracted_requests": cumulative(times, r.step_start_seconds,
                                                    r.step_preemptions),
        "sglang:prompt_tokens": cumulative(times, ends, r.step_prompt_tokens),
        "sglang:generation_tokens": cumulative(times, ends, r.step_generation_tokens),
        "prefill_compute": cumulative(times, ends, r.step_prefill_tokens),
        "prefill_cache": cumulative(times, r.first_scheduled_seconds[scheduled], cached),
        "decode": cumulative(times, ends, r.step_decode_tokens),
        "forward_extend": cumulative(times, ends, step_seconds * (prefilling & ~decoding)),
        "forward_decode": cumulative(times, ends, step_seconds * (decoding & ~prefilling)),
        "forward_mixed": cumulative(times, ends, step_seconds * (decoding & prefilling)),
    }  # fmt: skip
    return [
        {"histograms": {k: v[i] for k, v in histograms.items()},
         "values": {k: float(v[i]) for k, v in values.items()}}
        for i in range(times.size)
    ]  # fmt: skip


class _Pages:
    """A prometheus_client collector of the families at one or more scrapes: `points` pairs each
    scrape's state with its Unix time (None on a page, which carries no timestamps; OpenMetrics
    for backfill gives every point its time, the points of a family in time order)."""

    def __init__(self, points: list[tuple[dict, float | None]], *, model_name: str,
                 device_timer: bool):  # fmt: skip
        self.points, self.model, self.device_timer = points, model_name, device_timer

    def collect(self):
        labels = ["model_name", *SCHEDULER_LABELS]
        values = [self.model, "unified", "0", "0", "0"]
        for name, help_text in _HISTOGRAMS:
            family = HistogramMetricFamily(name, help_text, labels=["model_name"])
            for state, at in self.points:
                h = state["histograms"][name]
                family.add_metric([self.model], _buckets(h), h.sum, timestamp=at)
            yield family
        for kind, families in ((GaugeMetricFamily, _GAUGES), (CounterMetricFamily, _COUNTERS)):
            for name, help_text in families:
                family = kind(name, help_text, labels=labels)
                for state, at in self.points:
                    family.add_metric(values, state["values"][name], timestamp=at)
                yield family
        by_label = [(_REALTIME, "mode", ("prefill_compute", "prefill_cache", "decode"))]
        if self.device_timer:
            by_label.append((_EXECUTION, "category",
                             ("forward_extend", "forward_decode", "forward_mixed")))  # fmt: skip
        for (name, help_text), label, keys in by_label:
            family = CounterMetricFamily(name, help_text, labels=[*labels, label])
            for key in keys:
                for state, at in self.points:
                    family.add_metric([*values, key], state["values"][key], timestamp=at)
            yield family


def _buckets(h: Histogram) -> list[tuple[str, float]]:
    return [(floatToGoString(le), float(c)) for le, c in zip(h.upper_bounds, h.cumulative_counts,
                                                             strict=True)]  # fmt: skip


def render_sglang_page(state: dict, *, model_name: str, device_timer: bool = True) -> str:
    """One SGLang `/metrics` page (Prometheus text format 0.0.4) of one scrape's state."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Pages([(state, None)], model_name=model_name, device_timer=device_timer))
    return generate_latest(registry).decode()


def render_sglang_openmetrics(
    result: SimulationResult,
    *,
    interval_seconds: float = 15.0,
    start_unix_seconds: float = DEFAULT_START_UNIX_SECONDS,
    model_name: str = DEFAULT_MODEL_NAME,
    device_timer: bool = True,
) -> str:
    """Every scrape's SGLang families as one OpenMetrics text, each point with its time, for
    `promtool tsdb create-blocks-from openmetrics` (written by prometheus_client's OpenMetrics
    exposition)."""
    times = scrape_times(result, interval_seconds=interval_seconds)
    states = sglang_scrape_states(result, times)
    points = [(s, start_unix_seconds + float(t)) for s, t in zip(states, times, strict=True)]
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Pages(points, model_name=model_name, device_timer=device_timer))
    # ALLOWUTF8: the default escaping writes sample names through the label-name rule, which turns
    # the colons of sglang:... into underscores while the # TYPE lines keep them (0.26.0)
    return openmetrics_latest(registry, escaping=ALLOWUTF8).decode()


def export_sglang_openmetrics(result: SimulationResult, path: str | Path, **kwargs) -> Path:
    """Write `render_sglang_openmetrics` (its keyword arguments) to `path`."""
    path = Path(path)
    check_writable(path, folder=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_sglang_openmetrics(result, **kwargs))
    return path


def export_sglang_scrapes(
    result: SimulationResult,
    out_dir: str | Path,
    *,
    interval_seconds: float = 15.0,
    start_unix_seconds: float = DEFAULT_START_UNIX_SECONDS,
    model_name: str = DEFAULT_MODEL_NAME,
    device_timer: bool = True,
    cover_end: bool = True,
) -> list[Path]:
    """Write one SGLang `/metrics` page per scrape into `out_dir` (named as `export`'s vLLM
    pages are, which `itlkit.metrics.sources.read_scrape_folder` reads); returns the paths."""
    check_writable(Path(out_dir), folder=True)
    times = scrape_times(result, interval_seconds=interval_seconds, cover_end=cover_end)
    states = sglang_scrape_states(result, times)
    pages = (
        render_sglang_page(s, model_name=model_name, device_timer=device_timer) for s in states
    )
    return write_pages(out_dir, times, pages, start_unix_seconds=start_unix_seconds)
