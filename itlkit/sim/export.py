"""Export a simulated run as vLLM would have exposed it: `/metrics` scrapes and OpenMetrics.

A run becomes the cumulative values a vLLM V1 engine's Prometheus client would hold at each scrape
time (histograms in vLLM's bucket bounds, counters, gauges; labels `model_name` and `engine`):

- a folder of Prometheus text scrapes, one file per scrape named
  `metrics-<UTC time, ISO 8601 basic>.prom` (e.g. `metrics-20261202T152000.000Z.prom`), the
  naming scheme `itlkit.metrics.sources.read_scrape_folder` reads; the page layout is vLLM's
  (`itlkit.metrics.exposition.render_vllm_metrics`);
- one OpenMetrics file with a timestamp on every sample, each family's points in time order (a
  histogram's buckets, count and sum together per point) and a final `# EOF`, for
  `promtool tsdb create-blocks-from openmetrics FILE DIR` (Prometheus backfill).

When each observation lands (vLLM `IterationStats` / `loggers.py` semantics): ITL at the end of
the step that produced the token, TTFT at the first token, e2e and the per-request histograms at
the last token, `prompt_tokens_total` when a prefill completes, preemptions when the step that
preempted was scheduled. Gauges show the engine's state in the step running at scrape time
(all zero while the engine idles).
"""

from __future__ import annotations

import datetime as dt
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from prometheus_client.utils import floatToGoString

from itlkit.errors import ConfigError
from itlkit.metrics.exposition import EngineState, render_vllm_metrics
from itlkit.metrics.histogram import Histogram, bucket_index, bucket_layout
from itlkit.metrics.vllm_metrics import (
    ITERATION_TOKENS_BUCKETS,
    ITL_BUCKETS_SECONDS,
    REQUEST_LATENCY_BUCKETS_SECONDS,
    TTFT_BUCKETS_SECONDS,
)
from itlkit.sim.scheduler import SimulationResult

DEFAULT_START_UNIX_SECONDS = 1_796_223_600.0  # 2026-12-02T15:00:00Z, a fixed, reproducible origin
DEFAULT_MODEL_NAME = "simulated"
_TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000,
                  100000, math.inf)  # fmt: skip


def output_problem(path: str | Path, *, folder: bool) -> str | None:
    """What stops writing `path` (a folder of scrapes, or one file), in words; None if nothing.

    Missing folders on the way are created, as `mkdir -p` would; what exists must be of the
    right kind and writable. Checked before a long computation, so that it is not lost."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        return "is a link to a place that does not exist"
    if path.exists():
        if folder and not path.is_dir():
            return "is a file, not a folder for the scrapes"
        if not folder and path.is_dir():
            return "is a folder; give the name of a file to write"
        if not os.access(path, os.W_OK):
            return "is not writable"
        return None
    parent = path.parent
    while not parent.exists():  # the first folder (or file) on the way that exists
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is a file, so nothing can be created under it"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot be created: {parent} is not writable"
    return None


def check_writable(path: Path, *, folder: bool) -> None:
    problem = output_problem(path, folder=folder)
    if problem:
        raise ConfigError(f"{path}: {problem}")


@dataclass(frozen=True, eq=False)
class ScrapeSeries:
    """Cumulative metric values at each scrape time (index k of every array)."""

    times_seconds: np.ndarray  # simulated time of each scrape
    histograms: dict[str, list[Histogram]]
    values: dict[str, np.ndarray]
    finished: np.ndarray  # vllm:request_success_total{finished_reason="length"}

    def state(self, k: int) -> EngineState:
        """The engine's metric state at scrape k."""
        return EngineState(
            histograms={name: series[k] for name, series in self.histograms.items()},
            values={name: float(series[k]) for name, series in self.values.items()},
            success_by_reason={"length": float(self.finished[k])},
        )


def scrape_times(
    result: SimulationResult, *, interval_seconds: float, cover_end: bool = True
) -> np.ndarray:
    """Scrape instants 0, interval, 2 x interval, ...: through the first one at or after the
    run's end (`cover_end`), so the last scrape holds every observation the run made, as
    Prometheus' next scrape of a finished run would; or only those within the run."""
    interval = float(interval_seconds)
    if not (interval > 0 and math.isfinite(interval)):
        raise ConfigError(f"scrape interval must be > 0 seconds, got {interval_seconds}")
    last = (math.ceil if cover_end else math.floor)(result.end_seconds / interval)
    return np.arange(0, last + 1) * interval


