"""The ITL histogram's clusters (issue 11, item 2), on bucket counts written out by hand from the
real pages in data/real-pages (each item's provenance.md has the same table)."""

import math

import numpy as np
import pytest

from itlkit.diagnosis.fingerprint import VALLEY_RATIO, find_clusters
from itlkit.metrics.histogram import Histogram

ITL_BOUNDS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, math.inf]


def _page(per_bucket, sum_seconds):
    per_bucket = list(per_bucket) + [0] * (len(ITL_BOUNDS) - len(per_bucket))
    return Histogram.create(
        upper_bounds=np.array(ITL_BOUNDS), cumulative_counts=np.cumsum(per_bucket),
        sum=sum_seconds,
    )  # fmt: skip


def test_a_cluster_behind_a_thinner_bucket_is_separate():
    # er0080 opt-125m: 155 912 <= 10 ms, 2 069 at 10-25 ms (138/ms), 6 648 at 25-50 ms (266/ms):
    # 138 < 0.7 x 266, so 25-50 ms is its own cluster; the thin bucket is the main one's tail.
    main, slow = find_clusters(_page([155912, 2069, 6648], 998.1225105317717))
    assert (main.observations, slow.observations) == (155912 + 2069, 6648)
    assert slow.share == pytest.approx(0.0404, abs=5e-5)
    assert slow.mean_seconds == pytest.approx(0.0375)  # its bucket's midpoint
    assert main.mean_seconds == pytest.approx((998.1225105317717 - 6648 * 0.0375) / 157981)
    assert not slow.behind_empty_bucket


def test_a_few_observations_behind_an_empty_bucket_are_a_cluster():
    # kubeai: 2 519 at 25-50 ms, nothing at 50-75 ms, 18 at 75-100 ms (0.71 %).
    main, slow = find_clusters(_page([0, 0, 2519, 0, 18], 98.351))
    assert (main.lower_seconds, main.upper_seconds) == (0.025, 0.05)
    assert slow.observations == 18 and slow.behind_empty_bucket
    assert slow.share == pytest.approx(18 / 2537)
    assert main.mean_seconds == pytest.approx((98.351 - 18 * 0.0875) / 2519)


def test_a_falling_tail_is_one_cluster():
    # armandos: 1 731 at 10-25 ms, 2 at 25-50 ms: a density that only falls has no second mode.
    (only,) = find_clusters(_page([0, 1731, 2], 41.112))
    assert only.observations == 1733 and only.share == 1.0


def test_a_shallow_dip_does_not_split():
    # 100 / 15 ms = 6.7/ms, then 140 / 25 ms = 5.6/ms (0.84 of the smaller peak's 6.7/ms), then
    # 180 / 25 ms = 7.2/ms: a dip to 0.84 > VALLEY_RATIO is noise-sized, one cluster.
    assert VALLEY_RATIO < 140 / 25 / (100 / 15)
    (only,) = find_clusters(_page([0, 100, 140, 180], 30.0))
    assert only.observations == 420


def test_an_open_ended_slow_cluster_leaves_the_main_mean_to_its_buckets():
    # francetravail: a slow cluster holding +Inf hides any amount of time, so the _sum cannot
    # give the main cluster's mean; its bucket midpoints do.
    counts = [
        0,
        2047565,
        886264,
        70485,
        26112,
        1831,
        905,
        2767,
        2228,
        1611,
        3140,
        2421,
        9154,
        18613,
    ]
    main, slow = find_clusters(_page(counts, 202693.24))
    assert (slow.lower_seconds, slow.upper_seconds) == (0.2, math.inf)  # 0.15-0.2 is the valley
    assert slow.observations == sum(counts[7:])
    mids = [0.0175, 0.0375, 0.0625, 0.0875, 0.125, 0.175]
    assert main.mean_seconds == pytest.approx(np.dot(mids, counts[1:7]) / sum(counts[1:7]))
