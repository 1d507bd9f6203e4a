"""A prefix that requests share is held once in the KV cache, as vLLM's block pool holds it.

vLLM (v1/core/block_pool.py, kv_cache_manager.py) keeps one copy of each cached block and counts
the requests that reference it; a block goes back to the free pool when its count falls to zero.
So ten running requests that start with the same 2,000-token system prompt hold 2,000 tokens of
it, not 20,000. Every expectation below is worked out by hand from that rule.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from itlkit.errors import ConfigError
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.scheduler import constant_step_function, simulate
from itlkit.sim.workload import make_workload, read_workload_csv, synthetic_workload

STEP = constant_step_function(0.01)
WIDE = SchedulerConfig(max_num_batched_tokens=20_000, max_num_seqs=16)


def _ten_sharing(**overrides):
    """Ten 3,000-token prompts at t = 0 whose first 2,000 tokens are a cached shared prefix."""
    columns = dict(
        arrival_seconds=np.zeros(10),
        prompt_tokens=3000,
        output_tokens=10,
        cached_prompt_tokens=2000,
        shared_prompt_tokens=2000,
        prefix_group=0,
    )
    return make_workload(**(columns | overrides))


def test_a_shared_prefix_is_held_once():
    r = simulate(_ten_sharing(), step_function=STEP, kv_capacity_tokens=10**6, config=WIDE)
    # Step 0 admits all ten and prefills their 1,000 own tokens each: 2,000 shared + 10 x 1,000.
    assert r.step_kv_tokens[0] == 2000 + 10 * 1000
    # Step 1: each of the ten writes the KV of the token step 0 emitted.
    assert r.step_kv_tokens[1] == 2000 + 10 * 1001
    assert r.step_kv_tokens[-1] == 0  # the prefix is freed with its last holder


def test_without_a_group_each_request_holds_its_own_copy():
    alone = _ten_sharing(shared_prompt_tokens=0, prefix_group=-1)
    r = simulate(alone, step_function=STEP, kv_capacity_tokens=10**6, config=WIDE)
    assert r.step_kv_tokens[0] == 10 * 3000


def test_groups_hold_their_prefixes_apart():
    two = _ten_sharing(prefix_group=np.arange(10) % 2)
    r = simulate(two, step_function=STEP, kv_capacity_tokens=10**6, config=WIDE)
    assert r.step_kv_tokens[0] == 2 * 2000 + 10 * 1000


def test_sharing_lets_the_whole_batch_in_where_copies_would_not_fit():
    # 13,000 tokens: the ten fit with one prefix (12,000, then + 10 a step for 9 more steps);
    # with ten copies (3,000 each) only four fit, the others wait for them to finish.
    capacity = 13_000
    shared = simulate(_ten_sharing(), step_function=STEP, kv_capacity_tokens=capacity, config=WIDE)
    assert shared.step_first_tokens[0] == 10
    assert shared.step_preemptions.sum() == 0
    copies = simulate(
        _ten_sharing(shared_prompt_tokens=0, prefix_group=-1),
        step_function=STEP,
        kv_capacity_tokens=capacity,
        config=WIDE,
    )
    assert copies.step_first_tokens[0] == capacity // 3000


def test_the_group_holds_its_longest_shared_prefix_and_shrinks_when_it_leaves():
    # A shares 2,000 tokens and finishes after 2 tokens; B shares the first 1,000 of them (a
    # prefix of A's) and generates 20. Both are prompts of 3,000 tokens admitted in step 0.
    w = make_workload(
        arrival_seconds=[0.0, 0.0],
        prompt_tokens=3000,
        output_tokens=[2, 20],
        cached_prompt_tokens=[2000, 1000],
        shared_prompt_tokens=[2000, 1000],
        prefix_group=0,
    )
    r = simulate(w, step_function=STEP, kv_capacity_tokens=10**6, config=WIDE)
    # Step 0: the group holds A's 2,000 (B's 1,000 are inside them); A adds 1,000, B 2,000.
    assert r.step_kv_tokens[0] == 2000 + 1000 + 2000
    # A's second token is step 1's, and A leaves then. B alone holds all its context: in step
    # s >= 1 it writes the KV of the token emitted at the end of step s - 1, so 3,000 + s.
    for step in range(2, 10):
        assert r.step_kv_tokens[step] == 3000 + step


def test_a_preempted_request_gives_back_only_what_no_other_holds():
    # Capacity for the prefix and about two requests' own tokens and outputs: the batch
    # outgrows it while decoding, the newest are preempted, and every token still arrives once.
    w = _ten_sharing(output_tokens=400)
    r = simulate(w, step_function=STEP, kv_capacity_tokens=2000 + 10 * 1000 + 1500, config=WIDE)
    assert r.step_preemptions.sum() > 0
    assert r.finished.all()
    np.testing.assert_array_equal(r.generated_tokens, w.output_tokens)
    assert r.step_kv_tokens.max() <= 2000 + 10 * 1000 + 1500
    assert r.step_kv_tokens[-1] == 0


def test_synthetic_shared_prefixes_form_one_group():
    w = synthetic_workload(
        duration_seconds=60,
        rate_per_second=2,
        prompt_tokens=3000,
        output_tokens=50,
        shared_prefix_tokens=2000,
        shared_prefix_fraction=0.5,
        seed=1,
    )
    sharing = w.prefix_group == 0
    assert 0 < sharing.sum() < w.num_requests
    np.testing.assert_array_equal(w.shared_prompt_tokens, np.where(sharing, 2000, 0))
    np.testing.assert_array_equal(w.prefix_group[~sharing], -1)


def test_a_csv_prefix_group_below_minus_one_names_its_line(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(
        "arrival_seconds,prompt_tokens,output_tokens,prefix_group\n0,30,5,1\n0,30,5,-3\n"
    )
    with pytest.raises(ConfigError, match=r"trace.csv:3: prefix_group is '-3'; it must be a whole"):
        read_workload_csv(path)


def test_a_csv_prefix_group_column_shares_the_cached_tokens(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(
        "arrival_seconds,prompt_tokens,output_tokens,cached_prompt_tokens,prefix_group\n"
        "0,3000,5,2000,7\n0.1,3000,5,2000,7\n0.2,500,5,0,\n"
    )
    w = read_workload_csv(path)
    np.testing.assert_array_equal(w.prefix_group, [7, 7, -1])
    np.testing.assert_array_equal(w.shared_prompt_tokens, [2000, 2000, 0])


@pytest.mark.parametrize(
    "columns, message",
    [
        (dict(shared_prompt_tokens=2500), "at most the cached ones"),
        (dict(shared_prompt_tokens=-1), "at most the cached ones"),
        (dict(prefix_group=-1), "needs a prefix group"),
        (dict(prefix_group=-2), "must be >= 0 \\(or -1: none\\), got -2"),
    ],
)
def test_inconsistent_sharing_is_refused(columns, message):
    with pytest.raises(ConfigError, match=message):
        _ten_sharing(**columns)


@settings(max_examples=120, deadline=None)
@given(data=st.data(), chunked=st.booleans(), seed=st.integers(0, 2**31))
def test_kv_stays_in_bounds_and_comes_back_with_groups(data, chunked, seed):
    """Property: with random groups and shared lengths, every token arrives once, KV never
    exceeds the capacity, and all of it (prefixes included) is free at the end."""
    rng = np.random.default_rng(seed)
    n = data.draw(st.integers(1, 25), label="requests")
    prompt = rng.integers(2, 300, size=n)
    output = rng.integers(1, 60, size=n)
    cached = np.minimum(rng.integers(0, 150, size=n), prompt - 1)
    shared = np.minimum(rng.integers(0, 150, size=n), cached)
    group = np.where(shared > 0, rng.integers(0, 3, size=n), -1)
    w = make_workload(
        arrival_seconds=np.sort(rng.uniform(0, 2, size=n)),
        prompt_tokens=prompt,
        output_tokens=output,
        cached_prompt_tokens=cached,
        shared_prompt_tokens=shared,
        prefix_group=group,
    )
    capacity = int((prompt + output).max()) + data.draw(st.integers(0, 1500), label="spare")
    seqs = data.draw(st.integers(1, 12), label="max_num_seqs")
    config = SchedulerConfig(
        max_num_batched_tokens=data.draw(st.integers(seqs, 400), label="budget"),
        max_num_seqs=seqs,
        enable_chunked_prefill=chunked,
    )
    r = simulate(w, step_function=STEP, kv_capacity_tokens=capacity, config=config)
    assert r.finished.all()
    np.testing.assert_array_equal(r.generated_tokens, w.output_tokens)
    assert 0 <= r.step_kv_tokens.min() and r.step_kv_tokens.max() <= capacity
    assert r.step_kv_tokens[-1] == 0