def scrape_series(result: SimulationResult, *, times_seconds) -> ScrapeSeries:
    """What the engine's metrics held at each of `times_seconds` (simulated seconds)."""
    times = np.asarray(times_seconds, dtype=float)
    if times.ndim != 1 or times.size == 0 or np.any(np.diff(times) <= 0):
        raise ConfigError("scrape times must be a non-empty increasing list of seconds")
    finished = cumulative(times, result.finish_seconds[result.finished],
                           np.ones(int(result.finished.sum())))  # fmt: skip
    return ScrapeSeries(times, _histograms(result, times), _values(result, times), finished)


def _histograms(r: SimulationResult, times: np.ndarray) -> dict[str, list[Histogram]]:
    """Every vLLM histogram family, cumulative at each scrape time."""
    w = r.workload
    ends = r.step_end_seconds
    done = r.finished
    got_first = ~np.isnan(r.first_token_seconds)
    finish = r.finish_seconds[done]
    generated = r.generated_tokens[done].astype(float)
    decode_time = finish - r.first_token_seconds[done]

    def histogram(at, values, weights, bounds):
        return cumulative_histograms(times, at, values, weights, bounds)

    itl_at = np.concatenate([ends, r.gap_end_seconds])
    itl_values = np.concatenate([r.step_duration_seconds, r.gap_itl_seconds])
    itl_weights = np.concatenate([r.step_itl_observations, np.ones(r.gap_itl_seconds.size)])
    ones = np.ones(int(done.sum()))
    start = r.first_scheduled_seconds[done]
    return {
        "vllm:inter_token_latency_seconds": histogram(
            itl_at, itl_values, itl_weights, ITL_BUCKETS_SECONDS
        ),
        "vllm:time_to_first_token_seconds": histogram(
            r.first_token_seconds[got_first],
            r.first_token_seconds[got_first] - w.arrival_seconds[got_first],
            np.ones(int(got_first.sum())),
            TTFT_BUCKETS_SECONDS,
        ),
        "vllm:e2e_request_latency_seconds": histogram(
            finish, finish - w.arrival_seconds[done], ones, REQUEST_LATENCY_BUCKETS_SECONDS
        ),
        "vllm:request_queue_time_seconds": histogram(
            finish, start - w.arrival_seconds[done], ones, REQUEST_LATENCY_BUCKETS_SECONDS
        ),
        "vllm:request_prefill_time_seconds": histogram(
            finish, r.first_token_seconds[done] - start, ones, REQUEST_LATENCY_BUCKETS_SECONDS
        ),
        "vllm:request_decode_time_seconds": histogram(
            finish, decode_time, ones, REQUEST_LATENCY_BUCKETS_SECONDS
        ),
        "vllm:request_inference_time_seconds": histogram(
            finish, finish - start, ones, REQUEST_LATENCY_BUCKETS_SECONDS
        ),
        "vllm:request_time_per_output_token_seconds": histogram(
            finish,
            np.where(generated > 1, decode_time / np.maximum(generated - 1, 1), 0.0),
            ones,
            ITL_BUCKETS_SECONDS,
        ),
        "vllm:iteration_tokens_total": histogram(
            ends,
            (r.step_prompt_tokens + r.step_generation_tokens).astype(float),
            np.ones(r.steps),
            ITERATION_TOKENS_BUCKETS,
        ),
        "vllm:request_prompt_tokens": histogram(
            finish, w.prompt_tokens[done].astype(float), ones, _TOKEN_BUCKETS
        ),
        "vllm:request_generation_tokens": histogram(finish, generated, ones, _TOKEN_BUCKETS),
        "vllm:request_max_num_generation_tokens": histogram(
            finish, w.output_tokens[done].astype(float), ones, _TOKEN_BUCKETS
        ),
        "vllm:request_params_max_tokens": histogram(
            finish, w.output_tokens[done].astype(float), ones, _TOKEN_BUCKETS
        ),
        "vllm:request_params_n": histogram(finish, ones, ones, (1, 2, 5, 10, 20, math.inf)),
    }


