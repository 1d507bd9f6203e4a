"""SGLang's `--scheduler-recv-interval` and `--num-continuous-decode-steps`, traced by hand.

SGLang's scheduler takes the requests the tokenizer sent at the top of a loop turn (one turn
per forward batch). With `--scheduler-recv-interval N` a counter grows each turn by the weight
of the batch the turn before ran: 1 after a decode batch or a turn without one, 1,000 after a
prefill; the turn that brings it to N receives and sets it to 0. An idle scheduler spins its
turns and receives at once. `--num-continuous-decode-steps` is read by no SGLang since
sgl-project/sglang#2095: one decode pass per turn. (Citations with file and commit in
`itlkit/sim/sglang.py`.)

The step function below makes a step with prompt tokens take 1 s and a step of decodes alone
0.25 s, so every time is a sum done by hand.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from dataclasses import replace

import numpy as np
import pytest
from _paths import REAL_RUNS
from hypothesis import given, settings
from hypothesis import strategies as st

from itlkit.calibration.predict import run_config, simulate_run
from itlkit.cli import main
from itlkit.errors import ConfigError
from itlkit.sim.runs import parse_runs
from itlkit.sim.scheduler import simulate
from itlkit.sim.sglang import RecvSkipper, sglang_settings
from itlkit.sim.workload import make_workload

GIB = 2**30
PREFILL_SECONDS, DECODE_SECONDS = 1.0, 0.25


def _step(*, decode_tokens, prefill_tokens, kv_tokens):
    return PREFILL_SECONDS if prefill_tokens else DECODE_SECONDS


def _config(interval: int = 1, **given):
    """SGLang's policy, a chunk of 64 tokens, at most 8 running requests."""
    given = {"chunked_prefill_size": 64, "max_running_requests": 8,
             "scheduler_recv_interval": interval, **given}  # fmt: skip
    return sglang_settings(gpu_memory_bytes=80 * GIB, given=given).scheduler_config()


def _run(w, config, *, capacity: int = 100_000):
    return simulate(w, step_function=_step, kv_capacity_tokens=capacity, config=config)


def test_the_counter_rules_by_hand():
    every4 = RecvSkipper(4)
    # after decodes: 0 -> 1 -> 2 -> 3 -> 4 = N: the fourth turn receives and starts again at 0
    assert [every4.tick(c, prefill=False) for c in (0, 1, 2, 3)] == [1, 2, 3, 0]
    # after a prefill batch: + 1,000 >= 4, whatever the count
    assert every4.tick(3, prefill=True) == every4.tick(0, prefill=True) == 0
    # decode turns to the next receiving one: N - count
    assert [every4.turns_to_receive(c) for c in (0, 1, 3)] == [4, 3, 1]
    # 1 + 6 turns = 7 = 4 + 3: one receiving turn on the way, 3 counted since
    assert every4.after_decode_turns(1, 6) == 3
    # an interval above SGLang's prefill weight: a prefill adds 1,000, two reach 2,000
    slow = RecvSkipper(2000)
    assert slow.tick(0, prefill=True) == 1000 and slow.tick(1000, prefill=True) == 0


@given(interval=st.integers(1, 50), count=st.integers(0, 49), turns=st.integers(0, 200))
@settings(max_examples=200, deadline=None)
def test_decode_turns_at_once_land_where_turns_one_by_one_do(interval, count, turns):
    skipper = RecvSkipper(interval)
    count %= interval
    one_by_one, received = count, []
    for k in range(1, turns + 1):
        one_by_one = skipper.tick(one_by_one, prefill=False)
        if one_by_one == 0:
            received.append(k)
    assert skipper.after_decode_turns(count, turns) == one_by_one
    if turns >= interval:  # the first receiving turn is the one `turns_to_receive` names
        assert received[0] == skipper.turns_to_receive(count)


def _closed_loop():
    """A: prompt 10, output 100; B: prompt 10, output 2; C: prompt 10, output 5, all wanted at
    t = 0 by a client of 2 slots: C is sent when B finishes."""
    return make_workload(arrival_seconds=[0.0, 0.0, 0.0], prompt_tokens=[10, 10, 10],
                         output_tokens=[100, 2, 5], max_concurrency=2)  # fmt: skip


