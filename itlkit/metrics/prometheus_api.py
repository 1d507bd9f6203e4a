"""Read vLLM metrics from a Prometheus server's HTTP API (`/api/v1/query_range`).

The PromQL is the one vLLM's Grafana dashboard uses (vllm-project/vllm
`examples/observability/prometheus_grafana/grafana.json` @ 4b5c627c):
`histogram_quantile(q, sum by(le) (rate(<metric>_bucket{model_name="…"}[window])))`, with
`rate(_sum)/rate(_count)` for the mean. For ITL the current and the deprecated name are joined
with PromQL `or` after `sum by(le)`: where both exist the current one wins, so nothing is counted
twice, and servers older than vLLM 0.10.2 still answer. Only the stdlib (urllib) talks to it.
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse

import numpy as np
import pandas as pd

from itlkit.errors import PrometheusError
from itlkit.metrics.histogram import HistogramSeries
from itlkit.metrics.http_get import HttpGetError, HttpStatusError, http_get
from itlkit.metrics.vllm_metrics import metric

_WINDOW = re.compile(r"(\d+(ms|s|m|h|d|w|y))+|\$__rate_interval|\$__range|\$__interval")


def _selector(model_name: str | None) -> str:
    if model_name is None:
        return ""
    escaped = model_name.replace("\\", "\\\\").replace('"', '\\"')
    return f'{{model_name="{escaped}"}}'


def _check_window(rate_window: str) -> str:
    if not _WINDOW.fullmatch(rate_window):
        raise PrometheusError(f"bad rate window {rate_window!r}: use a PromQL duration like 1m")
    return rate_window


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else " or ".join(f"({p})" for p in parts)


def bucket_rate_query(
    metric_key: str = "itl", *, model_name: str | None = None, rate_window: str = "1m"
) -> str:
    """`sum by(le) (rate(<metric>_bucket{model_name="…"}[window]))`, old names joined by `or`."""
    sel, w = _selector(model_name), _check_window(rate_window)
    return _joined([f"sum by(le) (rate({n}_bucket{sel}[{w}]))" for n in metric(metric_key).names])


def quantile_query(
    q: float, metric_key: str = "itl", *, model_name: str | None = None, rate_window: str = "1m"
) -> str:
    """The Grafana panel query: `histogram_quantile(q, sum by(le) (rate(…_bucket[window])))`."""
    inner = bucket_rate_query(metric_key, model_name=model_name, rate_window=rate_window)
    return f"histogram_quantile({q:g}, {inner})"


def _sum_rate(metric_key: str, suffix: str, model_name, rate_window) -> str:
    sel, w = _selector(model_name), _check_window(rate_window)
    return _joined([f"sum(rate({n}{suffix}{sel}[{w}]))" for n in metric(metric_key).names])


def mean_query(metric_key: str = "itl", *, model_name=None, rate_window: str = "1m") -> str:
    """Mean observation over the window: rate of `_sum` over rate of `_count` (Grafana's mean)."""
    s = _sum_rate(metric_key, "_sum", model_name, rate_window)
    c = _sum_rate(metric_key, "_count", model_name, rate_window)
    return f"({s}) / ({c})"


def count_rate_query(metric_key: str = "ttft", *, model_name=None, rate_window: str = "1m") -> str:
    """Observations per second (for TTFT: first tokens produced per second)."""
    return _sum_rate(metric_key, "_count", model_name, rate_window)


def counter_rate_query(metric_key: str, *, model_name=None, rate_window: str = "1m") -> str:
    """Per-second rate of a counter summed over engines, e.g. preemptions."""
    return _sum_rate(metric_key, "", model_name, rate_window)


def gauge_query(metric_key: str, *, model_name=None, how: str = "sum") -> str:
    """A gauge combined over engines (`sum` for requests, `avg` for KV-cache usage)."""
    sel = _selector(model_name)
    return _joined([f"{how}({n}{sel})" for n in metric(metric_key).names])


MAX_ANSWER_BYTES = 64_000_000  # a week of 15 s points for a few hundred series fits in far less


def _get_json(url: str, base_url: str, *, timeout_seconds: float) -> object:
    try:
        body = http_get(url, deadline_seconds=timeout_seconds, max_bytes=MAX_ANSWER_BYTES)
    except HttpStatusError as exc:
        try:
            detail = json.loads(exc.body).get("error", exc.reason)
        except (ValueError, AttributeError):
            detail = exc.reason
        raise PrometheusError(f"{base_url}: query rejected (HTTP {exc.code}): {detail}") from None
    except HttpGetError as exc:
        said = str(exc).replace("cannot reach", "cannot reach Prometheus", 1)
        raise PrometheusError(f"{base_url}: {said}") from None
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise PrometheusError(f"{base_url}: answer is not JSON ({exc})") from None


def _matrix(doc: object, base_url: str) -> list:
    """The `data.result` list of a `query_range` answer, its shape checked."""
    if not isinstance(doc, dict):
        raise PrometheusError(f"{base_url}: answer is not a Prometheus API object")
    if doc.get("status") != "success":
        raise PrometheusError(f"{base_url}: {doc.get('errorType')}: {doc.get('error')}")
    data = doc.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise PrometheusError(f"{base_url}: answer has no data.result list (not a Prometheus API?)")
    if data.get("resultType", "matrix") != "matrix":
        raise PrometheusError(
            f"{base_url}: expected a range-query matrix, got resultType {data.get('resultType')!r}"
        )
    return data["result"]


def _series_rows(series: object, base_url: str) -> list[dict]:
    bad = PrometheusError(f"{base_url}: a result series is not {{metric, values: [[t, v], ...]}}")
    if not isinstance(series, dict) or not isinstance(series.get("values", []), list):
        raise bad
    labels = series.get("metric", {})
    if not isinstance(labels, dict):
        raise bad
    rows = []
    for point in series.get("values", []):
        if not (isinstance(point, list) and len(point) == 2):
            raise bad
        try:
            t, v = float(point[0]), float(point[1])
        except (TypeError, ValueError):
            raise PrometheusError(f"{base_url}: a sample is not a number: {point!r:.80}") from None
        if not math.isfinite(t):
            raise bad
        rows.append({**labels, "timestamp_seconds": t, "value": v})
    return rows


def range_result(
    base_url: str,
    promql: str,
    *,
    start_seconds: float,
    end_seconds: float,
    step_seconds: float,
    timeout_seconds: float = 30.0,
) -> list:
    """Run `/api/v1/query_range`; the answer's `data.result` list of series, its shape checked.

    `timeout_seconds` bounds the whole request; answers over `MAX_ANSWER_BYTES` are refused.
    """
    params = urllib.parse.urlencode(
        {"query": promql, "start": f"{start_seconds:.3f}", "end": f"{end_seconds:.3f}",
         "step": f"{step_seconds:g}"}
    )  # fmt: skip
    url = f"{base_url.rstrip('/')}/api/v1/query_range?{params}"
    return _matrix(_get_json(url, base_url, timeout_seconds=timeout_seconds), base_url)


def query_range(
    base_url: str,
    promql: str,
    *,
    start_seconds: float,
    end_seconds: float,
    step_seconds: float,
    timeout_seconds: float = 30.0,
) -> pd.DataFrame:
    """`range_result` as one row per (series, time): labels, timestamp_seconds, value."""
    result = range_result(
        base_url, promql, start_seconds=start_seconds, end_seconds=end_seconds,
        step_seconds=step_seconds, timeout_seconds=timeout_seconds,
    )  # fmt: skip
    rows = [row for series in result for row in _series_rows(series, base_url)]
    return pd.DataFrame(rows, columns=None if rows else ["timestamp_seconds", "value"])


def _one_series(frame: pd.DataFrame, times: np.ndarray) -> np.ndarray:
    """Values aligned on `times` (NaN where Prometheus returned no point)."""
    if frame.empty:
        return np.full(times.size, math.nan)
    values = frame.groupby("timestamp_seconds")["value"].sum()
    return values.reindex(times).to_numpy()


def fetch_vllm_summary(
    base_url: str,
    *,
    start_seconds: float,
    end_seconds: float,
    step_seconds: float,
    model_name: str | None = None,
    rate_window: str = "1m",
    timeout_seconds: float = 30.0,
) -> pd.DataFrame:
    """ITL quantiles and mean, TTFT count rate, running requests and preemption rate over time.

    Every number is Prometheus' own evaluation of the Grafana-style PromQL; index:
    timestamp_seconds.
    """
    kw = dict(model_name=model_name, rate_window=rate_window)
    queries = {
        "itl_p50_seconds": quantile_query(0.5, "itl", **kw),
        "itl_p90_seconds": quantile_query(0.9, "itl", **kw),
        "itl_p99_seconds": quantile_query(0.99, "itl", **kw),
        "itl_mean_seconds": mean_query("itl", **kw),
        "ttft_count_per_second": count_rate_query("ttft", **kw),
        "running_requests": gauge_query("running", model_name=model_name),
        "preemptions_per_second": counter_rate_query("preemptions", **kw),
    }
    n = math.floor((end_seconds - start_seconds) / step_seconds + 1e-9) + 1
    times = start_seconds + step_seconds * np.arange(n)
    columns = {
        name: _one_series(
            query_range(
                base_url,
                promql,
                start_seconds=start_seconds,
                end_seconds=end_seconds,
                step_seconds=step_seconds,
                timeout_seconds=timeout_seconds,
            ),
            times,
        )
        for name, promql in queries.items()
    }
    return pd.DataFrame(columns, index=pd.Index(times, name="timestamp_seconds"))


def fetch_bucket_rates(
    base_url: str,
    metric_key: str = "itl",
    *,
    start_seconds: float,
    end_seconds: float,
    step_seconds: float,
    model_name: str | None = None,
    rate_window: str = "1m",
    timeout_seconds: float = 30.0,
) -> HistogramSeries:
    """Per-second bucket rates over time as a series of windows (not counters).

    Row i of `cumulative_counts` is `sum by(le) (rate(…_bucket[window]))` at time i, i.e. a
    window's histogram scaled by 1/seconds; quantiles are scale-free, so
    `itlkit.metrics.histogram.quantile` of a row equals Grafana's panel at that time. Times where
    Prometheus has no data are dropped.
    """
    kw = dict(model_name=model_name, rate_window=rate_window)
    span = dict(start_seconds=start_seconds, end_seconds=end_seconds, step_seconds=step_seconds,
                timeout_seconds=timeout_seconds)  # fmt: skip
    buckets = query_range(base_url, bucket_rate_query(metric_key, **kw), **span)
    if buckets.empty:
        raise PrometheusError(f"{base_url}: no {' or '.join(metric(metric_key).names)} data")
    if "le" not in buckets.columns or buckets["le"].isna().any():
        raise PrometheusError(f"{base_url}: bucket rates came back without an 'le' label")
    try:
        buckets = buckets.assign(le=buckets["le"].astype(float))
    except ValueError:
        raise PrometheusError(f"{base_url}: an 'le' label is not a number") from None
    table = buckets.pivot_table(
        index="timestamp_seconds", columns="le", values="value", aggfunc="sum"
    )
    table = table.dropna()
    times = table.index.to_numpy(dtype=float)
    sums = _one_series(
        query_range(base_url, _sum_rate(metric_key, "_sum", *kw.values()), **span), times
    )
    counts = _one_series(
        query_range(base_url, _sum_rate(metric_key, "_count", *kw.values()), **span), times
    )
    return HistogramSeries(
        timestamps_seconds=times,
        upper_bounds=table.columns.to_numpy(dtype=float),
        cumulative_counts=table.to_numpy(),
        sums=sums,
        counts=counts,
        sources=tuple(f"{base_url}@{t:.0f}" for t in times),
    )
