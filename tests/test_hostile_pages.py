"""metrics.readers and metrics.series on pages a hostile or broken world produces.

Each page is written by hand; what it must read as (or the error it must give) is stated beside
it, from the exposition format's rules and from arithmetic on the page's own numbers.
"""

from __future__ import annotations

import json
import math

import pytest
from test_sources import HEAD, itl_lines, page

from itlkit.errors import SourceError
from itlkit.metrics.histogram import series_window
from itlkit.metrics.readers import parse_prometheus_text
from itlkit.metrics.series import histogram_series

ITL = "vllm:inter_token_latency_seconds"
GOOD = page(HEAD, itl_lines(ITL, [90, 90, 90, 90, 100, 100], 90 * 0.005 + 10 * 0.08))


def _read(text, source="p.prom"):
    return histogram_series(parse_prometheus_text(text, source=source), "itl")


def test_the_good_page_reads():
    s = _read(GOOD)
    assert s.counts.tolist() == [100] and s.sums[0] == pytest.approx(1.25)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("_count{model_name=\"m\",engine=\"0\"} 100", "_count{model_name=\"m\",engine=\"0\"} +Inf",
         r"p.prom:9: .*_count is inf; a count, sum or counter must be a finite number >= 0"),
        ("_sum{model_name=\"m\",engine=\"0\"} 1.25", "_sum{model_name=\"m\",engine=\"0\"} -15",
         r"p.prom:10: .*_sum is -15"),
        ("_sum{model_name=\"m\",engine=\"0\"} 1.25", "_sum{model_name=\"m\",engine=\"0\"} -Inf",
         r"p.prom:10: .*_sum is -inf"),
        ('le="0.01"} 90', 'le="0.01"} true', r"p.prom:3: malformed"),
        ('le="0.01"} 90', 'le="0.01"} 1e999', r"p.prom:3: .*_bucket is inf"),
    ],
)  # fmt: skip
def test_impossible_values_name_file_line_and_metric(old, new, message):
    text = GOOD.replace(old, new)
    assert text != GOOD
    with pytest.raises(SourceError, match=message):
        _read(text)


@pytest.mark.parametrize(("value", "printed"), [("-3", "-3"), ("+Inf", "inf")])
def test_an_impossible_number_of_running_requests_names_its_line(value, printed):
    # A gauge may go down, but a count of requests never below 0 (the batch would read as 1)
    text = GOOD + "# TYPE vllm:num_requests_running gauge\n"
    text += f'vllm:num_requests_running{{model_name="m",engine="0"}} {value}\n'
    line = text.count("\n")
    message = rf"p.prom:{line}: vllm:num_requests_running is {printed}; a number of requests must"
    with pytest.raises(SourceError, match=message):
        parse_prometheus_text(text, source="p.prom")


def test_a_fraction_gauge_out_of_its_range_still_reads():
    # vllm:kv_cache_usage_perc above 1 is impossible but harmless to read: the diagnosis names it
    text = GOOD + "# TYPE vllm:kv_cache_usage_perc gauge\n"
    text += 'vllm:kv_cache_usage_perc{model_name="m",engine="0"} 4.2\n'
    frame = parse_prometheus_text(text, source="p.prom")
    assert frame.loc[frame["metric"] == "kv_usage", "value"].tolist() == [4.2]


def test_page_cut_inside_its_last_line_is_refused():
    # Cut inside the _sum value "1.25" -> "1.": a mean of 10 ms instead of 12.5 ms, if read.
    cut = GOOD.rstrip("\n")[:-2]
    with pytest.raises(SourceError, match=r"p.prom:10: the page ends inside this sample line"):
        _read(cut)


def test_last_line_without_newline_of_a_family_not_read_is_fine():
    _read(GOOD + 'vllm:avg_generation_throughput_toks_per_s{model_name="m"} 154.6')