def _values(r: SimulationResult, times: np.ndarray) -> dict[str, np.ndarray]:
    """Gauges and counters at each scrape time."""
    w = r.workload
    ends = r.step_end_seconds
    scheduled = ~np.isnan(r.first_scheduled_seconds)
    gauge = step_gauge(r, times)
    return {
        "vllm:num_requests_running": gauge(r.step_running.astype(float)),
        "vllm:num_requests_waiting": gauge(r.step_waiting.astype(float)),
        "vllm:kv_cache_usage_perc": gauge(r.step_kv_tokens / r.kv_capacity_tokens),
        "vllm:num_preemptions_total": cumulative(times, r.step_start_seconds, r.step_preemptions),
        "vllm:prompt_tokens_total": cumulative(times, ends, r.step_prompt_tokens),
        "vllm:generation_tokens_total": cumulative(times, ends, r.step_generation_tokens),
        "vllm:prefix_cache_queries_total": cumulative(
            times, r.first_scheduled_seconds[scheduled], w.prompt_tokens[scheduled]
        ),
        "vllm:prefix_cache_hits_total": cumulative(
            times, r.first_scheduled_seconds[scheduled], w.cached_prompt_tokens[scheduled]
        ),
    }


def step_gauge(r: SimulationResult, times: np.ndarray):
    """A gauge's reader: a per-step array's value in the step in progress at each scrape time
    (zero while the engine idles)."""
    index = np.searchsorted(r.step_start_seconds, times, side="right") - 1
    safe = np.maximum(index, 0)
    ends = r.step_end_seconds
    busy = (index >= 0) & (times < ends[safe]) if r.steps else np.zeros(times.size, dtype=bool)

    def gauge(per_step) -> np.ndarray:
        if not r.steps:
            return np.zeros(times.size)
        return np.where(busy, np.asarray(per_step, dtype=float)[safe], 0.0)

    return gauge


def cumulative(times, at, weights) -> np.ndarray:
    """Sum of `weights` whose event time is <= each scrape time."""
    k = np.searchsorted(times, np.asarray(at, dtype=float), side="left")
    per_scrape = np.bincount(k, weights=np.asarray(weights, dtype=float), minlength=times.size + 1)
    return np.cumsum(per_scrape[: times.size])


def cumulative_histograms(times, at, values, weights, bounds) -> list[Histogram]:
    """One cumulative histogram per scrape time: observations with event time <= the scrape."""
    bounds = bucket_layout(bounds)
    at = np.asarray(at, dtype=float)
    values = np.asarray(values, dtype=float)
    weights = np.asarray(weights, dtype=float)
    k = np.searchsorted(times, at, side="left")
    b = bucket_index(bounds, values)  # the binning of histogram.from_samples
    cells = np.bincount(
        k * bounds.size + b, weights=weights, minlength=(times.size + 1) * bounds.size
    ).reshape(times.size + 1, bounds.size)[: times.size]
    counts = np.cumsum(np.cumsum(cells, axis=0), axis=1)
    sums = np.cumsum(
        np.bincount(k, weights=values * weights, minlength=times.size + 1)[: times.size]
    )
    return [
        Histogram(bounds, counts[i], float(sums[i]), float(counts[i, -1]))
        for i in range(times.size)
    ]


def scrape_file_name(unix_seconds: float) -> str:
    when = dt.datetime.fromtimestamp(unix_seconds, tz=dt.UTC)
    return "metrics-" + when.strftime("%Y%m%dT%H%M%S.") + f"{when.microsecond // 1000:03d}Z.prom"


def export_prometheus_scrapes(
    result: SimulationResult,
    out_dir: str | Path,
    *,
    interval_seconds: float = 15.0,
    start_unix_seconds: float = DEFAULT_START_UNIX_SECONDS,
    model_name: str = DEFAULT_MODEL_NAME,
    engine: str = "0",
    version: str = "0.12",
    cover_end: bool = True,
) -> list[Path]:
    """Write one vLLM-format `/metrics` page per scrape into `out_dir`; returns the paths.

    Simulated time 0 is `start_unix_seconds`; `version` picks vLLM's page layout ("0.9", "0.11"
    with the deprecated TPOT twin of ITL, or "0.12"); `cover_end` as in `scrape_times`.
    """
    check_writable(Path(out_dir), folder=True)
    times = scrape_times(result, interval_seconds=interval_seconds, cover_end=cover_end)
    series = scrape_series(result, times_seconds=times)

    from itlkit.sim.export_speculative import spec_decode_pages

    spec = spec_decode_pages(result, times, model_name=model_name, engine=engine,
                             created_seconds=start_unix_seconds)  # fmt: skip

    def page(k: int) -> str:
        text = render_vllm_metrics({engine: series.state(k)}, model_name=model_name,
                                   version=version, created_seconds=start_unix_seconds)  # fmt: skip
        return text + spec[k]

    pages = (page(k) for k in range(times.size))
    return write_pages(out_dir, times, pages, start_unix_seconds=start_unix_seconds)


