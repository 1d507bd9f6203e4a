"""The evidence of an ITL incident, as windows in time.

A scrape series is cumulative: counters and histogram buckets only grow. Diagnosis needs what
happened *in* each stretch of time, so this module cuts the series into windows and takes, per
window, the ITL histogram increase, the rate of first tokens (the TTFT histogram's count rate,
i.e. prefill completions, vLLM's arrival signal), the mean of the running/waiting gauges, and the
increase of the preemption and token counters. Counter resets are detected and reported.

Every source (scrape folder, one saved page, a Prometheus server, a simulator export) ends up as
one `Timeline`, so the diagnosis does not care where the numbers came from.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from itlkit.errors import EvidenceError, SourceError
from itlkit.metrics.histogram import (
    Histogram,
    HistogramSeries,
    Window,
    series_window,
    sum_histograms,
)
from itlkit.metrics.http_get import one_line, shown_url
from itlkit.metrics.series import histogram_series, scalar_series
from itlkit.metrics.sglang_metrics import DIAGNOSIS_NOTE as SGLANG_DIAGNOSIS_NOTE
from itlkit.metrics.sglang_metrics import FORWARD_CATEGORIES, reading_notes
from itlkit.metrics.speculative_metrics import speculation_reading

DEFAULT_WINDOW_SECONDS = 60.0


@dataclass(frozen=True)
class Timeline:
    """Per-window evidence; arrays have one entry per window, NaN where a metric is missing."""

    start_seconds: np.ndarray
    end_seconds: np.ndarray
    itl: tuple[Histogram, ...]
    itl_total: Histogram
    ttft_total: Histogram | None
    first_tokens: np.ndarray
    running: np.ndarray
    waiting: np.ndarray
    kv_usage: np.ndarray
    preemptions: np.ndarray
    prompt_tokens: np.ndarray
    generation_tokens: np.ndarray
    finished_requests: np.ndarray
    counter_resets_seconds: tuple[float, ...]
    snapshots: int
    notes: tuple[str, ...] = ()
    prefix_cache_queries: np.ndarray | None = None
    prefix_cache_hits: np.ndarray | None = None
    finished_prompt_tokens: np.ndarray | None = None  # vllm:request_prompt_tokens _sum
    finished_generation_tokens: np.ndarray | None = None  # vllm:request_generation_tokens _sum
    finished_counted: np.ndarray | None = None  # vllm:request_prompt_tokens _count
    engine: str = "vllm"  # whose metrics these are: "vllm" or "sglang" (its families' names)
    # GPU seconds per window by forward mode ("extend", "decode", "mixed"): SGLang's device
    # timer (`sglang_metrics.FORWARD_CATEGORIES`); None where not exported
    forward_seconds: dict[str, np.ndarray] | None = None
    speculation: object | None = None  # `speculative_metrics.SpeculationReading`, where on
    spec_drafts: np.ndarray | None = None  # vLLM's spec_decode counters per window (None: off)
    spec_accepted: np.ndarray | None = None

    def prefix_cache_hit_rate(self) -> float:
        """Share of looked-up prompt tokens the prefix cache served (0 when not exported)."""
        if self.prefix_cache_queries is None or self.prefix_cache_hits is None:
            return 0.0
        queries = np.nansum(self.prefix_cache_queries)
        return float(np.nansum(self.prefix_cache_hits) / queries) if queries > 0 else 0.0

    def __len__(self) -> int:
        return int(self.start_seconds.size)

    @property
    def has_time_axis(self) -> bool:
        return (
            self.snapshots >= 2 and len(self) >= 1 and bool(np.all(np.isfinite(self.end_seconds)))
        )

    @property
    def duration_seconds(self) -> float:
        return float(self.end_seconds[-1] - self.start_seconds[0]) if len(self) else 0.0

    @property
    def itl_counts(self) -> np.ndarray:
        """ITL observations per window."""
        return np.array([h.count for h in self.itl])

    @property
    def first_tokens_per_second(self) -> np.ndarray:
        """Rate of first tokens per window: prefill completions, the arrival signal."""
        if not self.has_time_axis:
            return np.full(len(self), math.nan)
        return self.first_tokens / self.durations_seconds

    def _per_finished(self, tokens: np.ndarray | None) -> float:
        if tokens is None or self.finished_counted is None:
            return math.nan
        count = np.nansum(self.finished_counted)
        return float(np.nansum(tokens) / count) if count > 0 else math.nan

    def mean_prompt_tokens(self) -> float:
        """Prompt tokens per request: from the per-request histogram when exported (exact), else
        prompt-token counter over first tokens (inflated by recomputed prompts); NaN if unknown."""
        exact = self._per_finished(self.finished_prompt_tokens)
        if math.isfinite(exact):
            return exact
        first_tokens = np.nansum(self.first_tokens)
        prompt = np.nansum(self.prompt_tokens)
        return float(prompt / first_tokens) if first_tokens > 0 and prompt > 0 else math.nan

    def mean_output_tokens(self) -> float:
        """Generated tokens per finished request over the whole period (NaN if unknown)."""
        exact = self._per_finished(self.finished_generation_tokens)
        if math.isfinite(exact):
            return exact
        finished, generated = np.nansum(self.finished_requests), np.nansum(self.generation_tokens)
        return float(generated / finished) if finished > 0 and generated > 0 else math.nan

    @property
    def durations_seconds(self) -> np.ndarray:
        return self.end_seconds - self.start_seconds


def _optional_scalar(
    frame: pd.DataFrame, key: str, how: str, notes: list[str] | None, label: str | None = None
) -> pd.Series | None:
    """The metric's series, or None when absent (with a note, unless `notes` is None)."""
    try:
        return scalar_series(frame, key, how=how, label=label)
    except SourceError:
        if notes is not None:
            notes.append(f"no {key} metric in the input: evidence that needs it is skipped")
        return None


