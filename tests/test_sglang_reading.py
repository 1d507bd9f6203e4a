"""SGLang pages read into the same tidy table as vLLM's, and its non-ITL never read as an ITL.

What each SGLang version exports, and how, is in tests/data/sglang/metric-definitions.md (read
from SGLang's source, file and commit per row). The real page is SGLang 0.3.5's own docs example
(tests/data/sglang/README.md). Expected values are read off the page's lines, or follow the text
format's rules written out here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from _paths import DATA

from itlkit.errors import SourceError
from itlkit.metrics.readers import read_paths, read_texts
from itlkit.metrics.series import histogram_series, scalar_series

PAGE = DATA / "sglang" / "sglang-0.3.5-gemma-2-9b-docs.prom"


def itlkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "itlkit", *args], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def test_the_real_035_page_reads_with_its_model_and_ttft():
    frame = read_paths([PAGE])
    ttft = histogram_series(frame, "ttft")
    # lines 48 and 70: _sum 656.0780844688416, _count 2124; SGLang 0.3.5 labels the model `name`
    assert (ttft.counts[0], ttft.sums[0]) == (2124.0, 656.0780844688416)
    assert set(frame.loc[frame["metric"] == "ttft", "model_name"]) == {"google/gemma-2-9b-it"}
    assert set(frame.loc[frame["metric"] == "ttft", "family"]) == {
        "sglang:time_to_first_token_seconds"}  # fmt: skip
    # Prometheus' rule: rank 0.5 x 2124 = 1062 falls in (0.1, 0.25] (cumulative 707 -> 1187),
    # linear inside it: 0.1 + (1062 - 707) / (1187 - 707) x 0.15
    h = ttft.snapshot(0)
    assert h.quantile(0.5) == pytest.approx(0.1 + 355 / 480 * 0.15, rel=1e-12)
    # and rank 0.9 x 2124 = 1911.6 in (0.5, 0.75] (1350 -> 2124)
    assert h.quantile(0.9) == pytest.approx(0.5 + (1911.6 - 1350) / 774 * 0.25, rel=1e-12)
    running = scalar_series(frame, "running")
    assert list(running.values) == [0.0]  # line 21: idle at the scrape


def test_the_035_tpot_is_never_read_as_an_itl():
    # 0.3.5's sglang:time_per_output_token_seconds is each decode iteration's wall time, once per
    # running request; prefill iterations record nothing (scheduler.py get_stats @ 5bc2508)
    frame = read_paths([PAGE])
    assert not (frame["metric"] == "itl").any()
    said = (
        r"0\.3\.5 metrics.*iterations that run a prefill record nothing.*not read as an inter-token"
    )
    with pytest.raises(SourceError, match=said):
        histogram_series(frame, "itl")
    for command in (("histogram",), ("diagnose",)):
        done = itlkit(*command, str(PAGE))
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert done.stderr.count("\n") == 1 and "not read as an inter-token latency" in done.stderr


def _current_page(tp_ranks=(0, 1)) -> str:
    """A page as current SGLang writes it (metric-definitions.md section 1): the ITL on the
    tokenizer side (label model_name), gauges once per TP rank (engine_type, tp_rank, pp_rank)."""
    itl = [(0.002, 0), (0.004, 0), (0.006, 10), (0.008, 40), (0.01, 70), (0.015, 90),
           (0.02, 100)]  # fmt: skip
    lines = ["# TYPE sglang:inter_token_latency_seconds histogram"]
    for le, count in itl:
        lines.append(
            f'sglang:inter_token_latency_seconds_bucket{{le="{le}",model_name="m"}} {count}'
        )
    lines += [
        'sglang:inter_token_latency_seconds_bucket{le="+Inf",model_name="m"} 100',
        'sglang:inter_token_latency_seconds_sum{model_name="m"} 0.85',
        'sglang:inter_token_latency_seconds_count{model_name="m"} 100',
        "# TYPE sglang:num_running_reqs gauge",
    ]
    for rank in tp_ranks:
        labels = f'engine_type="unified",model_name="m",pp_rank="0",tp_rank="{rank}"'
        lines.append(f"sglang:num_running_reqs{{{labels}}} 12")
    lines += ["# TYPE sglang:num_retracted_requests_total counter",
              'sglang:num_retracted_requests_total{engine_type="unified",model_name="m",'
              'pp_rank="0",tp_rank="0"} 3']  # fmt: skip
    return "\n".join(lines) + "\n"


def test_a_current_page_reads_its_itl_and_one_ranks_gauges():
    frame = read_texts({"metrics-20261205T120000Z.prom": _current_page()})
    itl = histogram_series(frame, "itl").snapshot(0)
    # rank 50 of 100: (0.008, 0.01] holds cumulative 40 -> 70: 0.008 + 10 / 30 x 0.002
    assert itl.quantile(0.5) == pytest.approx(0.008 + 10 / 30 * 0.002, rel=1e-12)
    assert itl.mean == pytest.approx(0.0085)
    # the gauge of TP ranks 0 and 1 is one instance's: 12 running, not 24
    assert list(scalar_series(frame, "running").values) == [12.0]
    assert list(scalar_series(frame, "preemptions").values) == [3.0]  # SGLang's retractions
    labels = set(frame.loc[frame["metric"] == "running", "labels"])
    assert labels == {"engine_type=unified"}


def test_the_histogram_command_reads_an_sglang_itl(tmp_path):
    page = tmp_path / "metrics-20261205T120000Z.prom"
    page.write_text(_current_page())
    done = itlkit("histogram", "--json", str(page))
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["family"] == "sglang:inter_token_latency_seconds"
    # what SGLang's ITL is, said with it (metric-definitions.md: observe_inter_token_latency)
    assert any("k observations of its gap / k" in w for w in doc["warnings"])


def test_a_diagnosis_of_sglang_metrics_says_what_it_assumes(tmp_path):
    page = tmp_path / "metrics-20261205T120000Z.prom"
    page.write_text(_current_page())
    done = itlkit("diagnose", str(page), "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                  "--context", "1000")  # fmt: skip
    assert done.returncode == 0, done.stderr
    # SGLang's schedule is not vLLM's: the report says so, and how its ITL is counted
    assert "SGLang runs a prefill batch alone before the running batch decodes" in done.stdout
    assert "SGLang's ITL is per token" in done.stdout


def test_the_evidence_names_sglangs_own_metrics(tmp_path):
    page = tmp_path / "metrics-20261205T120000Z.prom"
    page.write_text(_current_page())
    done = itlkit("diagnose", "--json", str(page), "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                  "--context", "1000")  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = json.dumps(json.loads(done.stdout))
    # the page's 3 retractions, under SGLang's name; the checks in SGLang's names too
    assert "sglang:num_retracted_requests_total rose by 3" in text
    assert "vllm:" not in text
    short = itlkit("diagnose", str(page), "--model", "llama-3.1-8b", "--gpu", "h100-sxm")
    assert "(sglang:prompt_tokens_total, sglang:generation_tokens_total)" in short.stderr
