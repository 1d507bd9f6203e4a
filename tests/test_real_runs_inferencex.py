"""data/real-runs-inferencex/: 91 real SGLang runs of DeepSeek-R1-0528 (H200, B200, B300, MI300X,
MI325X, MI355X) converted by make_runs.py from InferenceX's dashboard fixture. The figures checked
here were typed from the fixture's rows (SemiAnalysisAI/InferenceX-app
@ 528c4146b8f502fcbce8df7870a935a970cbae25, packages/app/cypress/fixtures/api/benchmarks.json,
GPL-3.0: figures only) and the settings from the InferenceX scripts named beside them."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from itlkit.calibration.predict import predict_run
from itlkit.errors import ConfigError
from itlkit.physics.calibration import load_calibration
from itlkit.sim.runs import RunError, read_runs

FOLDER = Path(__file__).resolve().parents[1] / "data" / "real-runs-inferencex"
RUNS = FOLDER / "inferencex.json"
FIXTURE_COMMIT = "528c4146b8f502fcbce8df7870a935a970cbae25"


def _converter():
    name = "make_runs_inferencex"
    if name not in sys.modules:  # a dataclass looks its module up in sys.modules
        spec = importlib.util.spec_from_file_location(name, FOLDER / "make_runs.py")
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


@pytest.fixture(scope="module")
def doc() -> dict:
    return json.loads(RUNS.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runs() -> dict:
    return {run.id: run for run in read_runs(RUNS)}


def by_id(doc: dict) -> dict:
    return {run["id"]: run for run in doc["runs"]}


def _row(hardware, precision, tp, ep, isl, osl, conc, image, date, run, metrics) -> dict:
    """A fixture row with the fields make_runs.py reads (single-node SGLang DeepSeek-R1)."""
    return {
        "hardware": hardware, "framework": "sglang", "model": "dsr1", "precision": precision,
        "spec_method": "none", "disagg": False, "is_multinode": False, "prefill_tp": tp,
        "prefill_ep": ep, "prefill_dp_attention": False, "decode_tp": tp, "decode_ep": ep,
        "decode_dp_attention": False, "isl": isl, "osl": osl, "conc": conc, "image": image,
        "metrics": metrics, "date": date,
        "run_url": f"https://github.com/SemiAnalysisAI/InferenceX/actions/runs/{run}",
    }  # fmt: skip


# Four rows of the fixture @ 528c4146, the figures copied by hand (the power and energy metrics
# and the row fields the converter does not read left out).
EXCERPT = [
    _row("mi355x", "fp8", 8, 1, 1024, 1024, 4, "lmsysorg/sglang:v0.5.12-rocm700-mi35x",
         "2026-05-27", "26486957776/attempts/1", {
             "p90_itl": 0.00976169495843351, "p99_itl": 0.010777702974155545,
             "mean_itl": 0.010156868908726718, "median_itl": 0.009645953075960279,
             "p99.9_itl": 0.09403164859954269, "p90_e2el": 10.373954058135862,
             "p90_tpot": 0.010186037294929808, "p90_ttft": 1.6482687692856417,
             "p99_e2el": 14.767775083926972, "p99_tpot": 0.012924622337146384,
             "p99_ttft": 1.7412233773549088, "mean_e2el": 9.662590102606918,
             "mean_tpot": 0.010143009066538262, "mean_ttft": 0.35153487175120973,
             "median_e2el": 9.465509700472467, "median_tpot": 0.009930574152489022,
             "median_ttft": 0.11508698936086148, "p99.9_tpot": 0.012945570580454903,
             "tput_per_gpu": 92.52648660357187, "input_tput_per_gpu": 46.488360944755165,
             "output_tput_per_gpu": 46.0381256588167}),
    _row("h200", "fp8", 8, 1, 8192, 1024, 8, "lmsysorg/sglang:v0.5.12-cu130", "2026-05-17",
         "25980019087/attempts/2", {
             "p90_itl": 0.12593060228973627, "p99_itl": 0.44963209055363407,
             "mean_itl": 0.13827448037716672, "median_itl": 0.12108057178556919,
             "p99.9_itl": 0.9566000960600219, "p90_e2el": 14.964729657582941,
             "p90_tpot": 0.014626059613559826, "p90_ttft": 0.852144463639707,
             "p99_e2el": 16.99803781699389, "p99_tpot": 0.015172156449623322,
             "p99_ttft": 2.1824619112163783, "mean_e2el": 13.341410665772855,
             "mean_tpot": 0.013876353598717398, "mean_ttft": 0.4905263568041846,
             "median_e2el": 13.228951966855675, "median_tpot": 0.013925268301002294,
             "median_ttft": 0.31424099672585726, "p99.9_tpot": 0.015485017830364246,
             "tput_per_gpu": 607.8649210257171, "input_tput_per_gpu": 539.5306515016871,
             "output_tput_per_gpu": 68.33426952403}),
    _row("b200", "fp8", 4, 1, 8192, 1024, 32, "lmsysorg/sglang:v0.5.12-cu130", "2026-05-22",
         "26306422380/attempts/1", {
             "p90_itl": 1.7756122789578512, "p99_itl": 2.983835111418738,
             "mean_itl": 0.977789327804273, "median_itl": 0.6499440540210344,
             "p99.9_itl": 7.866895542726852, "p90_e2el": 37.15071050282568,
             "p90_tpot": 0.035852540337491745, "p90_ttft": 1.964194584073266,
             "p99_e2el": 45.1247213900165, "p99_tpot": 0.040108800665948255,
             "p99_ttft": 12.323374743171735, "mean_e2el": 32.12794787875591,
             "mean_tpot": 0.03306502157165633, "mean_ttft": 1.507864161184989,
             "median_e2el": 31.914876055991044, "median_tpot": 0.0336639677726555,
             "median_ttft": 0.799003222520696, "p99.9_tpot": 0.041745253707332425,
             "tput_per_gpu": 2013.983103380633, "input_tput_per_gpu": 1788.7637573766604,
             "output_tput_per_gpu": 225.21934600397282}),
    # Expert parallelism (ep 8): itlkit's Deployment cannot express it.
    _row("b200", "fp8", 8, 8, 1024, 1024, 4, None, "2025-11-18", "19448910442/attempts/4", {
             "mean_itl": 0.3030719556348989, "mean_tpot": 0.010271497302061958,
             "mean_ttft": 0.1718475322960876, "mean_e2el": 9.61860025329981}),
]  # fmt: skip
EXCERPT_IDS = [
    "b200-dsr1-fp8-sglang-tp4-8192-1024-c32",
    "h200-dsr1-fp8-sglang-tp8-8192-1024-c8",
    "mi355x-dsr1-fp8-sglang-tp8-1024-1024-c4",
]


def test_every_run_reads(doc):
    parsed = read_runs(RUNS, lenient=True)
    assert len(parsed) == len(doc["runs"]) == 91
    assert not [run for run in parsed if isinstance(run, RunError)]
    assert {run.engine for run in parsed} == {"SGLang"}
    assert {run.gpu for run in parsed} == {"h200-sxm", "b200", "b300", "mi300x", "mi325x", "mi355x"}
    assert {run.model.slug for run in parsed} == {"deepseek-v3"}


def test_every_row_read_is_kept_or_left_out_for_one_reason(doc):
    left = doc["left_out"]
    # Two fixture versions of 435 rows each.
    assert left["rows_read"] == 870 and left["runs_kept"] == 91
    assert left["rows_read"] == left["runs_kept"] + sum(left["counts"].values())
    assert left["counts"]["duplicate"] == 30 and left["runs_refused"] == []


def test_the_converter_is_deterministic(tmp_path):
    make_runs = _converter()
    excerpt = tmp_path / "excerpt.json"
    excerpt.write_text(json.dumps(EXCERPT), encoding="utf-8")
    outs = [tmp_path / "a.json", tmp_path / "b.json"]
    for out in outs:
        make_runs.main([str(excerpt), "--fixture-commit", FIXTURE_COMMIT, "-o", str(out)])
    assert outs[0].read_bytes() == outs[1].read_bytes()
    converted = json.loads(outs[0].read_text(encoding="utf-8"))
    assert [run["id"] for run in converted["runs"]] == EXCERPT_IDS
    assert converted["left_out"]["counts"] == {"expert_or_data_parallel": 1}


def test_an_unknown_fixture_needs_its_commit(tmp_path):
    make_runs = _converter()
    excerpt = tmp_path / "excerpt.json"
    excerpt.write_text(json.dumps(EXCERPT), encoding="utf-8")
    with pytest.raises(ConfigError, match="--fixture-commit"):
        make_runs.main([str(excerpt), "-o", str(tmp_path / "out.json")])


def test_a_vllm_row_without_a_recipe_is_counted_not_guessed(tmp_path):
    """A single-node vLLM gpt-oss-120b row, a configuration InferenceX-app@3a600f1d's
    availability.json lists (h200 / vllm / gptoss120b / fp4, 1024/1024, 2026-03-27), reaches the
    recipe look-up (its model key is a catalog model) and is left out as no_recipe: make_runs.py
    has no vLLM recipe, and no fixture version read holds a vLLM row. No figures are needed: the
    row is refused before they are read."""
    make_runs = _converter()
    row = {**EXCERPT[1], "hardware": "h200", "framework": "vllm", "model": "gptoss120b",
           "precision": "fp4", "isl": 1024, "osl": 1024, "conc": 16, "image": None,
           "date": "2026-03-27", "metrics": {}}  # fmt: skip
    assert make_runs.structural_reason(row) is None
    data = json.dumps([row]).encode()
    out = make_runs.convert([([row], make_runs.fixture_source(data, FIXTURE_COMMIT))])
    assert out["runs"] == [] and out["left_out"]["counts"] == {"no_recipe": 1}
    assert out["left_out"]["runs_refused"] == [{
        "id": "h200-gptoss120b-fp4-vllm-tp8-1024-1024-c16", "date": "2026-03-27",
        "reason": make_runs.REASONS["no_recipe"]}]  # fmt: skip


def test_the_committed_runs_are_the_converters_output(doc):
    """The excerpt's rows convert to the committed runs, but for how the fixture file was known
    (its SHA-256, and the commit's date and title that only a known version carries)."""
    make_runs = _converter()
    data = json.dumps(EXCERPT).encode()
    converted = make_runs.convert([(EXCERPT, make_runs.fixture_source(data, FIXTURE_COMMIT))])
    committed = by_id(doc)
    for run in converted["runs"]:
        mine, theirs = dict(run), dict(committed[run["id"]])
        assert mine.pop("source")["commit"] == theirs.pop("source")["commit"] == FIXTURE_COMMIT
        assert mine == theirs


def test_mi355x_fp8_1k1k_c4_equals_its_source_row(doc, runs):
    # Fixture row mi355x / sglang / dsr1 / fp8, TP8 EP1, 1024/1024, conc 4, 2026-05-27, run
    # 26486957776: mean_ttft 0.35153487175120973, p90_ttft 1.6482687692856417, p99_ttft
    # 1.7412233773549088, mean_tpot 0.010143009066538262, mean_itl 0.010156868908726718,
    # median_itl 0.009645953075960279, p99_itl 0.010777702974155545, mean_e2el 9.662590102606918,
    # p99_e2el 14.767775083926972. Recipe: dsr1_fp8_mi355x.sh @ bfad6df7 (--chunked-prefill-size
    # 196608 --mem-fraction-static 0.8 --num-continuous-decode-steps 8 --cuda-graph-max-bs $CONC
    # --kv-cache-dtype fp8_e4m3; no --stream-interval).
    raw, run = by_id(doc)["mi355x-dsr1-fp8-sglang-tp8-1024-1024-c4"], runs[
        "mi355x-dsr1-fp8-sglang-tp8-1024-1024-c4"]  # fmt: skip
    m = raw["measured"]
    assert m["ttft_mean_seconds"] == 0.35153487175120973
    assert m["ttft_p90_seconds"] == 1.6482687692856417
    assert m["ttft_p99_seconds"] == 1.7412233773549088
    assert m["tpot_mean_seconds"] == 0.010143009066538262
    assert m["itl_mean_seconds"] == 0.010156868908726718  # one token per chunk: measured ITL
    assert run.itl_per_token_quantiles_seconds[0.5] == 0.009645953075960279
    assert run.itl_per_token_quantiles_seconds[0.99] == 0.010777702974155545
    assert (m["e2e_mean_seconds"], m["e2e_p99_seconds"]) == (9.662590102606918, 14.767775083926972)
    assert (run.gpu, run.tp, run.weights_precision, run.kv_precision) == ("mi355x", 8, "fp8", "fp8")
    assert run.engine == "SGLang" and run.max_num_batched_tokens == 196608
    assert run.gpu_memory_utilization == 0.8 and not run.mixed_chunk
    assert raw["engine"]["num_continuous_decode_steps"] == 8
    assert raw["engine"]["cuda_graph_max_bs"] == 4
    assert raw["engine"]["launch_source"]["commit"] == "bfad6df76985d1bf9ae20e914a5f81862bd3397c"
    w = run.workload
    assert (w.client, w.num_prompts, w.max_concurrency) == ("closed loop", 40, 4)
    assert (w.prompt_distribution.low_tokens, w.prompt_distribution.high_tokens) == (819, 1024)
    assert w.output_tokens_mean == 921.5 and w.ignore_eos
    assert raw["source"]["run_url"].endswith("/runs/26486957776/attempts/1")
    assert raw["flags"] == ["continuous_decode_steps"]


def test_h200_8k1k_c8_equals_its_source_row(doc, runs):
    # Fixture row h200 / sglang / dsr1 / fp8, TP8, 8192/1024, conc 8, 2026-05-17, run
    # 25980019087: mean_ttft 0.4905263568041846, p99_ttft 2.1824619112163783, mean_tpot
    # 0.013876353598717398, median_tpot 0.013925268301002294, mean_itl 0.13827448037716672 (a
    # chunk of 10 tokens), mean_e2el 13.341410665772855. Recipe: dsr1_fp8_h200.sh @ 2fc18b75,
    # not 1k/1k: --max-running-requests 256 --chunked-prefill-size 32768 --max-prefill-tokens
    # 32768 --mem-fraction-static 0.82 --stream-interval 10, no --kv-cache-dtype.
    raw, run = by_id(doc)["h200-dsr1-fp8-sglang-tp8-8192-1024-c8"], runs[
        "h200-dsr1-fp8-sglang-tp8-8192-1024-c8"]  # fmt: skip
    m = raw["measured"]
    assert m["ttft_mean_seconds"] == 0.4905263568041846
    assert m["ttft_p99_seconds"] == 2.1824619112163783
    assert m["itl_mean_seconds"] == m["tpot_mean_seconds"] == 0.013876353598717398
    assert m["tpot_p50_seconds"] == 0.013925268301002294
    assert m["itl_per_chunk_seconds"]["mean"] == 0.13827448037716672
    assert m["stream_interval_tokens"] == 10 and run.itl_per_token_quantiles_seconds == {}
    assert m["e2e_mean_seconds"] == 13.341410665772855
    assert (run.gpu, run.kv_precision, run.max_num_seqs, run.max_num_batched_tokens) == (
        "h200-sxm", "bf16", 256, 32768)  # fmt: skip
    assert run.gpu_memory_utilization == 0.82 and run.max_model_len == 163840
    w = run.workload
    assert (w.num_prompts, w.max_concurrency, w.output_tokens_mean) == (80, 8, 921.5)
    assert (w.prompt_distribution.low_tokens, w.prompt_distribution.high_tokens) == (6553, 8192)
    assert raw["flags"] == ["stream_interval"]


def test_b200_tp4_8k1k_c32_equals_its_source_row(doc, runs):
    # Fixture row b200 / sglang / dsr1 / fp8, TP4 EP1, 8192/1024, conc 32, 2026-05-22, run
    # 26306422380: mean_ttft 1.507864161184989, p90_ttft 1.964194584073266, p99_ttft
    # 12.323374743171735, mean_tpot 0.03306502157165633, mean_e2el 32.12794787875591, p99_e2el
    # 45.1247213900165. Recipe: dsr1_fp8_b200.sh @ d4948f99, TP4: MAX_RUNNING_REQUESTS=32,
    # MEM_FRAC_STATIC=0.95, CHUNKED_PREFILL_SIZE=8192, SCHEDULER_RECV_INTERVAL=10,
    # --kv-cache-dtype fp8_e4m3 --stream-interval 30.
    raw, run = by_id(doc)["b200-dsr1-fp8-sglang-tp4-8192-1024-c32"], runs[
        "b200-dsr1-fp8-sglang-tp4-8192-1024-c32"]  # fmt: skip
    m = raw["measured"]
    assert m["ttft_mean_seconds"] == 1.507864161184989
    assert (m["ttft_p90_seconds"], m["ttft_p99_seconds"]) == (1.964194584073266, 12.323374743171735)
    assert m["itl_mean_seconds"] == 0.03306502157165633
    assert (m["e2e_mean_seconds"], m["e2e_p99_seconds"]) == (32.12794787875591, 45.1247213900165)
    assert (run.gpu, run.tp, run.kv_precision) == ("b200", 4, "fp8")
    assert (run.max_num_seqs, run.max_num_batched_tokens, run.gpu_memory_utilization) == (
        32, 8192, 0.95)  # fmt: skip
    assert raw["engine"]["scheduler_recv_interval"] == 10
    assert raw["engine"]["stream_interval"] == 30
    assert run.workload.num_prompts == 320 and run.workload.max_concurrency == 32
    assert raw["source"]["image"] == raw["engine"]["image"] == "lmsysorg/sglang:v0.5.12-cu130"
    assert raw["flags"] == ["stream_interval", "scheduler_recv_interval"]


def test_every_run_is_the_documented_client(doc, runs):
    """bench_serving's random dataset at range ratio 0.8, CONC x 10 prompts, a closed loop."""
    for raw in doc["runs"]:
        w, conc = runs[raw["id"]].workload, raw["source"]["row"]["conc"]
        assert (w.arrival, w.num_prompts, w.max_concurrency) == ("vllm-bench", 10 * conc, conc)
        for dist, nominal in ((w.prompt_distribution, raw["source"]["row"]["isl"]),
                              (w.output_distribution, raw["source"]["row"]["osl"])):  # fmt: skip
            assert (dist.low_tokens, dist.high_tokens) == (int(0.8 * nominal), nominal)
        assert raw["engine"]["image"] == raw["source"]["image"], raw["id"]
        assert raw["source"]["date"] >= "2026-02-19"


def test_one_small_run_simulates(runs):
    # B200 TP8, one slot, ten requests of about 1,000 tokens in and out.
    run = runs["b200-dsr1-fp8-sglang-tp8-1024-1024-c1"]
    assert (run.workload.num_prompts, run.workload.max_concurrency) == (10, 1)
    prediction = predict_run(run, load_calibration("bundled"), seed=0)
    assert (prediction.requests, prediction.unfinished) == (10, 0)
    assert prediction.mean_running <= 1.0 + 1e-9  # one slot: never two requests at once
    assert 0 < prediction.ttft_mean_seconds < prediction.e2e_mean_seconds
