"""metrics.histogram against Prometheus' own histogram_quantile cases and hand-computed numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from itlkit.errors import HistogramError
from itlkit.metrics.histogram import (
    Histogram,
    counter_rate,
    difference,
    from_samples,
    locate_quantile,
    quantile,
    series_steps,
    series_window,
    slow_share_over_time,
    split_modes,
    stack_series,
    sum_histograms,
)

DATA = Path(__file__).parent / "data"
INF = math.inf
# vLLM's default ITL buckets (vllm/v1/metrics/buckets.py, shared spec §2.1), written out here so
# the test does not depend on the library's copy.
VLLM_ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
            10.0, 20.0, 40.0, 80.0, INF]  # fmt: skip


def _num(x):
    return {"+Inf": INF, "-Inf": -INF, "NaN": math.nan}.get(x, x) if isinstance(x, str) else x


CASES = json.loads((DATA / "prom_histogram_quantile.json").read_text())


def test_fixture_has_all_69_cases():
    assert len(CASES) == 69


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_prometheus_histogram_quantile_cases(case):
    bounds = [_num(b) for b, _ in case["buckets"]]
    counts = [c for _, c in case["buckets"]]
    got = quantile(_num(case["q"]), bounds, counts)
    want = _num(case["expected"])
    if math.isnan(want):
        assert math.isnan(got)
    elif math.isinf(want):
        assert got == want
    else:
        assert got == pytest.approx(want, rel=1e-6, abs=1e-12)


def test_q0_with_empty_first_bucket_is_nan_like_go():
    # rank 0 in bucket (0, 0.1] holding 0 observations: Go computes 0 * (0/0) = NaN.
    assert math.isnan(quantile(0.0, [0.1, 0.2, INF], [0, 5, 10]))


def test_highest_bound_not_inf_and_single_bucket_are_nan():
    assert math.isnan(quantile(0.5, [0.1, 0.2], [5, 10]))
    assert math.isnan(quantile(0.5, [INF], [10]))
    assert math.isnan(quantile(0.5, [], []))


def test_p99_of_bimodal_itl_is_interpolated_in_the_75_to_100_ms_bucket():
    # 90 ITLs at 16 ms and 10 at 79 ms: rank 99 is the 9th of 10 in (0.075, 0.1] → 0.0975 s.
    h = from_samples([0.016] * 90 + [0.079] * 10, upper_bounds=VLLM_ITL)
    est = h.locate(0.99)
    assert est.value == pytest.approx(0.0975, rel=1e-12)
    assert (est.bucket_lower, est.bucket_upper) == (0.075, 0.1)
    assert h.mean == pytest.approx((90 * 0.016 + 10 * 0.079) / 100)
    assert h.quantile(0.5) == pytest.approx(0.01 + 0.015 * 50 / 90)


def test_quantile_in_inf_bucket_reports_second_highest_bound_and_inf_bucket():
    est = locate_quantile(0.99, [0.1, 1.0, INF], [1, 2, 10])
    assert est.value == 1.0 and (est.bucket_lower, est.bucket_upper) == (1.0, INF)


def test_from_samples_puts_a_value_on_a_bound_into_that_bucket():
    h = from_samples([0.01, 0.0100001, 100.0], upper_bounds=[0.01, 0.025, INF])
    assert h.cumulative_counts.tolist() == [1, 2, 3]
    assert h.bucket_counts.tolist() == [1, 1, 1]
    assert h.sum == pytest.approx(100.0200001)
    assert h.lower_bounds.tolist() == [0.0, 0.01, 0.025]


def test_create_sorts_buckets_and_gives_non_cumulative_view():
    h = Histogram.create(upper_bounds=[INF, 0.1, 0.05], cumulative_counts=[10, 7, 3], sum=0.9)
    assert h.upper_bounds.tolist() == [0.05, 0.1, INF]
    assert h.bucket_counts.tolist() == [3, 4, 3]
    assert h.count == 10 and h.mean == pytest.approx(0.09)


@pytest.mark.parametrize(
    ("bounds", "counts", "message"),
    [
        ([0.1, 0.2], [1, 2], "no +Inf bucket"),
        ([0.1, 0.2, INF], [5, 3, 6], "not monotonic: le=0.1 has 5 but le=0.2 has 3"),
        ([0.1, 0.2, INF], [1, math.nan, 3], "NaN"),
        ([], [], "no buckets"),
        ([0.1, 0.1, INF], [1, 2, 3], "duplicate upper bound"),
        ([0.1, INF], [1, 2, 3], "2 upper bounds but 3"),
    ],
)
def test_create_rejects_bad_histograms(bounds, counts, message):
    with pytest.raises(HistogramError, match=message.replace("+", r"\+")):
        Histogram.create(upper_bounds=bounds, cumulative_counts=counts, sum=1.0, where="f.prom")


def test_create_names_where_and_rejects_nan_count_and_wrong_count():
    with pytest.raises(HistogramError, match=r"^f\.prom: histogram count is NaN"):
        Histogram.create(
            upper_bounds=[1, INF], cumulative_counts=[1, 2], sum=1.0, count=math.nan, where="f.prom"
        )
    # A NaN sum is "not known" (a page without _sum): the quantiles hold, the mean is NaN.
    unknown = Histogram.create(upper_bounds=[1, INF], cumulative_counts=[1, 2], sum=math.nan)
    assert math.isnan(unknown.mean) and unknown.quantile(0.25) == pytest.approx(0.5)
    with pytest.raises(HistogramError, match="count 5 differs"):
        Histogram.create(upper_bounds=[1, INF], cumulative_counts=[1, 2], sum=1, count=5)


def test_empty_histogram_has_nan_mean_and_quantile():
    h = Histogram.create(upper_bounds=[0.1, INF], cumulative_counts=[0, 0], sum=0.0)
    assert math.isnan(h.mean) and math.isnan(h.quantile(0.5))


def _h(counts, total_sum, bounds=(0.1, 0.2, INF)):
    return Histogram.create(upper_bounds=bounds, cumulative_counts=counts, sum=total_sum)


def test_difference_of_two_snapshots():
    w = difference(_h([2, 5, 6], 1.0), _h([4, 10, 12], 2.5), start_seconds=0, end_seconds=15)
    assert w.histogram.cumulative_counts.tolist() == [2, 5, 6]
    assert w.histogram.bucket_counts.tolist() == [2, 3, 1]
    assert w.histogram.sum == pytest.approx(1.5) and w.histogram.count == 6
    assert not w.counter_reset and w.duration_seconds == 15


def test_counter_reset_is_reported_and_never_negative():
    w = difference(_h([40, 50, 60], 9.0), _h([1, 2, 3], 0.3), start_seconds=0, end_seconds=15)
    assert w.counter_reset and w.reset_times_seconds == (15,)
    assert w.histogram.cumulative_counts.tolist() == [1, 2, 3]
    assert (w.histogram.bucket_counts >= 0).all()


def test_series_window_sums_steps_across_a_reset():
    snaps = [_h([0, 0, 0], 0), _h([2, 4, 4], 0.5), _h([1, 1, 2], 0.4), _h([3, 4, 5], 0.9)]
    series = stack_series([0, 15, 30, 45], snaps, sources=["a", "b", "c", "d"])
    w = series_window(series)
    # 0→15 adds [2,4,4]; 15→30 resets (keep [1,1,2]); 30→45 adds [2,3,3]
    assert w.histogram.cumulative_counts.tolist() == [5, 8, 9]
    assert w.histogram.sum == pytest.approx(0.5 + 0.4 + 0.5)
    assert w.reset_times_seconds == (30.0,)
    assert (w.start_seconds, w.end_seconds) == (0.0, 45.0)
    assert len(series_steps(series)) == 3
    assert series_window(series, first=1, last=1).histogram.count == 0


def test_layout_change_between_snapshots_or_label_sets_is_an_error():
    a, b = _h([1, 2, 3], 1.0), _h([1, 2, 3], 1.0, bounds=(0.1, 0.3, INF))
    with pytest.raises(HistogramError, match="layout changed"):
        difference(a, b)
    with pytest.raises(HistogramError, match=r"engine=\"1\".*cannot sum"):
        sum_histograms([a, b], names=['engine="0"', 'engine="1"'])
    with pytest.raises(HistogramError, match=r"layout differs between t0 .* and t1"):
        stack_series([0, 1], [a, b], sources=["t0", "t1"])


def test_sum_by_le_across_engines():
    s = sum_histograms([_h([1, 2, 3], 1.0), _h([0, 4, 4], 2.0)])
    assert s.cumulative_counts.tolist() == [1, 6, 7] and s.sum == 3.0 and s.count == 7


def test_split_modes_near_floor_and_slow():
    h = from_samples([0.016] * 90 + [0.079] * 10, upper_bounds=VLLM_ITL)
    m = split_modes(h, floor_seconds=0.015, slow_factor=5)
    # floor in (10, 25] ms, slow mode 75 ms in (50, 75] ms; sqrt(5)*15 ms = 33.5 ms → cut 25 ms
    assert m.floor_bucket == (0.01, 0.025) and m.slow_bucket == (0.05, 0.075)
    assert m.cut_seconds == 0.025
    assert m.near_floor_share == pytest.approx(0.9) and m.slow_share == pytest.approx(0.1)
    assert m.peak_bucket == (0.01, 0.025) and m.resolved


def test_split_modes_warns_when_floor_and_slow_mode_share_a_bucket():
    h = from_samples([0.16] * 10, upper_bounds=VLLM_ITL)
    m = split_modes(h, floor_seconds=0.16, slow_factor=1.2)
    assert not m.resolved and "(150.00 ms, 200.00 ms]" in m.warning
    assert math.isnan(m.near_floor_share)
    with pytest.raises(HistogramError, match="slow_factor"):
        split_modes(h, floor_seconds=0.01, slow_factor=1)


bucket_lists = st.lists(
    st.floats(min_value=-10, max_value=1e4, allow_nan=False), min_size=1, max_size=12, unique=True
).map(lambda xs: [*sorted(xs), INF])


@st.composite
def histograms(draw):
    bounds = draw(bucket_lists)
    per_bucket = draw(st.lists(st.integers(0, 1000), min_size=len(bounds), max_size=len(bounds)))
    return bounds, np.cumsum(per_bucket).astype(float)


@settings(max_examples=300, deadline=None)
@given(histograms(), st.floats(0, 1), st.floats(0, 1))
def test_quantile_is_monotone_in_q_and_within_its_bucket(hist, q1, q2):
    bounds, counts = hist
    lo, hi = sorted((q1, q2))
    a, b = locate_quantile(lo, bounds, counts), locate_quantile(hi, bounds, counts)
    if counts[-1] == 0:
        assert math.isnan(a.value) and math.isnan(b.value)
        return
    for est in (a, b):
        if math.isnan(est.value):  # only q=0 over an empty first bucket, as in Go
            assert est.q == 0
            continue
        finite = [x for x in bounds if x != INF]
        assert min(0.0, finite[0]) <= est.value <= finite[-1] if finite else True
        assert est.bucket_lower <= est.value <= est.bucket_upper
    if not math.isnan(a.value):
        assert a.value <= b.value + 1e-9 * max(1.0, abs(b.value))


def test_counter_rate_handles_a_reset():
    # 0 → 30 → 60 → (restart) 15 → 45 at 15 s steps: 2, 2, 1 (15 since the restart), 2 per second
    rate = counter_rate([0, 15, 30, 45, 60], [0, 30, 60, 15, 45])
    assert rate.tolist() == [2.0, 2.0, 1.0, 2.0]


def test_slow_share_over_time_per_interval():
    bounds = (0.01, 0.025, 0.05, 0.075, 0.1, INF)
    snaps = [
        Histogram.create(upper_bounds=bounds, cumulative_counts=[0] * 6, sum=0),
        Histogram.create(upper_bounds=bounds, cumulative_counts=[0, 90, 90, 90, 100, 100], sum=2),
        Histogram.create(upper_bounds=bounds, cumulative_counts=[0, 90, 90, 90, 100, 100], sum=2),
        Histogram.create(
            upper_bounds=bounds, cumulative_counts=[0, 140, 140, 140, 200, 200], sum=6
        ),
    ]
    timeline = slow_share_over_time(
        stack_series([0, 15, 30, 45], snaps), floor_seconds=0.015, slow_factor=5
    )
    assert timeline.midpoints_seconds.tolist() == [7.5, 22.5, 37.5]
    assert timeline.observations.tolist() == [100, 0, 100]
    # 10 of 100 above the 25 ms cut; an empty interval has no share; then 50 of 100
    assert timeline.slow_share[0] == pytest.approx(0.1) and math.isnan(timeline.slow_share[1])
    assert timeline.slow_share[2] == pytest.approx(0.5) and timeline.warning is None


def test_values_on_bounds_land_in_that_le_bucket_with_and_without_weights():
    """prometheus_client: `value <= le` counts, so 0.025 is in le=0.025, not le=0.05."""
    values = [0.01, 0.025, 0.025, 0.05, 0.0500001]
    plain = from_samples(values, upper_bounds=[0.01, 0.025, 0.05, INF])
    assert list(plain.bucket_counts) == [1, 2, 1, 1]
    weighted = from_samples(values, weights=[3, 1, 2, 5, 7], upper_bounds=[0.01, 0.025, 0.05, INF])
    assert list(weighted.bucket_counts) == [3, 3, 5, 7]
    assert weighted.count == 18
    assert weighted.sum == pytest.approx(3 * 0.01 + 3 * 0.025 + 5 * 0.05 + 7 * 0.0500001)
    with pytest.raises(HistogramError, match="weights"):
        from_samples(values, weights=[1, 2], upper_bounds=[0.01, INF])


def test_bounds_given_unsorted_twice_or_without_inf_make_one_sorted_layout():
    """Bounds as a user may pass them: the layout is sorted, each bound once, +Inf last."""
    h = from_samples([0.2, 0.3, 5.0], upper_bounds=[0.5, 0.1, 0.5, 1.0])
    assert list(h.upper_bounds) == [0.1, 0.5, 1.0, INF]
    assert list(h.bucket_counts) == [0, 2, 0, 1]  # 0.2 and 0.3 <= 0.5; 5.0 only in +Inf
