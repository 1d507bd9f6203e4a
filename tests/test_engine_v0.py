"""vLLM V0 without chunked prefill: a step that admits prompts runs them alone.

vLLM V0's `Scheduler._schedule_default` (vllm/core/scheduler.py, vllm-project/vllm @ 0dce2b29)
schedules waiting prompts first, whole, with the whole token budget, and "Don't schedule decodes
if prefills are scheduled": every running stream waits out the prefill step. The steps are traced
here by hand, every step 1 s long.
"""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from itlkit.errors import ConfigError
from itlkit.sim.scheduler import SchedulerConfig, constant_step_function, simulate
from itlkit.sim.workload import make_workload

V0 = SchedulerConfig(max_num_batched_tokens=16, max_num_seqs=4, enable_chunked_prefill=False,
                     prefill_only_steps=True)  # fmt: skip
V1 = SchedulerConfig(max_num_batched_tokens=16, max_num_seqs=4, enable_chunked_prefill=False)


def _run(config):
    # A: prompt 4, 4 output tokens, at t = 0; B: prompt 4, 2 output tokens, at t = 2.5
    w = make_workload(arrival_seconds=[0.0, 2.5], prompt_tokens=[4, 4], output_tokens=[4, 2])
    return simulate(w, step_function=constant_step_function(1.0), kv_capacity_tokens=100,
                    config=config)  # fmt: skip


def test_the_decodes_wait_out_a_prefill_step():
    # step 0 [0, 1): A's prompt -> its 1st token at 1; steps 1, 2: A decodes -> tokens at 2, 3.
    # step 3 [3, 4): B waits (it came at 2.5): V0 runs B's prompt alone, A waits -> B's 1st at 4.
    # step 4 [4, 5): A and B decode -> A's 4th and B's 2nd token at 5: both done.
    r = _run(V0)
    assert list(r.step_prefill_tokens) == [4, 0, 0, 4, 0]
    assert list(r.step_decode_tokens) == [0, 1, 1, 0, 2]
    assert list(r.token_times_seconds(0)) == [1.0, 2.0, 3.0, 5.0]
    assert list(r.finish_seconds) == [5.0, 5.0]
    assert list(r.first_token_seconds) == [1.0, 4.0]
    # A's gaps 1, 1 and the 2 s it waited; B's 1: one observation per token after the first
    assert sorted(r.itl_seconds) == [1.0, 1.0, 1.0, 2.0]
    assert r.step_kv_tokens[-1] == 0  # every KV token held came back


def test_a_paused_stream_keeps_its_kv_and_reads_it_again():
    seen = []

    def step(*, decode_tokens, prefill_tokens, kv_tokens):
        seen.append((decode_tokens, prefill_tokens, kv_tokens))
        return 1.0

    w = make_workload(arrival_seconds=[0.0, 2.5], prompt_tokens=[4, 4], output_tokens=[6, 2])
    simulate(w, step_function=step, kv_capacity_tokens=100, config=V0)
    # A reads its 4 prompt tokens, then 5 (steps 1, 2); sits out B's prompt (step 3); then A
    # reads 6 and B its 4 (step 4: B's 2nd token, done), A 7 and 8 (steps 5, 6: A's 6th token)
    assert seen == [(0, 4, 0), (1, 0, 4), (1, 0, 5), (0, 4, 0), (2, 0, 10), (1, 0, 7),
                    (1, 0, 8)]  # fmt: skip


def test_without_prefill_only_steps_the_prompt_rides_with_the_decodes():
    # V1 (chunked prefill off too): step 3 carries A's decode and B's whole prompt together
    r = _run(V1)
    assert list(r.step_prefill_tokens) == [4, 0, 0, 4, 0]
    assert list(r.step_decode_tokens) == [0, 1, 1, 1, 1]
    assert list(r.finish_seconds) == [4.0, 5.0]
    assert sorted(r.itl_seconds) == [1.0, 1.0, 1.0, 1.0]


def test_a_run_of_prefill_steps_holds_every_stream():
    # three prompts of 12 tokens at t = 0.5 with a budget of 16: one per prefill step (a second
    # would not fit), so A waits out three steps; its next token is 4 s after its last
    w = make_workload(arrival_seconds=[0.0, 0.5, 0.5, 0.5], prompt_tokens=[4, 12, 12, 12],
                      output_tokens=[6, 2, 2, 2])  # fmt: skip
    r = simulate(w, step_function=constant_step_function(1.0), kv_capacity_tokens=200, config=V0)
    times = list(r.token_times_seconds(0))
    assert times[:3] == [1.0, 5.0, 6.0]  # steps 1-3 prefill B, C, D; A decodes again in step 4
    assert r.finished.all() and list(r.step_decode_tokens[:5]) == [0, 0, 0, 0, 4]