OPENMETRICS = """# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{model_name="m",engine="0",le="0.01"} 10 1796225076
vllm:inter_token_latency_seconds_bucket{model_name="m",engine="0",le="0.01"} 30 1796225091
vllm:inter_token_latency_seconds_bucket{model_name="m",engine="0",le="+Inf"} 10 1796225076
vllm:inter_token_latency_seconds_bucket{model_name="m",engine="0",le="+Inf"} 30 1796225091
vllm:inter_token_latency_seconds_count{model_name="m",engine="0"} 10 1796225076
vllm:inter_token_latency_seconds_count{model_name="m",engine="0"} 30 1796225091
vllm:inter_token_latency_seconds_sum{model_name="m",engine="0"} 0.05 1796225076
vllm:inter_token_latency_seconds_sum{model_name="m",engine="0"} 0.15 1796225091
# EOF
"""


def test_openmetrics_samples_with_timestamps_are_a_time_series():
    # Two scrapes 15 s apart in one file: 10 then 30 observations, not 40 summed at one instant.
    s = _read(OPENMETRICS, source="run.om")
    assert s.timestamps_seconds.tolist() == [1796225076.0, 1796225091.0]
    assert s.counts.tolist() == [10, 30]
    assert series_window(s).histogram.count == 20


def test_text_format_timestamps_are_milliseconds():
    stamped = "\n".join(
        line + " 1796225076000" if line and not line.startswith("#") else line
        for line in GOOD.split("\n")
    )
    assert _read(stamped).timestamps_seconds.tolist() == [1796225076.0]


def test_implausible_timestamps_are_refused():
    stamped = OPENMETRICS.replace(" 1796225091\n", " 1796225091000\n")  # ms in OpenMetrics
    with pytest.raises(SourceError, match=r"run.om:3: sample timestamp .* not a Unix time"):
        _read(stamped, source="run.om")