def _window_edges(times: np.ndarray, window_seconds: float) -> np.ndarray:
    """Indices of the snapshots that start each window (greedy: each window >= window_seconds)."""
    edges = [0]
    for i in range(1, times.size):
        if times[i] - times[edges[-1]] >= window_seconds - 1e-9:
            edges.append(i)
    if edges[-1] != times.size - 1:
        edges.append(times.size - 1)
    return np.asarray(edges)


def _counter_increase(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Increase of a counter over each window; after a reset, the value since the reset."""
    steps = np.diff(values)
    resets = steps < 0
    steps[resets] = values[1:][resets]
    cumulative = np.concatenate([[0.0], np.cumsum(steps)])
    return cumulative[edges[1:]] - cumulative[edges[:-1]]


def _gauge_mean(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Mean of a gauge over the snapshots of each window (both ends included)."""
    return np.array([np.mean(values[a : b + 1]) for a, b in itertools.pairwise(edges)])


def _windows(series: HistogramSeries, edges: np.ndarray) -> list[Window]:
    """Histogram increase over each window [edges[k], edges[k+1]], vectorised over scrapes.

    Between two scrapes a bucket or the count going down is a counter reset (a restart): the
    later scrape then holds everything since the reset, as PromQL's increase() assumes.
    """
    counts, times = series.cumulative_counts, series.timestamps_seconds
    step = np.diff(counts, axis=0)
    step_sums = np.diff(series.sums)
    reset = (step < 0).any(axis=1) | (np.diff(series.counts) < 0)
    step[reset] = counts[1:][reset]
    step_sums[reset] = series.sums[1:][reset]
    step = np.maximum.accumulate(step, axis=1)  # float noise must not break monotonicity
    cumulative = np.vstack([np.zeros(counts.shape[1]), np.cumsum(step, axis=0)])
    cumulative_sums = np.concatenate([[0.0], np.cumsum(step_sums)])
    # metrics.series already carried each series across its resets; keep their times
    reset_times = np.union1d(times[1:][reset], np.asarray(series.reset_times_seconds, float))
    windows = []
    for a, b in itertools.pairwise(edges):
        histogram = Histogram.create(
            upper_bounds=series.upper_bounds,
            cumulative_counts=cumulative[b] - cumulative[a],
            sum=cumulative_sums[b] - cumulative_sums[a],
        )
        inside = reset_times[(reset_times > times[a]) & (reset_times <= times[b])]
        windows.append(Window(histogram, float(times[a]), float(times[b]), tuple(inside)))
    return windows


def _count_series(frame: pd.DataFrame, key: str) -> pd.Series | None:
    """A histogram's `_count` per scrape (summed over label sets), without building histograms."""
    rows = frame[(frame["metric"] == key) & (frame["sample"] == "count")]
    if rows.empty:
        return None
    return rows.groupby("timestamp_seconds", dropna=False)["value"].sum().rename(key)


@dataclass
class _Aligner:
    """Reads the other metrics of a scrape table at the ITL histogram's scrape times, per window:
    counters as their increase, gauges as their mean (the values themselves for one scrape)."""

    frame: pd.DataFrame
    times: np.ndarray
    edges: np.ndarray
    notes: list[str]

    @property
    def single(self) -> bool:
        return self.times.size == 1

    def _at_times(self, series: pd.Series | None) -> np.ndarray | None:
        if series is None:
            return None
        series = series[~series.index.duplicated(keep="last")]
        if self.single:
            return series.to_numpy()[-1:] if len(series) else None
        aligned = series.reindex(self.times)
        if aligned.isna().any():
            self.notes.append(f"{series.name} is missing in some scrapes; those windows show NaN")
        return aligned.to_numpy(dtype=float)

    def _increase(self, series: pd.Series | None) -> np.ndarray | None:
        values = self._at_times(series)
        if values is None or self.single:
            return values
        return _counter_increase(np.nan_to_num(values), self.edges)

    def _nan(self) -> np.ndarray:
        return np.full(max(self.edges.size - 1, 1), math.nan)

    def counter(self, key: str) -> np.ndarray:
        """A counter's increase per window; NaN (with a note) when not exported."""
        values = self._increase(_optional_scalar(self.frame, key, "sum", self.notes))
        return self._nan() if values is None else values

    def optional_counter(self, key: str, label: str | None = None) -> np.ndarray | None:
        """A counter that older servers do not export: None without a note when missing; with
        `label`, its series that carry that label ("category=forward_extend")."""
        return self._increase(_optional_scalar(self.frame, key, "sum", None, label))

    def forward_seconds(self) -> dict[str, np.ndarray] | None:
        """GPU seconds per window by forward mode, where the metrics give them."""
        found = {mode: self.optional_counter("forward_seconds", f"category={category}")
                 for mode, category in FORWARD_CATEGORIES.items()}  # fmt: skip
        if all(v is None for v in found.values()):
            return None
        # a mode that never ran has no series yet (a labelled counter appears when first counted)
        return {mode: np.zeros_like(self._nan()) if v is None else v for mode, v in found.items()}

    def gauge(self, key: str) -> np.ndarray:
        """A gauge's mean per window; NaN (with a note) when not exported."""
        how = "mean" if key == "kv_usage" else "sum"
        values = self._at_times(_optional_scalar(self.frame, key, how, self.notes))
        if values is None:
            return self._nan()
        return values if self.single else _gauge_mean(values, self.edges)

    def histogram_count(self, key: str) -> np.ndarray | None:
        """Observations per window of a histogram (its _count increase)."""
        return self._increase(_count_series(self.frame, key))


def require_scrape_times(series: HistogramSeries) -> None:
    """Refuse two or more scrapes when some carry no time: their order, and so the window
    between them, is unknown (`itlkit diagnose` and `itlkit histogram` share this check)."""
    if len(series) >= 2 and not np.all(np.isfinite(series.timestamps_seconds)):
        raise EvidenceError(
            "scrapes without timestamps: name each file with its ISO time or pass one file"
        )


def _itl_windows(frame: pd.DataFrame, window_seconds: float, notes: list[str]):
    """The ITL histogram series, cut into windows, with the snapshot edges of each window."""
    try:
        itl = histogram_series(frame, "itl")
    except SourceError as exc:
        if (frame["metric"] == "itl").any() or (frame["metric"] == "sglang_tpot").any():
            raise  # broken, or SGLang's TPOT: the message names the file and says what is wrong
        raise EvidenceError(
            "the metrics hold no ITL histogram (vllm:inter_token_latency_seconds or "
            f"vllm:time_per_output_token_seconds): {exc}"
        ) from None
    notes.extend(itl.notes)
    if (frame["family"] == "sglang:inter_token_latency_seconds").any():
        notes.append(SGLANG_DIAGNOSIS_NOTE)
    require_scrape_times(itl)
    times = itl.timestamps_seconds
    if len(itl) == 1:
        notes.append(
            "a single scrape has no time axis: it holds everything since the server started, so "
            "arrival correlation and growth over time cannot be judged"
        )
        return times, np.array([0, 0]), [Window(itl.snapshot(0), math.nan, float(times[0]))]
    edges = _window_edges(times, window_seconds)
    return times, edges, _windows(itl, edges)


def _ttft_total(frame: pd.DataFrame, times: np.ndarray) -> Histogram | None:
    """The TTFT histogram's increase over the whole period (None when not exported)."""
    ends = (
        frame["timestamp_seconds"].isin([times[0], times[-1]]) | frame["timestamp_seconds"].isna()
    )
    try:
        ttft = histogram_series(frame[ends], "ttft")
    except SourceError:
        return None
    return series_window(ttft).histogram if len(ttft) >= 2 else ttft.snapshot(len(ttft) - 1)


def _engine_of_frame(frame: pd.DataFrame) -> str:
    """ "sglang" when the ITL came from SGLang's family, else "vllm"."""
    itl = frame.loc[frame["metric"] == "itl", "family"]
    return "sglang" if itl.astype(str).str.startswith("sglang:").any() else "vllm"


def timeline_from_frame(
    frame: pd.DataFrame, *, window_seconds: float = DEFAULT_WINDOW_SECONDS
) -> Timeline:
    """Cut a tidy scrape table (metrics.readers) into windows of at least `window_seconds`."""
    if not window_seconds > 0:
        raise EvidenceError(f"window must be positive, got {window_seconds}")
    notes: list[str] = []
    times, edges, windows = _itl_windows(frame, window_seconds, notes)
    resets = tuple(t for w in windows for t in w.reset_times_seconds)
    if resets:
        notes.append(
            f"{len(resets)} counter reset(s) (server restart) at "
            + ", ".join(pd.to_datetime(list(resets), unit="s").strftime("%H:%M:%S"))
            + ": counts around them are lower bounds"
        )
    total = sum_histograms([w.histogram for w in windows])
    if total.count == 0:
        raise EvidenceError("the ITL histogram recorded no observations in the period")
    at = _Aligner(frame, times, edges, notes)
    first_tokens = at.histogram_count("ttft")
    if first_tokens is None:
        first_tokens = np.full(len(windows), math.nan)
        notes.append(
            "no TTFT histogram: the arrival signal (rate of first tokens) is missing, so slow-mode "
            "correlation with arrivals cannot be checked"
        )
    finished = at.histogram_count("e2e")
    if finished is None:
        finished = at.counter("request_success")
    return Timeline(
        start_seconds=np.array([w.start_seconds for w in windows]),
        end_seconds=np.array([w.end_seconds for w in windows]),
        itl=tuple(w.histogram for w in windows),
        itl_total=total,
        ttft_total=_ttft_total(frame, times),
        first_tokens=first_tokens,
        running=at.gauge("running"),
        waiting=at.gauge("waiting"),
        kv_usage=at.gauge("kv_usage"),
        preemptions=at.counter("preemptions"),
        prompt_tokens=at.counter("prompt_tokens"),
        generation_tokens=at.counter("generation_tokens"),
        finished_requests=finished,
        counter_resets_seconds=resets,
        snapshots=times.size,
        notes=tuple(dict.fromkeys(notes)),
        prefix_cache_queries=at.optional_counter("prefix_cache_queries"),
        prefix_cache_hits=at.optional_counter("prefix_cache_hits"),
        finished_prompt_tokens=at.optional_counter("request_prompt_tokens_sum"),
        finished_generation_tokens=at.optional_counter("request_generation_tokens_sum"),
        finished_counted=at.optional_counter("request_prompt_tokens_count"),
        engine=_engine_of_frame(frame),
        forward_seconds=at.forward_seconds(),
        speculation=speculation_reading(frame),
        spec_drafts=at.optional_counter("spec_drafts"),
        spec_accepted=at.optional_counter("spec_accepted"),
    )


PLAUSIBLE_UNIX_SECONDS = (946_684_800.0, 4_102_444_800.0)  # 2000-01-01 to 2100-01-01 UTC
MAX_QUERY_POINTS = 11_000  # Prometheus refuses a range query of more points per series
PERIOD_NAMES = ("the start", "the end", "the window")  # how messages name the three values
_TIME_HINT = "use unix seconds or e.g. 2026-12-02T15:00:00Z"


def _utc(timestamp_seconds: float) -> str:
    return pd.Timestamp(timestamp_seconds, unit="s", tz="UTC").strftime("%Y-%m-%dT%H:%M:%SZ")


def _iso_seconds(raw: str, *, name: str) -> float:
    try:
        when = pd.Timestamp(raw)
    except (ValueError, OverflowError):
        when = pd.NaT
    if pd.isna(when):
        raise EvidenceError(f"{name} {one_line(raw, 40)!r} is not a time: {_TIME_HINT}")
    if when.tzinfo is None:
        when = when.tz_localize("UTC")
    return when.timestamp()


def parse_time_seconds(text: str, *, name: str = "the time") -> float:
    """Unix seconds, or an RFC 3339 / ISO 8601 time (UTC when no zone is given), from 2000 to
    2099; `name` says which time a refusal is about (`--start`)."""
    raw = str(text).strip()
    try:
        value = float(raw)
    except ValueError:
        value = _iso_seconds(raw, name=name)
    low, high = PLAUSIBLE_UNIX_SECONDS
    if not low <= value < high:
        hint = ""
        if math.isfinite(value) and low <= value / 1e3 < high:
            hint = f" (milliseconds? {value / 1e3:.0f} s is {_utc(value / 1e3)})"
        raise EvidenceError(
            f"{name} {one_line(raw, 40)!r} is not a time from 2000 to 2099{hint}: {_TIME_HINT}"
        )
    return value


def _span_in_words(seconds: float) -> str:
    for unit, size in (("days", 86_400.0), ("hours", 3_600.0), ("minutes", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:g} s"


def _histograms_from_rates(rates: HistogramSeries, window_seconds: float) -> tuple[Histogram, ...]:
    """Each step's `rate(bucket[w])` times w: Prometheus' own `increase` per window.

    `fetch_bucket_rates` refused buckets that fall as le grows; what is left is float noise,
    evened out as Prometheus' `histogram_quantile` does.
    """
    return tuple(
        Histogram.create(
            upper_bounds=rates.upper_bounds,
            cumulative_counts=np.maximum.accumulate(row * window_seconds),
            sum=float(np.nan_to_num(s) * window_seconds),
        )
        for row, s in zip(rates.cumulative_counts, rates.sums, strict=True)
    )


@dataclass
class _PrometheusQueries:
    """Range queries over the period, one value per window end."""

    base_url: str
    span: dict
    times: np.ndarray
    notes: list[str]

    def series(self, promql: str, *, scale: float = 1.0) -> np.ndarray:
        """The query's values summed over series at each window end (NaN with a note if empty)."""
        from itlkit.metrics.prometheus_api import check_rates, query_range

        frame = query_range(self.base_url, promql, **self.span)
        if frame.empty:
            self.notes.append(f"Prometheus returned nothing for {promql}")
            return np.full(self.times.size, math.nan)
        values = frame.groupby("timestamp_seconds")["value"].sum()
        values = values.reindex(self.times).to_numpy(dtype=float)
        check_rates(values, self.times, where=f"{shown_url(self.base_url)}: {promql}")
        return values * scale

    def ttft_total(self, model_name: str | None, window: str, window_seconds: float,
                   engine: str = "vllm"):  # fmt: skip
        """The TTFT histogram over the whole period (None, with a note, when absent)."""
        from itlkit.metrics.prometheus_api import NoDataError, fetch_bucket_rates

        try:
            ttft = fetch_bucket_rates(self.base_url, "ttft", model_name=model_name,
                                      rate_window=window, engine=engine, **self.span)  # fmt: skip
        except NoDataError:
            self.notes.append("no TTFT histogram in that period")
            return None
        return Histogram.create(
            upper_bounds=ttft.upper_bounds,
            cumulative_counts=np.maximum.accumulate(
                np.nansum(ttft.cumulative_counts, axis=0) * window_seconds
            ),
            sum=float(np.nansum(ttft.sums) * window_seconds),
        )


def period_seconds(
    start, end, window_seconds: float, *, names=PERIOD_NAMES, max_windows: int | None = None
) -> tuple[float, float]:
    """The period's start and end in Unix seconds; refused unless it holds one window, and,
    with `max_windows`, unless it holds at most that many. `names` (start, end, window) are the
    words the refusals use: `("--start", "--end", "--window")` on the command line."""
    first, last, window_name = names
    start_seconds = parse_time_seconds(start, name=first)
    end_seconds = parse_time_seconds(end, name=last)
    if not end_seconds > start_seconds:
        raise EvidenceError(
            f"{last} ({one_line(end, 40)}) is not after {first} ({one_line(start, 40)})"
        )
    period = end_seconds - start_seconds
    if not period >= window_seconds:
        raise EvidenceError(
            f"the period ({period:g} s) must span at least one window ({window_seconds:g} s)"
        )
    windows = math.floor(period / window_seconds + 1e-9)
    if max_windows is not None and windows > max_windows:
        raise EvidenceError(
            f"{first} to {last} span {_span_in_words(period)}: {windows:,} windows of "
            f"{window_seconds:g} s, more than the {max_windows:,} points Prometheus returns "
            f"per query; shorten the period to at most "
            f"{_span_in_words(max_windows * window_seconds)} or make {window_name} at least "
            f"{math.ceil(period / max_windows):,} s"
        )
    return start_seconds, end_seconds


def _prometheus_span(start, end, window_seconds: float, timeout_seconds: float):
    """The range-query window (`60s`) and span: one step per window, ending at each window."""
    start_seconds, end_seconds = period_seconds(
        start, end, window_seconds, max_windows=MAX_QUERY_POINTS
    )
    span = dict(
        start_seconds=start_seconds + window_seconds,
        end_seconds=end_seconds,
        step_seconds=window_seconds,
        timeout_seconds=timeout_seconds,
    )
    return f"{round(window_seconds)}s", span


SGLANG_READ = ("sglang:inter_token_latency_seconds", "sglang:time_to_first_token_seconds")


def _itl_rates(base_url: str, model_name, window: str, span: dict):
    """(the ITL bucket rates, the engine whose metrics hold them): vLLM's families, else
    SGLang's; EvidenceError, naming the models the server holds, when neither has any."""
    from itlkit.metrics.prometheus_api import ENGINES, NoDataError, fetch_bucket_rates, model_names

    missing = []
    for engine in ENGINES:
        try:
            rates = fetch_bucket_rates(base_url, "itl", model_name=model_name,
                                       rate_window=window, engine=engine, **span)  # fmt: skip
            return rates, engine
        except NoDataError as exc:
            missing.append(str(exc))
    served = model_names(base_url, **span) if model_name is not None else []
    if served:
        raise EvidenceError(
            f"no ITL histogram of model_name {one_line(model_name, 80)!r} in that period "
            f"(the server holds: {', '.join(repr(n) for n in served[:8])})"
        )
    raise EvidenceError(f"no ITL histogram in that period: {'; '.join(missing)}")


def timeline_from_prometheus(
    base_url: str,
    *,
    start,
    end,
    window_seconds: float = DEFAULT_WINDOW_SECONDS,
    model_name: str | None = None,
    timeout_seconds: float = 30.0,
) -> Timeline:
    """The same windows from a Prometheus server: `rate(...[window])` x window at each step.

    Each window's histogram is `sum by(le) (rate(bucket[w]))` times w, i.e. Prometheus' own
    `increase`, so quantiles match what Grafana shows for the same window.
    """
    from itlkit.metrics.prometheus_api import count_rate_query, counter_rate_query, gauge_query

    window, span = _prometheus_span(start, end, window_seconds, timeout_seconds)
    itl, engine = _itl_rates(base_url, model_name, window, span)
    times = itl.timestamps_seconds
    histograms = _histograms_from_rates(itl, window_seconds)
    total = sum_histograms(histograms)
    if total.count == 0:
        raise EvidenceError("the ITL histogram recorded no observations in the period")
    q = _PrometheusQueries(base_url, span, times, [])
    if engine == "sglang":  # what SGLang's readings mean, as for its pages
        q.notes += [*reading_notes(SGLANG_READ), SGLANG_DIAGNOSIS_NOTE]
    kw = dict(model_name=model_name, rate_window=window, engine=engine)
    gauge = dict(model_name=model_name, engine=engine)

    def increase(query: str) -> np.ndarray:
        return q.series(query, scale=window_seconds)

    return Timeline(
        start_seconds=times - window_seconds,
        end_seconds=times,
        itl=histograms,
        itl_total=total,
        ttft_total=q.ttft_total(model_name, window, window_seconds, engine),
        first_tokens=increase(count_rate_query("ttft", **kw)),
        running=q.series(gauge_query("running", **gauge)),
        waiting=q.series(gauge_query("waiting", **gauge)),
        kv_usage=q.series(gauge_query("kv_usage", how="max", **gauge)),
        preemptions=increase(counter_rate_query("preemptions", **kw)),
        prompt_tokens=increase(counter_rate_query("prompt_tokens", **kw)),
        generation_tokens=increase(counter_rate_query("generation_tokens", **kw)),
        finished_requests=increase(count_rate_query("e2e", **kw)),
        counter_resets_seconds=(),
        snapshots=int(times.size) + 1,
        notes=tuple(dict.fromkeys(q.notes)),
        engine=engine,
        forward_seconds=_forward_from_prometheus(q, kw, increase) if engine == "sglang" else None,
    )


def _forward_from_prometheus(q: _PrometheusQueries, kw: dict, increase) -> dict | None:
    """SGLang's GPU seconds by forward mode per window (None when the server has none)."""
    from itlkit.metrics.prometheus_api import counter_rate_query

    found = {}
    for mode, category in FORWARD_CATEGORIES.items():
        query = counter_rate_query("forward_seconds", matchers=(f'category="{category}"',), **kw)
        before = len(q.notes)
        found[mode] = increase(query)
        del q.notes[before:]  # the counter is optional (SGLang's device timer): no note
    if all(np.isnan(v).all() for v in found.values()):
        return None
    return {mode: np.nan_to_num(v) for mode, v in found.items()}