@pytest.mark.parametrize("interval", [1, 2, 4, 30])
def test_a_request_sent_just_after_a_receiving_pass_waits_for_the_next(interval):
    # Step 0 [0, 1): the idle scheduler received A and B at once and prefills them; their
    # first tokens at 1 s. The pass of step 1 follows a prefill: it receives (nothing has come)
    # and counts 0. Step 1 [1, 1.25) decodes A and B; B's second and last token ends it, and the
    # client sends C at 1.25 s, just after that receiving pass. Decode passes 2, 3, ... count
    # 1, 2, ...: pass 1 + N receives C, at 1 + 0.25 N (steps 2 to N decode A alone). C's
    # prefill [1 + 0.25 N, 2 + 0.25 N): its TTFT is 2 + 0.25 N - 1.25 = 0.75 + 0.25 N.
    r = _run(_closed_loop(), _config(interval))
    assert r.workload.arrival_seconds[2] == 1.25  # C's clock starts when the client sent it
    assert r.first_token_seconds[2] == pytest.approx(2.0 + 0.25 * interval, abs=1e-12)
    assert r.ttft_seconds[2] == pytest.approx(0.75 + 0.25 * interval, abs=1e-12)
    # the steps between decode (A and B in step 1, A alone from step 2): C's prefill is the second
    prefill_step = int(np.flatnonzero(r.step_prefill_tokens)[1])
    assert prefill_step == 1 + interval
    assert r.step_start_seconds[prefill_step] == pytest.approx(1 + 0.25 * interval, abs=1e-12)


def test_a_prefill_makes_the_next_pass_receive():
    # Interval 30. A: prompt 10, output 100 at t = 0; B: prompt 10, output 100 at 0.5, during
    # A's prefill [0, 1); C: prompt 10, output 5 at 2.1.
    # Step 1's pass follows a prefill: it takes B, whose prefill runs [1, 2) alone (first token
    # at 2 s, TTFT 1.5 s, as with interval 1). Step 2's pass follows B's prefill: it receives,
    # before C comes, and counts 0. Decode passes 3 to 31 count 1 to 29 and pass 32 receives C,
    # at 2 + 0.25 x 30 = 9.5 s: C's first token at 10.5 s, TTFT 8.4 s. With interval 1 pass 3
    # (2.25 s) takes C: first token at 3.25 s.
    w = make_workload(arrival_seconds=[0.0, 0.5, 2.1], prompt_tokens=[10, 10, 10],
                      output_tokens=[100, 100, 5])  # fmt: skip
    slow, every = _run(w, _config(30)), _run(w, _config(1))
    assert slow.first_token_seconds[1] == every.first_token_seconds[1] == 2.0
    assert slow.first_token_seconds[2] == pytest.approx(10.5, abs=1e-12)
    assert every.first_token_seconds[2] == pytest.approx(3.25, abs=1e-12)
    assert slow.ttft_seconds[2] == pytest.approx(8.4, abs=1e-12)


def test_an_idle_scheduler_receives_at_once():
    # One slot: each request is sent when the one before finishes, to an idle scheduler, which
    # spins its turns and takes it at once, whatever the interval. A: prompt 10, output 3 =>
    # prefill [0, 1), decodes [1, 1.25), [1.25, 1.5); B sent at 1.5 is prefilled [1.5, 2.5).
    w = make_workload(arrival_seconds=[0.0] * 4, prompt_tokens=10, output_tokens=3,
                      max_concurrency=1)  # fmt: skip
    slow, every = _run(w, _config(30)), _run(w, _config(1))
    assert slow.first_token_seconds[1] == 2.5
    for key in ("first_token_seconds", "finish_seconds", "step_start_seconds"):
        assert np.array_equal(getattr(slow, key), getattr(every, key))
    # requests 60 s apart, each done before the next comes: the same
    apart = make_workload(arrival_seconds=60.0 * np.arange(5), prompt_tokens=50,
                          output_tokens=20)  # fmt: skip
    assert np.array_equal(_run(apart, _config(30)).first_token_seconds,
                          _run(apart, _config(1)).first_token_seconds)  # fmt: skip


def _poisson(seed: int, *, n: int = 300, gap_seconds: float = 3.0):
    """n requests of 5 to 149 prompt and 1 to 119 output tokens, gap_seconds apart on average."""
    rng = np.random.default_rng(seed)
    return make_workload(arrival_seconds=np.cumsum(rng.exponential(gap_seconds, n)),
                         prompt_tokens=rng.integers(5, 150, n),
                         output_tokens=rng.integers(1, 120, n))  # fmt: skip


def _log(r) -> list[np.ndarray]:
    return [r.step_start_seconds, r.step_duration_seconds, r.step_decode_tokens,
            r.step_prefill_tokens, r.step_running, r.step_waiting, r.step_kv_tokens,
            r.first_token_seconds, r.finish_seconds]  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_interval_1_and_one_decode_step_leave_the_schedule_as_it_was(seed):
    # The defaults build no counter at all; a counter of interval 1 walks the new path (every
    # pass receives, stretches stop before each pass while an arrival is due) and must give
    # the same steps, at the same times; --num-continuous-decode-steps 8 changes nothing.
    # Arrivals 3 s apart and 0.4 s apart (a queue that never empties); a KV pool of 2,000
    # tokens makes SGLang's reservation and retraction take part.
    base = _config()
    assert base.recv_skipper is None
    counted = replace(base, recv_skipper=RecvSkipper(1))
    eight = _config(num_continuous_decode_steps=8)
    for w, capacity in itertools.product((_poisson(seed), _poisson(seed, gap_seconds=0.4)),
                                         (100_000, 2000)):  # fmt: skip
        runs = [_run(w, c, capacity=capacity) for c in (base, counted, eight)]
        assert runs[0].finished.all() and runs[0].steps > 300
        for other in runs[1:]:
            for a, b in zip(_log(runs[0]), _log(other), strict=True):
                assert np.array_equal(a, b, equal_nan=True)


