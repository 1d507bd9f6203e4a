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
import time
import urllib.parse

import numpy as np
import pandas as pd

from itlkit.errors import PrometheusError
from itlkit.metrics.histogram import HistogramSeries
from itlkit.metrics.http_get import HttpGetError, HttpStatusError, http_get, one_line, shown_url
from itlkit.metrics.sglang_metrics import engine_of
from itlkit.metrics.vllm_metrics import metric

_WINDOW = re.compile(r"(\d+(ms|s|m|h|d|w|y))+|\$__rate_interval|\$__range|\$__interval")


# SGLang's scheduler metrics come once per TP / PP rank, each the same instance's view: rank 0's
# is read (a metric without the label, as SGLang's request histograms, matches "" too).
SGLANG_RANK = 'tp_rank=~"|0",pp_rank=~"|0"'


def _selector(model_name: str | None, engine: str = "vllm", matchers: tuple[str, ...] = ()) -> str:
    parts = [SGLANG_RANK] if engine == "sglang" else []
    parts += matchers
    if model_name is not None:
        escaped = model_name.replace("\\", "\\\\").replace('"', '\\"')
        parts.insert(0, f'model_name="{escaped}"')
    return "{" + ",".join(parts) + "}" if parts else ""


def _check_window(rate_window: str) -> str:
    if not _WINDOW.fullmatch(rate_window):
        raise PrometheusError(f"bad rate window {rate_window!r}: use a PromQL duration like 1m")
    return rate_window


ENGINES = ("vllm", "sglang")


def _names(metric_key: str, engine: str = "vllm") -> tuple[str, ...]:
    """The metric's family names in one engine's metrics (vLLM's: its Grafana dashboard's)."""
    return tuple(n for n in metric(metric_key).names if engine_of(n) == engine)


def _joined(parts: list[str]) -> str:
    if not parts:
        raise PrometheusError("that metric has no family to query in this engine's metrics")
    return parts[0] if len(parts) == 1 else " or ".join(f"({p})" for p in parts)


def bucket_rate_query(metric_key: str = "itl", *, model_name: str | None = None,
                      rate_window: str = "1m", engine: str = "vllm") -> str:  # fmt: skip
    """`sum by(le) (rate(<metric>_bucket{model_name="…"}[window]))`, old names joined by `or`."""
    sel, w = _selector(model_name, engine), _check_window(rate_window)
    names = _names(metric_key, engine)
    return _joined([f"sum by(le) (rate({n}_bucket{sel}[{w}]))" for n in names])


def quantile_query(q: float, metric_key: str = "itl", *, model_name: str | None = None,
                   rate_window: str = "1m", engine: str = "vllm") -> str:  # fmt: skip
    """The Grafana panel query: `histogram_quantile(q, sum by(le) (rate(…_bucket[window])))`."""
    inner = bucket_rate_query(metric_key, model_name=model_name, rate_window=rate_window,
                              engine=engine)  # fmt: skip
    return f"histogram_quantile({q:g}, {inner})"


def _sum_rate(metric_key: str, suffix: str, model_name, rate_window, engine="vllm",
              matchers: tuple[str, ...] = ()) -> str:  # fmt: skip
    sel, w = _selector(model_name, engine, matchers), _check_window(rate_window)
    return _joined([f"sum(rate({n}{suffix}{sel}[{w}]))" for n in _names(metric_key, engine)])


def mean_query(metric_key: str = "itl", *, model_name=None, rate_window: str = "1m",
               engine: str = "vllm") -> str:  # fmt: skip
    """Mean observation over the window: rate of `_sum` over rate of `_count` (Grafana's mean)."""
    s = _sum_rate(metric_key, "_sum", model_name, rate_window, engine)
    c = _sum_rate(metric_key, "_count", model_name, rate_window, engine)
    return f"({s}) / ({c})"


def count_rate_query(metric_key: str = "ttft", *, model_name=None, rate_window: str = "1m",
                     engine: str = "vllm") -> str:  # fmt: skip
    """Observations per second (for TTFT: first tokens produced per second)."""
    return _sum_rate(metric_key, "_count", model_name, rate_window, engine)


def counter_rate_query(metric_key: str, *, model_name=None, rate_window: str = "1m",
                       engine: str = "vllm", matchers: tuple[str, ...] = ()) -> str:  # fmt: skip
    """Per-second rate of a counter summed over engines, e.g. preemptions; `matchers` narrow
    the series (`'category="forward_extend"'`)."""
    return _sum_rate(metric_key, "", model_name, rate_window, engine, matchers)


def gauge_query(metric_key: str, *, model_name=None, how: str = "sum",
                engine: str = "vllm") -> str:  # fmt: skip
    """A gauge combined over engines (`sum` for requests, `avg` for KV-cache usage)."""
    sel = _selector(model_name, engine)
    return _joined([f"{how}({n}{sel})" for n in _names(metric_key, engine)])


