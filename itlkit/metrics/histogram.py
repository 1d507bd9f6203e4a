"""Classic Prometheus histograms: buckets, exact `histogram_quantile`, windows, modes.

A classic histogram is a list of upper bounds (`le`, the last one +Inf) with a cumulative count per
bound, plus the sum and count of all observations. Everything here is pure numpy; bucket bounds
always come from the data. Quantiles follow Prometheus' `promql/quantile.go` `BucketQuantile`
exactly (checked against the 69 cases of `promql/promqltest/testdata/histograms.test`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from itlkit.errors import HistogramError
from itlkit.units import format_seconds

# promql/quantile.go: smallDeltaTolerance; relative deltas below it are float noise.
SMALL_DELTA_TOLERANCE = 1e-12
_MIN_NORMAL = np.finfo(np.float64).smallest_normal


@dataclass(frozen=True)
class Histogram:
    """A classic histogram: sorted upper bounds (last +Inf), cumulative counts, sum and count."""

    upper_bounds: np.ndarray
    cumulative_counts: np.ndarray
    sum: float
    count: float

    @classmethod
    def create(cls, *, upper_bounds, cumulative_counts, sum, count=None, where: str = ""):
        """Validate and build a histogram; `where` (file, series) prefixes every error message."""
        at = f"{where}: " if where else ""
        bounds = np.asarray(upper_bounds, dtype=float).ravel()
        counts = np.asarray(cumulative_counts, dtype=float).ravel()
        if bounds.size == 0:
            raise HistogramError(f"{at}histogram has no buckets")
        if bounds.shape != counts.shape:
            raise HistogramError(
                f"{at}{bounds.size} upper bounds but {counts.size} cumulative counts"
            )
        if np.isnan(bounds).any():
            raise HistogramError(f"{at}an upper bound (le) is NaN")
        order = np.argsort(bounds, kind="stable")
        bounds, counts = bounds[order], counts[order]
        if np.any(np.diff(bounds) == 0):
            raise HistogramError(
                f"{at}duplicate upper bound le={_fmt(bounds[1:][np.diff(bounds) == 0][0])}"
            )
        if not math.isinf(bounds[-1]) or bounds[-1] < 0:
            raise HistogramError(
                f"{at}histogram has no +Inf bucket (highest le={_fmt(bounds[-1])})"
            )
        if np.isnan(counts).any():
            raise HistogramError(
                f"{at}a bucket count is NaN (le={_fmt(bounds[np.isnan(counts)][0])})"
            )
        if (counts < 0).any():
            raise HistogramError(
                f"{at}a bucket count is negative (le={_fmt(bounds[counts < 0][0])})"
            )
        drops = np.flatnonzero(np.diff(counts) < 0)
        if drops.size:
            i = drops[0]
            raise HistogramError(
                f"{at}cumulative counts are not monotonic: le={_fmt(bounds[i])} has {counts[i]:g} "
                f"but le={_fmt(bounds[i + 1])} has {counts[i + 1]:g}"
            )
        total = counts[-1] if count is None else float(count)
        if math.isnan(total):
            raise HistogramError(f"{at}histogram count is NaN")
        # A NaN sum means "not known" (a page without `_sum`): quantiles hold, the mean is NaN.
        if not math.isclose(total, counts[-1], rel_tol=1e-9, abs_tol=1e-9):
            raise HistogramError(f"{at}count {total:g} differs from the +Inf bucket {counts[-1]:g}")
        bounds.flags.writeable = False
        counts.flags.writeable = False
        return cls(bounds, counts, float(sum), total)

    @property
    def bucket_counts(self) -> np.ndarray:
        """Observations in each bucket (the non-cumulative view)."""
        return np.diff(self.cumulative_counts, prepend=0.0)

    @property
    def lower_bounds(self) -> np.ndarray:
        """Each bucket's lower bound: 0 for the first when its le > 0 (as Prometheus assumes)."""
        first = 0.0 if self.upper_bounds[0] > 0 else -np.inf
        return np.concatenate([[first], self.upper_bounds[:-1]])

    @property
    def mean(self) -> float:
        """Mean observation, sum / count (NaN when empty)."""
        return self.sum / self.count if self.count > 0 else math.nan

    def quantile(self, q: float) -> float:
        """Prometheus `histogram_quantile(q, ...)` of this histogram."""
        return quantile(q, self.upper_bounds, self.cumulative_counts)

    def locate(self, q: float) -> QuantileEstimate:
        """The q-quantile together with the bucket it was interpolated in."""
        return locate_quantile(q, self.upper_bounds, self.cumulative_counts)


