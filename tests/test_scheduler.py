"""The scheduler simulator against physics and the worked example, not against its own output.

Outside numbers: shared/spec/worked-example.txt (Llama 3.1 8B BF16 on one H100 SXM, 64 streams
at 4,096 tokens: floor 15.05 ms; with a 2,048-token chunk ~79 ms; with 512, ~29 ms).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from itlkit.errors import ConfigError
from itlkit.metrics.vllm_metrics import ITL_BUCKETS_SECONDS
from itlkit.physics.roofline import Deployment, capacity, decode_step, step_seconds
from itlkit.sim.lengths import LogNormal, Uniform
from itlkit.sim.results import fine_buckets_seconds, weighted_quantile
from itlkit.sim.scheduler import (
    SchedulerConfig,
    constant_step_function,
    kv_capacity_tokens,
    roofline_step_function,
    simulate,
    simulate_deployment,
)
from itlkit.sim.workload import make_workload, steady_workload, synthetic_workload

FLOOR_SECONDS = 15.05e-3  # worked example: 64 x 4,096 tokens, Llama 3.1 8B BF16, H100 SXM
CHUNK_2048_SECONDS = 79e-3  # "step with a chunk = ~79 ms"
CHUNK_512_SECONDS = 29e-3  # "with a 512-token chunk ... = ~29 ms"
STREAMS = 64


@pytest.fixture(scope="module")
def llama_h100() -> Deployment:
    return Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")


# ---- step-time adapter -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "tp", "terms"),
    [
        ("llama-3.1-8b", 1, {}),
        ("llama-3.1-70b", 4, {"allreduce_latency_seconds": 5e-6}),
        ("llama-3.1-8b", 1, {"prefill_attention": True}),
        ("mixtral-8x7b-v0.1", 2, {}),
        ("llama-3.1-8b", 2, {"host_overhead_seconds": 6e-4, "host_seconds_per_sequence": 4e-6}),
    ],
)
def test_roofline_step_function_equals_step_seconds(model, tp, terms):
    dep = Deployment.create(model=model, gpu="h100-sxm", tp=tp, **terms)
    step = roofline_step_function(dep)
    for decode, prefill, kv in ((1, 0, 10), (64, 0, 64 * 4096), (63, 2049, 63 * 4300), (0, 512, 0)):
        expect = step_seconds(dep, decode_tokens=decode, prefill_tokens=prefill, kv_tokens=kv)
        got = step(decode_tokens=decode, prefill_tokens=prefill, kv_tokens=kv)
        assert got == pytest.approx(expect, rel=1e-12)
    # A stretch of decode steps passes its contexts as one array.
    contexts = np.array([1000, 2000, 3000])
    stretch = step(decode_tokens=8, prefill_tokens=0, kv_tokens=contexts)
    for got, kv in zip(stretch, contexts, strict=True):
        expect = step_seconds(dep, decode_tokens=8, prefill_tokens=0, kv_tokens=int(kv))
        assert got == pytest.approx(expect, rel=1e-12)


def test_host_time_counts_every_decode_and_the_prefilling_sequence_once(llama_h100):
    """Host time = per step + per sequence x (decodes + 1 for a step that carries a chunk)."""
    per_sequence = 1e-3
    plain = roofline_step_function(llama_h100)
    hosted = roofline_step_function(replace(llama_h100, host_seconds_per_sequence=per_sequence))
    for decode, prefill, sequences in ((3, 100, 4), (3, 0, 3), (0, 512, 1), (64, 2048, 65)):
        kv = 1000 * decode
        for args in ({"kv_tokens": kv}, {"kv_tokens": np.array([kv, kv])}):  # one step, a stretch
            extra = hosted(decode_tokens=decode, prefill_tokens=prefill, **args) - plain(
                decode_tokens=decode, prefill_tokens=prefill, **args
            )
            assert np.allclose(extra, sequences * per_sequence, rtol=1e-9, atol=0)


def test_roofline_step_function_reproduces_the_worked_example(llama_h100):
    step = roofline_step_function(llama_h100)
    kv = STREAMS * 4096
    assert step(decode_tokens=64, prefill_tokens=0, kv_tokens=kv) == pytest.approx(
        FLOOR_SECONDS, abs=0.01e-3
    )
    assert step(decode_tokens=64, prefill_tokens=2048, kv_tokens=kv) == pytest.approx(
        CHUNK_2048_SECONDS, rel=0.01
    )
    assert step(decode_tokens=64, prefill_tokens=512, kv_tokens=kv) == pytest.approx(
        CHUNK_512_SECONDS, rel=0.01
    )


def test_efficiency_and_host_overhead(llama_h100):
    step = roofline_step_function(llama_h100, efficiency=0.5, host_overhead_seconds=2e-3)
    got = step(decode_tokens=64, prefill_tokens=0, kv_tokens=STREAMS * 4096)
    assert got == pytest.approx(2 * FLOOR_SECONDS + 2e-3, abs=0.02e-3)
    arrays = step(
        decode_tokens=np.array([64, 64]), prefill_tokens=np.array([0, 2048]), kv_tokens=262144
    )
    assert arrays.shape == (2,)
    assert arrays[0] == pytest.approx(got)


def test_kv_capacity_from_gpu_memory(llama_h100):
    # as vLLM sizes it: the H100's CUDA total (85,045,477,376 B, deviceQuery) x 0.9 - 16.06 GB of
    # weights - 0.6 GiB of profiled activations, / 131,072 B per token (the worked example's KV
    # per token), in whole 16-token blocks
    kv_bytes = 85_045_477_376 * 0.9 - 8_030_261_248 * 2 - 0.6 * 2**30
    assert kv_capacity_tokens(llama_h100) == math.floor(kv_bytes / (16 * 131_072)) * 16
    # the reference analysis' view (80 GB x 0.9 - weights) holds fewer sequences
    per_sequence = capacity(llama_h100, context_tokens=4096).max_sequences
    assert kv_capacity_tokens(llama_h100) // 4096 > per_sequence


# ---- bookkeeping physics -----------------------------------------------------------------


def test_constant_step_gives_exactly_constant_itl():
    w = synthetic_workload(
        duration_seconds=60, rate_per_second=4, prompt_tokens=700, output_tokens=50, seed=1
    )
    r = simulate(
        w,
        step_function=constant_step_function(0.02),
        kv_capacity_tokens=10**6,
        config=SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=64),
    )
    itl = r.itl_seconds
    assert itl.size > 1000
    assert np.all(itl == 0.02)
    assert r.finished.all() and r.preemptions == 0
    # Token times seen by one request are spaced by the step too.
    times = r.token_times_seconds(10)
    assert times.size == 50
    np.testing.assert_allclose(np.diff(times), 0.02, rtol=0, atol=1e-9)


def test_littles_law_on_a_long_run():
    """Time-average requests in the system = arrival rate x mean time in system (within 2%)."""
    rate = 3.0
    w = synthetic_workload(
        duration_seconds=1200,
        rate_per_second=rate,
        prompt_tokens=1000,
        output_tokens=100,
        seed=7,
    )
    r = simulate(
        w,
        step_function=constant_step_function(0.02),
        kv_capacity_tokens=10**6,
        config=SchedulerConfig(max_num_batched_tokens=1024, max_num_seqs=256),
    )
    assert r.finished.all()
    horizon = r.end_seconds
    in_system = r.step_running + r.step_waiting
    mean_in_system = float(np.dot(in_system, r.step_duration_seconds)) / horizon
    arrival_rate = w.num_requests / horizon
    assert mean_in_system == pytest.approx(arrival_rate * r.e2e_seconds.mean(), rel=0.02)


def test_every_token_is_counted_once_even_with_preemption():
    w = make_workload(arrival_seconds=np.zeros(8), prompt_tokens=200, output_tokens=300)
    r = simulate(
        w,
        step_function=constant_step_function(0.01),
        kv_capacity_tokens=1500,  # 8 x 500 tokens will not fit at once
        config=SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=8),
    )
    assert r.preemptions > 0
    assert r.finished.all()
    np.testing.assert_array_equal(r.generated_tokens, 300)
    for i in range(8):
        assert r.token_times_seconds(i).size == 300
    # One ITL observation per token after the first; one generated token per emitted token.
    assert r.itl_seconds.size == 8 * 299
    assert r.step_generation_tokens.sum() == 8 * 300
    assert r.step_kv_tokens.max() <= 1500
    assert r.step_kv_tokens.min() >= 0 and r.step_kv_tokens[-1] == 0


def test_steady_decode_itl_is_the_model_decode_step(llama_h100):
    """64 identical requests, no arrivals: each decode step = the roofline decode step."""
    w = steady_workload(running=STREAMS, prompt_tokens=4096, output_tokens=64)
    r = simulate_deployment(w, deployment=llama_h100)
    decode_only = np.flatnonzero((r.step_prefill_tokens == 0) & (r.step_decode_tokens == STREAMS))
    assert decode_only.size > 30
    emitted_before = np.zeros((decode_only.size, STREAMS))
    for i in range(STREAMS):
        times = r.token_times_seconds(i)
        starts = r.step_start_seconds[decode_only]
        emitted_before[:, i] = np.searchsorted(times, starts, side="right")
    # KV read by a step: the prompt plus every token already fed back (all but the newest).
    context = 4096 + emitted_before.mean(axis=1) - 1
    expect = decode_step(llama_h100, batch_size=STREAMS, context_tokens=context).step_seconds
    np.testing.assert_allclose(r.step_duration_seconds[decode_only], expect, rtol=1e-9)
    # And every such ITL sits within a few tokens' KV of the worked example's floor.
    assert r.step_duration_seconds[decode_only].min() == pytest.approx(FLOOR_SECONDS, rel=0.01)


# ---- the worked example's scenario -------------------------------------------------------

WINDOW_STEPS = 256


def _worked_example(llama_h100, *, chunk_tokens, rate=3.0, **config):
    """64 resident streams at ~4K context (cached prompts: they start together) + new 4K prompts.

    Residents' contexts run from 3,968 to 4,224 tokens (mean 4,096) over the window. New prompts
    are prefill-only (one output token), so every ITL observation belongs to a resident stream.
    Budget = 64 decode tokens + `chunk_tokens`, as in the worked example.
    """
    resident_prompt = 4096 - WINDOW_STEPS // 2
    arrivals = synthetic_workload(
        duration_seconds=30, rate_per_second=rate, prompt_tokens=4096, output_tokens=1, seed=11
    )
    w = make_workload(
        arrival_seconds=np.concatenate([np.zeros(STREAMS), 0.05 + arrivals.arrival_seconds]),
        prompt_tokens=np.concatenate([np.full(STREAMS, resident_prompt), arrivals.prompt_tokens]),
        output_tokens=np.concatenate([np.full(STREAMS, WINDOW_STEPS + 1), arrivals.output_tokens]),
        cached_prompt_tokens=np.concatenate(
            [np.full(STREAMS, resident_prompt - 1), np.zeros(arrivals.num_requests, dtype=int)]
        ),
    )
    settings = dict(max_num_batched_tokens=STREAMS + chunk_tokens, max_num_seqs=STREAMS + 1)
    settings.update(config)
    r = simulate_deployment(w, deployment=llama_h100, config=SchedulerConfig(**settings))
    new = np.arange(r.workload.num_requests) >= STREAMS
    new &= r.workload.arrival_seconds < r.finish_seconds[:STREAMS].max()
    ttft = r.first_token_seconds[new] - r.workload.arrival_seconds[new]
    return r, r.itl_seconds, ttft


def _share(samples, low, high):
    return float(np.mean((samples >= low) & (samples <= high)))


def test_2048_budget_gives_a_bimodal_itl_floor_and_mixed_step(llama_h100):
    r, itl, _ = _worked_example(llama_h100, chunk_tokens=2048)
    assert itl.size == STREAMS * WINDOW_STEPS
    fast = _share(itl, 0.97 * FLOOR_SECONDS, 1.03 * FLOOR_SECONDS)
    slow = _share(itl, 0.97 * CHUNK_2048_SECONDS, 1.03 * CHUNK_2048_SECONDS)
    assert fast > 0.5 and slow > 0.1
    assert fast + slow > 0.99  # nothing in between: two modes
    assert np.median(itl) == pytest.approx(FLOOR_SECONDS, rel=0.03)
    assert np.max(itl) == pytest.approx(CHUNK_2048_SECONDS, rel=0.03)
    # The vLLM buckets see it too: mass in (10, 25] ms and (75, 100] ms only.
    h = r.itl_histogram()
    per_bucket = dict(zip(h.upper_bounds, h.bucket_counts, strict=True))
    assert per_bucket[0.025] + per_bucket[0.1] == h.count


def test_512_budget_moves_the_slow_mode_to_29ms_and_raises_ttft(llama_h100):
    _, _, ttft_2048 = _worked_example(llama_h100, chunk_tokens=2048)
    _, itl_512, ttft_512 = _worked_example(llama_h100, chunk_tokens=512)
    slow = itl_512[itl_512 > 1.5 * FLOOR_SECONDS]
    assert slow.size > 0.1 * itl_512.size
    assert np.median(slow) == pytest.approx(CHUNK_512_SECONDS, rel=0.03)
    assert itl_512.max() < 0.5 * CHUNK_2048_SECONDS
    # A 4,096-token prompt needs 8 chunked steps instead of 2: first tokens come later.
    assert np.median(ttft_512) > 1.2 * np.median(ttft_2048)
    assert np.quantile(ttft_512, 0.99) > np.quantile(ttft_2048, 0.99)


def test_disaggregated_prefill_removes_the_slow_mode(llama_h100):
    r, itl, ttft = _worked_example(llama_h100, chunk_tokens=2048, disaggregated=True)
    assert r.step_prefill_tokens.sum() == 0
    assert itl.max() < 1.1 * FLOOR_SECONDS
    # First tokens still pay the prefill: two 2,048-token chunks on the prefill instance.
    prefill_alone = 2 * step_seconds(llama_h100, decode_tokens=0, prefill_tokens=2048, kv_tokens=0)
    assert ttft.min() > prefill_alone


def test_chunked_prefill_off_gives_rarer_but_larger_stalls(llama_h100):
    _, itl_on, _ = _worked_example(llama_h100, chunk_tokens=2048)
    _, itl_off, _ = _worked_example(llama_h100, chunk_tokens=2048, enable_chunked_prefill=False)
    slow_on = itl_on > 2 * FLOOR_SECONDS
    slow_off = itl_off > 2 * FLOOR_SECONDS
    assert slow_off.mean() < slow_on.mean()  # rarer
    # A whole 4,096-token prompt rides in one step: ~2 x 68.6 ms of GEMMs + the KV read.
    whole = step_seconds(llama_h100, decode_tokens=64, prefill_tokens=4096, kv_tokens=64 * 4096)
    assert itl_off.max() == pytest.approx(whole, rel=0.03)
    assert np.quantile(itl_off, 0.99) > np.quantile(itl_on, 0.99)  # worse ITL p99


# ---- KV capacity and preemption ------------------------------------------------------------


def _crowd(llama_h100, *, requests):
    w = make_workload(arrival_seconds=np.zeros(requests), prompt_tokens=2000, output_tokens=2000)
    return simulate_deployment(
        w, deployment=llama_h100, config=SchedulerConfig(max_num_batched_tokens=8192)
    )


def test_above_kv_capacity_preempts_with_multi_second_gaps(llama_h100):
    # 200 x 4,000 tokens = 800k > 426k tokens of KV
    r = _crowd(llama_h100, requests=200)
    assert r.preemptions > 0
    assert r.request_preemptions.sum() == r.preemptions
    assert r.itl_seconds.max() > 2.0
    assert r.gap_itl_seconds.size > 0 and r.gap_itl_seconds.min() > 0
    assert r.finished.all()


def test_below_kv_capacity_never_preempts(llama_h100):
    r = _crowd(llama_h100, requests=100)  # 100 x 4,000 = 400k < 426k tokens
    assert r.preemptions == 0
    assert r.gap_itl_seconds.size == 0
    # The longest ITL is one step carrying a full 8,192-token budget of prefill, well under 1 s.
    longest = step_seconds(llama_h100, decode_tokens=0, prefill_tokens=8192, kv_tokens=400_000)
    assert r.itl_seconds.max() < longest < 1.0


# ---- outputs -------------------------------------------------------------------------------


def test_in_flight_requests_are_reported_separately():
    w = synthetic_workload(
        duration_seconds=20, rate_per_second=5, prompt_tokens=500, output_tokens=400, seed=2
    )
    r = simulate(
        w,
        step_function=constant_step_function(0.02),
        kv_capacity_tokens=10**6,
        until_seconds=10,
    )
    frame = r.requests_frame()
    summary = r.summary()
    assert summary.requests_in_flight > 0
    assert summary.requests_finished + summary.requests_in_flight == summary.requests_arrived
    assert (frame["status"] == "in_flight").sum() == summary.requests_in_flight
    assert frame.loc[frame["status"] == "finished", "e2e_seconds"].notna().all()
    assert frame.loc[frame["status"] == "in_flight", "e2e_seconds"].isna().all()
    assert r.e2e_seconds.size == summary.requests_finished


def test_histograms_quantiles_and_frames(llama_h100):
    w = synthetic_workload(
        duration_seconds=30, rate_per_second=4, prompt_tokens=2000, output_tokens=100, seed=3
    )
    r = simulate_deployment(w, deployment=llama_h100)
    itl = r.itl_seconds
    vllm = r.itl_histogram()
    assert list(vllm.upper_bounds) == list(ITL_BUCKETS_SECONDS)
    assert vllm.count == itl.size
    assert vllm.cumulative_counts[0] == np.sum(itl <= 0.01)
    fine = r.itl_histogram(fine_buckets_seconds())
    assert fine.count == itl.size and fine.sum == pytest.approx(itl.sum())
    for q in (0.5, 0.9, 0.99):
        assert r.itl_quantile(q) == np.quantile(itl, q, method="inverted_cdf")
    steps = r.steps_frame()
    assert len(steps) == r.steps
    assert (steps["decode_tokens"] + steps["prefill_tokens"] <= 8192).all()
    assert steps["kv_usage"].between(0, 1).all()


def test_weighted_quantile_matches_repeated_samples():
    values, weights = np.array([3.0, 1.0, 2.0]), np.array([1, 5, 2])
    repeated = np.repeat(values, weights)
    for q in np.linspace(0, 1, 11):
        assert weighted_quantile(values, weights, q) == np.quantile(
            repeated, q, method="inverted_cdf"
        )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (SchedulerConfig(max_num_seqs=300, max_num_batched_tokens=256), "max_num_seqs"),
        (SchedulerConfig(max_num_batched_tokens=0), "max_num_batched_tokens"),
        (SchedulerConfig(kv_transfer_bytes_per_second=0), "kv_transfer"),
    ],
)
def test_bad_config_is_a_clear_error(config, message):
    w = steady_workload(running=2, prompt_tokens=10, output_tokens=5)
    with pytest.raises(ConfigError, match=message):
        simulate(
            w, step_function=constant_step_function(0.01), kv_capacity_tokens=100, config=config
        )


def test_a_request_larger_than_the_kv_cache_is_refused():
    w = steady_workload(running=1, prompt_tokens=900, output_tokens=200)
    with pytest.raises(ConfigError, match="could never finish"):
        simulate(w, step_function=constant_step_function(0.01), kv_capacity_tokens=1000)


def test_step_function_must_return_positive_seconds():
    w = steady_workload(running=1, prompt_tokens=10, output_tokens=5)
    with pytest.raises(ConfigError, match="step function"):
        simulate(
            w,
            step_function=lambda *, decode_tokens, prefill_tokens, kv_tokens: 0.0,
            kv_capacity_tokens=100,
        )


@pytest.mark.parametrize("disaggregated", [False, True])
def test_fast_path_matches_step_by_step(llama_h100, monkeypatch, disaggregated):
    """Pure-decode stretches done in a tight loop or as arrays change nothing in the results."""
    w = synthetic_workload(
        duration_seconds=60, rate_per_second=2, prompt_tokens=3000, output_tokens=400, seed=9
    )
    config = SchedulerConfig(
        max_num_batched_tokens=2048, max_num_seqs=64, disaggregated=disaggregated
    )
    fast = simulate_deployment(w, deployment=llama_h100, config=config, until_seconds=60)
    monkeypatch.setattr("itlkit.sim.engine.FAST_PATH_MIN_STEPS", 10**9)
    slow = simulate_deployment(w, deployment=llama_h100, config=config, until_seconds=60)
    assert fast.steps == slow.steps
    for name in ("step_start_seconds", "step_duration_seconds"):
        np.testing.assert_allclose(getattr(fast, name), getattr(slow, name), rtol=1e-12)
    for name in (
        "step_decode_tokens", "step_prefill_tokens", "step_running", "step_waiting",
        "step_kv_tokens", "step_itl_observations", "generated_tokens",
    ):  # fmt: skip
        np.testing.assert_array_equal(getattr(fast, name), getattr(slow, name))
    np.testing.assert_allclose(fast.finish_seconds, slow.finish_seconds, rtol=1e-12)


def test_prefix_cache_hits_skip_prefill_but_hold_kv():
    w = make_workload(
        arrival_seconds=np.arange(20) * 0.5,
        prompt_tokens=3000,
        output_tokens=10,
        cached_prompt_tokens=2000,
    )
    r = simulate(
        w,
        step_function=constant_step_function(0.01),
        kv_capacity_tokens=10**6,
        config=SchedulerConfig(max_num_batched_tokens=512, max_num_seqs=8),
    )
    assert r.step_prefill_tokens.sum() == 20 * 1000  # only the uncached 1,000 tokens each
    # While one request decodes alone, it holds its whole prompt's KV (cached part included).
    assert r.step_kv_tokens.max() >= 3000
    assert r.step_kv_tokens.min() >= 0 and r.step_kv_tokens[-1] == 0  # all freed at the end


@pytest.mark.parametrize(
    "mode", [{}, {"enable_chunked_prefill": False}, {"disaggregated": True}], ids=str
)
def test_tokens_and_kv_are_conserved_under_pressure(llama_h100, mode):
    """Mixed lengths, a shared prefix and a small KV cache: every token once, all KV returned."""
    w = synthetic_workload(
        duration_seconds=60,
        rate_per_second=6,
        prompt_tokens=Uniform(500, 6000),
        output_tokens=LogNormal(300, 1.0, max_tokens=4000),
        shared_prefix_tokens=300,
        seed=2,
    )
    r = simulate(
        w,
        step_function=roofline_step_function(llama_h100),
        kv_capacity_tokens=150_000,
        config=SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=128, **mode),
        kv_bytes_per_token=131_072,
    )
    assert r.finished.all()
    np.testing.assert_array_equal(r.generated_tokens, w.output_tokens)
    assert r.itl_seconds.size == (w.output_tokens - 1).sum()
    assert r.step_generation_tokens.sum() == w.output_tokens.sum()
    assert 0 <= r.step_kv_tokens.min() and r.step_kv_tokens.max() <= 150_000
    assert r.step_kv_tokens[-1] == 0
    assert (r.step_decode_tokens + r.step_prefill_tokens <= 2048).all() or not mode.get(
        "enable_chunked_prefill", True
    )


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    chunked=st.booleans(),
    disaggregated=st.booleans(),
    seed=st.integers(0, 2**31),
)
def test_invariants_hold_for_any_small_workload(data, chunked, disaggregated, seed):
    """Property: whatever the traffic and knobs, tokens are conserved and KV stays in bounds."""
    rng = np.random.default_rng(seed)
    n = data.draw(st.integers(1, 25), label="requests")
    prompt = rng.integers(1, 300, size=n)
    output = rng.integers(1, 60, size=n)
    cached = np.minimum(rng.integers(0, 100, size=n), prompt - 1)
    w = make_workload(
        arrival_seconds=np.sort(rng.uniform(0, 2, size=n)),
        prompt_tokens=prompt,
        output_tokens=output,
        cached_prompt_tokens=cached,
    )
    capacity_tokens = int((prompt + output).max()) + data.draw(st.integers(0, 2000), label="spare")
    seqs = data.draw(st.integers(1, 16), label="max_num_seqs")
    budget = data.draw(st.integers(seqs, 512), label="budget")
    config = SchedulerConfig(
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        enable_chunked_prefill=chunked,
        disaggregated=disaggregated,
    )
    r = simulate(
        w,
        step_function=lambda *, decode_tokens, prefill_tokens, kv_tokens: (
            0.01 + 1e-5 * (decode_tokens + prefill_tokens)
        ),
        kv_capacity_tokens=capacity_tokens,
        config=config,
        kv_bytes_per_token=1000.0,
    )
    assert r.finished.all()
    np.testing.assert_array_equal(r.generated_tokens, w.output_tokens)
    assert r.itl_seconds.size == (w.output_tokens - 1).sum()
    assert np.all(r.itl_seconds > 0)
    assert r.step_generation_tokens.sum() == w.output_tokens.sum()
    assert r.step_kv_tokens.min() >= 0 and r.step_kv_tokens.max() <= capacity_tokens
    assert r.step_kv_tokens[-1] == 0
    assert r.step_running.max() <= seqs
    if chunked:
        assert (r.step_decode_tokens + r.step_prefill_tokens <= budget).all()
    for i in range(n):
        times = r.token_times_seconds(i)
        assert times.size == w.output_tokens[i]
        assert np.all(np.diff(times) > 0)
        assert times[0] == r.first_token_seconds[i] and times[-1] == r.finish_seconds[i]
    assert np.all(r.first_token_seconds >= w.arrival_seconds)


def _on_the_bounds():
    """Steps of exactly 0.5 s: ITL 0.5, TTFT 0.5 and e2e 2.5 s, each an `le` of vLLM's buckets."""
    w = make_workload(arrival_seconds=np.zeros(2), prompt_tokens=10, output_tokens=5)
    return simulate(w, step_function=constant_step_function(0.5), kv_capacity_tokens=100)


