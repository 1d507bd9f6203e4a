"""A `vllm bench serve` result of a speculating server: its spec_decode_* fields read as vLLM
writes them, checked against each other, and used by `diagnose` and `simulate`.

vLLM's client (`benchmark` in vllm/benchmarks/serve.py @ 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1)
takes the increase of the server's counters over the run: num_drafts, draft_tokens,
accepted_tokens; acceptance_rate = accepted / draft_tokens x 100; acceptance_length = 1 +
accepted / drafts; per-position rates = accepted at position i / drafts. The files below are
written from counts chosen here, with those formulas.
"""

import json
from pathlib import Path

import pytest

from itlkit.cli import main
from itlkit.errors import SourceError
from itlkit.metrics.bench import parse_bench_result

# 1,000 drafts of 4 tokens, 2,080 accepted: 800 at position 0, 600, 400, 280
COUNTS = dict(drafts=1000, draft_tokens=4000, accepted=2080, per_pos=[800, 600, 400, 280])


def _doc(*, concurrency=1, itl_ms=12.5, tpot_ms=4.05, counts=COUNTS, **overrides):
    c = counts
    doc = {
        "completed": 500, "failed": 0, "duration": 120.0, "max_concurrency": concurrency,
        "request_rate": float("inf"), "total_input_tokens": 500 * 1000,
        "total_output_tokens": 500 * 1000, "mean_itl_ms": itl_ms, "median_itl_ms": itl_ms,
        "p99_itl_ms": itl_ms * 1.3, "mean_tpot_ms": tpot_ms, "median_tpot_ms": tpot_ms,
        "mean_ttft_ms": 40.0, "median_ttft_ms": 38.0, "p99_ttft_ms": 80.0,
        "spec_decode_acceptance_rate": c["accepted"] / c["draft_tokens"] * 100,
        "spec_decode_acceptance_length": 1 + c["accepted"] / c["drafts"],
        "spec_decode_num_drafts": c["drafts"], "spec_decode_draft_tokens": c["draft_tokens"],
        "spec_decode_accepted_tokens": c["accepted"],
        "spec_decode_per_position_acceptance_rates": [n / c["drafts"] for n in c["per_pos"]],
    }  # fmt: skip
    doc.update(overrides)
    return doc


def test_the_fields_read_as_vllm_computes_them():
    reading = parse_bench_result(json.dumps(_doc()), source="b.json").speculation
    assert reading.tokens_per_step == pytest.approx(3.08)
    assert reading.positions == 4
    assert reading.per_position == pytest.approx((0.8, 0.6, 0.4, 0.28))
    assert parse_bench_result(json.dumps({"completed": 3, "mean_itl_ms": 5.0})).speculation is None


@pytest.mark.parametrize(
    "overrides, says",
    [
        ({"spec_decode_accepted_tokens": 4100}, "exceeds spec_decode_draft_tokens"),
        ({"spec_decode_acceptance_length": 2.5}, "is not 1 + accepted / drafts"),
        ({"spec_decode_per_position_acceptance_rates": [0.6, 0.8, 0.4, 0.28]}, "rises"),
        ({"spec_decode_per_position_acceptance_rates": [0.8, 0.6, 0.4]}, "sum to"),
        ({"spec_decode_num_drafts": 0}, "no step was verified"),
        ({"spec_decode_num_drafts": -5}, "'spec_decode_num_drafts'"),
        ({"spec_decode_per_position_acceptance_rates": [1.2, 0.6, 0.2, 0.08]}, "from 0 to 1"),
    ],
)
def test_impossible_speculation_fields_are_one_clear_error(overrides, says):
    with pytest.raises(SourceError, match="b.json") as err:
        parse_bench_result(json.dumps(_doc(**overrides)), source="b.json")
    assert says in str(err.value) and "\n" not in str(err.value)


def test_more_accepted_per_draft_than_its_drafts_is_refused():
    counts = dict(drafts=1000, draft_tokens=2000, accepted=2000, per_pos=[])
    doc = _doc(counts=counts, spec_decode_draft_tokens=1500)
    with pytest.raises(SourceError, match="exceeds"):
        parse_bench_result(json.dumps(doc), source="b.json")