@dataclass(frozen=True)
class QuantileEstimate:
    """An interpolated quantile and the bucket (lower, upper] it was interpolated in."""

    q: float
    value: float
    bucket_lower: float
    bucket_upper: float


@dataclass(frozen=True)
class Window:
    """What a counter histogram gained between two times, and where counters were reset."""

    histogram: Histogram
    start_seconds: float
    end_seconds: float
    reset_times_seconds: tuple[float, ...] = ()

    @property
    def duration_seconds(self) -> float:
        """Length of the window."""
        return self.end_seconds - self.start_seconds

    @property
    def counter_reset(self) -> bool:
        """True when a counter went down inside the window (a restart): counts are a lower bound."""
        return bool(self.reset_times_seconds)


@dataclass(frozen=True)
class HistogramSeries:
    """Timestamped snapshots of one histogram with one bucket layout (rows are times)."""

    timestamps_seconds: np.ndarray
    upper_bounds: np.ndarray
    cumulative_counts: np.ndarray  # shape (times, buckets)
    sums: np.ndarray
    counts: np.ndarray
    sources: tuple[str, ...] = field(default=())
    # Times of the scrapes at which some series' counters went down (a restart); the counts
    # above already carry on across them (`metrics.series` corrects each series, then sums).
    reset_times_seconds: tuple[float, ...] = field(default=())
    # What the reader had to assume about the input (a page without _sum or +Inf), in words.
    notes: tuple[str, ...] = field(default=())

    def __len__(self) -> int:
        return int(self.timestamps_seconds.size)

    def snapshot(self, i: int) -> Histogram:
        """The i-th snapshot as a Histogram."""
        return Histogram.create(
            upper_bounds=self.upper_bounds,
            cumulative_counts=self.cumulative_counts[i],
            sum=self.sums[i],
            count=self.counts[i],
            where=self.sources[i] if self.sources else "",
        )


@dataclass(frozen=True)
class ModeSplit:
    """Where a histogram's mass sits relative to a floor: near it, or in a slow mode at k×floor."""

    floor_seconds: float
    slow_factor: float
    cut_seconds: float
    near_floor_share: float
    slow_share: float
    floor_bucket: tuple[float, float]
    slow_bucket: tuple[float, float]
    peak_bucket: tuple[float, float]
    warning: str | None

    @property
    def resolved(self) -> bool:
        """False when the buckets are too coarse to tell the floor from the slow mode."""
        return self.warning is None


def _fmt(x: float) -> str:
    return "+Inf" if x == math.inf else ("-Inf" if x == -math.inf else f"{x:g}")


def _almost_equal(a: float, b: float, epsilon: float) -> bool:
    """util/almost.Equal from Prometheus: relative float comparison."""
    if math.isnan(a) and math.isnan(b):
        return True
    if a == b:
        return True
    abs_sum = abs(a) + abs(b)
    diff = abs(a - b)
    if a == 0 or b == 0 or abs_sum < _MIN_NORMAL:
        return diff < epsilon * _MIN_NORMAL
    return diff / min(abs_sum, np.finfo(np.float64).max) < epsilon


