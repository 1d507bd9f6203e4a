"""Preemption on the chunked-prefill path takes the newest running request, as vLLM V1 does.

vLLM V1 `Scheduler.schedule` (vllm/v1/core/sched/scheduler.py, commit 00024d31): when a running
request's next tokens find no KV blocks, `preempted_req = self.running.pop()` (the most recently
admitted), repeated until the tokens fit; `if preempted_req == request: break` (the request itself
was the newest: it is not scheduled this step). The step is traced here by hand.
"""

import numpy as np

from itlkit.sim.scheduler import SchedulerConfig, constant_step_function, simulate
from itlkit.sim.workload import make_workload

STEP_SECONDS = 0.01
CONFIG = SchedulerConfig(max_num_batched_tokens=8, max_num_seqs=4)  # chunked prefill on
CAPACITY_TOKENS = 20


def _run(until_seconds=None):
    # A (2-token prompt), B (10) and C (12) arrive together; 8 output tokens each
    # (12 + 8 = 20 fits the cache, so none is refused).
    w = make_workload(arrival_seconds=[0.0, 0.0, 0.0], prompt_tokens=[2, 10, 12], output_tokens=8)
    return simulate(
        w,
        step_function=constant_step_function(STEP_SECONDS),
        kv_capacity_tokens=CAPACITY_TOKENS,
        config=CONFIG,
        until_seconds=until_seconds,
    )


def test_a_chunk_that_finds_no_kv_preempts_the_newest_running_request():
    # Step 0: budget 8. A prefills its 2 tokens; B takes the other 6 of its 10 (KV 8).
    # Step 1: A decodes (KV 9, budget 7); B's last 4 (KV 13) complete it; C is admitted with the
    #         3 tokens left (KV 16): running, oldest first, is A, B, C; C is part-way.
    # Step 2: A and B decode (KV 18, budget 6). C's next chunk of 6 would need 24 > 20 KV tokens:
    #         the newest running request goes, and that is C itself: its 3 tokens are freed, it
    #         waits at the front of the queue, and the step carries the 2 decodes only.
    r = _run(until_seconds=3 * STEP_SECONDS)  # stop after step 2
    assert list(r.step_prefill_tokens) == [8, 7, 0]
    assert list(r.step_decode_tokens) == [0, 1, 2]
    assert list(r.step_preemptions) == [0, 0, 1]
    assert list(r.step_kv_tokens) == [8, 16, 15]  # 18 held minus C's 3
    assert list(r.request_preemptions) == [0, 0, 1]  # C, not A or B, lost its KV


def test_the_oldest_request_is_never_the_one_preempted():
    # Over the whole run KV stays short (steps 5, 7 and 10 preempt too), and
    # every time the newest goes: A, admitted first, decodes its 8 tokens back to back.
    r = _run()
    assert r.request_preemptions[0] == 0 and r.request_preemptions[1:].min() >= 1
    np.testing.assert_allclose(np.diff(r.token_times_seconds(0)), STEP_SECONDS, atol=1e-12)
    assert r.finished.all()


# ---- a preempted request finds its blocks again (vLLM V1 with prefix caching) --------------
# vLLM frees a preempted request's blocks into the free queue behind the blocks already free,
# keeping their hashes; each later allocation evicts from the queue's head (the request's last
# blocks first); on readmission the prefix-cache lookup finds what is left, in whole 16-token
# blocks, at most all but the last token (docs/research/gpu-memory-as-vllm-sees-it.md, section 4:
# vllm/v1/core/block_pool.py, kv_cache_manager.py, scheduler.py at v0.10.1.1).


def _refind_run(prefix_caching: bool = True):
    # A and B: 64-token prompts, 43 and 100 output tokens, 200 KV tokens, a large budget
    w = make_workload(arrival_seconds=[0.0, 0.0], prompt_tokens=[64, 64], output_tokens=[43, 100])
    config = SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=4,
                             enable_prefix_caching=prefix_caching)  # fmt: skip
    return simulate(w, step_function=constant_step_function(STEP_SECONDS),
                    kv_capacity_tokens=200, config=config)  # fmt: skip


def test_a_preempted_request_recomputes_only_what_was_evicted():
    # Step 0 prefills both prompts (128 tokens) and emits their first tokens; each step then adds
    # 2 tokens: 128 + 2 x 36 = 200 fills the cache at step 36. Step 37 preempts B (the newest),
    # holding 64 + 37 = 101 tokens, with no free tokens ahead of them. A decodes at steps 37-42
    # (6 allocations, each evicting one token of B's from the head) and finishes its 43 tokens.
    # Step 43 readmits B: 101 - 6 = 95 tokens left, 80 in whole blocks: it recomputes 21.
    r = _refind_run()
    assert list(r.request_preemptions) == [0, 1]
    assert list(np.flatnonzero(r.step_preemptions)) == [37]
    prefills = np.flatnonzero(r.step_prefill_tokens)
    assert list(prefills) == [0, 43]
    assert list(r.step_prefill_tokens[prefills]) == [128, 101 - (101 - 6) // 16 * 16]
    assert r.finished.all()


def test_without_the_blocks_found_again_the_whole_context_is_recomputed(monkeypatch):
    # what itlkit did before (and vLLM does without prefix caching): all 101 tokens again
    from itlkit.sim import engine

    monkeypatch.setattr(engine.Engine, "_refound", lambda self, r: r.cached)
    r = _refind_run()
    prefills = np.flatnonzero(r.step_prefill_tokens)
    assert list(r.step_prefill_tokens[prefills]) == [128, 101]


def test_with_the_prefix_cache_off_the_whole_context_is_recomputed():
    # vLLM V0's default, or --no-enable-prefix-caching: freed blocks keep no hash to be found by
    r = _refind_run(prefix_caching=False)
    prefills = np.flatnonzero(r.step_prefill_tokens)
    assert list(r.step_prefill_tokens[prefills]) == [128, 101]