def test_the_settings_say_what_they_took():
    default = sglang_settings(gpu_memory_bytes=80 * GIB)
    assert (default.scheduler_recv_interval, default.num_continuous_decode_steps) == (1, 1)
    said = "\n".join(default.assumptions)
    assert "scheduler_recv_interval 1: SGLang's default" in said
    assert "num_continuous_decode_steps 1: SGLang's default" in said
    given_ = {"scheduler_recv_interval": 30, "num_continuous_decode_steps": 4,
              "max_running_requests": 64}  # fmt: skip
    amd = sglang_settings(gpu_memory_bytes=192 * GIB, given=given_)
    assert amd.scheduler_config().recv_skipper == RecvSkipper(30)
    assert amd.num_continuous_decode_steps == 4
    assert "scheduler_recv_interval 30" in amd.describe()
    said = "\n".join(amd.assumptions)
    assert "scheduler_recv_interval" not in said
    assert "num_continuous_decode_steps 4: run as 1" in said and "#2095" in said
    for bad in (0, -1, 2.5, True, "30"):
        with pytest.raises(ConfigError, match="scheduler_recv_interval must be an integer >= 1"):
            sglang_settings(gpu_memory_bytes=80 * GIB, given={"scheduler_recv_interval": bad})


def _simulate(capsys, *flags) -> dict:
    code = main(["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--json",
                 "--num-prompts", "40", "--request-rate", "20", "--prompt-tokens", "500",
                 "--output-tokens", "64", "--engine", "sglang", "--seed", "1",
                 *flags])  # fmt: skip
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_the_flags_on_the_command_line(capsys):
    default = _simulate(capsys)
    assert any(a.startswith("scheduler_recv_interval 1:") for a in default["assumptions"])
    assert any(a.startswith("num_continuous_decode_steps 1:") for a in default["assumptions"])
    slow = _simulate(capsys, "--scheduler-recv-interval", "30",
                     "--num-continuous-decode-steps", "4")  # fmt: skip
    assert slow["config"]["recv_skipper"] == {"interval": 30}
    assert not any(a.startswith("scheduler_recv_interval") for a in slow["assumptions"])
    assert any(a.startswith("num_continuous_decode_steps 4: run as 1")
               for a in slow["assumptions"])  # fmt: skip
    assert slow["ttft_mean_seconds"] > default["ttft_mean_seconds"]
    for flag in ("--scheduler-recv-interval", "--num-continuous-decode-steps"):
        code = main(["simulate", "--duration", "5", flag, "4"])
        err = capsys.readouterr().err
        assert code != 0 and f"{flag} is an SGLang setting (give --engine sglang)" in err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        with pytest.raises(SystemExit):
            main(["simulate", "--duration", "5", "--engine", "sglang", flag, "0"])
        assert "'0' is not a number of scheduler passes" in capsys.readouterr().err


def _inferencex(run_id: str, **engine):
    doc = json.loads((REAL_RUNS.parent / "real-runs-inferencex" / "inferencex.json").read_text())
    run = copy.deepcopy(next(r for r in doc["runs"] if r["id"] == run_id))
    run["engine"] |= engine
    return parse_runs({**doc, "runs": [run]})[0]


def test_an_inferencex_run_replays_with_its_receive_interval():
    # B200 TP8 at 32 slots: --scheduler-recv-interval 30 (dsr1_fp8_b200.sh); as measured, the
    # sends after each finish wait for the 30th decode pass, and the mean TTFT is longer
    run = _inferencex("b200-dsr1-fp8-sglang-tp8-1024-1024-c32")
    assert run.scheduler_recv_interval == 30 and run.num_continuous_decode_steps == 1
    assert run_config(run).recv_skipper == RecvSkipper(30)
    every = _inferencex("b200-dsr1-fp8-sglang-tp8-1024-1024-c32", scheduler_recv_interval=1)
    slow_ttft = simulate_run(run).ttft_seconds.mean()
    assert slow_ttft > 1.5 * simulate_run(every).ttft_seconds.mean()
    assert math.isfinite(slow_ttft)