def test_prefill_only_steps_are_a_policy_of_one_instance():
    with pytest.raises(ConfigError, match="not with disaggregated"):
        SchedulerConfig(prefill_only_steps=True, enable_chunked_prefill=False,
                        disaggregated=True).validate()  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    arrivals=st.lists(st.floats(0, 20), min_size=1, max_size=12),
    prompts=st.lists(st.integers(1, 40), min_size=12, max_size=12),
    outputs=st.lists(st.integers(1, 30), min_size=12, max_size=12),
    capacity=st.integers(80, 300),
    seqs=st.integers(1, 6),
)
def test_v0_runs_keep_their_books(arrivals, prompts, outputs, capacity, seqs):
    # whatever the traffic and however tight the KV cache: every request finishes with all its
    # tokens, token times only move forward, one ITL per token after the first, KV all returned
    n = len(arrivals)
    w = make_workload(arrival_seconds=sorted(arrivals), prompt_tokens=prompts[:n],
                      output_tokens=outputs[:n])  # fmt: skip
    config = SchedulerConfig(max_num_batched_tokens=64, max_num_seqs=seqs,
                             enable_chunked_prefill=False, prefill_only_steps=True)  # fmt: skip
    r = simulate(w, step_function=constant_step_function(0.5), kv_capacity_tokens=capacity,
                 config=config)  # fmt: skip
    assert r.finished.all()
    assert list(r.generated_tokens) == outputs[:n]
    for i in range(n):
        times = r.token_times_seconds(i)
        assert len(times) == outputs[i] and (len(times) < 2 or min(times[1:] - times[:-1]) > 0)
    assert len(r.itl_seconds) == sum(o - 1 for o in outputs[:n])
    assert r.step_kv_tokens[-1] == 0
    # no step both prefills and decodes
    assert not ((r.step_prefill_tokens > 0) & (r.step_decode_tokens > 0)).any()


# ---- V0's admission watermark ---------------------------------------------------------------
# `can_allocate` (vllm/core/block_manager.py, vllm-project/vllm @9a4b60a4) admits a prompt only
# if the free blocks less the prompt's stay >= int(0.01 x all blocks).


def _watermark_run(share: float):
    # 100 blocks of 16 (1,600 tokens): a 1 % watermark keeps 1 block (16 tokens) free.
    # A (1,000-token prompt, 10 outputs) and B (590, 2 outputs) arrive together.
    config = SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=4,
                             enable_chunked_prefill=False, prefill_only_steps=True,
                             admission_watermark=share)  # fmt: skip
    w = make_workload(arrival_seconds=[0.0, 0.0], prompt_tokens=[1000, 590], output_tokens=[10, 2])
    return simulate(w, step_function=constant_step_function(1.0), kv_capacity_tokens=1600,
                    config=config)  # fmt: skip


def test_the_watermark_holds_a_prompt_back_until_the_headroom_is_free():
    # without it both prompts fit (1,590 <= 1,600): one prefill step of both
    free = _watermark_run(0.0)
    assert free.step_prefill_tokens[0] == 1590
    # with it B needs 590 + 16 free beside A's 1,000 (600 are): it waits for A. A prefills at
    # step 0 (its 1st token), decodes its other 9 at steps 1-9 and leaves; B's prompt at step 10
    held = _watermark_run(0.01)
    steps = [int(s) for s in held.step_prefill_tokens.nonzero()[0]]
    assert steps == [0, 10] and list(held.step_prefill_tokens[steps]) == [1000, 590]
    assert held.finished.all()


def test_only_v0_keeps_a_watermark():
    from itlkit.sim.versions import engine_defaults

    def config(version):
        settings = engine_defaults(version, gpu_memory_bytes=85e9, gpu_name="NVIDIA H100",
                                   max_model_len=4096)  # fmt: skip
        return settings.scheduler_config()

    assert config("0.6.3").admission_watermark == 0.01
    assert config("0.10.1").admission_watermark == 0.0


def test_the_watermark_is_whole_blocks_rounded_down():
    # 3,190 tokens are 199 whole blocks: int(0.01 x 199) = 1 block (16 tokens), not 31 tokens.
    # A (2,000) and B (1,170) leave 20 free: B is admitted beside A in step 0.
    config = SchedulerConfig(max_num_batched_tokens=4096, max_num_seqs=4,
                             enable_chunked_prefill=False, prefill_only_steps=True,
                             admission_watermark=0.01)  # fmt: skip
    w = make_workload(arrival_seconds=[0.0, 0.0], prompt_tokens=[2000, 1170], output_tokens=2)
    r = simulate(w, step_function=constant_step_function(1.0), kv_capacity_tokens=3190,
                 config=config)  # fmt: skip
    assert r.step_prefill_tokens[0] == 3170