def write_pages(out_dir, times_seconds, pages, *, start_unix_seconds: float) -> list[Path]:
    """Write each page as `out_dir`/metrics-<its UTC time>.prom (simulated time 0 at
    `start_unix_seconds`), creating the folder; returns the paths."""
    out = Path(out_dir)
    check_writable(out, folder=True)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for t, page in zip(times_seconds, pages, strict=False):
        path = out / scrape_file_name(start_unix_seconds + float(t))
        path.write_text(page)
        paths.append(path)
    return paths


# ---- OpenMetrics ----------------------------------------------------------------------------

_HIST, _GAUGE, _COUNTER = "histogram", "gauge", "counter"
_OPENMETRICS_FAMILIES = (
    ("vllm:inter_token_latency_seconds", _HIST, "Histogram of inter-token latency in seconds."),
    ("vllm:time_to_first_token_seconds", _HIST, "Histogram of time to first token in seconds."),
    ("vllm:e2e_request_latency_seconds", _HIST, "Histogram of e2e request latency in seconds."),
    ("vllm:iteration_tokens_total", _HIST, "Histogram of number of tokens per engine_step."),
    ("vllm:num_requests_running", _GAUGE, "Number of requests in model execution batches."),
    ("vllm:num_requests_waiting", _GAUGE, "Number of requests waiting to be processed."),
    ("vllm:kv_cache_usage_perc", _GAUGE, "KV-cache usage. 1 means 100 percent usage."),
    ("vllm:num_preemptions_total", _COUNTER, "Cumulative number of preemption from the engine."),
    ("vllm:prompt_tokens_total", _COUNTER, "Number of prefill tokens processed."),
    ("vllm:generation_tokens_total", _COUNTER, "Number of generation tokens processed."),
)  # fmt: skip


def render_openmetrics(
    result: SimulationResult,
    *,
    interval_seconds: float = 15.0,
    start_unix_seconds: float = DEFAULT_START_UNIX_SECONDS,
    model_name: str = DEFAULT_MODEL_NAME,
    engine: str = "0",
) -> str:
    """The run's main vLLM families as OpenMetrics text with a timestamp on every sample."""
    series = scrape_series(
        result, times_seconds=scrape_times(result, interval_seconds=interval_seconds)
    )
    stamps = [_om_timestamp(start_unix_seconds + t) for t in series.times_seconds]
    base = f'model_name="{_escape(model_name)}",engine="{_escape(engine)}"'
    lines: list[str] = []
    for name, kind, help_text in _OPENMETRICS_FAMILIES:
        family = name.removesuffix("_total") if kind == "counter" else name
        lines.append(f"# HELP {family} {help_text}")
        lines.append(f"# TYPE {family} {kind}")
        if kind == "histogram":
            # One MetricPoint per scrape: its buckets, count and sum together, in time order.
            snapshots = series.histograms[name]
            labels = [f'{{{base},le="{floatToGoString(le)}"}}' for le in snapshots[0].upper_bounds]
            for h, ts in zip(snapshots, stamps, strict=True):
                lines += [
                    f"{name}_bucket{label} {floatToGoString(count)} {ts}"
                    for label, count in zip(labels, h.cumulative_counts, strict=True)
                ]
                lines.append(f"{name}_count{{{base}}} {floatToGoString(h.count)} {ts}")
                lines.append(f"{name}_sum{{{base}}} {floatToGoString(h.sum)} {ts}")
        else:
            lines += [
                f"{name}{{{base}}} {floatToGoString(v)} {ts}"
                for v, ts in zip(series.values[name], stamps, strict=True)
            ]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def export_openmetrics(
    result: SimulationResult,
    path: str | Path,
    *,
    interval_seconds: float = 15.0,
    start_unix_seconds: float = DEFAULT_START_UNIX_SECONDS,
    model_name: str = DEFAULT_MODEL_NAME,
    engine: str = "0",
) -> Path:
    """Write `render_openmetrics` to `path` (for `promtool tsdb create-blocks-from openmetrics`);
    missing folders on the way are created, as `export_prometheus_scrapes` creates its folder."""
    path = Path(path)
    check_writable(path, folder=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        render_openmetrics(
            result,
            interval_seconds=interval_seconds,
            start_unix_seconds=start_unix_seconds,
            model_name=model_name,
            engine=engine,
        )
    )
    return path


def _om_timestamp(unix_seconds: float) -> str:
    return f"{unix_seconds:.3f}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
