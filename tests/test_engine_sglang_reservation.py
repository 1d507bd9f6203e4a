"""SGLang's KV reservation, new-token ratio and retraction order, traced by hand.

SGLang admits a prompt only if its uncached tokens plus min(its output left, 4,096) stay below
the free KV less min(output left, 4,096) x `new_token_ratio` of every running request; a refusal
marks the running batch full until a request leaves. The ratio starts at 0.7 x
--schedule-conservativeness, falls by (init - 0.14 init) / 600 per decode step and is set after a
retraction to (generated + 20 per request) / (max new tokens + 1) over the requests kept. A
decode step short of KV retracts fewest generated tokens first, ties the longest prompt, to the
queue's tail. (Citations with file and commit in `itlkit/sim/sglang.py`.)

Every step below takes 1 s (`constant_step_function(1.0)`), so step s runs [s, s + 1) while the
engine is busy. A request's first token comes at the end of the step that completes its prompt;
each decode step adds one KV token per running request.
"""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest
from _paths import REAL_RUNS
from hypothesis import given, settings
from hypothesis import strategies as st

from itlkit.calibration.predict import run_config
from itlkit.cli import main
from itlkit.errors import ConfigError
from itlkit.sim.engine import Engine
from itlkit.sim.runs import parse_runs
from itlkit.sim.scheduler import SchedulerConfig, constant_step_function, simulate
from itlkit.sim.sglang import NewTokenRatio, SglangSchedulerConfig, sglang_settings
from itlkit.sim.workload import make_workload

GIB = 2**30
STEP = constant_step_function(1.0)


def _config(conservativeness: float = 1.0) -> SglangSchedulerConfig:
    """SGLang's policy with a chunk of 64 tokens and at most 8 running requests."""
    given_ = {"chunked_prefill_size": 64, "max_running_requests": 8,
              "schedule_conservativeness": conservativeness}  # fmt: skip
    return sglang_settings(gpu_memory_bytes=80 * GIB, given=given_).scheduler_config()


def _plain() -> SchedulerConfig:
    """The same prefill-only steps without the reservation (admit while the chunk fits)."""
    return SchedulerConfig(max_num_batched_tokens=64, max_num_seqs=8, prefill_only_steps=True)


def test_the_ratio_rules_by_hand():
    r = NewTokenRatio.from_conservativeness(1.0)
    # 0.7 x 1; the floor 0.14 x 0.7 = 0.098; (0.7 - 0.098) / 600 = 0.602 / 600 a step
    assert (r.init, r.floor) == pytest.approx((0.7, 0.098), abs=1e-15)
    assert r.decay == pytest.approx(0.602 / 600, rel=1e-12)
    assert r.decayed(0.7) == pytest.approx(0.7 - 0.0010033333333, abs=1e-12)
    assert r.decayed(0.7, steps=3) == pytest.approx(0.7 - 3 * 0.0010033333333, abs=1e-12)
    assert r.decayed(0.7, steps=600) == pytest.approx(0.098, abs=1e-12)  # all the way down
    assert r.decayed(0.7, steps=5000) == 0.098  # and no further
    assert r.decayed(0.05) == 0.098  # max(0.05 - decay, floor): a low ratio comes up to it
    # conservativeness 2: 1.4 capped at 1; floor 0.14; 0.86 / 600 a step
    two = NewTokenRatio.from_conservativeness(2.0)
    assert (two.init, two.floor) == pytest.approx((1.0, 0.14), abs=1e-15)
    assert two.decay == pytest.approx(0.86 / 600, rel=1e-12)
    # after a retraction, kept: 23 and 22 tokens generated of 60 and 30:
    # (23 + 22 + 2 x 20) / (60 + 30 + 1) = 85 / 91
    assert r.after_retraction(generated_tokens=45, max_new_tokens=90, requests=2) == (
        pytest.approx(85 / 91, rel=1e-15)
    )
    # one kept, 100 of 100 generated: (100 + 20) / 101 > 1, capped at 1
    assert r.after_retraction(generated_tokens=100, max_new_tokens=100, requests=1) == 1.0
    # a running request's output left is clipped at 4,096 before the ratio: 4,096 x 0.7
    assert r.held_back(5000, 0.7) == pytest.approx(2867.2, abs=1e-9)


