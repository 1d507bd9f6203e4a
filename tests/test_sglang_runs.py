"""A runs file may name SGLang as the engine (`engine.name: "sglang"`), in SGLang's own flag
names; what is left out takes SGLang's defaults on the run's GPU (itlkit/sim/sglang.py cites its
source), and the run is replayed with SGLang's schedule and KV pool.

The run: trainval:64 of the bundled runs (Qwen2.5-7B on one H100, vLLM 0.15.1), re-labelled as
served by SGLang with its defaults.
"""

import copy
import json

import numpy as np
import pytest
from _paths import REAL_RUNS

from itlkit.calibration.predict import run_config, run_deployment, run_kv_tokens, simulate_run
from itlkit.errors import ConfigError
from itlkit.physics.engine_memory import sglang_kv_cache
from itlkit.sim.runs import parse_runs

BASE = json.loads((REAL_RUNS / "real_runs_trainval.json").read_text())


def _as_sglang(**engine):
    doc = copy.deepcopy(BASE)
    run = next(r for r in doc["runs"] if r["id"] == "trainval:64")
    run["engine"] = {"name": "sglang", **engine}
    doc["runs"] = [run]
    return parse_runs(doc)[0]


def test_an_sglang_run_takes_sglangs_defaults_on_its_gpu():
    run = _as_sglang()
    assert run.engine == "SGLang"
    # an H100 (79.2 GiB as CUDA counts it) is below 90 GiB: chunk 8,192; memory share 0.834
    assert run.max_num_batched_tokens == 8192 and run.gpu_memory_utilization == 0.834
    assert any("chunked_prefill_size 8,192" in a for a in run.engine_assumptions)
    # its KV pool in one-token pages, and the running-request cap SGLang derives from it:
    # min(KV // 2, min(max(KV / context x 512, 2,048), 4,096))
    dep = run_deployment(run)
    kv = run_kv_tokens(run, dep)
    assert kv == sglang_kv_cache(dep).kv_tokens and run.block_size == 1
    pool = min(max(int(kv / run.max_model_len * 512), 2048), 4096)
    config = run_config(run, kv_tokens=kv)
    assert config.max_num_seqs == min(kv // 2, pool) and config.prefill_only_steps


def test_an_sglang_run_replays_with_prefill_batches_alone():
    result = simulate_run(_as_sglang(chunked_prefill_size=2048))
    assert result.config.prefill_only_steps and result.config.max_num_batched_tokens == 2048
    both = (result.step_prefill_tokens > 0) & (result.step_decode_tokens > 0)
    assert not both.any() and result.finished.all()
    mixed = simulate_run(_as_sglang(chunked_prefill_size=2048, enable_mixed_chunk=True))
    assert not mixed.config.prefill_only_steps
    assert np.any((mixed.step_prefill_tokens > 0) & (mixed.step_decode_tokens > 0))


def test_disable_radix_cache_turns_the_prefix_cache_off():
    on, off = (
        _as_sglang(chunked_prefill_size=2048),
        _as_sglang(chunked_prefill_size=2048, disable_radix_cache=True),
    )
    assert on.prefix_caching and not off.prefix_caching
    assert not run_config(off, kv_tokens=10**6).enable_prefix_caching
    # trainval:64 cycles 100 prompts over 10 shared system prompts: with the radix cache the
    # repeats are served from it, without it every prompt token is computed
    computed_on = simulate_run(on).step_prefill_tokens.sum()
    computed_off = simulate_run(off).step_prefill_tokens.sum()
    prompts = off.workload.prompt_tokens * off.workload.requests
    assert computed_off == pytest.approx(prompts, rel=0.01) and computed_on < 0.7 * computed_off


def test_a_bad_sglang_field_is_named():
    with pytest.raises(ConfigError, match="engine.enable_mixed_chunk.*true or false"):
        _as_sglang(enable_mixed_chunk="yes")
    with pytest.raises(ConfigError, match="engine.disable_radix_cache.*true or false"):
        _as_sglang(disable_radix_cache="yes")
    with pytest.raises(ConfigError, match="engine.chunked_prefill_size"):
        _as_sglang(chunked_prefill_size=-5)


def test_an_sglang_run_gives_its_receive_interval_and_continuous_decode_steps():
    # The names InferenceX's runs carry (data/real-runs-inferencex/inferencex.json), SGLang's
    # own: --scheduler-recv-interval 30 takes new requests every 30 decode passes;
    # --num-continuous-decode-steps 4 is read by no SGLang since sgl-project/sglang#2095
    run = _as_sglang(scheduler_recv_interval=30, num_continuous_decode_steps=4)
    assert (run.scheduler_recv_interval, run.num_continuous_decode_steps) == (30, 4)
    config = run_config(run, kv_tokens=run_kv_tokens(run, run_deployment(run)))
    assert config.recv_skipper.interval == 30
    assert any(a.startswith("num_continuous_decode_steps 4: run as 1")
               for a in run.engine_assumptions)  # fmt: skip
    plain = _as_sglang()
    assert (plain.scheduler_recv_interval, plain.num_continuous_decode_steps) == (1, 1)
    kv = run_kv_tokens(plain, run_deployment(plain))
    assert run_config(plain, kv_tokens=kv).recv_skipper is None  # a pass receives every step
    assert any(a.startswith("scheduler_recv_interval 1: SGLang's default")
               for a in plain.engine_assumptions)  # fmt: skip


@pytest.mark.parametrize("field", ["scheduler_recv_interval", "num_continuous_decode_steps"])
@pytest.mark.parametrize("value", [0, -3, 2.5, "30", True, 10**7])
def test_a_bad_pass_count_is_one_line_naming_the_run_and_field(field, value):
    with pytest.raises(ConfigError) as caught:
        _as_sglang(**{field: value})
    message = str(caught.value)
    assert f"run 'trainval:64': engine.{field}" in message and "\n" not in message
