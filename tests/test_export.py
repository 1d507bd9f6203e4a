"""Simulator exports read back the way a real vLLM scrape would be: through itlkit.metrics.readers,
prometheus_client's parsers and promtool. The bar: the same numbers as the run's own samples."""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from itlkit.errors import ConfigError
from itlkit.metrics.histogram import from_samples
from itlkit.metrics.readers import read_prometheus_text, read_scrape_folder
from itlkit.metrics.scrape_names import timestamp_from_name
from itlkit.metrics.series import histogram_series, scalar_series
from itlkit.metrics.vllm_metrics import ITL_BUCKETS_SECONDS, TTFT_BUCKETS_SECONDS
from itlkit.physics.roofline import Deployment
from itlkit.sim.export import (
    DEFAULT_START_UNIX_SECONDS,
    export_openmetrics,
    export_prometheus_scrapes,
    render_openmetrics,
    scrape_series,
    scrape_times,
)
from itlkit.sim.scheduler import SchedulerConfig, simulate_deployment
from itlkit.sim.workload import make_workload, synthetic_workload

MAIN_FAMILIES = (
    "vllm:inter_token_latency_seconds",
    "vllm:time_to_first_token_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:iteration_tokens_total",
)


@pytest.fixture(scope="module")
def run():
    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    w = synthetic_workload(
        duration_seconds=90, rate_per_second=4, prompt_tokens=4096, output_tokens=256, seed=5
    )
    config = SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=128)
    return simulate_deployment(w, deployment=dep, config=config, until_seconds=90)


@pytest.fixture(scope="module")
def scrapes(run, tmp_path_factory):
    folder = tmp_path_factory.mktemp("scrapes")
    paths = export_prometheus_scrapes(run, folder, interval_seconds=15, model_name="m")
    return folder, paths


def test_scrape_files_are_named_by_their_utc_time(run, scrapes):
    _, paths = scrapes
    times = scrape_times(run, interval_seconds=15)
    # 0, 15, ..., 90 s, and 105 s: the run's last step ends after 90 s (it started before)
    assert run.end_seconds > 90
    assert len(paths) == len(times) == 8
    assert paths[0].name == "metrics-20261202T150000.000Z.prom"
    for path, t in zip(paths, times, strict=True):
        assert timestamp_from_name(path.name) == DEFAULT_START_UNIX_SECONDS + t


def test_read_back_itl_equals_the_samples_binned_directly(run, scrapes):
    folder, _ = scrapes
    frame = read_scrape_folder(folder)
    series = histogram_series(frame, "itl")
    times = scrape_times(run, interval_seconds=15)
    np.testing.assert_array_equal(series.timestamps_seconds, DEFAULT_START_UNIX_SECONDS + times)
    for k, t in enumerate(times):
        values, weights = run.itl_weighted(until_seconds=t)
        direct = from_samples(values, weights=weights, upper_bounds=ITL_BUCKETS_SECONDS)
        read = series.snapshot(k)
        np.testing.assert_array_equal(read.upper_bounds, direct.upper_bounds)
        np.testing.assert_array_equal(read.cumulative_counts, direct.cumulative_counts)
        assert read.sum == pytest.approx(direct.sum, rel=1e-12)
        for q in (0.5, 0.9, 0.99):  # NaN for the empty scrape at t = 0, as in Prometheus
            assert read.quantile(q) == pytest.approx(direct.quantile(q), rel=1e-12, nan_ok=True)
    assert series.counts[-1] > 50_000  # a real amount of traffic went through


def test_the_last_scrape_holds_every_observation_of_the_run(run, scrapes, tmp_path):
    # the simulation's own count (every step's ITL observations) against what a reader sees
    values, weights = run.itl_weighted(until_seconds=math.inf)
    for read in (
        histogram_series(read_scrape_folder(scrapes[0]), "itl"),
        histogram_series(read_prometheus_text(export_openmetrics(run, tmp_path / "run.om")), "itl"),
    ):
        assert read.counts[-1] == weights.sum() == run.summary().itl_observations
        assert read.sums[-1] == pytest.approx(np.dot(values, weights), rel=1e-12)
    # the grid of a monitored incident stops at the last scrape within the run
    assert scrape_times(run, interval_seconds=15, cover_end=False)[-1] == 90


def test_read_back_ttft_and_counters(run, scrapes):
    folder, _ = scrapes
    frame = read_scrape_folder(folder)
    end = scrape_times(run, interval_seconds=15)[-1]
    ttft = histogram_series(frame, "ttft").snapshot(-1)
    got = run.first_token_seconds <= end
    samples = run.first_token_seconds[got] - run.workload.arrival_seconds[got]
    direct = from_samples(samples, upper_bounds=TTFT_BUCKETS_SECONDS)
    np.testing.assert_array_equal(ttft.cumulative_counts, direct.cumulative_counts)
    ended = run.step_end_seconds <= end
    generation = scalar_series(frame, "generation_tokens")
    assert generation.iloc[-1] == run.step_generation_tokens[ended].sum()
    prompt = scalar_series(frame, "prompt_tokens")
    # vLLM adds a request's whole prompt when its prefill completes.
    assert prompt.iloc[-1] == 4096 * np.sum(run.first_token_seconds <= end)
    running = scalar_series(frame, "running")
    assert running.max() > 10 and (running.to_numpy() == np.round(running.to_numpy())).all()
    usage = scalar_series(frame, "kv_usage")
    assert ((usage >= 0) & (usage <= 1)).all()


