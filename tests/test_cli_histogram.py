"""`itlkit histogram`: tables, JSON, windows between scrapes, and one-line errors."""

from __future__ import annotations

import json

import pytest

from itlkit.cli import main

HEAD = "# TYPE vllm:inter_token_latency_seconds histogram\n"


def itl_page(counts, total, *, extra=""):
    """A hand-written vLLM ITL histogram with buckets 10, 25, 75, 100 ms and +Inf."""
    les = ["0.01", "0.025", "0.075", "0.1", "+Inf"]
    lines = [
        f'vllm:inter_token_latency_seconds_bucket{{model_name="m",engine="0",le="{le}"}} {c}'
        for le, c in zip(les, counts, strict=True)
    ]
    lines.append(
        f'vllm:inter_token_latency_seconds_count{{model_name="m",engine="0"}} {counts[-1]}'
    )
    lines.append(f'vllm:inter_token_latency_seconds_sum{{model_name="m",engine="0"}} {total}')
    return HEAD + "\n".join(lines) + "\n" + extra


def run_json(capsys, *argv):
    assert main(["histogram", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_one_page_json(tmp_path, capsys):
    path = tmp_path / "page.prom"
    path.write_text(itl_page([0, 90, 90, 100, 100], 2.23))
    doc = run_json(capsys, str(path))
    assert doc["count"] == 100 and doc["sum_seconds"] == pytest.approx(2.23)
    assert doc["mean_seconds"] == pytest.approx(0.0223)
    assert doc["p99_seconds"] == pytest.approx(0.0975)  # 9th of 10 in (75, 100] ms
    assert doc["p99_bucket_seconds"] == [0.075, 0.1]
    assert doc["p50_seconds"] == pytest.approx(0.01 + 0.015 * 50 / 90)
    assert doc["p90_seconds"] == pytest.approx(0.025)
    assert doc["buckets"] == [[0.01, 0], [0.025, 90], [0.075, 90], [0.1, 100], ["+Inf", 100]]
    assert doc["scrapes"] == 1 and "window" not in doc


def test_window_between_first_and_last_scrape(tmp_path, capsys):
    folder = tmp_path / "series"
    folder.mkdir()
    pages = [([0, 10, 10, 10, 10], 0.2), ([0, 50, 50, 60, 60], 1.5), ([0, 100, 100, 120, 120], 3.0)]
    times = ["15:24:36", "15:24:51", "15:25:06"]
    for when, (counts, total) in zip(times, pages, strict=True):
        (folder / f"metrics-2026-12-02T{when}Z.prom").write_text(itl_page(counts, total))
    doc = run_json(capsys, str(folder))
    assert doc["buckets"] == [[0.01, 0], [0.025, 90], [0.075, 90], [0.1, 110], ["+Inf", 110]]
    assert doc["count"] == 110 and doc["sum_seconds"] == pytest.approx(2.8)
    assert doc["window"]["duration_seconds"] == 30
    assert (
        doc["window"]["start"] == "2026-12-02T15:24:36Z" and doc["window"]["counter_resets"] == []
    )


def test_text_table_reset_warning_and_modes(tmp_path, capsys):
    folder = tmp_path / "series"
    folder.mkdir()
    (folder / "a-20261202T000000Z.prom").write_text(itl_page([0, 500, 500, 600, 600], 15.0))
    (folder / "b-20261202T000015Z.prom").write_text(itl_page([0, 90, 90, 100, 100], 2.23))
    code = main(["histogram", str(folder), "--floor-seconds", "0.015", "--slow-factor", "5"])
    out = capsys.readouterr().out
    assert code == 0
    assert "counter reset before 2026-12-02T00:00:15Z" in out
    assert "p99 97.50 ms  (interpolated in bucket (75.00 ms, 100.00 ms])" in out
    assert "90% near the floor 15.00 ms (up to 25.00 ms)" in out and "10% slower" in out


def test_other_metric_and_bench_json(tmp_path, capsys):
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"ttfts": [0.003, 0.2], "itls": [[0.02], [0.02, 0.3]]}))
    doc = run_json(capsys, str(bench), "--metric", "ttft")
    assert doc["count"] == 2 and doc["sum_seconds"] == pytest.approx(0.203)
    first = dict((str(le), c) for le, c in doc["buckets"])
    assert first["0.001"] == 0 and first["0.005"] == 1 and first["0.25"] == 2  # vLLM TTFT buckets
    doc = run_json(capsys, str(bench))
    assert doc["count"] == 3


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file (0 bytes)"),
        (b"vllm:inter_token_latency_seconds_count{x 1\n", ":1: malformed"),
        (b"# TYPE up gauge\nup 1\n", "no vllm:inter_token_latency_seconds"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, content, message):
    path = tmp_path / "bad.prom"
    path.write_bytes(content)
    assert main(["histogram", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_missing_path(tmp_path, capsys):
    assert main(["histogram", str(tmp_path / "nope.prom")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