def _diagnose(tmp_path, capsys, doc):
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(doc))
    assert main(["diagnose", str(path), "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                 "--json"]) == 0  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    return out, {c["cause"]: c["score"] for c in out["causes"]}


def test_a_summary_at_high_concurrency_names_speculation_not_the_host(tmp_path, capsys):
    # 256 streams, 1,500 tokens of context, k = 4 at 0.3 a draft (1.43 tokens a step): a
    # verification step multiplies 1,280 tokens (~42 ms of GEMM at 50% of 989 TFLOP/s) beside
    # ~15 ms of KV: a 60 ms gap is that step, not a host 20 ms beyond the decode floor's reach
    counts = dict(drafts=1000, draft_tokens=4000, accepted=425, per_pos=[300, 90, 27, 8])
    doc = _doc(concurrency=256, itl_ms=60.0, tpot_ms=42.0, counts=counts,
               total_input_tokens=500 * 1000, total_output_tokens=500 * 1000)  # fmt: skip
    out, scores = _diagnose(tmp_path, capsys, doc)
    assert scores["speculation_cost"] >= 0.5 and scores["host_overhead"] < 0.5
    assert out["verdict"].startswith("speculative decoding costs more than it saves")


def test_a_summary_at_concurrency_one_says_speculation_pays(tmp_path, capsys):
    out, scores = _diagnose(tmp_path, capsys, _doc())
    assert scores["speculation_cost"] == 0.0
    assert any("3.08 tokens a step" in line for line in out["speculation"])


def test_simulate_replays_a_bench_file_with_its_speculation(tmp_path, capsys):
    doc = _doc(
        input_lens=[200] * 20,
        output_lens=[300] * 20,
        ttfts=[0.04] * 20,
        itls=[[0.0125] * 10] * 20,
        errors=[""] * 20,
        start_times=[i * 0.5 for i in range(20)],
    )
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(doc))
    assert main(["simulate", "--workload", str(path), "--drain", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["speculation"]["acceptance_per_position"] == pytest.approx([0.8, 0.6, 0.4, 0.28])
    assert any(a.startswith(f"speculation from {path}") for a in out["assumptions"])


REAL = (
    Path(__file__).parent.parent / "data/real-pages/er0080-qwen27b-fp8-tp2-3090-specdec-bench-v0.25"
)


def test_a_real_speculative_bench_file_reads_as_its_counters_say():
    # er0080/vllm-benchmarking's vLLM 0.25.1 run (provenance.md): 1,260 drafts of 3 tokens,
    # 2,723 accepted, per position 0.85 / 0.7167 / 0.5944; its mean ITL over its mean TPOT is
    # the tokens a streamed chunk carried, which the counters give too
    result = parse_bench_result((REAL / "bench.json").read_text(), source="bench.json")
    reading = result.speculation
    assert reading.tokens_per_step == pytest.approx(1 + 2723 / 1260)
    assert reading.positions == 3
    assert reading.per_position == pytest.approx((0.85, 0.7166667, 0.5944444))
    itl, tpot = result.summaries["itl"].mean_seconds, result.summaries["tpot"].mean_seconds
    assert itl / tpot == pytest.approx(reading.tokens_per_step, rel=0.01)


def test_the_real_file_judged_with_a_stand_in_model_is_healthy(capsys):
    # Qwen3.8-27B is not in the catalog: Qwen3-32B in FP8 on the same 2 x RTX 3090 stands in
    # (a few GB more weights: a slower floor, so no healthier a verdict). The provenance's
    # hand reading argues healthy: p99 1.15x the median, and at 2 streams speculation pays.
    stand_in = ["--model", "qwen3-32b", "--weights-precision", "fp8", "--gpu", "rtx-3090"]
    assert main(["diagnose", str(REAL / "bench.json"), *stand_in, "--tp", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["healthy"]
    scores = {c["cause"]: c["score"] for c in out["causes"]}
    assert scores["speculation_cost"] == 0.0 and scores["host_overhead"] < 0.5
