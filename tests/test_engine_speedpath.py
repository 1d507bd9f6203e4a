"""The engine's speed paths (decode stretches, tabulated decode times, batched step records)
change no result: every array equals the one the step-by-step engine produces, bit for bit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from itlkit.errors import ConfigError
from itlkit.physics.roofline import Deployment
from itlkit.sim import decode_times, engine, step_log
from itlkit.sim.lengths import Uniform
from itlkit.sim.results import SimulationResult
from itlkit.sim.scheduler import (
    SchedulerConfig,
    roofline_step_function,
    simulate,
    simulate_deployment,
    step_jitter_factors,
)
from itlkit.sim.workload import synthetic_workload

ARRAYS = [
    f.name for f in dataclasses.fields(SimulationResult) if f.name not in ("config", "workload")
]


@pytest.fixture(scope="module")
def llama_h100() -> Deployment:
    return Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")


def _assert_identical(a, b) -> None:
    for name in ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name
        else:
            assert x == y, name


CASES = {
    # issue 8's traffic: 64 slots full, a queue, prompts in two chunks
    "issue 8": (dict(rate_per_second=2, prompt_tokens=4096, output_tokens=1536),
                SchedulerConfig(max_num_batched_tokens=2112, max_num_seqs=64), None),
    "jitter": (dict(rate_per_second=3, prompt_tokens=Uniform(500, 4000), output_tokens=300),
               SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=32), 0.2),
    "disaggregated": (dict(rate_per_second=6, prompt_tokens=2048, output_tokens=256),
                      SchedulerConfig(disaggregated=True, max_num_seqs=32), 0.1),
    "no chunking": (dict(rate_per_second=4, prompt_tokens=Uniform(500, 6000), output_tokens=200),
                    SchedulerConfig(enable_chunked_prefill=False, max_num_seqs=48), None),
    # vLLM's --async-scheduling: an arrival joins the step after next, stretches stop for it
    "async scheduling": (dict(rate_per_second=3, prompt_tokens=Uniform(500, 4000),
                              output_tokens=300),
                         SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=32,
                                         async_scheduling=True), 0.2),
}  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_speed_paths_match_step_by_step(llama_h100, monkeypatch, name):
    lengths, config, sigma = CASES[name]
    w = synthetic_workload(duration_seconds=120, seed=3, **lengths)
    jitter = None if sigma is None else step_jitter_factors(sigma, seed=1)

    def run():
        return simulate_deployment(
            w, deployment=llama_h100, config=config, until_seconds=120, jitter=jitter
        )

    fast = run()
    monkeypatch.setattr(decode_times, "TABLE_AFTER_STRETCHES", 10**9)  # every stretch calls
    untabulated = run()
    monkeypatch.setattr(step_log, "PENDING_STEPS", 7)  # many small record writes
    monkeypatch.setattr(engine, "FAST_PATH_MIN_STEPS", 10**9)  # no stretches at all
    slow = run()
    assert fast.steps > 1000 and slow.steps == fast.steps
    _assert_identical(fast, untabulated)
    _assert_identical(fast, slow)


def test_decode_times_tabulates_a_recurring_decode_count(llama_h100):
    step = roofline_step_function(llama_h100)
    times = decode_times.DecodeTimes(step)
    kv = 300_000
    for _ in range(decode_times.TABLE_AFTER_STRETCHES - 1):
        assert times.lookup(64, kv, 30) is None
    table = times.lookup(64, kv, 30)
    direct = step(decode_tokens=64, prefill_tokens=0, kv_tokens=kv + 64 * np.arange(30))
    assert np.array_equal(table, direct)
    assert times.tokens == 64 * 29 + 1 + decode_times.TABLE_PAD_TOKENS  # padded past the end
    # A stretch past the table's end widens it; the old entries stay.
    wide = times.lookup(64, kv + 5_000, 200)
    assert np.array_equal(
        wide, step(decode_tokens=64, prefill_tokens=0, kv_tokens=kv + 5_000 + 64 * np.arange(200))
    )
    assert times.tokens <= decode_times.TABLE_MAX_TOKENS


def test_decode_times_never_tabulates_a_time_not_above_zero():
    def step(*, decode_tokens, prefill_tokens, kv_tokens):
        return 1e-3 - 1e-9 * np.asarray(kv_tokens)  # <= 0 s from 1e6 KV tokens on

    times = decode_times.DecodeTimes(step)
    for _ in range(2 * decode_times.TABLE_AFTER_STRETCHES):
        assert times.lookup(8, 999_000, 10) is None
    assert times.tables == {}


def test_a_stretch_with_a_step_not_above_zero_is_refused():
    w = synthetic_workload(duration_seconds=5, rate_per_second=4, prompt_tokens=100,
                           output_tokens=400, seed=0)  # fmt: skip

    def step(*, decode_tokens, prefill_tokens, kv_tokens):
        if prefill_tokens:
            return 1e-2
        return 1e-2 - 5e-6 * np.asarray(kv_tokens, dtype=float)  # decodes: <= 0 s from 2,000

    with pytest.raises(ConfigError, match="step function"):
        simulate(w, step_function=step, kv_capacity_tokens=100_000)


def test_a_step_whose_finishes_were_all_cancelled_no_longer_ends_a_stretch():
    # A decoder paused by a prefill-only step (or preempted) bumps its epoch: the finish it had
    # scheduled at step 5 is void, and `retire` would skip it. The next finish is step 7's.
    class Request:
        def __init__(self, epoch):
            self.epoch = epoch

    paused, live, later = Request(epoch=1), Request(epoch=0), Request(epoch=0)
    e = object.__new__(engine.Engine)
    e.finish_steps = [5, 7, 9]
    e.finishes = {5: [(paused, 0)], 7: [(paused, 0), (live, 0)], 9: [(later, 0)]}
    assert e.next_finish() == 7
    assert 5 not in e.finishes and e.finish_steps[0] == 7  # dropped, as retire would have
    assert e.next_finish() == 7  # a step with one live finish stays
    e.finish_steps, e.finishes = [], {}
    assert e.next_finish() == float("inf")