def test_the_reservation_refuses_what_plain_kv_fit_admits():
    # KV of 200 tokens. A: prompt 20, output 100 at t = 0; B: prompt 20, output 100 at t = 0.5.
    # Step 0 prefills A (20 + 100 = 120 < 200 free). At step 1, A holds 20 tokens and has 99
    # to go, 99 x 0.7 = 69.3 held back: room 200 - 20 - 69.3 = 110.7, and B needs 20 + 100 =
    # 120 >= 110.7: refused, though its 20 prompt tokens fit the 180 free. The batch counts as
    # full until A leaves: A's 100th token ends step 99, B is prefilled in step 100 and has its
    # first token at 101 s. Plain fit admits B at step 1: its first token at 2 s.
    w = make_workload(arrival_seconds=[0.0, 0.5], prompt_tokens=[20, 20],
                      output_tokens=[100, 100])  # fmt: skip
    sglang = simulate(w, step_function=STEP, kv_capacity_tokens=200, config=_config())
    plain = simulate(w, step_function=STEP, kv_capacity_tokens=200, config=_plain())
    assert sglang.first_token_seconds[1] == 101.0
    assert plain.first_token_seconds[1] == 2.0
    assert sglang.finished.all() and sglang.preemptions == 0


def test_a_refused_prompt_waits_for_a_request_to_leave_however_the_ratio_falls():
    # KV of 1,200. A: prompt 10, output 1,000 at t = 0; B: prompt 60, output 440 at t = 0.5.
    # At step k A holds 10 + (k - 1) tokens with 1,000 - k to go, the ratio 0.7 - (k - 1) d,
    # d = 0.602 / 600. Step 1: room 1,200 - 10 - 999 x 0.7 = 490.7 < 60 + 440 = 500: refused,
    # batch full. Asked again, B would get in at step 15 (room 1,200 - 24 - 985 x (0.7 - 14 d)
    # = 500.34; at step 14, 1,200 - 23 - 986 x (0.7 - 13 d) = 499.66) and have its first token
    # at 16 s. SGLang asks again only once A leaves: A's last token ends step 999, B's first
    # ends step 1,000.
    w = make_workload(arrival_seconds=[0.0, 0.5], prompt_tokens=[10, 60],
                      output_tokens=[1000, 440])  # fmt: skip
    r = simulate(w, step_function=STEP, kv_capacity_tokens=1200, config=_config())
    assert r.first_token_seconds[1] == 1001.0


def _engine(w, *, capacity: int, config) -> Engine:
    return Engine(w, step_function=STEP, capacity_tokens=capacity, config=config,
                  ready_seconds=w.arrival_seconds, ready_order=np.arange(w.num_requests),
                  end_seconds=math.inf)  # fmt: skip


