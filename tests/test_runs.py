"""sim.runs: the `itlkit-runs/1` format, read from the 13 real runs of the fixture, and bad files.

Expected values are the fixture's own (data/real-runs/, from shared/fixtures with its
attribution) and Llama 4 Scout's published size (107.8 B total, 17.2 B active).
"""

from __future__ import annotations

import copy
import json

import pytest
from _paths import REAL_RUNS

from itlkit.errors import ConfigError
from itlkit.sim.runs import parse_runs, read_runs

FIXTURE = REAL_RUNS / "real_runs_trainval.json"
DOC = json.loads(FIXTURE.read_text())


def test_the_fixture_reads_as_thirteen_runs():
    runs = {r.id: r for r in read_runs(FIXTURE)}
    assert len(runs) == 13
    codegen = runs["trainval:20260217-155451-llama-2-7b-tp1-codegen"]
    assert codegen.model.slug == "llama-2-7b" and codegen.tp == 1
    assert [(s.rate_per_second, s.duration_seconds) for s in codegen.workload.stages] == [
        (5.0, 600.0), (10.0, 600.0)
    ]  # fmt: skip
    assert codegen.workload.prompt_tokens_mean == 591.63
    assert (codegen.workload.system_prompts, codegen.workload.prompts_per_system_prompt) == (10, 10)
    assert codegen.max_num_seqs == 128 and codegen.max_model_len == 4096  # defaults_for_null
    assert codegen.itl_per_token_quantiles_seconds[0.998] == pytest.approx(0.01944652586397811)
    scout = runs["trainval:20"]
    assert scout.weights_precision == "fp8" and scout.tp == 2
    assert round(scout.model.total_params / 1e9, 1) == 107.8
    assert round(scout.model.active_params / 1e9, 1) == 17.2


def test_runs_with_unknown_rates_keep_them_unknown():
    lite = [r for r in read_runs(FIXTURE) if r.workload.name.endswith("-lite")]
    assert len(lite) == 7 and all(r.workload.stages is None for r in lite)


def _broken(edit) -> dict:
    doc = copy.deepcopy(DOC)
    edit(doc)
    return doc


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format="itlkit-runs/9"), "not a runs file"),
        (lambda d: d.update(runs=[]), "'runs' must be a non-empty list"),
        (lambda d: d["runs"][1].update(model="llama-9-7b"), r"run 'trainval:20'.*model.*unknown"),
        (lambda d: d["runs"][0].update(gpu="h900"), r"run 'trainval:17'.*h900"),
        (lambda d: d["runs"][0].update(tp=0), r"tp must be a whole number from 1 to 1,024, got 0"),
        (lambda d: d["runs"][0].update(tp="2"), r"tp must be a whole number, got '2'"),
        (lambda d: d["runs"][0].update(weights_precision="fp3"), "fp3"),
        (lambda d: d["runs"][1]["workload"].update(stages=[{"rate_per_second": -5,
                                                            "duration_seconds": 600}]),
         "rate_per_second must be a finite number > 0"),
        (lambda d: d["runs"][0]["measured"].pop("ttft_mean_seconds"), "ttft_mean_seconds is mi"),
        (lambda d: d["runs"][0]["workload"].update(arrival=[]),  # unhashable: found by fuzzing
         r"workload.arrival must be one of 'poisson-fixed-count', 'vllm-bench', got \[\]"),
        (lambda d: d["runs"][0]["engine"].update(chunked_prefill="yes"), "must be true or false"),
        (lambda d: d["runs"][0]["engine"].update(async_scheduling=1),
         r"run 'trainval:17': engine.async_scheduling must be true or false, got 1"),
        (lambda d: d["runs"][1].update(id="trainval:17"), "ids must be unique"),
        (lambda d: d["runs"][0]["model"]["config"]["text_config"].update(num_key_value_heads=0),
         "num_key_value_heads"),
    ],
)  # fmt: skip
def test_bad_runs_files_say_what_and_where(edit, message):
    with pytest.raises(ConfigError, match=message):
        parse_runs(_broken(edit), source="runs.json")


