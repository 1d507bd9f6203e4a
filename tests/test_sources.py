"""metrics.readers and metrics.series: real vLLM pages, scrape folders, bench JSON, bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from itlkit.errors import SourceError
from itlkit.metrics.exposition import EngineState, render_vllm_metrics
from itlkit.metrics.histogram import from_samples, series_window
from itlkit.metrics.readers import (
    parse_prometheus_text,
    read_bench_json,
    read_bench_samples,
    read_paths,
    read_prometheus_text,
    read_scrape_folder,
)
from itlkit.metrics.scrape_names import timestamp_from_name, timestamp_to_name
from itlkit.metrics.series import histogram_series, scalar_series

INF = math.inf
ITL_LE = ["0.01", "0.025", "0.05", "0.075", "0.1", "+Inf"]


def itl_lines(family, counts, total, *, labels='model_name="m",engine="0"', le_first=False):
    """Exposition lines of one ITL-like histogram in vLLM's format (written by hand here)."""
    out = []
    for le, c in zip(ITL_LE, counts, strict=True):
        lab = f'le="{le}",{labels}' if le_first else f'{labels},le="{le}"'
        out.append(f"{family}_bucket{{{lab}}} {c}")
    out.append(f"{family}_count{{{labels}}} {counts[-1]}")
    out.append(f"{family}_sum{{{labels}}} {total}")
    return out


def page(*blocks):
    return "\n".join(line for block in blocks for line in block) + "\n"


HEAD = [
    "# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.",
    "# TYPE vllm:inter_token_latency_seconds histogram",
]
TPOT_HEAD = [
    "# HELP vllm:time_per_output_token_seconds Histogram of time per output token in seconds.",
    "# TYPE vllm:time_per_output_token_seconds histogram",
]


def test_itl_and_deprecated_tpot_in_one_page_are_not_double_counted():
    text = page(
        TPOT_HEAD,
        itl_lines("vllm:time_per_output_token_seconds", [5, 80, 90, 90, 100, 100], 2.2),
        HEAD,
        itl_lines("vllm:inter_token_latency_seconds", [5, 80, 90, 90, 100, 100], 2.2),
    )
    s = histogram_series(parse_prometheus_text(text), "itl")
    assert s.counts.tolist() == [100.0]
    assert s.cumulative_counts[0].tolist() == [5, 80, 90, 90, 100, 100]
    # p99: rank 99 in (0.075, 0.1] holding 10 → 0.075 + 0.025 * 9/10
    assert s.snapshot(0).quantile(0.99) == pytest.approx(0.0975)


def test_old_tpot_only_page_is_read_as_itl():
    text = page(TPOT_HEAD, itl_lines("vllm:time_per_output_token_seconds", [1, 2, 3, 4, 5, 6], 1))
    frame = parse_prometheus_text(text)
    assert set(frame["family"]) == {"vllm:time_per_output_token_seconds"}
    assert histogram_series(frame, "itl").counts.tolist() == [6.0]


def test_labels_in_any_order_and_engines_summed_by_le():
    text = page(
        HEAD,
        itl_lines("vllm:inter_token_latency_seconds", [1, 2, 3, 4, 5, 6], 0.5),
        itl_lines(
            "vllm:inter_token_latency_seconds",
            [0, 0, 10, 10, 10, 14],
            3.0,
            labels='engine="1",model_name="m"',
            le_first=True,
        ),
    )
    frame = parse_prometheus_text(text)
    assert set(frame["engine"]) == {"0", "1"} and set(frame["model_name"]) == {"m"}
    s = histogram_series(frame, "itl")
    assert s.cumulative_counts[0].tolist() == [1, 2, 13, 14, 15, 20]
    assert s.sums.tolist() == [3.5]
    only_1 = histogram_series(frame, "itl", engine=1)
    assert only_1.counts.tolist() == [14.0]


