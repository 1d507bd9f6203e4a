"""Workloads: arrival processes against their statistics, lengths, prefixes, replays, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from itlkit.errors import ConfigError, ItlkitError
from itlkit.sim.arrivals import bursty_profile, poisson_arrivals
from itlkit.sim.lengths import Fixed, LogNormal, Sampled, Uniform
from itlkit.sim.workload import (
    RateProfile,
    make_workload,
    profile_arrivals,
    read_vllm_bench_result,
    read_workload,
    synthetic_workload,
)


def test_poisson_arrivals_have_the_rate_and_exponential_gaps():
    rate, duration = 5.0, 4000.0
    t = poisson_arrivals(rate_per_second=rate, duration_seconds=duration, seed=1)
    expected = rate * duration
    assert abs(t.size - expected) < 4 * math.sqrt(expected)  # Poisson count, 4 sigma
    gaps = np.diff(t)
    assert gaps.mean() == pytest.approx(1 / rate, rel=0.02)
    assert gaps.std() == pytest.approx(1 / rate, rel=0.03)  # exponential: std = mean
    assert np.all(np.diff(t) >= 0) and t.min() >= 0 and t.max() < duration


def test_rate_profile_arrivals_follow_each_segment():
    profile = RateProfile((0.0, 100.0, 150.0), (2.0, 20.0, 0.0))
    t = profile_arrivals(profile=profile, duration_seconds=300, seed=3)
    first, burst, silent = (
        np.sum(t < 100),
        np.sum((t >= 100) & (t < 150)),
        np.sum(t >= 150),
    )
    assert abs(first - 200) < 4 * math.sqrt(200)
    assert abs(burst - 1000) < 4 * math.sqrt(1000)
    assert silent == 0
    assert profile.rate_at(120.0) == 20.0


def test_bursty_profile_repeats_bursts():
    p = bursty_profile(
        base_rate_per_second=1,
        burst_rate_per_second=10,
        period_seconds=60,
        burst_seconds=10,
        duration_seconds=180,
    )
    assert p.start_seconds == (0.0, 10.0, 60.0, 70.0, 120.0, 130.0)
    np.testing.assert_array_equal(p.rate_at([5, 30, 65, 125]), [10, 1, 10, 10])


def test_seed_reproduces_and_generators_are_accepted():
    a = synthetic_workload(duration_seconds=60, rate_per_second=3, seed=42)
    b = synthetic_workload(duration_seconds=60, rate_per_second=3, seed=42)
    c = synthetic_workload(duration_seconds=60, rate_per_second=3, seed=np.random.default_rng(42))
    np.testing.assert_array_equal(a.arrival_seconds, b.arrival_seconds)
    np.testing.assert_array_equal(a.arrival_seconds, c.arrival_seconds)
    d = synthetic_workload(duration_seconds=60, rate_per_second=3, seed=43)
    assert not np.array_equal(a.arrival_seconds, d.arrival_seconds)


def test_length_distributions():
    rng = np.random.default_rng(0)
    np.testing.assert_array_equal(Fixed(7).sample(rng, size=3), [7, 7, 7])
    u = Uniform(10, 20).sample(rng, size=20_000)
    assert u.min() == 10 and u.max() == 20 and u.mean() == pytest.approx(15, rel=0.01)
    ln = LogNormal(1000, 0.5).sample(rng, size=20_000)
    assert np.median(ln) == pytest.approx(1000, rel=0.03)
    assert np.log(ln).std() == pytest.approx(0.5, rel=0.03)
    assert LogNormal(1000, 2.0, max_tokens=4000).sample(rng, size=1000).max() <= 4000
    s = Sampled((3, 5, 8)).sample(rng, size=3000)
    assert set(np.unique(s)) == {3, 5, 8}


def test_shared_prefix_is_served_from_cache():
    w = synthetic_workload(
        duration_seconds=100,
        rate_per_second=5,
        prompt_tokens=Uniform(100, 3000),
        shared_prefix_tokens=1024,
        shared_prefix_fraction=0.5,
        seed=4,
    )
    cached = w.cached_prompt_tokens
    assert set(np.unique(cached[cached > 0])) <= set(range(99, 1025))
    assert np.all(cached < w.prompt_tokens)
    assert np.mean(cached > 0) == pytest.approx(0.5, abs=0.06)
    assert np.all(cached[(cached > 0) & (w.prompt_tokens > 1024)] == 1024)


def test_csv_replay(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(
        "arrival_seconds,prompt_tokens,output_tokens,cached_prompt_tokens\n"
        "1.5,100,20,0\n0.5,300,10,64\n"
    )
    w = read_workload(path)
    np.testing.assert_array_equal(w.arrival_seconds, [0.5, 1.5])  # sorted by arrival
    np.testing.assert_array_equal(w.prompt_tokens, [300, 100])
    np.testing.assert_array_equal(w.cached_prompt_tokens, [64, 0])


def test_vllm_bench_result_replay_with_start_times(tmp_path):
    path = tmp_path / "bench.json"
    path.write_text(
        json.dumps(
            {
                "request_rate": 2.0,
                "input_lens": [1000, 2000, 3000],
                "output_lens": [100, 0, 300],
                "start_times": [10.0, 10.4, 11.0],
                "errors": ["", "timeout", ""],
                "ttfts": [0.1, 0.0, 0.2],
                "itls": [[0.02] * 99, [], [0.02] * 299],
            }
        )
    )
    w = read_vllm_bench_result(path)
    np.testing.assert_array_equal(w.arrival_seconds, [0.0, 1.0])
    np.testing.assert_array_equal(w.prompt_tokens, [1000, 3000])
    np.testing.assert_array_equal(w.output_tokens, [100, 300])


def test_vllm_bench_result_without_start_times_redraws_poisson(tmp_path):
    path = tmp_path / "bench.json"
    n = 4000
    path.write_text(
        json.dumps({"request_rate": 4.0, "input_lens": [500] * n, "output_lens": [50] * n})
    )
    w = read_vllm_bench_result(path, seed=1)
    assert w.num_requests == n
    assert np.diff(w.arrival_seconds).mean() == pytest.approx(0.25, rel=0.05)
    path.write_text(json.dumps({"request_rate": "inf", "input_lens": [5], "output_lens": [5]}))
    assert read_vllm_bench_result(path).arrival_seconds.tolist() == [0.0]


@pytest.mark.parametrize(
    ("text", "suffix", "message"),
    [
        ("arrival_seconds,prompt_tokens\n1,2\n", ".csv", "lacks output_tokens"),
        (
            "arrival_seconds,prompt_tokens,output_tokens\n1,x,3\n",
            ".csv",
            r":2: prompt_tokens is 'x'; it must be a whole number of tokens from 1 to 100,000,000",
        ),
        (
            "arrival_seconds,prompt_tokens,output_tokens\n1,5\n",
            ".csv",
            r":2: the row has fewer values than the header has columns \(no output_tokens\)",
        ),
        (
            "arrival_seconds,prompt_tokens,output_tokens\n1,5,5\n2,5" + "9" * 200_000 + ",5\n",
            ".csv",
            ":3: a value longer than 131,072 characters",
        ),
        (
            "arrival_seconds,prompt_tokens,output_tokens\n1,5,5\n2,5\x0012,5\n",
            ".csv",
            r":3: binary data \(a NUL byte\)",
        ),
        ("arrival_seconds,prompt_tokens,output_tokens\n1,5,5,9\n", ".csv", ":2: the row has more"),
        (
            "arrival_seconds,prompt_tokens,output_tokens\nnan,5,5\n",
            ".csv",
            ":2: arrival_seconds is",
        ),
        ("arrival_seconds,prompt_tokens,output_tokens\n1,5,1e20\n", ".csv", ":2: output_tokens is"),
        ("\ufeffarrival_seconds,prompt_tokens\n1,2\n", ".csv", r":1: the CSV header lacks output"),
        (
            "arrival_seconds,prompt_tokens,output_tokens,prefix_group\n1,5,5,-2\n",
            ".csv",
            ":2: prefix_group is '-2'; it must be a whole number",
        ),
        (
            "arrival_seconds,prompt_tokens,output_tokens\n1,0,3\n",
            ".csv",
            ":2: prompt_tokens is '0'",
        ),
        ("{not json", ".json", "not valid JSON"),
        ('{"a": 1}', ".json", "not a vllm bench serve result"),
        ('{"completed": 0, "mean_itl_ms": null}', ".json", "completed no request"),
        ('{"completed": 9, "mean_itl_ms": 20}', ".json", "summary-only bench result"),
        (
            '{"input_lens": [5, "x"], "output_lens": [5, 6]}',
            ".json",
            r"input_lens\[1\] is 'x'; a token count is a whole number",
        ),
        (
            '{"input_lens": [5], "output_lens": [5]}',
            ".json",
            "neither start_times nor request_rate",
        ),
        ("x", ".txt", ".csv or a vllm bench"),
    ],
)
def test_bad_workload_files_name_the_problem(tmp_path, text, suffix, message):
    path = tmp_path / f"w{suffix}"
    path.write_text(text)
    with pytest.raises(ItlkitError, match=message):
        read_workload(path)


def test_workload_files_in_other_encodings_are_named(tmp_path):
    head = "arrival_seconds,prompt_tokens,output_tokens\n"
    path = tmp_path / "w.csv"
    path.write_bytes((head + "1,5,5\n# café\n").encode("latin-1"))
    with pytest.raises(ConfigError, match=r"w\.csv:3: not UTF-8 text \(byte 0xe9 at offset"):
        read_workload(path)
    path.write_bytes((head + "1,5,5\n").encode("utf-16"))
    with pytest.raises(ConfigError, match=r"w\.csv: UTF-16 text; save the workload CSV file"):
        read_workload(path)
    path.write_bytes(("\ufeff" + head + "1,5,5\n").encode("utf-8"))  # Excel's BOM is fine
    assert read_workload(path).num_requests == 1
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(ConfigError, match=r"folder\.csv: is a folder, not a workload file"):
        read_workload(tmp_path / "folder.csv")
    (tmp_path / "loop.csv").symlink_to(tmp_path / "loop.csv")
    with pytest.raises(ConfigError, match=r"loop\.csv: a symbolic link that loops"):
        read_workload(tmp_path / "loop.csv")


def test_bad_arguments_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such workload file"):
        read_workload(tmp_path / "missing.csv")
    with pytest.raises(ConfigError, match="exactly one"):
        synthetic_workload(duration_seconds=10)
    with pytest.raises(ConfigError, match="rate"):
        synthetic_workload(duration_seconds=10, rate_per_second=-1)
    with pytest.raises(ConfigError, match="low <= high"):
        Uniform(5, 2).sample(np.random.default_rng(0), size=1)
    with pytest.raises(ConfigError, match="start times"):
        RateProfile((5.0,), (1.0,))
    with pytest.raises(ConfigError, match="cached prompt tokens"):
        make_workload(
            arrival_seconds=[0], prompt_tokens=10, output_tokens=1, cached_prompt_tokens=10
        )


@settings(max_examples=50, deadline=None)
@given(
    starts=st.lists(st.floats(0.5, 50), min_size=0, max_size=4, unique=True),
    rates=st.lists(st.floats(0, 20), min_size=5, max_size=5),
    seed=st.integers(0, 2**32 - 1),
)
def test_profile_arrivals_are_sorted_inside_the_window_and_skip_zero_rates(starts, rates, seed):
    knots = (0.0, *sorted(starts))
    profile = RateProfile(knots, tuple(rates[: len(knots)]))
    t = profile_arrivals(profile=profile, duration_seconds=60, seed=seed)
    assert np.all(np.diff(t) >= 0) and (t.size == 0 or (t[0] >= 0 and t[-1] <= 60))
    assert np.all(profile.rate_at(t) > 0)