MAX_ANSWER_BYTES = 64_000_000  # a week of 15 s points for a few hundred series fits in far less
MAX_RATE_PER_SECOND = 1e12  # no vLLM server counts a trillion of anything a second (tokens ~1e5)
# A cumulative bucket rate may fall below the one before it by float noise (sums of rates of
# several series); Prometheus' histogram_quantile evens such noise out. A fall larger than this
# share of the window's total rate is not noise: the answer cannot be a histogram's.
BUCKET_FALL_TOLERANCE = 1e-6


class NoDataError(PrometheusError):
    """The server answered, but holds no series for the query in the period."""


def _utc(timestamp_seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp_seconds))


def check_rates(values: np.ndarray, times: np.ndarray, *, where: str) -> None:
    """Refuse (PrometheusError) rates or gauges no vLLM server can have: below 0, infinite or
    above MAX_RATE_PER_SECOND. NaN (no data at that time) passes. `where` names the query."""
    values = np.asarray(values, dtype=float)
    bad = ~np.isnan(values) & ~((values >= 0) & (values <= MAX_RATE_PER_SECOND))
    if bad.any():
        i = np.argwhere(bad)[0]
        value, at = values[tuple(i)], _utc(times[i[0]])
        why = "is negative: a rate or a count is never below 0" if value < 0 else (
            f"is beyond any server (above {MAX_RATE_PER_SECOND:g})")  # fmt: skip
        raise PrometheusError(f"{where}: the value {value:g} at {at} {why}")


def check_bucket_rates(
    upper_bounds: np.ndarray, rates: np.ndarray, times: np.ndarray, *, where: str
) -> None:
    """Refuse bucket rates (rows: times, columns: `upper_bounds`, cumulative) that cannot be a
    histogram's: no +Inf bucket, a negative or impossible rate, or one that falls as le grows."""
    if not upper_bounds.size or not math.isinf(upper_bounds[-1]):
        highest = f"le={upper_bounds[-1]:g}" if upper_bounds.size else "no bucket"
        raise PrometheusError(f"{where}: the buckets end at {highest}, without the +Inf bucket "
                              "every Prometheus histogram has")  # fmt: skip
    check_rates(rates, times, where=where)
    if rates.shape[1] < 2:
        return
    tolerance = BUCKET_FALL_TOLERANCE * np.nan_to_num(rates[:, -1:])
    falls = np.diff(rates, axis=1) < -tolerance
    if falls.any():
        t, j = np.argwhere(falls)[0]
        raise PrometheusError(
            f"{where}: at {_utc(times[t])} the bucket rates fall from "
            f"{rates[t, j]:g}/s (le={upper_bounds[j]:g}) to {rates[t, j + 1]:g}/s "
            f"(le={upper_bounds[j + 1]:g}); a histogram's cumulative buckets never fall as le grows"
        )


def _status_error(exc: HttpStatusError, where: str) -> PrometheusError:
    """An HTTP error status with Prometheus' own explanation (its JSON `error`) when it sent one."""
    try:
        detail = json.loads(exc.body).get("error")
    except (ValueError, AttributeError, RecursionError):
        detail = None
    said = f": {one_line(str(detail), 300)}" if detail else ""
    if exc.code in (400, 422):  # Prometheus' bad_data and execution errors
        return PrometheusError(f"{where}: query rejected (HTTP {exc.code}){said}")
    if exc.code == 404:
        said = (" at /api/v1/query_range (is it a Prometheus server's base URL, e.g. "
                "http://127.0.0.1:9090?)")  # fmt: skip
    return PrometheusError(f"{where}: {exc}{said}")


def _not_json(body: bytes) -> str:
    """What arrived instead of a JSON answer, in words."""
    if not body.strip():
        return "answered with an empty body, not the Prometheus API's JSON"
    if body[:2] == b"\x1f\x8b":
        return "answered with gzip-compressed data, which itlkit did not ask for"
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (f"answered with bytes that are not UTF-8 text (byte 0x{body[exc.start]:02x} at "
                f"offset {exc.start:,}), not the Prometheus API's JSON")  # fmt: skip
    if text.lstrip().startswith("<"):
        return ("answered with an HTML page, not the Prometheus API's JSON (give the server's "
                "base URL, e.g. http://127.0.0.1:9090)")  # fmt: skip
    return f"answered with text that is not JSON ({one_line(text.strip(), 60)!r}...)"


def _get_json(url: str, base_url: str, *, timeout_seconds: float) -> object:
    where = shown_url(base_url)
    try:
        body = http_get(url, deadline_seconds=timeout_seconds, max_bytes=MAX_ANSWER_BYTES)
    except HttpStatusError as exc:
        raise _status_error(exc, where) from None
    except HttpGetError as exc:
        raise PrometheusError(f"{where}: {exc}") from None
    try:
        return json.loads(body.decode("utf-8"))
    except UnicodeDecodeError:
        raise PrometheusError(f"{where}: {_not_json(body)}") from None
    except ValueError:
        raise PrometheusError(f"{where}: {_not_json(body)}") from None
    except RecursionError:
        raise PrometheusError(f"{where}: answered with JSON nested too deep to be the "
                              "Prometheus API's") from None  # fmt: skip