def test_retraction_order_the_ratio_reset_and_its_decay_step_by_step():
    # schedule_conservativeness 0.1: ratio 0.07 falling by d = (0.07 - 0.0098) / 600 a step, so
    # little is held back for running requests and three can run into a KV pool of 126.
    # A: prompt 10, output 60 at t = 0; B: prompt 30, output 30 and C: prompt 20, output 30 at
    # t = 1.5; D: prompt 30, output 10 at t = 10.
    d = 0.0602 / 600
    w = make_workload(arrival_seconds=[0.0, 1.5, 1.5, 10.0], prompt_tokens=[10, 30, 20, 30],
                      output_tokens=[60, 30, 30, 10])  # fmt: skip
    engine = _engine(w, capacity=126, config=_config(0.1))
    trace = []
    while engine.step():
        trace.append((engine.s, engine.ratio))
    expected = [
        (1, 0.07),  # step 0 prefills A (70 < 126): no decay in a prefill step
        (2, 0.07 - d),  # step 1: A decodes (a stretch of one step, up to B's and C's arrival)
        # step 2: A holds 11 and has 58 to go: room 126 - 11 - 58 (0.07 - d) = 110.95 > B's
        # 30 + 30; then 126 - 41 - 4.05 - 30 = 50.95 > C's 20 + 30: both prefilled, A paused
        (3, 0.07 - d),
        (4, 0.07 - 2 * d),  # step 3: A, paused, decodes again with B and C (a step of its own)
        (10, 0.07 - 8 * d),  # steps 4-9 in one stretch, to D's arrival; KV 61 + 21 = 82
        # step 10: room 126 - 82 - (51 + 22 + 22) x (0.07 - 8d) = 37.43 < D's 30 + 10: refused
        # (its 30 prompt tokens fit plainly); batch full, so the stretch runs past the arrival
        (11, 0.07 - 9 * d),
        (24, 0.07 - 22 * d),  # steps 11-23, to the KV's end: 85 + 13 x 3 = 124 held
        # step 24: 124 + 3 > 126. Generated: A 23, B 22, C 22: B and C tie, B's prompt (30) is
        # longer: B is retracted (51 tokens freed: 73 + 2 fit). The ratio over A and C:
        # (23 + 22 + 2 x 20) / (60 + 30 + 1) = 85 / 91
        (25, 85 / 91),
        # step 25: room 126 - 75 - (37 + 8) x 85/91 = 8.97 < D's 40: refused, decode
        (26, 85 / 91 - d),
        (32, 85 / 91 - 7 * d),  # steps 26-31 (batch full: one stretch) to C's last token
    ]
    assert [s for s, _ in trace[: len(expected)]] == [s for s, _ in expected]
    assert [x for _, x in trace[: len(expected)]] == pytest.approx([x for _, x in expected],
                                                                   abs=1e-12)  # fmt: skip
    # idle at the end: back to the start (`on_idle`)
    assert engine.ratio == pytest.approx(0.07, abs=1e-15)
    r = engine.request_arrays()
    assert list(r["preemptions"]) == [0, 1, 0, 0]  # B, neither A (most generated) nor C
    assert list(r["generated"]) == [60, 30, 30, 10]


def test_with_mixed_chunks_only_a_step_of_decodes_alone_decays_the_ratio():
    # --enable-mixed-chunk, chunk 64, KV 1,000; d = 0.602 / 600. A: prompt 10, output 5 at
    # t = 0; B: prompt 100, output 2 at t = 1.5. SGLang decays the ratio in `update_running_batch`,
    # which runs only when no prefill batch formed.
    d = 0.602 / 600
    given_ = {"chunked_prefill_size": 64, "max_running_requests": 8, "enable_mixed_chunk": True}
    config = sglang_settings(gpu_memory_bytes=80 * GIB, given=given_).scheduler_config()
    w = make_workload(arrival_seconds=[0.0, 1.5], prompt_tokens=[10, 100],
                      output_tokens=[5, 2])  # fmt: skip
    engine = _engine(w, capacity=1000, config=config)
    trace = []
    while engine.step():
        trace.append((engine.s, engine.ratio))
    expected = [
        (1, 0.7),  # step 0: A's prompt
        (2, 0.7 - d),  # step 1: A's decode alone
        (3, 0.7 - d),  # step 2: A's decode and B's first 63 tokens (64 less A's decode token)
        (4, 0.7 - d),  # step 3: A's decode and B's last 37 tokens
        (5, 0.7 - 2 * d),  # step 4: A's and B's decodes alone; both finish
    ]
    assert [s for s, _ in trace] == [s for s, _ in expected]
    assert [x for _, x in trace] == pytest.approx([x for _, x in expected], abs=1e-12)
    assert engine.ratio == 0.7  # idle


def test_the_retracted_request_goes_to_the_tail_of_the_queue():
    # The trace above: after step 24 the queue is D (waiting since step 10), then B. At step 32
    # (C left after step 31) A holds 40 tokens with 29 to go: room 126 - 40 - 29 x
    # (85/91 - 7d) = 58.93 > D's 40: D is prefilled and has its first token at 33 s. (B, in
    # front, would take that room first.)
    w = make_workload(arrival_seconds=[0.0, 1.5, 1.5, 10.0], prompt_tokens=[10, 30, 20, 30],
                      output_tokens=[60, 30, 30, 10])  # fmt: skip
    engine = _engine(w, capacity=126, config=_config(0.1))
    while engine.s < 25:
        engine.step()
    assert engine.s == 25 and [r.index for r in engine.waiting] == [3, 1]
    r = simulate(w, step_function=STEP, kv_capacity_tokens=126, config=_config(0.1))
    assert r.first_token_seconds[3] == 33.0


