"""Bad SGLang input gets one clear line: two engines' pages run together, an SGLang release whose
latency histograms itlkit does not know, and a k-split ITL whose _sum disagrees with its buckets.

SGLang's ITL (`observe_inter_token_latency`, observability/metrics_collector.py @ 44cedc2b;
tests/data/sglang/metric-definitions.md) adds k observations of gap / k to the buckets and the
whole gap to _sum: the two hold the same seconds, so a page where they disagree is not one
server's.
"""

import pytest

from itlkit.cli import main

ITL_VLLM = """\
# HELP vllm:inter_token_latency_seconds Histogram of inter-token latency in seconds.
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{le="0.01",model_name="m"} 5.0
vllm:inter_token_latency_seconds_bucket{le="+Inf",model_name="m"} 10.0
vllm:inter_token_latency_seconds_count{model_name="m"} 10.0
vllm:inter_token_latency_seconds_sum{model_name="m"} 0.2
"""


def _sglang_itl(sum_seconds: float, name: str = "sglang:inter_token_latency_seconds") -> str:
    # ten observations between 2 and 20 ms: a possible _sum lies in [0.02, 0.2] s
    return f"""\
# HELP {name} Histogram of inter-token latency in seconds.
# TYPE {name} histogram
{name}_bucket{{le="0.002",model_name="m"}} 0.0
{name}_bucket{{le="0.02",model_name="m"}} 10.0
{name}_bucket{{le="+Inf",model_name="m"}} 10.0
{name}_count{{model_name="m"}} 10.0
{name}_sum{{model_name="m"}} {sum_seconds}
"""


RUNNING = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 3.0
"""


def _one_line_error(capsys, path, command="histogram", *extra) -> str:
    code = main([command, str(path), *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_a_page_with_both_engines_metrics_is_refused_with_both_lines(tmp_path, capsys):
    page = tmp_path / "metrics.prom"
    page.write_text(ITL_VLLM + _sglang_itl(0.1))
    # the vLLM family starts at line 3, SGLang's at line 9
    err = _one_line_error(capsys, page)
    lines = f"{page}:3: vllm:inter_token_latency_seconds and, at line 9, "
    assert lines + "sglang:inter_token_latency_seconds: one page holds vLLM's and SGLang's" in err
    err = _one_line_error(capsys, page, "diagnose", "--model", "llama-3.1-8b")
    assert "one page holds vLLM's and SGLang's metrics" in err


def test_an_sglang_release_with_an_unknown_latency_histogram_reads_nothing_as_an_itl(
    tmp_path, capsys
):
    page = tmp_path / "metrics.prom"
    page.write_text(_sglang_itl(0.1, "sglang:inter_token_latency_per_chunk_seconds") + RUNNING)
    err = _one_line_error(capsys, page)
    assert "has SGLang's metrics but not sglang:inter_token_latency_seconds" in err
    assert "not read as one" in err


@pytest.mark.parametrize("sum_seconds", [5.0, 0.5])
def test_a_k_split_sum_that_disagrees_with_its_buckets_is_refused(tmp_path, capsys, sum_seconds):
    page = tmp_path / "metrics.prom"
    page.write_text(_sglang_itl(sum_seconds) + RUNNING)
    err = _one_line_error(capsys, page)
    assert f'sglang:inter_token_latency_seconds{{model_name="m"}} _sum {sum_seconds:g} is ' in err
    assert "between 0.02 and 0.2" in err and "SGLang's k-split" in err


def test_a_k_split_sum_that_agrees_reads(tmp_path, capsys):
    page = tmp_path / "metrics.prom"
    page.write_text(_sglang_itl(0.1) + RUNNING)
    assert main(["histogram", str(page)]) == 0
    assert "sglang:inter_token_latency_seconds" in capsys.readouterr().out