def _matrix(doc: object, base_url: str) -> list:
    """The `data.result` list of a `query_range` answer, its shape checked."""
    where = shown_url(base_url)
    if not isinstance(doc, dict):
        raise PrometheusError(f"{where}: answer is not a Prometheus API object")
    if "status" not in doc:
        raise PrometheusError(f"{where}: answer has no status (not a Prometheus API?)")
    if doc.get("status") != "success":
        said = one_line(f"{doc.get('errorType')}: {doc.get('error')}", 300)
        raise PrometheusError(f"{where}: Prometheus answered an error ({said})")
    data = doc.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise PrometheusError(f"{where}: answer has no data.result list (not a Prometheus API?)")
    if data.get("resultType", "matrix") != "matrix":
        kind = one_line(str(data.get("resultType")), 40)
        raise PrometheusError(f"{where}: expected a range-query matrix, got resultType {kind!r}")
    return data["result"]


def series_points(series: object, base_url: str) -> tuple[dict[str, str], np.ndarray]:
    """One result series as (labels, points): points is an (n, 2) float array of (time, value).

    Refuses (PrometheusError) a series that is not `{metric: {...}, values: [[t, v], ...]}`, a
    time that is not a finite number and a value that is not a number (NaN is one: Prometheus
    writes it for 0/0).
    """
    where = shown_url(base_url)
    bad = PrometheusError(f"{where}: a result series is not {{metric, values: [[t, v], ...]}}")
    if not isinstance(series, dict) or not isinstance(series.get("values", []), list):
        raise bad
    labels = series.get("metric", {})
    if not isinstance(labels, dict):
        raise bad
    values = series.get("values", [])
    if not all(isinstance(p, list) and len(p) == 2 for p in values):
        raise bad
    try:
        points = np.array(values, dtype=float).reshape(-1, 2)
    except (TypeError, ValueError):
        first = next((p for p in values if not all(_is_number(x) for x in p)), values[0])
        raise PrometheusError(
            f"{where}: a sample is not a number: {one_line(repr(first), 80)}"
        ) from None
    if not np.isfinite(points[:, 0]).all():
        raise PrometheusError(f"{where}: a sample's time is not a finite number of seconds")
    return {str(k): str(v) for k, v in labels.items()}, points


def _is_number(x: object) -> bool:
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return not isinstance(x, bool)


def _series_rows(series: object, base_url: str) -> list[dict]:
    labels, points = series_points(series, base_url)
    return [{**labels, "timestamp_seconds": t, "value": v} for t, v in points.tolist()]


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
    if re.search(r"[?#]", base_url):  # the API path and parameters go after it
        raise PrometheusError(f"{shown_url(base_url)}: a Prometheus base URL has no ?query or "
                              "#fragment; give one like http://127.0.0.1:9090")  # fmt: skip
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


def model_names(
    base_url: str,
    metric_key: str = "itl",
    *,
    start_seconds: float,
    end_seconds: float,
    step_seconds: float,
    timeout_seconds: float = 30.0,
) -> list[str]:
    """The `model_name` labels `metric_key`'s histogram carries in the period, sorted."""
    promql = _joined([f"group by(model_name) ({n}_count)" for n in _names(metric_key)])
    frame = query_range(
        base_url, promql, start_seconds=start_seconds, end_seconds=end_seconds,
        step_seconds=step_seconds, timeout_seconds=timeout_seconds,
    )  # fmt: skip
    if frame.empty or "model_name" not in frame.columns:
        return []
    return sorted({str(n) for n in frame["model_name"].dropna().unique()} - {""})


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
    engine: str = "vllm",
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
    where = shown_url(base_url)
    names = " or ".join(_names(metric_key, engine))
    buckets = query_range(base_url, bucket_rate_query(metric_key, **kw, engine=engine), **span)
    if buckets.empty:
        raise NoDataError(f"{where}: no {names} data")
    if "le" not in buckets.columns or buckets["le"].isna().any():
        raise PrometheusError(f"{where}: bucket rates came back without an 'le' label")
    try:
        buckets = buckets.assign(le=buckets["le"].astype(float))
    except ValueError:
        raise PrometheusError(f"{where}: an 'le' label is not a number") from None
    table = buckets.pivot_table(
        index="timestamp_seconds", columns="le", values="value", aggfunc="sum"
    )
    table = table.dropna()
    times = table.index.to_numpy(dtype=float)
    check_bucket_rates(
        table.columns.to_numpy(dtype=float), table.to_numpy(), times, where=f"{where}: {names}"
    )
    sums, counts = (
        _one_series(query_range(base_url, _sum_rate(metric_key, suffix, *kw.values(), engine),
                                **span), times)
        for suffix in ("_sum", "_count")
    )  # fmt: skip
    for suffix, values in (("_sum", sums), ("_count", counts)):
        check_rates(values, times, where=f"{where}: rate of {_names(metric_key)[0]}{suffix}")
    return HistogramSeries(
        timestamps_seconds=times,
        upper_bounds=table.columns.to_numpy(dtype=float),
        cumulative_counts=table.to_numpy(),
        sums=sums,
        counts=counts,
        sources=tuple(f"{base_url}@{t:.0f}" for t in times),
    )