def _prepared(upper_bounds, cumulative_counts) -> tuple[list[float], list[float]] | None:
    """Sort, coalesce equal bounds by summing, and force monotonicity (quantile.go steps 2-4)."""
    bounds = np.asarray(upper_bounds, dtype=float).ravel()
    counts = np.asarray(cumulative_counts, dtype=float).ravel()
    if bounds.shape != counts.shape:
        raise HistogramError(f"{bounds.size} upper bounds but {counts.size} cumulative counts")
    if bounds.size == 0:
        return None
    order = np.argsort(bounds, kind="stable")
    bounds, counts = bounds[order].tolist(), counts[order].tolist()
    if bounds[-1] != math.inf:
        return None
    merged_b, merged_c = [bounds[0]], [counts[0]]
    for b, c in zip(bounds[1:], counts[1:], strict=True):
        if b == merged_b[-1]:
            merged_c[-1] += c
        else:
            merged_b.append(b)
            merged_c.append(c)
    prev = merged_c[0]
    for i in range(1, len(merged_c)):
        curr = merged_c[i]
        if curr == prev:
            continue
        if _almost_equal(prev, curr, SMALL_DELTA_TOLERANCE) or curr < prev:
            merged_c[i] = prev
            continue
        prev = curr
    return merged_b, merged_c


def _search(n: int, counts: list[float], rank: float) -> int:
    """Go's sort.Search: smallest i in [0, n) with counts[i] >= rank, else n."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if not counts[mid] >= rank:
            lo = mid + 1
        else:
            hi = mid
    return lo


def locate_quantile(q: float, upper_bounds, cumulative_counts) -> QuantileEstimate:
    """Prometheus `BucketQuantile` (promql/quantile.go), also naming the bucket used."""
    q = float(q)
    nan = math.nan
    if math.isnan(q):
        return QuantileEstimate(q, nan, nan, nan)
    if q < 0:
        return QuantileEstimate(q, -math.inf, nan, nan)
    if q > 1:
        return QuantileEstimate(q, math.inf, nan, nan)
    prepared = _prepared(upper_bounds, cumulative_counts)
    if prepared is None or len(prepared[0]) < 2:
        return QuantileEstimate(q, nan, nan, nan)
    bounds, counts = prepared
    observations = counts[-1]
    if observations == 0:
        return QuantileEstimate(q, nan, nan, nan)
    rank = q * observations
    b = _search(len(bounds) - 1, counts, rank)
    if b == len(bounds) - 1:
        return QuantileEstimate(q, bounds[-2], bounds[-2], math.inf)
    if b == 0 and bounds[0] <= 0:
        return QuantileEstimate(q, bounds[0], -math.inf, bounds[0])
    start, end, count = 0.0, bounds[b], counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    # Go float division: 0/0 is NaN (q=0 with an empty first bucket), never an exception.
    ratio = rank / count if count != 0 else (nan if rank == 0 else math.copysign(math.inf, rank))
    return QuantileEstimate(q, start + (end - start) * ratio, start, end)


def quantile(q: float, upper_bounds, cumulative_counts) -> float:
    """Prometheus' classic `histogram_quantile(q, ...)`; bounds in any order, +Inf as inf."""
    return locate_quantile(q, upper_bounds, cumulative_counts).value


def bucket_layout(upper_bounds) -> np.ndarray:
    """Sorted, distinct upper bounds ending in +Inf (one is appended when missing)."""
    bounds = np.sort(np.asarray(upper_bounds, dtype=float).ravel())
    # Distinct by hand: np.unique imports numpy.ma (about 14 ms of a CLI call).
    bounds = bounds[np.concatenate(([True], bounds[1:] != bounds[:-1]))]
    if bounds[-1] != math.inf:
        bounds = np.append(bounds, math.inf)
    return bounds


def bucket_index(bounds: np.ndarray, values) -> np.ndarray:
    """The bucket each value lands in: the first `le` >= value (prometheus_client's `le`)."""
    return np.searchsorted(bounds, np.asarray(values, dtype=float), side="left")


