"""metrics.bench: `vllm bench serve --save-result` files, summary-only and detailed, and bad ones.

The summary keys are those vLLM's `vllm/benchmarks/serve.py` writes (`mean_itl_ms`,
`median_itl_ms`, `std_itl_ms`, `p99_itl_ms`, ... with `--metric-percentiles 50,90,99`).
"""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from itlkit.errors import SourceError
from itlkit.metrics.bench import parse_bench_result, read_bench_result

SUMMARY = {
    "date": "20261202-120000", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B-Instruct",
    "num_prompts": 200, "request_rate": 4.0, "duration": 61.2, "completed": 198, "failed": 2,
    "total_input_tokens": 405504, "total_output_tokens": 50688,
    "mean_ttft_ms": 182.5, "median_ttft_ms": 150.0, "std_ttft_ms": 60.1,
    "p50_ttft_ms": 150.0, "p90_ttft_ms": 260.0, "p99_ttft_ms": 410.0,
    "mean_tpot_ms": 21.0, "median_tpot_ms": 20.5, "std_tpot_ms": 2.0, "p99_tpot_ms": 27.0,
    "mean_itl_ms": 21.3, "median_itl_ms": 16.2, "std_itl_ms": 18.0,
    "p50_itl_ms": 16.2, "p90_itl_ms": 19.0, "p99_itl_ms": 79.4, "p99.9_itl_ms": 95.0,
}  # fmt: skip


def test_summary_only_file_is_read_as_a_summary():
    result = parse_bench_result(json.dumps(SUMMARY), source="sweep.json")
    assert result.samples is None
    assert (result.completed, result.failed) == (198, 2)
    itl = result.summaries["itl"]
    assert itl.mean_seconds == pytest.approx(0.0213) and itl.median_seconds == pytest.approx(0.0162)
    assert itl.percentiles_seconds == pytest.approx({0.5: 0.0162, 0.9: 0.019, 0.99: 0.0794,
                                                     0.999: 0.095})  # fmt: skip
    assert result.summaries["ttft"].percentiles_seconds[0.9] == pytest.approx(0.26)
    assert "e2el" not in result.summaries


def test_detailed_file_keeps_every_sample_and_drops_failed_requests():
    doc = {**SUMMARY, "num_prompts": 3, "completed": 2, "failed": 1,
           "ttfts": [0.1, 0.0, 0.3], "itls": [[0.02, 0.03], [], [0.01]],
           "errors": ["", "timeout", ""]}  # fmt: skip
    result = parse_bench_result(json.dumps(doc))
    assert result.completed == 2
    assert result.samples.ttft_seconds.tolist() == [0.1, 0.3]
    assert result.samples.itl_seconds.tolist() == [0.02, 0.03, 0.01]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({**SUMMARY, "completed": 0}, "completed no request"),
        ({"num_prompts": 5, "ttfts": [0, 0], "itls": [[], []], "errors": ["x", "y"]},
         "completed no request"),
        ({"hello": 1}, "not a vllm bench serve result"),
        ([1, 2], "top level is not an object"),
        ({**SUMMARY, "mean_itl_ms": "fast"}, "'mean_itl_ms' must be a number, got 'fast'"),
        ({**SUMMARY, "mean_itl_ms": True}, "'mean_itl_ms' must be a number, got True"),
        ({**SUMMARY, "p99_itl_ms": -3}, "'p99_itl_ms' is -3; it must be a finite number from 0"),
        ({**SUMMARY, "p99_itl_ms": 1e300}, "'p99_itl_ms' is 1e.300; it must be a finite number"),
        ({**SUMMARY, "p99_itl_ms": 18}, r"p99_itl_ms \(18\) is below p90_itl_ms \(19\)"),
        ({**SUMMARY, "p90_ttft_ms": 100}, r"p90_ttft_ms \(100\) is below median_ttft_ms"),
        ({**SUMMARY, "completed": 2.5}, "'completed' must be a whole number, got 2.5"),
        # at least half the gaps reach the median (16.2 ms), so the mean is >= 8.1 ms
        ({**SUMMARY, "mean_itl_ms": 0}, r"mean_itl_ms \(0\) is below what its median of 16.2"),
        ({"mean_tpot_ms": 0.2, "p99_tpot_ms": 27.0}, r"mean_tpot_ms \(0.2\) is below .* p99 of 27"),
        ({**SUMMARY, "completed": 10**309}, "'completed' is 1000.*; it must be 0 to 1,000,000,000"),
        ({**SUMMARY, "max_concurrency": "fast"}, "'max_concurrency' must be a whole number"),
        ({**SUMMARY, "max_concurrency": 0}, "'max_concurrency' is 0; it must be 1 to"),
        ({**SUMMARY, "max_concurrency": [4]}, "'max_concurrency' must be a whole number"),
        ({**SUMMARY, "total_input_tokens": -5}, "'total_input_tokens' is -5; it must be 0 to"),
        ({**SUMMARY, "total_output_tokens": {"a": 1}}, "'total_output_tokens' must be a whole"),
        ({**SUMMARY, "request_rate": -2}, "'request_rate' is -2; it must be a number of requests"),
        ({**SUMMARY, "request_rate": [1]}, "'request_rate' is \\[1\\]; it must be"),
        ({**SUMMARY, "input_lens": [5, "x"], "output_lens": [1, 2]},
         r"input_lens\[1\] is 'x'; a token count is a whole number"),
        ({**SUMMARY, "input_lens": [5, 10**20], "output_lens": [1, 2]},
         r"input_lens\[1\] is 1000.*; a token count"),
        ({**SUMMARY, "input_lens": [5], "output_lens": [1, 2]},
         r"per-request lists differ in length \(input_lens 1, output_lens 2\)"),
        ({**SUMMARY, "start_times": [0.0, "x"]}, r"start_times\[1\] is 'x', not a number"),
        ({**SUMMARY, "start_times": [0.0, float("nan")]}, r"start_times\[1\] is nan; it must be"),
        ({**SUMMARY, "p150_itl_ms": 3}, "not a percentile"),
        ({"ttfts": 3, "itls": [[0.1]]}, "'ttfts' must be a list"),
        ({"ttfts": None, "itls": [[0.1]]}, "'ttfts' must be a list"),
        ({"ttfts": [0.1], "itls": {"a": 1}}, "'itls' must be a list"),
        ({"ttfts": [0.1], "itls": [0.1]}, r"itls\[0\] must be the list"),
        ({"ttfts": [0.1], "itls": [[0.1, [0.2]]]}, r"itls\[0\]\[1\] is \[0.2\], not a number"),
        ({"ttfts": ["0.1"], "itls": [[0.1]]}, r"ttfts\[0\] is '0.1', not a number"),
        ({"ttfts": [0.1], "itls": [[float("inf")]]}, r"itls\[0\]\[0\] is inf; it must be a fin"),
        ({"ttfts": [0.1, 0.2], "itls": [[0.1]]}, "differ in length"),
        ({"ttfts": [0.1]}, "has ttfts but not both"),
    ],
)  # fmt: skip
def test_bad_files_are_one_clear_error(doc, message):
    with pytest.raises(SourceError, match=message):
        parse_bench_result(json.dumps(doc), source="bad.json")


