"""vLLM's --async-scheduling: each step is scheduled while the step before it runs.

`EngineCore.step_with_batch_queue` (vllm/v1/engine/core.py, vllm-project/vllm @ 00080ee1), with a
batch queue of two, schedules and launches step N+1 as soon as step N is launched and only then
blocks on N's output; requests that reached the engine core meanwhile are added before the next
call, which schedules N+2. So a request that arrives while step N runs first runs in step N+2,
where without it it would run in N+1; with nothing in flight the first step is scheduled at once.
The steps are traced by hand here, every step 1 s long.
"""

from itlkit.sim.scheduler import SchedulerConfig, constant_step_function, simulate
from itlkit.sim.versions import engine_defaults
from itlkit.sim.workload import make_workload

SYNC = SchedulerConfig(max_num_batched_tokens=16, max_num_seqs=4)
ASYNC = SchedulerConfig(max_num_batched_tokens=16, max_num_seqs=4, async_scheduling=True)


def _run(config, arrivals=(0.0, 2.5), outputs=(6, 2)):
    w = make_workload(arrival_seconds=list(arrivals), prompt_tokens=[4] * len(arrivals),
                      output_tokens=list(outputs))  # fmt: skip
    return simulate(w, step_function=constant_step_function(1.0), kv_capacity_tokens=100,
                    config=config)  # fmt: skip


def test_a_request_arriving_during_a_step_joins_the_step_after_next():
    # A at 0 into an empty engine: step 0 [0, 1) at once, both ways -> A's 1st token at 1.
    # B at 2.5, while step 2 [2, 3) runs. Without async scheduling step 3 [3, 4) takes B's
    # prompt -> its 1st token at 4; with it, step 3 was scheduled at 2, before B came: B's prompt
    # runs in step 4 [4, 5) -> its 1st token at 5, a step later
    sync, lagged = _run(SYNC), _run(ASYNC)
    assert list(sync.first_token_seconds) == [1.0, 4.0]
    assert list(lagged.first_token_seconds) == [1.0, 5.0]
    assert list(lagged.step_prefill_tokens[:5]) == [4, 0, 0, 0, 4]
    # A's stream is not delayed: one token a step, 1 .. 6
    assert list(lagged.token_times_seconds(0)) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert list(lagged.finish_seconds) == [6.0, 6.0]


def test_an_arrival_at_a_steps_start_or_into_an_idle_engine_waits_no_extra_step():
    # B at 2.0 exactly: step 3 was scheduled as step 2 started, at 2.0, and took it
    assert list(_run(ASYNC, arrivals=(0.0, 2.0)).first_token_seconds) == [1.0, 4.0]
    # A is done at 2 (2 tokens); B at 7.5 finds the engine empty: scheduled at once
    idle = _run(ASYNC, arrivals=(0.0, 7.5), outputs=(2, 2))
    assert list(idle.first_token_seconds) == [1.0, 8.5]


def test_the_release_decides_it():
    # on by default from vLLM 0.14 (vllm/config/vllm.py: None -> on unless pipeline parallel)
    def config(version, **given):
        s = engine_defaults(version, gpu_memory_bytes=80 * 2**30, max_model_len=8192,
                            **given)  # fmt: skip
        return s.scheduler_config()

    assert config("0.15.1").async_scheduling and not config("0.13.0").async_scheduling
    assert not config("0.15.1", async_scheduling=False).async_scheduling  # the server's flag
    assert config("0.10.1.1", async_scheduling=True).async_scheduling
    assert not config(None).async_scheduling  # none named: itlkit's engine as it always ran


def test_real_runs_take_their_releases_default():
    from _paths import REAL_RUNS, REAL_RUNS_MORE, REAL_RUNS_SCICOM

    from itlkit.calibration.predict import run_config
    from itlkit.sim.runs import read_runs

    h100 = read_runs(REAL_RUNS / "real_runs_trainval.json")  # vLLM 0.15.1
    scicom = read_runs(REAL_RUNS_SCICOM / "scicom.json")  # 0.14.1
    a100 = read_runs(REAL_RUNS_MORE / "real_world_more.json")  # 0.10.1.1 and 0.6.3 (V0)
    assert all(run.async_scheduling and run_config(run).async_scheduling for run in h100)
    assert all(run.async_scheduling for run in scicom)
    assert not any(run.async_scheduling or run_config(run).async_scheduling for run in a100)


def test_a_runs_own_flag_overrides_its_release():
    import json

    from _paths import REAL_RUNS

    from itlkit.sim.runs import parse_runs

    doc = json.loads((REAL_RUNS / "real_runs_trainval.json").read_text(encoding="utf-8"))
    doc["runs"][0]["engine"]["async_scheduling"] = False  # vLLM 0.15.1 started without it
    runs = parse_runs(doc, source="runs.json")
    assert not runs[0].async_scheduling and runs[1].async_scheduling


def test_a_runs_flag_is_refused_where_its_release_has_no_such_option_and_read_without_one():
    import json

    import pytest
    from _paths import REAL_RUNS

    from itlkit.errors import ConfigError
    from itlkit.sim.runs import parse_runs

    doc = json.loads((REAL_RUNS / "real_runs_trainval.json").read_text(encoding="utf-8"))
    doc["runs"] = doc["runs"][:1]
    engine = doc["runs"][0]["engine"]
    engine.update(version="0.6.3", async_scheduling=True)
    refused = r"engine.async_scheduling is true: vLLM 0.6.3 has no --async-scheduling"
    with pytest.raises(ConfigError, match=refused):
        parse_runs(doc, source="runs.json")
    engine.pop("version")
    assert parse_runs(doc, source="runs.json")[0].async_scheduling  # no version: as given
    engine.pop("async_scheduling")
    assert not parse_runs(doc, source="runs.json")[0].async_scheduling  # no version: off