def test_page_format_matches_vllm_and_prometheus_client(scrapes):
    _, paths = scrapes
    text = paths[-1].read_text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    for name in MAIN_FAMILIES:
        assert name in families, name
    for name in ("vllm:inter_token_latency_seconds", "vllm:num_preemptions_total"):
        assert f"# HELP {name} " in text and f"# TYPE {name} " in text
    assert '{model_name="m",engine="0",le="0.01"}' in text
    assert 'le="1.0"' in text and 'le="+Inf"' in text
    itl = families["vllm:inter_token_latency_seconds"]
    bounds = [s.labels["le"] for s in itl.samples if s.name.endswith("_bucket")]
    assert bounds == [
        "0.01", "0.025", "0.05", "0.075", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.75",
        "1.0", "2.5", "5.0", "7.5", "10.0", "20.0", "40.0", "80.0", "+Inf",
    ]  # fmt: skip


def test_preemptions_reach_the_counter(tmp_path):
    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    w = make_workload(arrival_seconds=np.zeros(200), prompt_tokens=2000, output_tokens=2000)
    r = simulate_deployment(w, deployment=dep)
    assert r.preemptions > 0
    export_prometheus_scrapes(r, tmp_path, interval_seconds=10)
    counter = scalar_series(read_scrape_folder(tmp_path), "preemptions")
    ended = r.step_start_seconds <= scrape_times(r, interval_seconds=10)[-1]
    assert counter.iloc[-1] == r.step_preemptions[ended].sum() > 0
    assert np.all(np.diff(counter.to_numpy()) >= 0)


def _points_at(text: str, stamp: str) -> str:
    """The metadata lines and every sample taken at one timestamp, as an OpenMetrics page."""
    keep = [
        line for line in text.splitlines() if line.startswith("#") or line.endswith(f" {stamp}")
    ]
    return "\n".join(keep) + "\n"


def test_openmetrics_parses_with_timestamps(run):
    text = render_openmetrics(run, interval_seconds=30, model_name="m")
    assert text.endswith("# EOF\n")
    times = np.array([0, 30, 60, 90.0])
    series = scrape_series(run, times_seconds=times)
    itl = series.histograms["vllm:inter_token_latency_seconds"]
    for k, t in enumerate(times):
        # prometheus_client's OpenMetrics parser rejects several histogram points per series
        # (a parser limitation; promtool accepts them, see the next test), so parse per time.
        stamp = f"{DEFAULT_START_UNIX_SECONDS + t:.3f}"
        families = {f.name: f for f in openmetrics_families(_points_at(text, stamp))}
        assert set(MAIN_FAMILIES) <= set(families)
        for family in families.values():
            assert {float(s.timestamp) for s in family.samples} == {float(stamp)}
        count = next(
            s for s in families["vllm:inter_token_latency_seconds"].samples
            if s.name.endswith("_count")
        )  # fmt: skip
        assert count.value == itl[k].count
        assert count.labels == {"model_name": "m", "engine": "0"}


def test_openmetrics_backfills_with_promtool(run, tmp_path, promtool_binary):
    path = export_openmetrics(run, tmp_path / "run.om", interval_seconds=15)
    done = subprocess.run(
        [str(promtool_binary), "tsdb", "create-blocks-from", "openmetrics", str(path),
         str(tmp_path / "tsdb")],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "tsdb").iterdir())


def test_bad_interval_is_a_clear_error(run, tmp_path):
    with pytest.raises(ConfigError, match="interval"):
        export_prometheus_scrapes(run, tmp_path, interval_seconds=0)


def test_older_page_layouts_read_back_without_double_counting(run, tmp_path):
    """vLLM 0.11 exposes ITL twice (with the deprecated TPOT name); 0.9 only as TPOT."""
    end = scrape_times(run, interval_seconds=45)[-1]
    values, weights = run.itl_weighted(until_seconds=end)
    direct = from_samples(values, weights=weights, upper_bounds=ITL_BUCKETS_SECONDS)
    for version in ("0.9", "0.11"):
        folder = tmp_path / version
        export_prometheus_scrapes(run, folder, interval_seconds=45, version=version)
        frame = read_scrape_folder(folder)
        read = histogram_series(frame, "itl").snapshot(-1)
        np.testing.assert_array_equal(read.cumulative_counts, direct.cumulative_counts)


def test_a_run_with_no_traffic_exports_zeros(tmp_path):
    w = make_workload(arrival_seconds=[], prompt_tokens=[], output_tokens=[])
    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    r = simulate_deployment(w, deployment=dep, until_seconds=30)
    export_prometheus_scrapes(r, tmp_path, interval_seconds=15)
    frame = read_scrape_folder(tmp_path)
    assert histogram_series(frame, "itl").counts.tolist() == [0, 0, 0]
    assert scalar_series(frame, "running").tolist() == [0, 0, 0]
    assert render_openmetrics(r).endswith("# EOF\n")


def test_exported_histograms_put_values_on_a_bound_into_that_le_bucket():
    """Steps of exactly 0.5 s: every ITL (0.5) and TTFT (0.5) lands in le=0.5 in the scrapes."""
    from itlkit.sim.scheduler import constant_step_function, simulate

    w = make_workload(arrival_seconds=np.zeros(2), prompt_tokens=10, output_tokens=5)
    r = simulate(w, step_function=constant_step_function(0.5), kv_capacity_tokens=100)
    last = scrape_series(r, times_seconds=[1.0, 3.0]).state(1).histograms
    for name, count in (
        ("vllm:inter_token_latency_seconds", 8),
        ("vllm:time_to_first_token_seconds", 2),
    ):
        h = last[name]
        per_bucket = dict(zip(h.upper_bounds, h.bucket_counts, strict=True))
        assert per_bucket[0.5] == count == h.count, (name, per_bucket)
    e2e = last["vllm:e2e_request_latency_seconds"]
    assert dict(zip(e2e.upper_bounds, e2e.bucket_counts, strict=True))[2.5] == 2