def test_result_histograms_put_values_on_a_bound_into_that_le_bucket():
    r = _on_the_bounds()
    for h, le, count in (
        (r.itl_histogram(), 0.5, 8),
        (r.ttft_histogram(), 0.5, 2),
        (r.e2e_histogram(), 2.5, 2),
    ):
        per_bucket = dict(zip(h.upper_bounds, h.bucket_counts, strict=True))
        assert per_bucket[le] == count == h.count, (le, per_bucket)


def test_a_new_prompts_first_chunk_is_the_budget_left_after_the_decodes():
    """Budget 2,048, no decodes: a 4,096-token prompt takes 2 steps (2,048 + 2,048), not 3.

    With 3 requests decoding, the next prompt's first chunk is 2,048 - 3 = 2,045 tokens.
    """
    w = make_workload(arrival_seconds=np.zeros(1), prompt_tokens=4096, output_tokens=2)
    config = SchedulerConfig(max_num_batched_tokens=2048, max_num_seqs=8)
    r = simulate(w, step_function=constant_step_function(0.01), kv_capacity_tokens=10**5,
                 config=config)  # fmt: skip
    assert list(r.step_prefill_tokens) == [2048, 2048, 0]
    assert r.first_token_seconds[0] == pytest.approx(0.02, abs=1e-12)
    # Three short requests decode from step 1 on; the long prompt arrives during step 1.
    w = make_workload(
        arrival_seconds=[0.0, 0.0, 0.0, 0.005], prompt_tokens=[1, 1, 1, 4096], output_tokens=10
    )
    r = simulate(w, step_function=constant_step_function(0.01), kv_capacity_tokens=10**5,
                 config=config)  # fmt: skip
    assert list(r.step_prefill_tokens[:4]) == [3, 2045, 2045, 6]
    assert list(r.step_decode_tokens[:4]) == [0, 3, 3, 3]


def test_preemption_evicts_the_newest_running_request():
    """KV for 3 x 12 tokens; each request needs 10 + 8: when KV runs out the last admitted goes."""
    w = make_workload(arrival_seconds=[0.0, 0.001, 0.002], prompt_tokens=10, output_tokens=8)
    config = SchedulerConfig(max_num_batched_tokens=16, max_num_seqs=4)
    r = simulate(w, step_function=constant_step_function(0.01), kv_capacity_tokens=36,
                 config=config)  # fmt: skip
    assert r.preemptions >= 1
    assert list(r.request_preemptions[:2]) == [0, 0]  # the two older ones never lose their KV
    assert r.request_preemptions[2] >= 1
    assert r.finished.all()