def from_samples(samples_seconds, *, upper_bounds, weights=None) -> Histogram:
    """Bin exact observations as prometheus_client does: v counts in every bucket with le >= v.

    `weights` (optional, one per sample) says how many observations each value stands for.
    """
    values = np.asarray(samples_seconds, dtype=float).ravel()
    if np.isnan(values).any():
        raise HistogramError("a sample is NaN")
    bounds = bucket_layout(upper_bounds)
    index = bucket_index(bounds, values)
    if weights is None:
        per_bucket = np.bincount(index, minlength=bounds.size).astype(float)
        total, count = float(values.sum()), float(values.size)
    else:
        weights = np.asarray(weights, dtype=float).ravel()
        if weights.shape != values.shape:
            raise HistogramError(f"{values.size} samples but {weights.size} weights")
        per_bucket = np.bincount(index, weights=weights, minlength=bounds.size)
        total, count = float(np.dot(values, weights)), float(weights.sum())
    return Histogram.create(
        upper_bounds=bounds, cumulative_counts=np.cumsum(per_bucket), sum=total, count=count
    )


def _same_layout(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all(a == b))


def sum_histograms(histograms, *, names=None) -> Histogram:
    """Sum histograms by `le` (PromQL `sum by (le)`), e.g. across engines; layouts must match."""
    histograms = list(histograms)
    if not histograms:
        raise HistogramError("no histograms to sum")
    names = list(names) if names is not None else [f"#{i}" for i in range(len(histograms))]
    first = histograms[0]
    for name, h in zip(names[1:], histograms[1:], strict=True):
        if not _same_layout(first.upper_bounds, h.upper_bounds):
            raise HistogramError(
                f"bucket layouts differ between {names[0]} (le={_bounds_text(first)}) and "
                f"{name} (le={_bounds_text(h)}); cannot sum them by le"
            )
    return Histogram.create(
        upper_bounds=first.upper_bounds,
        cumulative_counts=np.sum([h.cumulative_counts for h in histograms], axis=0),
        sum=float(np.sum([h.sum for h in histograms])),
        count=float(np.sum([h.count for h in histograms])),
    )


def _bounds_text(h: Histogram) -> str:
    return ",".join(_fmt(b) for b in h.upper_bounds)


def difference(
    earlier: Histogram,
    later: Histogram,
    *,
    start_seconds: float = math.nan,
    end_seconds: float = math.nan,
    where: str = "",
) -> Window:
    """What was observed between two snapshots; after a counter reset, `later` (as PromQL does)."""
    at = f"{where}: " if where else ""
    if not _same_layout(earlier.upper_bounds, later.upper_bounds):
        raise HistogramError(
            f"{at}bucket layout changed between snapshots (le={_bounds_text(earlier)} then "
            f"le={_bounds_text(later)})"
        )
    delta = later.cumulative_counts - earlier.cumulative_counts
    if (delta < 0).any() or later.count < earlier.count:
        # A counter went down: the server restarted, so `later` is all that was seen since.
        return Window(later, start_seconds, end_seconds, (end_seconds,))
    # A scrape is not atomic across buckets, so a bucket may lag its neighbour by an observation;
    # even such dips out with a running max, as histogram_quantile does.
    delta = np.maximum.accumulate(delta)
    return Window(
        Histogram.create(
            upper_bounds=later.upper_bounds,
            cumulative_counts=delta,
            sum=later.sum - earlier.sum,
            count=float(delta[-1]),
        ),
        start_seconds,
        end_seconds,
    )


def series_window(series: HistogramSeries, *, first: int = 0, last: int = -1) -> Window:
    """Increase from snapshot `first` to `last`, summing each step so resets lose nothing before."""
    n = len(series)
    if n == 0:
        raise HistogramError("empty series: no snapshots")
    first, last = range(n)[first], range(n)[last]
    ts = series.timestamps_seconds
    if first == last:
        empty = Histogram.create(
            upper_bounds=series.upper_bounds,
            cumulative_counts=np.zeros(series.upper_bounds.size),
            sum=0.0,
        )
        return Window(empty, float(ts[first]), float(ts[last]))
    steps = series_steps(series)[first:last]
    total = sum_histograms([w.histogram for w in steps])
    resets = tuple(t for w in steps for t in w.reset_times_seconds)
    return Window(total, float(ts[first]), float(ts[last]), resets)


