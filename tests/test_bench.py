"""metrics.bench: `vllm bench serve --save-result` files, summary-only and detailed, and bad ones.

The summary keys are those vLLM's `vllm/benchmarks/serve.py` writes (`mean_itl_ms`,
`median_itl_ms`, `std_itl_ms`, `p99_itl_ms`, ... with `--metric-percentiles 50,90,99`).
"""

from __future__ import annotations

import json
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
        ({**SUMMARY, "mean_itl_ms": "fast"}, "'mean_itl_ms' must be a finite number"),
        ({**SUMMARY, "mean_itl_ms": True}, "'mean_itl_ms' must be a finite number"),
        ({**SUMMARY, "p99_itl_ms": -3}, "'p99_itl_ms' is negative"),
        ({**SUMMARY, "p150_itl_ms": 3}, "not a percentile"),
        ({"ttfts": 3, "itls": [[0.1]]}, "'ttfts' must be a list"),
        ({"ttfts": None, "itls": [[0.1]]}, "'ttfts' must be a list"),
        ({"ttfts": [0.1], "itls": {"a": 1}}, "'itls' must be a list"),
        ({"ttfts": [0.1], "itls": [0.1]}, r"itls\[0\] must be the list"),
        ({"ttfts": [0.1], "itls": [[0.1, [0.2]]]}, r"itls\[0\] holds a value that is not a number"),
        ({"ttfts": ["0.1"], "itls": [[0.1]]}, "ttfts holds a value that is not a number"),
        ({"ttfts": [0.1], "itls": [[float("inf")]]}, "NaN, infinite or negative"),
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
    with pytest.raises(SourceError, match="not a regular file"):
        read_bench_result(tmp_path)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(SourceError, match="not a regular file"):
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