def test_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="no such runs file"):
        read_runs(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": \n')
    with pytest.raises(ConfigError, match=r"bad.json:2: not valid JSON"):
        read_runs(bad)


# ---- sizes, cross-checks and where each error points (the bad-input hunt's R09, R17, R29) -----

RUN64 = next(i for i, run in enumerate(DOC["runs"]) if run["id"] == "trainval:64")


def _run64(edit):
    """The fixture with run trainval:64 edited; the message must name the file, run and field."""

    def apply(doc):
        edit(doc["runs"][RUN64])

    return _broken(apply)


def _one_error(edit) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_runs(_run64(edit), source="runs.json")
    message = str(caught.value)
    assert message.count("runs.json") == 1 and message.count("trainval:64") == 1, message
    return message


def _stages(*pairs):
    return lambda r: r["workload"].update(
        stages=[{"rate_per_second": a, "duration_seconds": b} for a, b in pairs]
    )


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # R09: 1e6 req/s for 1e6 s is 1e12 requests: it ran out of memory; 1e4 x 1e3 s hung.
        (_stages((1e6, 1e6)), "workload.stages send 1,000,000,000,000 requests"),
        (_stages((1e4, 1e3)), "send 10,000,000 requests (rate_per_second x duration_seconds"),
        # a stage of 1e-9 req/s for 10 s sends none: the prediction crashed on an empty run
        (_stages((1e-9, 10)), "workload.stages send 0 requests"),
        (_stages((1e7, 1)), "workload.stages[0].rate_per_second must be a finite number > 0 up "
         "to 1,000,000, got 10000000.0"),
        (lambda r: r["workload"].update(system_prompts=10**9),
         "workload.system_prompts must be a whole number from 1 to 1,000,000, got 1000000000"),
        (lambda r: r["workload"].update(question_tokens=10**15),
         "workload.question_tokens must be a whole number from 1 to 10,000,000"),
        (lambda r: r["workload"].update(output_tokens_mean=1e308),
         "workload.output_tokens_mean must be a finite number > 0 up to 10,000,000"),
        (lambda r: r["workload"].update(prompt_template_tokens=float("nan")),
         "workload.prompt_template_tokens must be a number of tokens >= 0, got nan"),
        # prompts of 150 + 600 + 25.63 tokens and 251 output tokens in a 4,096-token context
        (lambda r: r["engine"].update(max_model_len=1000),
         "prompts of 776 tokens (prompt_tokens_mean, or system_prompt_tokens + question_tokens "
         "+ prompt_template_tokens) and 251 output tokens exceed engine.max_model_len (1,000)"),
        (lambda r: r["engine"].update(block_size=10**30),
         "engine.block_size must be a whole number from 1 to 1,024"),
        # 1,000 requests of 776 tokens in blocks of 1 token: 776,000 blocks is fine, 1e5
        # requests at 500/s give 77,600,000, over the replay's 50,000,000
        (lambda r: (r["engine"].update(block_size=1), _stages((500, 200))(r)),
         "send 100,000 prompts of 776 tokens: 77,600,000 KV blocks of engine.block_size 1"),
    ],
)  # fmt: skip
def test_sizes_beyond_a_simulation_are_refused_with_the_field(edit, expected):
    assert expected in _one_error(edit)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # R29: a TP that does not split qwen2.5-7b's 28 heads named neither the file nor the run
        (lambda r: r.update(tp=3), "tp is not usable: TP=3 does not divide the 28 attention"),
        (lambda r: r.update(tp=10**30), "tp must be a whole number from 1 to 1,024"),
        # the file and the run were named twice
        (lambda r: r.pop("weights_precision"), "run 'trainval:64': weights_precision is missing"),
        (lambda r: r.update(kv_precision="int4"), "run 'trainval:64': kv_precision is not usable"),
        (lambda r: r["engine"].update(gpu_memory_utilization=1e-9),
         "engine.gpu_memory_utilization 1e-09 of 85.05 GB (the GPU's CUDA total) leaves 0 B "
         "per GPU beside the weights of qwen2.5-7b bf16 on h100-sxm (15.23 GB)"),
        # vLLM's SchedulerConfig refuses this at start-up
        (lambda r: r["engine"].update(chunked_prefill=False, max_num_batched_tokens=2048),
         "engine.max_num_batched_tokens (2,048) is below engine.max_model_len (4,096) with "
         "chunked_prefill false"),
    ],
)  # fmt: skip
def test_deployment_errors_name_the_run_and_field_once(edit, expected):
    assert expected in _one_error(edit)


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        # R17: each value was checked alone; these were fitted
        (lambda m: m.update(ttft_mean_seconds=100.0),
         "measured.ttft_mean_seconds (100 s) is above measured.e2e_mean_seconds (1.7718 s)"),
        (lambda m: m.update(e2e_p90_seconds=99.0),
         "measured.e2e_p90_seconds (99 s) is above measured.e2e_p99_seconds"),
        (lambda m: m.update(itl_per_token_quantiles_seconds={"5": 0.1}),
         "itl_per_token_quantiles_seconds has the level '5'; levels are numbers between 0 and 1"),
        (lambda m: m.update(itl_per_token_quantiles_seconds={"NaN": 0.1}), "the level 'NaN'"),
        (lambda m: m.update(itl_per_token_quantiles_seconds={"0.5": -1}),
         "measured.itl_per_token_quantiles_seconds['0.5'] must be a finite number > 0"),
        (lambda m: m.update(itl_per_token_quantiles_seconds={"0.5": 0.2, "0.9": 0.1}),
         "has 0.1 s at 0.9, below 0.2 s at the lower level 0.5"),
    ],
)  # fmt: skip
def test_measured_values_that_no_run_can_measure(edit, expected):
    assert expected in _one_error(lambda r: edit(r["measured"]))


