"""sim.versions: `vllm serve`'s defaults by release, engine, GPU and context, against vLLM's source.

Expected values are read in the release wheels (PyPI `vllm==X`), as each row of
`versions.RELEASES` cites: vllm/engine/arg_utils.py (`_set_default_args_v1` @ v0.8.0-v0.10.2,
`get_batch_defaults` @ v0.11.1+), vllm/config.py `SchedulerConfig` (V0's budgets) and
vllm/config/cache.py (gpu_memory_utilization). GPU totals are CUDA's (`engine_memory`): H100 SXM
85.05e9 B = 79.2 GiB, A100 80GB 85.10e9 B = 79.3 GiB, L40S 44.5 GiB, B200 178.3 GiB.
"""

from __future__ import annotations

import copy
import json

import pytest
from _paths import REAL_RUNS
from hypothesis import given
from hypothesis import strategies as st

from itlkit.cli import main
from itlkit.errors import ConfigError
from itlkit.physics.engine_memory import cuda_total_bytes
from itlkit.physics.hardware import get_gpu
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.runs import parse_runs
from itlkit.sim.versions import (
    ENGINE_RELEASES,
    FIRST_UNKNOWN,
    GIB,
    RELEASES,
    V1_TIERS,
    engine_defaults,
    parse_vllm_version,
)

DOC = json.loads((REAL_RUNS / "real_runs_trainval.json").read_text())


def on(version, gpu: str, *, max_model_len: int = 8192, **given):
    """`version`'s settings on a catalog GPU, as CUDA reports its memory and name."""
    hardware = get_gpu(gpu)
    return engine_defaults(version, gpu_memory_bytes=cuda_total_bytes(hardware)[0],
                           gpu_name=hardware.name, max_model_len=max_model_len,
                           given=given)  # fmt: skip


def batch(settings) -> tuple[int, int]:
    return settings.max_num_batched_tokens, settings.max_num_seqs


# ---- the parser ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "release", "engine"),
    [
        ("0.10.1.1", (0, 10, 1, 1), "V1"),
        ("v0.6.3", (0, 6, 3), "V0"),
        ("0.15", (0, 15, 0), "V1"),  # a minor release reads as its .0
        ("0.8.5.post1", (0, 8, 5), "V1"),
        (" 0.7.3 ", (0, 7, 3), "V0"),
        ("V0", (0, 7, 3), "V0"),  # the last release where V0 was the default
        ("v1", (0, 10, 1, 1), "V1"),
        ("0.33.0", (0, 33, 0), "V1"),
        ("0.5.0", (0, 5, 0), "V0"),
    ],
)
def test_version_strings_parse(text, release, engine):
    version = parse_vllm_version(text)
    assert version.release == release and version.engine == engine


# What `vllm --version` prints for builds other than a release (PEP 440): each takes the release
# it names, and its label (the first line of the printed assumptions) says how it was read.
@pytest.mark.parametrize(
    ("text", "release", "said"),
    [
        ("0.11.0rc1", (0, 11, 0), "a pre-release of 0.11.0, read as 0.11.0"),
        ("0.9.0b2", (0, 9, 0), "a pre-release of 0.9.0"),
        ("0.11.1.dev5+g2aeac4b", (0, 11, 1), "a development build toward 0.11.1"),
        ("0.10.1.1+cu126", (0, 10, 1, 1), "build label '+cu126' left aside"),
        ("v0.12.0rc2.dev7+gabc1234", (0, 12, 0), "a pre-release of 0.12.0"),
    ],
)
def test_pre_release_and_development_builds_read_as_their_release(text, release, said):
    version = parse_vllm_version(text)
    assert version.release == release
    assert said in version.label and repr(text) in version.label
    assert not parse_vllm_version(".".join(map(str, release))).build  # a release needs no note


