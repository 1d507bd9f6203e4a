"""The API server's serial intake in front of the engine (issue 20): departures derived by hand,
and a simulated burst whose prompts reach the engine one intake after another."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from _paths import REAL_RUNS_LAMBDA
from hypothesis import given, settings
from hypothesis import strategies as st

from itlkit.calibration.predict import run_config
from itlkit.errors import ConfigError
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.intake import INTAKE_SECONDS_PER_PROMPT_TOKEN, intake_departures
from itlkit.sim.runs import read_runs
from itlkit.sim.scheduler import constant_step_function, simulate
from itlkit.sim.versions import engine_defaults
from itlkit.sim.workload import make_workload


def test_a_burst_is_taken_in_one_prompt_after_another():
    # all sent at 0; 100, 200, 300 tokens at 1 ms a token: in at 0.1, 0.3 and 0.6 s
    done = intake_departures([0.0, 0.0, 0.0], [100, 200, 300], 1e-3)
    assert done.tolist() == pytest.approx([0.1, 0.3, 0.6])


def test_an_idle_intake_starts_at_the_send():
    # the second arrives after the first is in (1.0 > 0.1): it starts at its send; the third
    # (1.05) waits for the second (in at 1.1)
    done = intake_departures([0.0, 1.0, 1.05], [100, 100, 100], 1e-3)
    assert done.tolist() == pytest.approx([0.1, 1.1, 1.2])


def test_no_cost_leaves_the_arrivals():
    arrival = np.array([0.0, 0.5, 0.5])
    done = intake_departures(arrival, [10, 20, 30], 0.0)
    assert done.tolist() == arrival.tolist() and done is not arrival


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 100), st.integers(1, 5000)), min_size=1, max_size=40),
    st.floats(1e-7, 1e-3),
)
def test_the_closed_form_is_the_queue(requests, per_token):
    arrival = np.sort([a for a, _ in requests])
    tokens = [t for _, t in requests]
    free, expected = 0.0, []
    for a, t in zip(arrival.tolist(), tokens, strict=True):
        free = max(a, free) + per_token * t
        expected.append(free)
    assert intake_departures(arrival, tokens, per_token) == pytest.approx(expected, rel=1e-9)


# ---- in front of the engine ------------------------------------------------------------------


def _burst(**kwargs):
    # three prompts of 100, 200 and 300 tokens sent at 0, two output tokens each
    return make_workload(arrival_seconds=[0.0, 0.0, 0.0], prompt_tokens=[100, 200, 300],
                         output_tokens=2, **kwargs)  # fmt: skip


def _run(workload, intake: float):
    config = SchedulerConfig(max_num_batched_tokens=8192, max_num_seqs=8,
                             intake_seconds_per_prompt_token=intake)  # fmt: skip
    return simulate(workload, step_function=constant_step_function(0.01),
                    kv_capacity_tokens=10**6, config=config)  # fmt: skip


def test_the_engine_sees_each_prompt_once_taken_in():
    # taken in at 0.1, 0.3 and 0.6 s (1 ms a token); each then runs its prompt in one 10 ms step
    # and its second token in the next (the engine idles between them); the client's clock
    # starts at the send (0)
    result = _run(_burst(), 1e-3)
    assert result.first_scheduled_seconds.tolist() == pytest.approx([0.1, 0.3, 0.6])
    assert result.ttft_seconds.tolist() == pytest.approx([0.11, 0.31, 0.61])
    assert result.workload.arrival_seconds.tolist() == [0.0, 0.0, 0.0]
    # without the intake all three prompts run in the first step
    assert _run(_burst(), 0.0).ttft_seconds.tolist() == pytest.approx([0.01, 0.01, 0.01])


def test_a_closed_loop_reaches_the_engine_at_its_send():
    closed = _run(_burst(max_concurrency=3), 1e-3)
    assert closed.first_scheduled_seconds.tolist() == [0.0, 0.0, 0.0]
    assert closed.ttft_seconds.tolist() == pytest.approx([0.01, 0.01, 0.01])


def test_a_disaggregated_prefill_instance_gets_them_once_taken_in():
    # one prefill instance: each prompt's 10 ms prefill starts once it is in (0.1, 0.3, 0.6 s),
    # then its KV moves (100-300 tokens x 1 byte at 1 MB/s: 0.1-0.3 ms) to the decode instance
    config = SchedulerConfig(max_num_batched_tokens=8192, max_num_seqs=8, disaggregated=True,
                             kv_transfer_bytes_per_second=1e6,
                             intake_seconds_per_prompt_token=1e-3)  # fmt: skip
    result = simulate(_burst(), step_function=constant_step_function(0.01),
                      kv_capacity_tokens=10**6, config=config, kv_bytes_per_token=1.0)  # fmt: skip
    ready = [0.1 + 0.01 + 1e-4, 0.3 + 0.01 + 2e-4, 0.6 + 0.01 + 3e-4]
    assert result.first_scheduled_seconds.tolist() == pytest.approx(ready)


def test_a_negative_intake_is_refused_by_name():
    with pytest.raises(ConfigError, match="intake_seconds_per_prompt_token must be >= 0"):
        _run(_burst(), -1e-6)


def test_the_releases_that_take_prompts_in_serially():
    run = read_runs(REAL_RUNS_LAMBDA / "lambda.json")[0]  # vLLM 0.5.4
    assert run_config(run).intake_seconds_per_prompt_token == INTAKE_SECONDS_PER_PROMPT_TOKEN
    for release, charged in (("0.8.3", True), ("0.10.2", True), ("0.11.0", False),
                             ("0.15.1", False)):  # fmt: skip
        settings = engine_defaults(release, gpu_memory_bytes=85e9, max_model_len=4096)
        expected = INTAKE_SECONDS_PER_PROMPT_TOKEN if charged else 0.0
        assert settings.scheduler_config().intake_seconds_per_prompt_token == expected
        said = any("tokenizes prompts one at a time" in line for line in settings.assumptions)
        assert said == charged
    later = replace(run, vllm_version="vLLM 0.15.1")
    assert run_config(later).intake_seconds_per_prompt_token == 0.0
    assert run_config(replace(run, vllm_version=None)).intake_seconds_per_prompt_token == 0.0
    unnamed = engine_defaults(None, gpu_memory_bytes=85e9, max_model_len=4096)
    assert unnamed.scheduler_config().intake_seconds_per_prompt_token == 0.0
    assert "serial intake is not simulated" in unnamed.assumptions[0]