def test_a_run_may_leave_its_quantiles_null_but_not_its_means():
    # SGLang's bench_serving prints no p90: a converter leaves them null rather than invent one
    def without(*keys):
        return _run64(lambda r: r["measured"].update(dict.fromkeys(keys)))

    (run,) = [r for r in parse_runs(without("e2e_p90_seconds", "ttft_p90_seconds",
                                            "e2e_p99_seconds"),
                                    source="runs.json") if r.id == "trainval:64"]  # fmt: skip
    assert "ttft_p90_seconds" not in run.measured and "e2e_p99_seconds" not in run.measured
    assert run.measured["ttft_p99_seconds"] > 0
    for key in ("ttft_mean_seconds", "e2e_mean_seconds", "itl_mean_seconds"):
        with pytest.raises(ConfigError, match=f"measured.{key} is missing"):
            parse_runs(without(key), source="runs.json")


def test_the_fixture_is_inside_every_bound():
    # the bounds are far from real runs: all 13 read (as test_the_fixture_reads... checks), and
    # the largest run sends 9,000 requests of ~600-800 tokens
    runs = read_runs(FIXTURE)
    assert max(run.workload.requests or 0 for run in runs) == 9000


def test_an_error_the_engine_raises_names_the_run():
    # a run built in code skips the reader's checks; the engine's words alone named no run
    from dataclasses import replace

    from itlkit.calibration.predict import simulate_run

    run = next(r for r in read_runs(FIXTURE) if r.id == "trainval:64")
    with pytest.raises(ConfigError, match=r"^run 'trainval:64': .*the weights leave no KV cache"):
        simulate_run(replace(run, gpu_memory_utilization=0.01))


def test_a_run_says_which_link_its_tp_crosses():
    def parsed(edit):
        doc = _run64(edit)
        return next(r for r in parse_runs(doc, source="runs.json") if r.id == "trainval:64")

    assert parsed(lambda run: None).interconnect is None  # the GPU's own link
    assert parsed(lambda run: run.update(interconnect="pcie")).interconnect == "pcie"
    # the flag the transcribed tables use for TP across nodes
    assert parsed(lambda run: run.update(flags=["tp_across_nodes"])).interconnect == "network"
    message = _one_error(lambda run: run.update(interconnect="ethernet"))
    assert "interconnect" in message and "nvlink, pcie, network" in message
    assert "\n" not in message


def test_a_run_may_name_its_model_as_served_and_says_how_it_was_read():
    # trainval:64 serves Qwen/Qwen2.5-7B-Instruct (its hf_model_id), the catalog's qwen2.5-7b
    by_slug = parse_runs(DOC, source="runs.json")[RUN64]
    (by_name,) = [r for r in parse_runs(_run64(lambda r: r.update(model=r["hf_model_id"])),
                                        source="runs.json") if r.id == "trainval:64"]  # fmt: skip
    assert by_name.model == by_slug.model
    assert by_name.engine_assumptions[0] == (
        "model 'Qwen/Qwen2.5-7B-Instruct' read as the catalog's qwen2.5-7b, the architecture its "
        "name gives (the run's weights_precision prices it)"
    )
    assert by_name.engine_assumptions[1:] == by_slug.engine_assumptions
    message = _one_error(lambda r: r.update(model="acme/Turbo-7B"))
    assert "model" in message and "unknown model 'acme/Turbo-7B'" in message
