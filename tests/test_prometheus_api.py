"""itlkit.metrics.prometheus_api against a real Prometheus server over a backfilled TSDB.

The test writes an OpenMetrics file of three vLLM servers (ITL only, ITL plus the deprecated
TPOT, TPOT only), builds blocks with `promtool tsdb create-blocks-from openmetrics`, starts
`prometheus` on 127.0.0.1 on a free port and queries it. Expected values are computed by hand
from the generated counters. Without the binaries the tests skip, unless CI=true.
"""

from __future__ import annotations

import math
import os
import shutil
import socket
import time

import numpy as np
import pytest
from _prometheus_server import backfilled_prometheus

from itlkit.errors import PrometheusError
from itlkit.metrics.histogram import quantile
from itlkit.metrics.prometheus_api import (
    bucket_rate_query,
    fetch_bucket_rates,
    fetch_vllm_summary,
    quantile_query,
    query_range,
)

pytestmark = pytest.mark.prometheus

STEP_SECONDS = 15
POINTS = 241  # one hour of 15 s scrapes
LE = ["0.01", "0.025", "0.05", "0.075", "0.1", "+Inf"]
# Per scrape: 90 ITLs of 16 ms (bucket 10-25 ms) and 10 of 79 ms (bucket 75-100 ms).
ITL_PER_SCRAPE = [0, 90, 90, 90, 100, 100]
ITL_SUM_PER_SCRAPE = 90 * 0.016 + 10 * 0.079
TTFT_PER_SCRAPE = 3
PREEMPTIONS_PER_SCRAPE = 3
RUNNING = 42


def _binaries():
    found = shutil.which("prometheus"), shutil.which("promtool")
    if None in found:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("CI=true but the prometheus/promtool binaries are missing (apt prometheus)")
        pytest.skip("prometheus and promtool not installed (Debian: apt-get install prometheus)")
    return found