def series_steps(series: HistogramSeries) -> list[Window]:
    """The window between each pair of consecutive snapshots (len(series) - 1 of them)."""
    snaps = [series.snapshot(i) for i in range(len(series))]
    ts = series.timestamps_seconds
    where = series.sources if series.sources else [""] * len(series)
    steps = [
        difference(
            snaps[i],
            snaps[i + 1],
            start_seconds=float(ts[i]),
            end_seconds=float(ts[i + 1]),
            where=f"{where[i]} -> {where[i + 1]}" if where[i] else "",
        )
        for i in range(len(snaps) - 1)
    ]
    corrected = set(series.reset_times_seconds)  # resets already undone per series upstream
    return [
        dataclasses.replace(w, reset_times_seconds=(*w.reset_times_seconds, w.end_seconds))
        if w.end_seconds in corrected and not w.counter_reset
        else w
        for w in steps
    ]


def stack_series(timestamps_seconds, histograms, *, sources=()) -> HistogramSeries:
    """Stack snapshots (in time order) into a series; every snapshot must share one layout."""
    histograms = list(histograms)
    if not histograms:
        raise HistogramError("empty series: no snapshots")
    names = list(sources) or [f"snapshot {i}" for i in range(len(histograms))]
    first = histograms[0]
    for name, h in zip(names, histograms, strict=True):
        if not _same_layout(first.upper_bounds, h.upper_bounds):
            raise HistogramError(
                f"bucket layout differs between {names[0]} (le={_bounds_text(first)}) and "
                f"{name} (le={_bounds_text(h)})"
            )
    return HistogramSeries(
        timestamps_seconds=np.asarray(timestamps_seconds, dtype=float),
        upper_bounds=first.upper_bounds,
        cumulative_counts=np.array([h.cumulative_counts for h in histograms]),
        sums=np.array([h.sum for h in histograms]),
        counts=np.array([h.count for h in histograms]),
        sources=tuple(sources),
    )


def _bucket_of(h: Histogram, value_seconds: float) -> int:
    """Index of the bucket (lower, upper] that holds value_seconds."""
    return int(np.searchsorted(h.upper_bounds, value_seconds, side="left"))


def split_modes(
    histogram: Histogram, *, floor_seconds: float, slow_factor: float, reference: str = "floor"
) -> ModeSplit:
    """Share of observations near a floor vs in a slow mode at slow_factor×floor, at bucket level.

    The cut is the bucket bound between the floor's bucket and the slow mode's bucket closest (on
    a log scale) to sqrt(slow_factor)×floor; when both fall in one bucket the shares are NaN and
    `warning` says the buckets cannot resolve them. `reference` names what `floor_seconds` is in
    that warning (the decode floor, or a measured "fast mode" used in its place).
    """
    if not (floor_seconds > 0 and math.isfinite(floor_seconds)):
        raise HistogramError(f"floor_seconds must be a positive number, got {floor_seconds!r}")
    if not slow_factor > 1:
        raise HistogramError(f"slow_factor must be > 1, got {slow_factor!r}")
    h = histogram
    lower, upper = h.lower_bounds, h.upper_bounds
    slow_seconds = floor_seconds * slow_factor
    i_floor, i_slow = _bucket_of(h, floor_seconds), _bucket_of(h, slow_seconds)
    per_bucket = h.bucket_counts
    i_peak = int(np.argmax(per_bucket))
    floor_bucket = (float(lower[i_floor]), float(upper[i_floor]))
    slow_bucket = (float(lower[i_slow]), float(upper[i_slow]))
    peak_bucket = (float(lower[i_peak]), float(upper[i_peak]))
    common = dict(
        floor_seconds=float(floor_seconds),
        slow_factor=float(slow_factor),
        floor_bucket=floor_bucket,
        slow_bucket=slow_bucket,
        peak_bucket=peak_bucket,
    )
    if i_floor == i_slow:
        warning = (
            f"the {reference} {format_seconds(floor_seconds)} and a slow mode at {slow_factor:g}× "
            f"it ({format_seconds(slow_seconds)}) fall in one bucket "
            f"({format_seconds(floor_bucket[0]) if floor_bucket[0] else 0}, "
            f"{format_seconds(floor_bucket[1])}]: the "
            "histogram cannot separate them"
        )
        return ModeSplit(cut_seconds=math.nan, near_floor_share=math.nan, slow_share=math.nan,
                         warning=warning, **common)  # fmt: skip
    candidates = upper[i_floor:i_slow]
    target = math.log(floor_seconds * math.sqrt(slow_factor))
    i_cut = i_floor + int(np.argmin(np.abs(np.log(candidates) - target)))
    total = h.count
    near = h.cumulative_counts[i_cut] / total if total > 0 else math.nan
    return ModeSplit(
        cut_seconds=float(upper[i_cut]),
        near_floor_share=float(near),
        slow_share=float(1 - near) if total > 0 else math.nan,
        warning=None,
        **common,
    )