def test_both_kv_usage_gauge_names_prefer_the_new_one():
    text = page(
        [
            "# TYPE vllm:gpu_cache_usage_perc gauge",
            'vllm:gpu_cache_usage_perc{model_name="m",engine="0"} 0.25',
            "# TYPE vllm:kv_cache_usage_perc gauge",
            'vllm:kv_cache_usage_perc{model_name="m",engine="0"} 0.75',
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{model_name="m",engine="0"} 3.0',
            'vllm:num_requests_running{engine="1",model_name="m"} 4.0',
        ]
    )
    frame = parse_prometheus_text(text)
    assert scalar_series(frame, "kv_usage").tolist() == [0.75]
    assert scalar_series(frame, "running").tolist() == [7.0]
    assert scalar_series(frame, "running", how="max").tolist() == [4.0]
    old_only = parse_prometheus_text('vllm:gpu_cache_usage_perc{model_name="m",engine="0"} 0.25\n')
    assert scalar_series(old_only, "kv_usage").tolist() == [0.25]


@pytest.mark.parametrize("version", ["0.9", "0.11", "0.12"])
@pytest.mark.parametrize("sorted_labels", [False, True])
def test_written_pages_of_every_version_read_back(version, sorted_labels):
    itl = from_samples([0.016] * 90 + [0.079] * 10, upper_bounds=[0.01, 0.025, 0.05, 0.1, INF])
    state = EngineState(
        histograms={"vllm:inter_token_latency_seconds": itl},
        values={"vllm:num_preemptions_total": 4.0, "vllm:kv_cache_usage_perc": 0.5},
    )
    text = render_vllm_metrics(
        {"0": state, "1": state}, model_name="m", version=version, sorted_labels=sorted_labels
    )
    frame = parse_prometheus_text(text)
    s = histogram_series(frame, "itl")
    assert s.cumulative_counts[0].tolist() == [0, 180, 180, 200, 200]
    assert scalar_series(frame, "preemptions").tolist() == [8.0]
    assert scalar_series(frame, "kv_usage", how="mean").tolist() == [0.5]
    assert histogram_series(frame, "ttft").counts.tolist() == [0.0]


def test_timestamps_in_file_names():
    want = 1796225076.0  # 2026-12-02T15:24:36Z
    assert timestamp_from_name("metrics-20261202T152436Z.prom") == want
    assert timestamp_from_name("2026-12-02T15:24:36Z.txt") == want
    assert timestamp_from_name("2026-12-02T15-24-36.5Z.prom") == want + 0.5
    assert timestamp_from_name("x-2026-12-02T16:24:36+01:00.prom") == want
    assert timestamp_from_name("20261202T152436.prom") == want  # no zone: UTC
    assert timestamp_from_name("metrics.prom") is None
    assert timestamp_to_name(want + 0.25) == "20261202T152436.250Z"
    with pytest.raises(SourceError, match="is not a valid time"):
        timestamp_from_name("20261302T152436Z.prom")


def _write_series(folder, pages, *, start=1796225076.0, step=15.0):
    folder.mkdir(exist_ok=True)
    for i, text in enumerate(pages):
        (folder / f"metrics-{timestamp_to_name(start + i * step)}.prom").write_text(text)


def test_folder_of_scrapes_in_time_order_with_a_counter_reset(tmp_path):
    counts = [[0, 0, 0, 0, 0, 0], [2, 4, 4, 4, 4, 4], [1, 1, 1, 2, 2, 2], [3, 4, 5, 6, 6, 6]]
    pages = [
        page(HEAD, itl_lines("vllm:inter_token_latency_seconds", c, 0.012 * c[-1])) for c in counts
    ]
    _write_series(tmp_path / "s", pages)
    (tmp_path / "s" / "README.md").write_text("not a scrape")
    frame = read_scrape_folder(tmp_path / "s")
    s = histogram_series(frame, "itl")
    assert np.diff(s.timestamps_seconds).tolist() == [15.0, 15.0, 15.0]
    w = series_window(s)
    # 0→1 adds [2,4,4,4,4,4]; 1→2 resets (keep [1,1,1,2,2,2]); 2→3 adds [2,3,4,4,4,4]
    assert w.histogram.cumulative_counts.tolist() == [5, 8, 9, 10, 10, 10]
    assert w.counter_reset and w.reset_times_seconds == (s.timestamps_seconds[2],)
    assert (w.histogram.bucket_counts >= 0).all()