def test_a_runs_release_candidate_takes_the_releases_defaults():
    rc, release = on("0.11.0rc1", "h100-sxm"), on("0.11.0", "h100-sxm")
    assert batch(rc) == (8192, 1024)  # V1 on a GPU of at least 70 GiB
    assert (batch(rc), rc.engine) == (batch(release), release.engine)
    assert "given as '0.11.0rc1': a pre-release of 0.11.0" in rc.assumptions[0]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0.4.3", "itlkit knows the defaults of vLLM 0.5.0 to 0.33.x"),
        ("0.34.0", "measured free memory"),  # the extensible KV cache, not modelled
        ("1.0", "itlkit knows"),
        ("V2", "is not a vLLM version"),
        ("latest", "is not a vLLM version"),
        ("0.10.1.1.1", "is not a vLLM version"),
        ("v0.11.0-cu128", "is not a vLLM version"),  # a container tag, not PEP 440
        ("1!0.10.0", "is not a vLLM version"),  # an epoch
        ("0.10.10000", "is not a vLLM version"),
        ("0.34.0rc1", "measured free memory"),  # a pre-release of an unknown release
        ("", "is not a vLLM version"),
        (10, "must be a vLLM version string"),
        (None, "must be a vLLM version string"),
    ],
)
def test_unknown_versions_are_refused(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_vllm_version(text)


@given(st.text(max_size=30))
def test_any_text_parses_or_is_refused_in_words(text):
    try:
        version = parse_vllm_version(text)
    except ConfigError as exc:
        assert "\n" not in str(exc)
    else:
        assert version.release < FIRST_UNKNOWN


def test_the_table_is_ordered_and_each_row_cites_its_releases():
    firsts = [row.first for row in RELEASES]
    assert firsts == sorted(firsts) and len(set(firsts)) == len(firsts)
    for row, after in zip(RELEASES, [*RELEASES[1:], None], strict=True):
        read = [parse_vllm_version(v).release for v in row.read.split()]
        assert read[0] == row.first and read == sorted(read)
        assert after is None or read[-1] < after.first
        assert row.v1_tiers in V1_TIERS and "@ v" in row.citation and "vllm/" in row.citation
        assert row.engine in ("V0", "V1")


# ---- V1: the batch defaults by GPU ----------------------------------------------------------


def test_v1_on_a_large_gpu_is_8192_and_1024():
    # 0.10.1.1 get_batch_defaults: `device_memory >= 70 * GiB_bytes and "a100" not in
    # device_name` -> OPENAI_API_SERVER 8192, 1024
    s = on("0.10.1.1", "h100-sxm")
    assert batch(s) == (8192, 1024)
    assert s.enable_chunked_prefill and s.enable_prefix_caching
    assert (s.block_size, s.gpu_memory_utilization, s.engine) == (16, 0.9, "V1")


@pytest.mark.parametrize("gpu", ["l40s", "l4", "a100-40gb-sxm", "a100-80gb-sxm"])
def test_v1_below_the_threshold_or_on_an_a100_is_2048_and_256(gpu):
    assert batch(on("0.10.1.1", gpu)) == (2048, 256)


def test_the_thresholds_are_70_and_160_gib_of_cuda_total():
    def tokens(memory, release="0.15.1"):
        return engine_defaults(release, gpu_memory_bytes=memory, gpu_name="NVIDIA B200",
                               max_model_len=8192).max_num_batched_tokens  # fmt: skip

    assert tokens(70 * GIB) == 8192
    assert tokens(70 * GIB - 1) == 2048
    assert tokens(160 * GIB, "0.28.0") == 16384
    assert tokens(160 * GIB - 1, "0.28.0") == 8192


def test_how_each_release_chose_the_large_gpu():
    # 0.8.0-0.8.3: H100/H200 by name, max_num_seqs 1024 everywhere
    assert batch(on("0.8.0", "l40s")) == (2048, 1024)
    assert batch(on("0.8.3", "h200-sxm")) == (8192, 1024)
    # 0.8.4: by name, 256 elsewhere; a 64 GB H100 still counts as large by its name
    assert batch(on("0.8.4", "h100-64gb")) == (8192, 1024)
    assert batch(on("0.8.4", "mi300x")) == (2048, 256)
    # 0.8.5: by memory only: the A100 80GB and a 192 GB MI300X are large, a 64 GB H100 is not
    assert batch(on("0.8.5", "a100-80gb-sxm")) == (8192, 1024)
    assert batch(on("0.8.5", "mi300x")) == (8192, 1024)
    assert batch(on("0.8.5", "h100-64gb")) == (2048, 256)
    # 0.9.0 on: not an A100
    assert batch(on("0.9.0", "a100-80gb-sxm")) == (2048, 256)
    # 0.28.0 on: 16384 from 160 GiB (B200 178 GiB; H200 131 GiB stays at 8192)
    assert batch(on("0.27.1", "b200")) == (8192, 1024)
    assert batch(on("0.28.0", "b200")) == (16384, 1024)
    assert batch(on("0.28.0", "h200-sxm")) == (8192, 1024)


def test_v1_clamps_max_num_seqs_to_the_budget_from_0_10_1():
    # `min(default_max_num_seqs[usage_context], self.max_num_batched_tokens)` @ v0.10.1
    assert batch(on("0.10.1", "h100-sxm", max_num_batched_tokens=512)) == (512, 512)
    # before it, vLLM's SchedulerConfig refuses max_num_seqs > max_num_batched_tokens
    with pytest.raises(ConfigError, match="max_num_seqs 1,024 .* exceeds max_num_batched_tokens"):
        on("0.10.0", "h100-sxm", max_num_batched_tokens=512)
    assert batch(on("0.10.0", "h100-sxm", max_num_batched_tokens=512, max_num_seqs=64)) == (
        512, 64
    )  # fmt: skip


def test_v1_chunked_prefill_is_forced_until_0_11_0_and_kept_off_after():
    forced = on("0.11.0", "h100-sxm", enable_chunked_prefill=False)
    assert forced.enable_chunked_prefill
    assert any("whatever is given" in line for line in forced.assumptions)
    # 0.11.1: a given off is kept, and the default budget holds max_model_len
    kept = on("0.11.1", "h100-sxm", max_model_len=32_768, enable_chunked_prefill=False)
    assert not kept.enable_chunked_prefill and kept.max_num_batched_tokens == 32_768


def test_v1_caps_the_default_budget_at_max_num_seqs_times_max_model_len_from_0_11_1():
    assert on("0.11.1", "h100-sxm", max_model_len=4).max_num_batched_tokens == 4096
    assert on("0.11.0", "h100-sxm", max_model_len=4).max_num_batched_tokens == 8192


def test_memory_share_and_async_scheduling_by_release():
    assert on("0.19.1", "h100-sxm").gpu_memory_utilization == 0.9
    assert on("0.20.0", "h100-sxm").gpu_memory_utilization == 0.92  # Field(default=0.92)
    releases = ("0.9.2", "0.10.0", "0.13.0", "0.14.0")
    assert [on(v, "h100-sxm").async_scheduling for v in releases] == [None, False, False, True]


# ---- V0 ------------------------------------------------------------------------------------


def test_v0_leaves_chunked_prefill_off_up_to_32k():
    s = on("0.6.3", "h100-sxm", max_model_len=8192)
    assert not s.enable_chunked_prefill and not s.enable_prefix_caching
    # unchunked, the budget is max(max_model_len, 2048); 256 sequences
    assert batch(s) == (8192, 256) and s.engine == "V0"
    assert on("0.6.3", "h100-sxm", max_model_len=1024).max_num_batched_tokens == 2048
    assert not on("0.6.3", "h100-sxm", max_model_len=32_768).enable_chunked_prefill


def test_v0_chunks_above_32k_at_512_then_2048():
    long = {"max_model_len": 32_769}
    assert batch(on("0.6.3", "h100-sxm", **long)) == (512, 256)
    assert batch(on("0.6.4", "h100-sxm", **long)) == (512, 256)
    assert batch(on("0.6.5", "h100-sxm", **long)) == (2048, 256)  # 'a balance between ITL and TTFT'
    assert on("V0", "h100-sxm", **long).enable_chunked_prefill
    # 0.5.0-0.5.2 had no 32K rule
    assert not on("0.5.2", "h100-sxm", max_model_len=131_072).enable_chunked_prefill
    assert on("0.5.3", "h100-sxm", max_model_len=131_072).enable_chunked_prefill


def test_v0_with_chunked_prefill_given_takes_its_chunked_budget():
    assert batch(on("0.7.3", "l4", enable_chunked_prefill=True)) == (2048, 256)


# ---- what is given, what is said ------------------------------------------------------------


def test_given_settings_stay_and_every_default_taken_is_said():
    s = on("0.15.1", "h100-sxm", max_num_batched_tokens=2048, gpu_memory_utilization=0.8)
    assert batch(s) == (2048, 1024) and s.gpu_memory_utilization == 0.8
    taken = [line.split(" ")[0] for line in s.assumptions[1:]]
    assert "max_num_seqs" in taken and "block_size" in taken
    assert "max_num_batched_tokens" not in taken and "gpu_memory_utilization" not in taken
    assert s.assumptions[0].startswith("vLLM 0.15.1: the V1 engine")


def test_no_version_is_itlkits_defaults_whatever_the_gpu():
    for gpu in ("l4", "a100-80gb-sxm", "b200"):
        s = on(None, gpu)
        assert s.scheduler_config() == SchedulerConfig()
        assert s.gpu_memory_utilization == 0.9
    assert batch(on(None, "l4", max_num_batched_tokens=512)) == (512, 512)


# ---- itlkit simulate -----------------------------------------------------------------------


def _json(capsys, *args):
    assert main(["simulate", "--json", "--duration", "10", "--rate", "2", "--drain", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_simulate_takes_the_versions_defaults_and_says_so(capsys):
    out = _json(capsys, "--vllm-version", "0.6.3", "--max-model-len", "8192")
    assert out["config"]["max_num_batched_tokens"] == 8192
    assert out["config"]["max_num_seqs"] == 256
    assert out["config"]["enable_chunked_prefill"] is False
    assert out["vllm_version"] == "vLLM 0.6.3"
    assert any(a.startswith("max_num_seqs 256") for a in out["assumptions"])
    given = _json(capsys, "--vllm-version", "0.6.3", "--max-num-seqs", "64", "--chunked-prefill")
    assert given["config"]["max_num_seqs"] == 64
    assert given["config"]["max_num_batched_tokens"] == 512  # V0's chunked budget in 0.6.3
    small = _json(capsys, "--vllm-version", "0.10.1.1", "--gpu", "l40s")
    assert (small["config"]["max_num_batched_tokens"], small["config"]["max_num_seqs"]) == (
        2048, 256
    )  # fmt: skip
    assert main(["simulate", "--duration", "10", "--rate", "2", "--vllm-version", "V1"]) == 0
    text = capsys.readouterr().out
    assert "assumed: V1 (read as vLLM 0.10.1.1)" in text
    assert "assumed: max_num_batched_tokens 8,192" in text


def test_simulate_says_max_model_len_is_assumed(capsys):
    out = _json(capsys, "--vllm-version", "0.7.3")
    assert any(a.startswith("max_model_len 32,768 (not given") for a in out["assumptions"])
    assert out["config"]["max_num_batched_tokens"] == 32_768


def test_simulate_refuses_an_unknown_version_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["simulate", "--vllm-version", "0.4.3"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1
    assert "--vllm-version" in err and "0.5.0 to 0.33.x" in err
    assert main(["simulate", "--vllm-version", "0.9.2", "--max-num-batched-tokens", "512"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--vllm-version 0.9.2: max_num_seqs 1,024" in err


def test_without_a_version_the_cli_settings_are_todays():
    from itlkit.cli import build_parser
    from itlkit.cli._engine_args import engine_settings as _engine_settings

    for flags, seqs in (((), 1024), (("--max-num-batched-tokens", "300"), 300)):
        args = build_parser("simulate").parse_args(["simulate", *flags])
        settings = _engine_settings(args)
        assert settings.gpu_memory_utilization == 0.9  # --gpu-memory-utilization's old default
        budget = args.max_num_batched_tokens or 8192
        assert settings.scheduler_config() == SchedulerConfig(
            max_num_batched_tokens=budget, max_num_seqs=seqs, enable_chunked_prefill=True
        )


_TODAY = ("--gpu-memory-utilization", "0.9")  # the flag's default before versions


@pytest.mark.parametrize(
    ("flags", "spelled_out"),
    [
        ((), ("--max-num-batched-tokens", "8192", "--max-num-seqs", "1024", "--chunked-prefill")),
        (("--max-num-batched-tokens", "2112"), ("--max-num-seqs", "1024", "--chunked-prefill")),
        (("--max-num-batched-tokens", "512", "--gpu", "l4"), ("--max-num-seqs", "512",
                                                              "--chunked-prefill")),
        (("--max-num-seqs", "64", "--gpu-memory-utilization", "0.8"),
         ("--max-num-batched-tokens", "8192", "--chunked-prefill")),
        (("--max-num-batched-tokens", "4352", "--no-chunked-prefill"), ("--max-num-seqs", "1024")),
    ],
)  # fmt: skip
def test_without_a_version_the_simulation_is_todays(capsys, flags, spelled_out):
    """Before versions the CLI ran a budget of 8192, max_num_seqs min(1024, budget), chunked
    prefill on and a memory share of 0.9: the same run with them spelled out gives the same
    JSON, key for key."""
    new = _json(capsys, *flags)
    old = _json(capsys, *_TODAY, *flags, *spelled_out)
    assert new.pop("vllm_version") is None and old.pop("vllm_version") is None
    assert new.pop("assumptions")[0].startswith("no vLLM version given")
    old.pop("assumptions")
    assert new == old


# ---- the runs format -----------------------------------------------------------------------


def _run(engine: dict, *, gpu: str = "h100-sxm", defaults: dict | None = None):
    """trainval:64 (Qwen2.5-7B, one H100, 2048-token budget) with these engine fields."""
    doc = copy.deepcopy(DOC)
    doc["runs"] = [r for r in doc["runs"] if r["id"] == "trainval:64"]
    doc["runs"][0]["gpu"] = gpu
    doc["runs"][0]["engine"] = {"name": "vllm", **engine}
    if defaults is None:
        doc.pop("defaults_for_null")
    else:
        doc["defaults_for_null"] = defaults
    (run,) = parse_runs(doc, source="runs.json")
    return run


def test_the_fixtures_version_changes_none_of_its_values():
    with_version = parse_runs(DOC, source="fixture")
    doc = copy.deepcopy(DOC)
    for run in doc["runs"]:
        del run["engine"]["version"]
    without = parse_runs(doc, source="fixture")
    fields = ("max_num_batched_tokens", "max_num_seqs", "max_model_len", "block_size",
              "gpu_memory_utilization", "chunked_prefill", "prefix_caching")  # fmt: skip
    for a, b in zip(with_version, without, strict=True):
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
        assert a.vllm_version == "vLLM 0.15.1" and b.vllm_version is None
        assert "max_num_seqs 128 (the file's defaults_for_null)" in a.engine_assumptions
        assert b.engine_assumptions == ()


@pytest.mark.parametrize("text, release, engine", [
    ("0.6.3.post1", (0, 6, 3), "V0"),  # labelled "vLLM 0.6.3 (given as '0.6.3.post1')"
    ("v0.8.5", (0, 8, 5), "V1"),  # labelled "vLLM 0.8.5 (given as 'v0.8.5')"
    ("0.11.1rc2+cu128", (0, 11, 1), "V1"),  # "vLLM 0.11.1 (given as '...': a pre-release ...)"
    ("V0", ENGINE_RELEASES["V0"], "V0"),  # labelled "V0 (read as vLLM ...)"
])  # fmt: skip
def test_a_run_reads_its_release_back_from_any_label(text, release, engine):
    run = _run({"vllm_version": text, "max_num_batched_tokens": 8192, "max_model_len": 8192})
    assert (run.release.release, run.release.engine) == (release, engine)


def test_a_runs_async_scheduling_is_stated_as_the_server_ran_it():
    # vLLM 0.11.x defaults it off; a run whose server passed --async-scheduling says on
    given = {"vllm_version": "0.11.2", "max_num_batched_tokens": 8192, "max_model_len": 8192}
    default = " ".join(_run(given).engine_assumptions)
    assert "--async-scheduling off:" in default and "(the server's)" not in default
    on = " ".join(_run({**given, "async_scheduling": True}).engine_assumptions)
    assert "--async-scheduling on (the server's)" in on
    with pytest.raises(ConfigError, match="engine.async_scheduling must be true or false"):
        _run({**given, "async_scheduling": "yes"})


def test_a_runs_null_fields_take_its_versions_defaults_on_its_gpu():
    a100 = _run({"vllm_version": "0.10.1.1", "max_num_batched_tokens": 2048,
                 "max_model_len": 8192}, gpu="a100-80gb-sxm")  # fmt: skip
    assert (a100.max_num_seqs, a100.gpu_memory_utilization, a100.block_size) == (256, 0.9, 16)
    assert a100.chunked_prefill and a100.prefix_caching
    h100 = _run({"vllm_version": "0.10.1.1", "max_model_len": 8192})
    assert (h100.max_num_batched_tokens, h100.max_num_seqs) == (8192, 1024)
    v0 = _run({"vllm_version": "0.6.3", "max_model_len": 4096})
    assert (v0.max_num_batched_tokens, v0.max_num_seqs) == (4096, 256)
    assert not v0.chunked_prefill and not v0.prefix_caching
    # the file's defaults_for_null come before the version's
    stated = _run({"vllm_version": "0.10.1.1", "max_model_len": 8192},
                  defaults={"max_num_seqs": 128})  # fmt: skip
    assert stated.max_num_seqs == 128


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        ({"vllm_version": "0.4.3"}, "engine.vllm_version '0.4.3': itlkit knows"),
        ({"version": "9.9"}, "engine.version '9.9': itlkit knows"),
        ({"vllm_version": 15}, "engine.vllm_version must be a vLLM version string"),
        ({"vllm_version": "0.9.2", "version": "0.10.0"}, "name different releases"),
        ({"vllm_version": "0.9.2", "max_num_batched_tokens": 512}, "engine.max_num_seqs is needed"),
        ({"vllm_version": "0.9.2", "prefix_caching": "yes"}, "engine.prefix_caching must be true"),
    ],
)
def test_a_bad_version_field_is_one_line_naming_it(engine, message):
    with pytest.raises(ConfigError, match=message) as error:
        _run({"max_num_batched_tokens": 2048, "max_model_len": 8192, **engine})
    assert "runs.json: run 'trainval:64'" in str(error.value) and "\n" not in str(error.value)


def test_another_engines_version_is_not_read_as_vllms():
    # an SGLang run's version is SGLang's: its settings are SGLang's (tests/test_sglang_runs.py)
    run = _run({"name": "sglang", "version": "0.4.3", "chunked_prefill_size": 2048})
    assert run.vllm_version is None and run.engine == "SGLang"
    assert run.max_num_batched_tokens == 2048
    with pytest.raises(
        ConfigError,
        match="engine.max_num_batched_tokens is vLLM's setting; an "
        "SGLang run gives chunked_prefill_size",
    ):
        _run({"name": "sglang", "max_num_batched_tokens": 2048})


def test_simulate_runs_prints_the_defaults_a_runs_version_gave_it(tmp_path, capsys):
    from itlkit.cli import main

    doc = copy.deepcopy(DOC)
    doc["runs"] = [r for r in doc["runs"] if r["id"] == "trainval:64"]
    doc["runs"][0]["gpu"] = "a100-80gb-sxm"
    doc["runs"][0]["engine"] = {"name": "vllm", "vllm_version": "0.10.1.1",
                                "max_num_batched_tokens": 2048, "max_model_len": 8192}  # fmt: skip
    doc.pop("defaults_for_null")
    path = tmp_path / "runs.json"
    path.write_text(json.dumps(doc))
    assert main(["simulate", "--runs", str(path), "--calibration", "none"]) == 0
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    assert any(a.startswith("max_num_seqs 256") for a in line["assumed"]), line["assumed"]


def test_simulate_takes_async_scheduling_from_the_release_or_the_flag(capsys):
    on_ = _json(capsys, "--vllm-version", "0.15.1")
    assert on_["config"]["async_scheduling"] is True
    assert any("joins the step after next" in a for a in on_["assumptions"])
    off = _json(capsys, "--vllm-version", "0.15.1", "--no-async-scheduling")
    assert off["config"]["async_scheduling"] is False
    assert not any("joins the step after next" in a for a in off["assumptions"])
    assert _json(capsys, "--vllm-version", "0.13.0")["config"]["async_scheduling"] is False
    assert _json(capsys)["config"]["async_scheduling"] is False  # none named: off
    given = _json(capsys, "--async-scheduling")
    assert given["config"]["async_scheduling"] is True
    assert "--async-scheduling on (given)" in given["assumptions"]
    # the same arrivals wait a step more for their first token: TTFT longer, never shorter
    assert on_["ttft_mean_seconds"] > off["ttft_mean_seconds"]
    assert main(["simulate", "--engine", "sglang", "--async-scheduling"]) != 0
    assert "--async-scheduling / --no-async-scheduling is a vLLM setting" in (
        capsys.readouterr().err)  # fmt: skip


def test_async_scheduling_is_refused_where_the_release_has_no_such_option(capsys):
    def settings(version, flag):
        h100 = get_gpu("h100-sxm")
        return engine_defaults(version, gpu_memory_bytes=cuda_total_bytes(h100)[0],
                               max_model_len=8192, async_scheduling=flag)  # fmt: skip

    with pytest.raises(ConfigError, match=r"vLLM 0.9.2 has no --async-scheduling"):
        settings("0.9.2", True)
    assert settings("0.9.2", False).async_scheduling is False
    assert settings("0.10.0", True).async_scheduling is True  # the option's first release
    assert main(["simulate", "--vllm-version", "0.6.3", "--async-scheduling"]) != 0
    assert "vLLM 0.6.3 has no --async-scheduling" in capsys.readouterr().err