def test_deep_nesting_and_broken_json():
    with pytest.raises(SourceError, match="nested too deeply"):
        parse_bench_result("[" * 100_000 + "]" * 100_000)
    with pytest.raises(SourceError, match=r"bad.json:2: not valid JSON"):
        parse_bench_result('{"a":\n', source="bad.json")


def test_non_regular_files_are_refused(tmp_path):
    with pytest.raises(SourceError, match="is a folder, not a bench result file"):
        read_bench_result(tmp_path)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(SourceError, match=r"is a named pipe \(FIFO\), not a bench result"):
        read_bench_result(fifo)  # would block forever if opened


def test_bundled_example_reads_with_its_samples():
    from itlkit.bundled import bundled_path

    result = read_bench_result(bundled_path("synthetic-vllm-bench-serve.json"))
    assert result.samples is not None and result.completed == len(result.samples.ttft_seconds)
    assert np.all(result.samples.itl_seconds >= 0)


def _cli(*args):
    import contextlib
    import io

    from itlkit.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_histogram_prints_a_summary_only_file_as_its_statistics(tmp_path):
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(SUMMARY))
    code, out, _ = _cli("histogram", str(path))
    assert code == 0
    assert "vllm bench summary of 198 requests" in out
    assert "itl mean 21.30 ms, median 16.20 ms, p50 16.20 ms, p90 19.00 ms, p99 79.40 ms" in out
    code, out, _ = _cli("histogram", str(path), "--json", "--metric", "ttft")
    summary = json.loads(out)["bench_summaries"][0]
    assert summary["median_seconds"] == pytest.approx(0.15)
    assert summary["percentiles_seconds"] == pytest.approx({"p50": 0.15, "p90": 0.26, "p99": 0.41})


def test_a_failed_run_gets_the_same_verdict_from_every_subcommand(tmp_path):
    # vLLM writes zeros for the statistics when no request completed.
    doc = {**SUMMARY, "completed": 0, "failed": 200, "mean_itl_ms": 0.0, "median_itl_ms": 0.0}
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(doc))
    for command in (["histogram", str(path)], ["diagnose", str(path)],
                    ["simulate", "--workload", str(path), "--duration", "10"]):  # fmt: skip
        code, _, err = _cli(*command)
        assert code == 2, (command, err)
        assert "the benchmark completed no request (every request failed)" in err, command


def test_how_the_requests_were_sent_is_read_and_checked():
    doc = {**SUMMARY, "max_concurrency": 8, "request_rate": "inf", "total_input_tokens": 100,
           "total_output_tokens": 40, "input_lens": [60, 40], "output_lens": [20, 20],
           "start_times": [10.0, 10.5], "errors": ["", ""]}  # fmt: skip
    r = parse_bench_result(json.dumps(doc)).requests
    assert r.max_concurrency == 8 and r.request_rate_per_second == math.inf
    assert (r.total_input_tokens, r.total_output_tokens) == (100, 40)
    assert r.input_lens.tolist() == [60, 40] and r.start_times_seconds.tolist() == [10.0, 10.5]
    bare = parse_bench_result(json.dumps({**SUMMARY, "request_rate": None})).requests
    assert bare.max_concurrency is None and math.isnan(bare.request_rate_per_second)