def _openmetrics(start: int) -> str:
    """Families declared once; each series' samples together, in time order; `# EOF` last."""
    times = [start + i * STEP_SECONDS for i in range(POINTS)]

    def series(name, per_scrape, labels):
        return [f"{name}{{{labels}}} {i * per_scrape!r} {t}" for i, t in enumerate(times)]

    itl = {
        "vllm:inter_token_latency_seconds": ("new", "both"),
        "vllm:time_per_output_token_seconds": ("both", "old"),
    }
    lines = []
    for family, models in itl.items():
        lines.append(f"# TYPE {family} histogram")
        for model in models:
            base = f'model_name="{model}",engine="0"'
            for le, per in zip(LE, ITL_PER_SCRAPE, strict=True):
                lines += series(f"{family}_bucket", per, f'{base},le="{le}"')
            lines += series(f"{family}_count", 100, base)
            lines += series(f"{family}_sum", ITL_SUM_PER_SCRAPE, base)
    models = [f'model_name="{m}",engine="0"' for m in ("new", "both", "old")]
    lines.append("# TYPE vllm:time_to_first_token_seconds histogram")
    for base in models:
        for le in ("0.1", "+Inf"):
            lines += series(
                "vllm:time_to_first_token_seconds_bucket", TTFT_PER_SCRAPE, f'{base},le="{le}"'
            )
        lines += series("vllm:time_to_first_token_seconds_count", TTFT_PER_SCRAPE, base)
        lines += series("vllm:time_to_first_token_seconds_sum", 0.15, base)
    lines.append("# TYPE vllm:num_preemptions counter")
    for base in models:
        lines += series("vllm:num_preemptions_total", PREEMPTIONS_PER_SCRAPE, base)
    lines.append("# TYPE vllm:num_requests_running gauge")
    for base in models:
        lines += [f"vllm:num_requests_running{{{base}}} {RUNNING} {t}" for t in times]
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    prom, promtool = _binaries()
    root = tmp_path_factory.mktemp("prom")
    start = (int(time.time()) // 3600 - 4) * 3600  # a whole hour, four hours ago
    with backfilled_prometheus(
        root, _openmetrics(start), prometheus=prom, promtool=promtool
    ) as url:
        yield url, start


def _span(start):
    # Stay 5 minutes inside the data so every rate window is full.
    return dict(start_seconds=start + 300, end_seconds=start + 3300, step_seconds=60)


HAND_P50 = 0.01 + 0.015 * 50 / 90  # rank 50 of the 90 in (10, 25] ms
HAND_P90 = 0.025  # rank 90 is exactly the 10-25 ms bucket's cumulative count
HAND_P99 = 0.075 + 0.025 * 9 / 10  # rank 99: the 9th of 10 in (75, 100] ms
HAND_MEAN = ITL_SUM_PER_SCRAPE / 100


@pytest.mark.parametrize("model", ["new", "both", "old"])
def test_grafana_queries_give_the_hand_computed_numbers(prometheus, model):
    url, start = prometheus
    summary = fetch_vllm_summary(url, model_name=model, **_span(start))
    assert len(summary) == 51
    assert summary["itl_p50_seconds"].to_numpy() == pytest.approx(HAND_P50, rel=1e-6)
    assert summary["itl_p90_seconds"].to_numpy() == pytest.approx(HAND_P90, rel=1e-6)
    assert summary["itl_p99_seconds"].to_numpy() == pytest.approx(HAND_P99, rel=1e-6)
    assert summary["itl_mean_seconds"].to_numpy() == pytest.approx(HAND_MEAN, rel=1e-6)
    assert summary["ttft_count_per_second"].to_numpy() == pytest.approx(3 / 15, rel=1e-6)
    assert summary["preemptions_per_second"].to_numpy() == pytest.approx(3 / 15, rel=1e-6)
    assert summary["running_requests"].to_numpy() == pytest.approx(RUNNING)


@pytest.mark.parametrize("model", ["new", "both", "old"])
def test_bucket_rates_not_double_counted_and_quantiles_agree(prometheus, model):
    url, start = prometheus
    series = fetch_bucket_rates(url, "itl", model_name=model, **_span(start))
    assert series.upper_bounds.tolist() == [0.01, 0.025, 0.05, 0.075, 0.1, math.inf]
    # 100 ITLs per 15 s: 6.67/s, not 13.3/s where both names are present
    assert series.cumulative_counts[:, -1] == pytest.approx(100 / 15, rel=1e-6)
    assert series.counts == pytest.approx(100 / 15, rel=1e-6)
    p99 = query_range(url, quantile_query(0.99, model_name=model), **_span(start))
    ours = [quantile(0.99, series.upper_bounds, row) for row in series.cumulative_counts]
    assert np.asarray(ours) == pytest.approx(p99["value"].to_numpy(), rel=1e-6)


def test_queries_are_the_grafana_ones():
    # vllm-metrics spec §6.1: the TTFT and ITL panels of vLLM's Grafana dashboard
    assert bucket_rate_query("ttft", model_name="m", rate_window="$__rate_interval") == (
        "sum by(le) (rate(vllm:time_to_first_token_seconds_bucket"
        '{model_name="m"}[$__rate_interval]))'
    )
    assert quantile_query(0.99, model_name="m") == (
        "histogram_quantile(0.99, "
        '(sum by(le) (rate(vllm:inter_token_latency_seconds_bucket{model_name="m"}[1m])))'
        ' or (sum by(le) (rate(vllm:time_per_output_token_seconds_bucket{model_name="m"}[1m]))))'
    )
    with pytest.raises(PrometheusError, match="bad rate window"):
        bucket_rate_query("itl", rate_window="5 minutes")


def test_errors(prometheus):
    url, start = prometheus
    with pytest.raises(PrometheusError, match=r"query rejected \(HTTP 400\)"):
        query_range(url, "sum(", **_span(start))
    with pytest.raises(PrometheusError, match="no vllm:inter_token_latency_seconds"):
        fetch_bucket_rates(url, "itl", model_name="nobody", **_span(start))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with pytest.raises(PrometheusError, match=f"nothing is listening at 127.0.0.1:{closed} \\("):
        query_range(f"http://127.0.0.1:{closed}", "up", timeout_seconds=2, **_span(start))