def test_bucket_layout_change_between_scrapes_names_the_file(tmp_path):
    a = page(HEAD, itl_lines("vllm:inter_token_latency_seconds", [1, 2, 3, 4, 5, 6], 1))
    b = a.replace('le="0.05"', 'le="0.06"')
    _write_series(tmp_path / "s", [a, b])
    frame = read_scrape_folder(tmp_path / "s")
    with pytest.raises(SourceError, match=r"metrics-20261202T152436\.000Z\.prom.*no le=0\.06"):
        histogram_series(frame, "itl")


def test_bucket_layout_differing_between_engines_is_an_error():
    text = page(
        HEAD,
        itl_lines("vllm:inter_token_latency_seconds", [1, 2, 3, 4, 5, 6], 1),
        [
            line.replace('le="0.05"', 'le="0.06"')
            for line in itl_lines(
                "vllm:inter_token_latency_seconds", [1, 2, 3, 4, 5, 6], 1, labels='engine="1"'
            )
        ],
    )
    with pytest.raises(SourceError, match="layouts differ"):
        histogram_series(parse_prometheus_text(text, source="two.prom"), "itl")


@pytest.mark.parametrize(
    ("bad", "line", "message"),
    [
        ("<html>502 Bad Gateway</html>", 4, "malformed exposition line"),
        ('vllm:num_requests_running{model_name="m" 3', 4, "malformed"),
        ('vllm:num_requests_running{model_name="m"} three', 4, "malformed exposition line"),
        ("vllm:num_requests_running{model_name=m} 3", 4, "malformed"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, bad, line, message):
    path = tmp_path / "bad.prom"
    path.write_text(
        "# HELP vllm:num_requests_running x\n# TYPE vllm:num_requests_running gauge\n"
        f'vllm:num_requests_running{{model_name="m"}} 1\n{bad}\n'
    )
    with pytest.raises(SourceError, match=rf"bad\.prom:{line}: {message}"):
        read_prometheus_text(path)


def test_histogram_without_inf_bucket(tmp_path):
    path = tmp_path / "noinf.prom"
    lines = itl_lines("vllm:inter_token_latency_seconds", [1, 2, 3, 4, 5, 5], 0.2)
    path.write_text(page(HEAD, [ln for ln in lines if "+Inf" not in ln]))
    # Prometheus' histogram_quantile answers NaN without +Inf: refused, naming the last bucket
    with pytest.raises(SourceError, match=r'noinf\.prom:\d+: .* no le="\+Inf" bucket'):
        histogram_series(read_prometheus_text(path), "itl")


def test_non_monotonic_counts(tmp_path):
    path = tmp_path / "nonmono.prom"
    path.write_text(
        page(HEAD, itl_lines("vllm:inter_token_latency_seconds", [5, 3, 6, 6, 6, 6], 1))
    )
    with pytest.raises(SourceError, match=r"nonmono\.prom: .*not monotonic: le=0\.01 has 5"):
        histogram_series(read_prometheus_text(path), "itl")


def test_nan_value_names_file(tmp_path):
    path = tmp_path / "nan.prom"
    path.write_text(
        page(HEAD, itl_lines("vllm:inter_token_latency_seconds", [1, "NaN", 3, 3, 3, 3], 1))
    )
    with pytest.raises(SourceError, match=r"nan\.prom: vllm:inter_token_latency_seconds.* is NaN"):
        histogram_series(read_prometheus_text(path), "itl")


def test_empty_histogram_reads_with_nan_quantiles():
    text = page(HEAD, itl_lines("vllm:inter_token_latency_seconds", [0] * 6, 0))
    h = histogram_series(parse_prometheus_text(text), "itl").snapshot(0)
    assert h.count == 0 and math.isnan(h.quantile(0.99)) and math.isnan(h.mean)


def test_zero_byte_file_and_missing_metric(tmp_path):
    empty = tmp_path / "empty.prom"
    empty.write_bytes(b"")
    with pytest.raises(SourceError, match=r"empty\.prom: empty file \(0 bytes\)"):
        read_prometheus_text(empty)
    other = tmp_path / "other.prom"
    other.write_text("# TYPE up gauge\nup 1\n")
    with pytest.raises(SourceError, match="no vllm:inter_token_latency_seconds or vllm:time_per"):
        histogram_series(read_prometheus_text(other), "itl")


def test_folder_errors(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(SourceError, match="no scrape files"):
        read_scrape_folder(tmp_path / "d")
    (tmp_path / "d" / "scrape.prom").write_text("up 1\n")
    with pytest.raises(SourceError, match=r"scrape\.prom: no ISO 8601 timestamp"):
        read_scrape_folder(tmp_path / "d")
    with pytest.raises(SourceError, match="no such file or folder"):
        read_paths([tmp_path / "missing.prom"])


def _bench(tmp_path, doc):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(doc))
    return path


def test_bench_json_exact_samples_and_binning(tmp_path):
    doc = {
        "ttfts": [0.2, 0.0, 0.03],
        "itls": [[0.01, 0.02, 0.08], [], [0.011, 2.0]],
        "errors": ["", "timeout", ""],
        "input_lens": [10, 10, 10],
    }
    samples = read_bench_samples(_bench(tmp_path, doc))
    assert samples.ttft_seconds.tolist() == [0.2, 0.03]
    assert samples.itl_seconds.tolist() == [0.01, 0.02, 0.08, 0.011, 2.0]
    frame = read_bench_json(_bench(tmp_path, doc))
    itl = histogram_series(frame, "itl").snapshot(0)
    le = dict(zip(itl.upper_bounds.tolist(), itl.cumulative_counts.tolist(), strict=True))
    # vLLM ITL buckets: 0.01 holds 0.01; 0.025 adds 0.02 and 0.011; 0.1 adds 0.08; 2.5 adds 2.0
    assert (le[0.01], le[0.025], le[0.075], le[0.1], le[2.5], le[INF]) == (1, 3, 3, 4, 5, 5)
    assert itl.sum == pytest.approx(2.121)
    ttft = histogram_series(frame, "ttft").snapshot(0)
    assert ttft.count == 2 and ttft.sum == pytest.approx(0.23)
    custom = read_bench_json(_bench(tmp_path, doc), itl_upper_bounds=[0.05, 1.0])
    assert histogram_series(custom, "itl").cumulative_counts[0].tolist() == [3, 4, 5]


def test_bench_json_errors(tmp_path):
    with pytest.raises(SourceError, match="summary-only bench result.*--save-detailed"):
        read_bench_samples(_bench(tmp_path, {"mean_itl_ms": 3.0}))
    with pytest.raises(SourceError, match="differ in length"):
        read_bench_samples(_bench(tmp_path, {"ttfts": [0.1], "itls": [], "errors": [""]}))
    with pytest.raises(SourceError, match=r"itls\[0\]\[0\] is -1.0; it must be a finite number"):
        read_bench_samples(_bench(tmp_path, {"ttfts": [0.1], "itls": [[-1.0]]}))
    bad = tmp_path / "broken.json"
    bad.write_text('{"ttfts": [0.1,\n')
    with pytest.raises(SourceError, match=r"broken\.json:2: not valid JSON"):
        read_bench_samples(bad)


def test_read_paths_mixes_files_and_folders(tmp_path):
    a = page(HEAD, itl_lines("vllm:inter_token_latency_seconds", [1, 2, 3, 4, 5, 6], 1))
    b = page(HEAD, itl_lines("vllm:inter_token_latency_seconds", [2, 4, 6, 8, 10, 12], 2))
    (tmp_path / "x-20261202T000000Z.prom").write_text(a)
    _write_series(tmp_path / "later", [b], start=1796169600.0 + 60)
    frame = read_paths([tmp_path / "later", tmp_path / "x-20261202T000000Z.prom"])
    s = histogram_series(frame, "itl")
    assert s.counts.tolist() == [6.0, 12.0]  # ordered by time, not by argument order


# --- property test on the parser path -----------------------------------------------------

label_values = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    bounds=st.lists(st.floats(1e-4, 1e4), min_size=1, max_size=8, unique=True),
    increments=st.lists(st.integers(0, 10**9), min_size=9, max_size=9),
    model=label_values,
    engine=st.integers(0, 7),
    order=st.permutations(["model_name", "engine", "le"]),
    where=st.floats(0, 1),
)
def test_parser_reads_back_any_histogram_exactly(bounds, increments, model, engine, order, where):
    bounds = sorted(bounds)
    cumulative = np.cumsum(increments[: len(bounds) + 1]).tolist()
    # A _sum the buckets allow: each observation between its bucket's bounds.
    per_bucket = np.asarray(increments[: len(bounds) + 1], dtype=float)
    least = float(per_bucket @ np.array([0.0, *bounds]))
    most = float(per_bucket[:-1] @ np.array(bounds)) if per_bucket[-1] == 0 else least + 1e9
    total = least + where * (most - least)
    values = {"model_name": _escape(model), "engine": str(engine)}
    lines = ["# TYPE vllm:inter_token_latency_seconds histogram"]
    for le, c in zip([*[repr(b) for b in bounds], "+Inf"], cumulative, strict=True):
        labels = ",".join(f'{k}="{values[k] if k != "le" else le}"' for k in order)
        lines.append(f"vllm:inter_token_latency_seconds_bucket{{{labels}}} {c}")
    plain = ",".join(f'{k}="{values[k]}"' for k in order if k != "le")
    lines.append(f"vllm:inter_token_latency_seconds_count{{{plain}}} {cumulative[-1]}")
    lines.append(f"vllm:inter_token_latency_seconds_sum{{{plain}}} {total!r}")
    frame = parse_prometheus_text("\n".join(lines) + "\n")
    assert set(frame["model_name"]) == {model}
    s = histogram_series(frame, "itl")
    assert s.upper_bounds.tolist() == [*bounds, INF]
    assert s.cumulative_counts[0].tolist() == cumulative
    assert s.sums[0] == total


def test_written_pages_are_valid_exposition_throughout():
    # Every line, not only the families itlkit reads, must parse with prometheus_client.
    text = render_vllm_metrics(
        {"0": EngineState(), "1": EngineState()}, model_name="m", info_families=True
    )
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["vllm:cache_config_info"].samples[1].labels["engine"] == "1"
    assert len(families["vllm:engine_sleep_state"].samples) == 6
    assert families["vllm:inter_token_latency_seconds"].type == "histogram"
    assert families["vllm:time_per_output_token_seconds"].type == "histogram"
    assert families["vllm:num_preemptions"].type == "counter"  # exposed as ..._total
    assert "vllm:request_success" in families and "vllm:iteration_tokens_total" in families
    buckets = [s for s in families["vllm:inter_token_latency_seconds"].samples if "le" in s.labels]
    assert [s.labels["le"] for s in buckets[:3]] == ["0.01", "0.025", "0.05"]
    assert buckets[19].labels["le"] == "+Inf" and len(buckets) == 40  # two engines


def test_folder_read_in_two_processes_matches_one(tmp_path):
    pages = [
        page(
            HEAD,
            itl_lines(
                "vllm:inter_token_latency_seconds", [i, 2 * i, 3 * i, 3 * i, 4 * i, 5 * i], i
            ),
        )
        for i in range(6)
    ]
    _write_series(tmp_path / "s", pages)
    one = histogram_series(read_scrape_folder(tmp_path / "s"), "itl")
    two = histogram_series(read_scrape_folder(tmp_path / "s", workers=2), "itl")
    assert two.cumulative_counts.tolist() == one.cumulative_counts.tolist()
    assert two.timestamps_seconds.tolist() == one.timestamps_seconds.tolist()
    assert one.counts.tolist() == [0, 5, 10, 15, 20, 25]