@settings(max_examples=80, deadline=None)
@given(
    arrivals=st.lists(st.floats(0, 20), min_size=1, max_size=12),
    prompts=st.lists(st.integers(1, 90), min_size=12, max_size=12),
    outputs=st.lists(st.integers(1, 30), min_size=12, max_size=12),
    capacity=st.integers(125, 300),
    seqs=st.integers(1, 6),
    chunk=st.integers(6, 64),
    conservativeness=st.floats(0.01, 3.0),
    mixed=st.booleans(),
)
def test_sglang_reservation_keeps_the_books(arrivals, prompts, outputs, capacity, seqs, chunk,
                                           conservativeness, mixed):  # fmt: skip
    # whatever the traffic and KV pressure, with SGLang's reservation and retraction (prefill
    # batches alone or mixed): every request finishes with all its tokens, one ITL per token
    # after the first, the KV held never passes the capacity and all comes back
    n = len(arrivals)
    w = make_workload(arrival_seconds=sorted(arrivals), prompt_tokens=prompts[:n],
                      output_tokens=outputs[:n])  # fmt: skip
    config = SglangSchedulerConfig(
        max_num_batched_tokens=chunk, max_num_seqs=seqs, prefill_only_steps=not mixed,
        new_token_ratio=NewTokenRatio.from_conservativeness(conservativeness),
    )  # fmt: skip
    r = simulate(w, step_function=constant_step_function(0.5), kv_capacity_tokens=capacity,
                 config=config)  # fmt: skip
    assert r.finished.all()
    assert list(r.generated_tokens) == outputs[:n]
    assert len(r.itl_seconds) == sum(o - 1 for o in outputs[:n])
    assert r.step_kv_tokens.max() <= capacity and r.step_kv_tokens[-1] == 0
    assert r.step_prefill_tokens.max() <= chunk
    if not mixed:
        assert not ((r.step_prefill_tokens > 0) & (r.step_decode_tokens > 0)).any()


def _simulate(capsys, *flags) -> dict:
    code = main(["simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--json",
                 "--num-prompts", "4", "--request-rate", "inf", "--prompt-tokens", "1000",
                 "--output-tokens", "16", "--engine", "sglang", *flags])  # fmt: skip
    assert code == 0
    return json.loads(capsys.readouterr().out)


def test_schedule_conservativeness_on_the_command_line(capsys):
    default = _simulate(capsys)
    assert any(a.startswith("schedule_conservativeness 1:") for a in default["assumptions"])
    assert default["config"]["new_token_ratio"]["init"] == pytest.approx(0.7, abs=1e-15)
    careful = _simulate(capsys, "--schedule-conservativeness", "2")
    # 0.7 x 2 = 1.4, capped at 1; its floor 0.14 x 1
    assert careful["config"]["new_token_ratio"]["init"] == 1.0
    assert careful["config"]["new_token_ratio"]["floor"] == pytest.approx(0.14, abs=1e-15)
    assert not any(a.startswith("schedule_conservativeness") for a in careful["assumptions"])
    code = main(["simulate", "--duration", "5", "--schedule-conservativeness", "2"])
    err = capsys.readouterr().err
    assert code != 0 and "--schedule-conservativeness is an SGLang setting" in err


def _sglang_run(**engine):
    doc = copy.deepcopy(json.loads((REAL_RUNS / "real_runs_trainval.json").read_text()))
    run = next(r for r in doc["runs"] if r["id"] == "trainval:64")
    run["engine"] = {"name": "sglang", **engine}
    doc["runs"] = [run]
    return parse_runs(doc)[0]


def test_schedule_conservativeness_in_a_runs_file():
    run = _sglang_run(schedule_conservativeness=0.5)
    config = run_config(run, kv_tokens=100_000)
    assert config.new_token_ratio.init == pytest.approx(0.35, abs=1e-15)  # 0.7 x 0.5
    default = _sglang_run()
    assert default.schedule_conservativeness == 1.0
    ratio = run_config(default, kv_tokens=100_000).new_token_ratio
    assert ratio.init == pytest.approx(0.7, abs=1e-15)
    with pytest.raises(ConfigError, match="engine.schedule_conservativeness"):
        _sglang_run(schedule_conservativeness=0)
