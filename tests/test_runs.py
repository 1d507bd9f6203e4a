"""sim.runs: the `itlkit-runs/1` format, read from the 13 real runs of the fixture, and bad files.

Expected values are the fixture's own (tests/data/real_runs/, from shared/fixtures with its
attribution) and Llama 4 Scout's published size (107.8 B total, 17.2 B active).
"""

from __future__ import annotations

import copy
import json

import pytest
from _paths import DATA

from itlkit.errors import ConfigError
from itlkit.sim.runs import parse_runs, read_runs

FIXTURE = DATA / "real_runs" / "real_runs_trainval.json"
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
        (lambda d: d["runs"][0].update(tp=0), r"tp must be a finite number > 0"),
        (lambda d: d["runs"][0].update(tp="2"), r"tp must be int"),
        (lambda d: d["runs"][0].update(weights_precision="fp3"), "fp3"),
        (lambda d: d["runs"][1]["workload"].update(stages=[{"rate_per_second": -5,
                                                            "duration_seconds": 600}]),
         "rate_per_second must be a finite number > 0"),
        (lambda d: d["runs"][0]["measured"].pop("ttft_mean_seconds"), "ttft_mean_seconds is mi"),
        (lambda d: d["runs"][0]["engine"].update(chunked_prefill="yes"), "must be true or false"),
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