def test_itlkits_own_openmetrics_export_reads_back_once(tmp_path, capsys):
    # Before: every timestamped sample of the file was summed as one scrape (71,480 for 30,414).
    from itlkit.cli import main

    path = tmp_path / "run.om"
    assert (
        main(["simulate", "--duration", "60", "--rate", "2", "--openmetrics-out", str(path)]) == 0
    )
    counts = [
        float(line.split()[-2])
        for line in path.read_text().splitlines()
        if line.startswith("vllm:inter_token_latency_seconds_count")
    ]
    capsys.readouterr()
    assert main(["histogram", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["count"] == counts[-1] - counts[0]  # increase from the first to the last scrape
    # scrapes every 15 s through the first at or after the run's end (its last step ends past 60)
    assert out["window"]["duration_seconds"] == 75


def test_sum_impossible_for_the_buckets_is_refused():
    # 90 observations <= 10 ms and 10 in (75, 100] ms add up to at most 0.9 + 1.0 = 1.9 s.
    text = GOOD.replace('engine="0"} 1.25', 'engine="0"} 1e308')
    with pytest.raises(
        SourceError, match=r"_sum 1e\+308 is impossible for its buckets.*0.75 and 1.9"
    ):
        _read(text)
    # ... and at least 10 x 75 ms = 0.75 s: a sum of 0.1 s cannot be either (less the slack
    # of two 100 ms observations for a scrape that caught _sum and the buckets apart).
    with pytest.raises(SourceError, match="impossible for its buckets"):
        _read(GOOD.replace('engine="0"} 1.25', 'engine="0"} 0.5'))
    assert _read(GOOD.replace('engine="0"} 1.25', 'engine="0"} 0.6')).sums[0] == 0.6  # slack


def test_counts_that_overflow_when_added_are_refused():
    big = page(
        HEAD,
        itl_lines(ITL, [1e308] * 6, 1e305, labels='model_name="m",engine="0"'),
        itl_lines(ITL, [1e308] * 6, 1e305, labels='model_name="m",engine="1"'),
    )
    with pytest.raises(SourceError, match="overflow"):
        _read(big)


NO_SUM = "\n".join(line for line in GOOD.split("\n") if "_sum" not in line)
NO_INF = "\n".join(line for line in GOOD.split("\n") if 'le="+Inf"' not in line)


def test_page_without_sum_gives_quantiles_and_no_mean():
    s = _read(NO_SUM)
    assert s.counts.tolist() == [100] and math.isnan(s.sums[0])
    assert any("no _sum samples" in note and "mean is unknown" in note for note in s.notes)
    h = s.snapshot(0)
    assert math.isnan(h.mean)
    # 90 of 100 observations <= 10 ms: the median interpolates to 50/90 of the first bucket.
    assert h.quantile(0.5) == pytest.approx(0.01 * 50 / 90)


def test_page_without_inf_bucket_is_refused_with_its_line():
    # Prometheus' histogram_quantile answers NaN without +Inf: no number, one line instead
    with pytest.raises(SourceError, match=r'p\.prom:\d+: .*no le="\+Inf" bucket.*NaN'):
        _read(NO_INF)


def test_partial_pages_in_the_cli_are_warnings_not_errors(tmp_path, capsys):
    from itlkit.cli import main

    (tmp_path / "nosum.prom").write_text(NO_SUM)
    assert main(["histogram", str(tmp_path / "nosum.prom"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["warnings"] and doc["count"] == 100
    assert main(["histogram", str(tmp_path / "nosum.prom")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("warning: itl: no _sum samples") and "mean n/a" in out
    (tmp_path / "noinf.prom").write_text(NO_INF)
    assert main(["histogram", str(tmp_path / "noinf.prom"), "--json"]) == 2
    err = capsys.readouterr().err
    assert "noinf.prom:" in err and "+Inf" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('le="0.01"} 90', 'le="0.01"} abc',
         r"p.prom:3: malformed exposition line \(the value 'abc' is not a number \(digits, NaN"),
        ('le="0.01"} 90', 'le="0.01"} 90 123 junk',
         r"p.prom:3: malformed exposition line \(3 fields after the labels; a sample is a value"),
        ('le="0.01"} 90', 'le="0.01"} 90 abc',
         r"p.prom:3: malformed exposition line \(the timestamp 'abc' is not a number of milli"),
        ('le="0.01"} 90', 'le="-1"} 90',
         r'p.prom:3: .*_bucket has le="-1": a bucket bound of a latency or a token count is'),
        # one stamped line in an unstamped page: it would split the histogram across two scrapes
        ('le="0.01"} 90', 'le="0.01"} 90 1796212800000',
         r"p.prom:4: this sample's time \(none\) differs from line 3's \(1796212800.000 s\)"),
    ],
)  # fmt: skip
def test_a_bad_sample_line_is_named_in_the_formats_terms(old, new, message):
    # (prometheus_client's own words, 'could not convert string to float', are not shown)
    text = GOOD.replace(old, new)
    assert text != GOOD
    with pytest.raises(SourceError, match=message) as raised:
        _read(text)
    assert "could not convert" not in str(raised.value)


def test_a_page_without_the_metric_is_named():
    text = "# HELP something else\nprocess_cpu_seconds_total 3\n"
    with pytest.raises(SourceError, match=r"no vllm:inter_token_latency_seconds or .* in p\.prom"):
        _read(text)


def test_a_huge_or_multiline_label_value_is_shown_short_on_one_line():
    for value in ("a" * 100_000, "a\\nb"):  # \n inside a label value is the format's escape
        labels = f'model_name="m",engine="0",x="{value}"'
        lines = itl_lines(ITL, [90, 90, 90, 90, 100, 100], 1.25, labels=labels)
        text = page(HEAD, [ln for ln in lines if 'le="0.01"' not in ln or "x=" not in ln])
        text += page(HEAD, itl_lines(ITL, [1, 1, 1, 1, 1, 1], 0.01))
        with pytest.raises(SourceError) as raised:
            _read(text)
        message = str(raised.value)
        assert "\n" not in message and len(message) < 400, message[:500]