def counter_increases(values) -> np.ndarray:
    """Increase of a counter between consecutive samples; after a drop (a reset), the new value."""
    v = np.asarray(values, dtype=float)
    step = np.diff(v)
    return np.where(step < 0, v[1:], step)


def counter_rate(timestamps_seconds, values) -> np.ndarray:
    """Per-second rate of a counter between consecutive samples, resets handled as in PromQL."""
    return counter_increases(values) / np.diff(np.asarray(timestamps_seconds, dtype=float))


@dataclass(frozen=True)
class Summary:
    """What a reader of one histogram needs: count, mean, quantiles with their buckets, modes."""

    histogram: Histogram
    quantiles: tuple[QuantileEstimate, ...]
    modes: ModeSplit | None

    @property
    def count(self) -> float:
        """Number of observations."""
        return self.histogram.count

    @property
    def mean(self) -> float:
        """Mean observation."""
        return self.histogram.mean

    def quantile(self, q: float) -> QuantileEstimate:
        """The estimate for q (one of the summarised quantiles)."""
        for est in self.quantiles:
            if est.q == q:
                return est
        raise KeyError(f"quantile {q} was not summarised; have {[e.q for e in self.quantiles]}")


def summarize(
    histogram: Histogram,
    *,
    quantiles=(0.5, 0.9, 0.99),
    floor_seconds: float | None = None,
    slow_factor: float = 3.0,
) -> Summary:
    """Count, mean, Prometheus quantiles with their buckets, and the mode split given a floor."""
    modes = None
    if floor_seconds is not None:
        modes = split_modes(histogram, floor_seconds=floor_seconds, slow_factor=slow_factor)
    return Summary(histogram, tuple(histogram.locate(q) for q in quantiles), modes)


@dataclass(frozen=True)
class ModeTimeline:
    """Per scrape interval: its midpoint, observations, and the share in the slow mode."""

    midpoints_seconds: np.ndarray
    observations: np.ndarray
    slow_share: np.ndarray  # NaN where the interval is empty or the buckets cannot resolve
    warning: str | None


def slow_share_over_time(
    series: HistogramSeries, *, floor_seconds: float, slow_factor: float
) -> ModeTimeline:
    """`split_modes` of every interval between consecutive scrapes."""
    steps = series_steps(series)
    mids, counts, shares, warning = [], [], [], None
    for w in steps:
        split = split_modes(w.histogram, floor_seconds=floor_seconds, slow_factor=slow_factor)
        warning = warning or split.warning
        mids.append((w.start_seconds + w.end_seconds) / 2)
        counts.append(w.histogram.count)
        shares.append(split.slow_share if w.histogram.count > 0 else math.nan)
    return ModeTimeline(np.array(mids), np.array(counts), np.array(shares), warning)
