"""Every common client (issue 20): closed loops (`vllm bench serve --max-concurrency`), bursts
(`--request-rate inf`), length distributions (fixed, uniform, lognormal, quantile tables,
`--dataset-name random`), repeated prompts, in the library, `itlkit simulate` and the
`itlkit-runs/1` format, and one-line errors for what cannot run.

Expected values are derived here: a first-come-first-served semaphore's send times from the
simulated finishes, the distributions' own means and bounds (vLLM's floor / ceil range for the
random dataset, vllm/benchmarks/datasets.py @ 0056b87f), binomial tolerances for drawn shares.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
from dataclasses import replace

import numpy as np
import pytest
from _paths import REAL_RUNS

from itlkit.calibration.predict import predict_run, run_config
from itlkit.cli import main
from itlkit.errors import ConfigError
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.lengths import (
    Fixed,
    LogNormal,
    Quantiles,
    Uniform,
    read_quantiles_csv,
    vllm_random_output_lengths,
    vllm_random_prompt_lengths,
)
from itlkit.sim.run_workload import repeat_prompts, run_workload
from itlkit.sim.runs import Stage, parse_runs
from itlkit.sim.scheduler import constant_step_function, simulate
from itlkit.sim.workload import bench_arrivals, bench_workload, make_workload, synthetic_workload

STEP_SECONDS = 0.01
STEP = constant_step_function(STEP_SECONDS)
ROOMY_KV_TOKENS = 10**7  # nothing is ever preempted


def run(workload, **config):
    return simulate(workload, step_function=STEP, kv_capacity_tokens=ROOMY_KV_TOKENS,
                    config=SchedulerConfig(**config))  # fmt: skip


def in_flight_peak(sent, finish) -> int:
    """Most requests between send and finish at once: a sweep over half-open [send, finish)
    (vLLM's `max_concurrent_requests`: a departure before an arrival at the same time)."""
    events = sorted([(t, 1) for t in sent] + [(t, -1) for t in finish])
    level = peak = 0
    for _, delta in events:
        level += delta
        peak = max(peak, level)
    return peak


# ---- closed loop --------------------------------------------------------------------------------


def test_one_slot_sends_each_request_when_the_previous_finishes():
    # a burst wanted at t = 0, fixed lengths: strictly one after another
    w = bench_workload(num_prompts=8, max_concurrency=1, prompt_tokens=100, output_tokens=5)
    r = run(w)
    assert r.finished.all()
    sent, finish = r.workload.arrival_seconds, r.finish_seconds
    assert sent[0] == 0.0
    assert np.array_equal(sent[1:], finish[:-1])  # E2E k starts where k - 1 ends
    assert r.step_running.max() == 1
    # prefill (1 step) + 4 more decode steps: every request takes 5 steps, back to back
    assert r.e2e_seconds == pytest.approx(np.full(8, 5 * STEP_SECONDS))
    assert r.end_seconds == pytest.approx(8 * 5 * STEP_SECONDS)


def test_one_slot_waits_for_arrivals_that_come_after_the_slot_frees():
    arrival = [0.0, 0.01, 0.5, 0.51, 2.0]
    w = make_workload(arrival_seconds=arrival, prompt_tokens=100, output_tokens=5,
                      max_concurrency=1)  # fmt: skip
    r = run(w)
    sent, finish = r.workload.arrival_seconds, r.finish_seconds
    expected = [arrival[0]] + [max(a, f) for a, f in zip(arrival[1:], finish[:-1], strict=True)]
    assert sent.tolist() == expected
    assert sent[2] == 0.5 and sent[1] > arrival[1]  # held by the slot, then by its own arrival


@pytest.mark.parametrize("rate", [math.inf, 40.0])
def test_four_slots_send_first_come_first_served_as_slots_free(rate):
    w = bench_workload(num_prompts=60, request_rate_per_second=rate, max_concurrency=4, seed=3,
                       prompt_tokens=Uniform(50, 400), output_tokens=Uniform(2, 40))  # fmt: skip
    r = run(w)
    wanted, sent, finish = w.arrival_seconds, r.workload.arrival_seconds, r.finish_seconds
    assert r.finished.all()
    # FIFO semaphore of 4: request k goes at its arrival or at the (k - 3)-th finish overall
    ordered = np.sort(finish)
    expected = [wanted[k] if k < 4 else max(wanted[k], ordered[k - 4]) for k in range(60)]
    assert sent.tolist() == expected
    assert in_flight_peak(sent, finish) == 4
    assert r.step_running.max() == 4
    if math.isinf(rate):
        # the queue never empties until the last send: 4 run in every step up to it, and the
        # engine never idles (each step starts where the one before ended)
        before_last_send = r.step_start_seconds < sent[-1]
        assert np.all(r.step_running[before_last_send] == 4)
        assert r.step_start_seconds[1:] == pytest.approx(r.step_end_seconds[:-1])


def test_slots_beyond_the_requests_change_nothing():
    # open-loop results are bit-identical, and a closed loop that never holds back is too
    w = synthetic_workload(duration_seconds=30, rate_per_second=4.0,
                           prompt_tokens=Uniform(100, 2000), output_tokens=64, seed=5)  # fmt: skip
    roofline = simulate(w, step_function=STEP, kv_capacity_tokens=20_000)
    closed = simulate(make_workload(
        arrival_seconds=w.arrival_seconds, prompt_tokens=w.prompt_tokens,
        output_tokens=w.output_tokens, max_concurrency=w.num_requests,
    ), step_function=STEP, kv_capacity_tokens=20_000)  # fmt: skip
    for name in ("first_token_seconds", "finish_seconds", "step_start_seconds", "step_running",
                 "step_waiting", "step_kv_tokens"):  # fmt: skip
        assert np.array_equal(getattr(roofline, name), getattr(closed, name)), name


def test_a_closed_loop_stopped_early_never_sends_the_rest():
    w = bench_workload(num_prompts=50, max_concurrency=2, prompt_tokens=100, output_tokens=20)
    r = simulate(w, step_function=STEP, kv_capacity_tokens=ROOMY_KV_TOKENS, until_seconds=0.95)
    # each request takes 20 steps of 10 ms: two at a time, pairs finish at 0.2, 0.4, 0.6, 0.8 s
    assert r.finished.sum() == 8
    assert r.arrived.sum() == 10 and r.in_flight.sum() == 2
    assert np.all(r.workload.arrival_seconds[10:] >= r.end_seconds)  # never sent


def test_queue_length_counts_only_sent_requests():
    # 2 slots, max_num_seqs 1: the server's queue holds at most the one other sent request
    w = bench_workload(num_prompts=20, max_concurrency=2, prompt_tokens=100, output_tokens=10)
    r = run(w, max_num_seqs=1, max_num_batched_tokens=8192)
    assert r.step_waiting.max() == 1 and r.step_running.max() == 1


# ---- bursts and vllm bench serve's arrivals -----------------------------------------------------


def test_a_burst_sends_every_request_at_zero():
    w = bench_workload(num_prompts=500, request_rate_per_second=math.inf, seed=1)
    assert w.num_requests == 500 and np.all(w.arrival_seconds == 0.0)
    assert np.all(bench_arrivals(num_prompts=7, request_rate_per_second=math.inf) == 0.0)


def test_bench_arrivals_are_rescaled_poisson_ending_at_n_over_rate():
    n, rate = 20_000, 8.0
    t = bench_arrivals(num_prompts=n, request_rate_per_second=rate, seed=2)
    assert t[-1] == pytest.approx(n / rate, rel=1e-12)  # vLLM's rescale
    gaps = np.diff(np.concatenate(([0.0], t)))
    assert np.all(gaps > 0)
    assert gaps.mean() == pytest.approx(1 / rate, rel=1e-9)  # n gaps sum to n / rate
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.03)  # exponential: cv 1
    even = bench_arrivals(num_prompts=n, request_rate_per_second=rate, burstiness=100.0, seed=2)
    gaps = np.diff(np.concatenate(([0.0], even)))
    assert gaps.std() / gaps.mean() == pytest.approx(0.1, abs=0.01)  # gamma: cv 1/sqrt(shape)


def test_cli_burst_and_closed_loop(capsys):
    burst = _json(capsys, "--num-prompts", "30", "--request-rate", "inf",
                  "--prompt-tokens", "512", "--output-tokens", "32")  # fmt: skip
    assert burst["requests_arrived"] == burst["requests_finished"] == 30
    closed = _json(capsys, "--num-prompts", "30", "--request-rate", "inf", "--max-concurrency",
                   "1", "--prompt-tokens", "512", "--output-tokens", "32")  # fmt: skip
    assert closed["requests_finished"] == 30
    # one at a time: a TTFT is one prefill step, never a queue; a burst queues behind prefills
    assert closed["ttft_p99_seconds"] < burst["ttft_p99_seconds"] / 5
    assert closed["simulated_seconds"] > burst["simulated_seconds"]


# ---- length distributions -----------------------------------------------------------------------

RNG_DRAWS = 200_000


def _draw(dist, seed=0):
    return dist.sample(np.random.default_rng(seed), size=RNG_DRAWS)


def test_uniform_lengths_stay_in_bounds_and_hit_both():
    x = _draw(Uniform(300, 700))
    assert x.min() == 300 and x.max() == 700
    # the mean's standard error is (401^2 - 1) / 12 ^ 0.5 / sqrt(n) = 0.26 tokens
    assert x.mean() == pytest.approx(Uniform(300, 700).mean_tokens, abs=1.5)


def test_lognormal_from_its_mean_and_sigma():
    dist = LogNormal.from_mean(2000.0, 0.8)
    assert dist.median_tokens == pytest.approx(2000 * math.exp(-0.32))  # mean e^{-sigma^2/2}
    x = _draw(dist)
    # sd / sqrt(n) = 2000 sqrt(e^0.64 - 1) / 447 = 0.4% of the mean
    assert x.mean() == pytest.approx(2000.0, rel=0.02)
    assert np.median(x) == pytest.approx(dist.median_tokens, rel=0.01)


def test_lognormal_from_its_mean_and_spread():
    dist = LogNormal.from_mean_sd(1000.0, 500.0)
    assert dist.sigma == pytest.approx(math.sqrt(math.log(1.25)))  # ln(1 + (sd/mean)^2)
    x = _draw(dist)
    assert x.mean() == pytest.approx(1000.0, rel=0.01)
    assert x.std() == pytest.approx(500.0, rel=0.03)


def test_quantile_table_is_a_piecewise_linear_inverse_cdf(tmp_path):
    path = tmp_path / "prompts.csv"
    path.write_text("level,tokens\n0,10\n0.5,200\n0.9,1000\n1,4000\n")
    dist = read_quantiles_csv(path)
    assert dist == Quantiles((0.0, 0.5, 0.9, 1.0), (10.0, 200.0, 1000.0, 4000.0))
    # trapezoids: 0.5 x 105 + 0.4 x 600 + 0.1 x 2500
    assert dist.mean_tokens == pytest.approx(52.5 + 240 + 250)
    x = _draw(dist)
    assert x.min() >= 10 and x.max() <= 4000
    assert x.mean() == pytest.approx(dist.mean_tokens, rel=0.01)
    for level, tokens in ((0.25, 105.0), (0.5, 200.0), (0.7, 600.0), (0.95, 2500.0)):
        assert np.quantile(x, level) == pytest.approx(tokens, rel=0.02), level


@pytest.mark.parametrize(
    ("input_len", "ratio", "special", "prefix", "low", "high"),
    [
        (1024, 0.0, 0, 0, 1024, 1024),  # fixed: the fixture's bursts
        (1000, 0.1, 0, 0, 900, 1100),
        (1000, 0.1, 1, 0, 900, 1100),  # 999: floor(899.1) + 1, ceil(1098.9) + 1
        (1001, 0.25, 0, 0, 750, 1252),  # floor(750.75), ceil(1251.25)
        (100, 0.5, 0, 64, 114, 214),  # a prefix adds to both bounds
    ],
)  # fmt: skip
def test_random_dataset_prompt_bounds_as_vllm_computes_them(input_len, ratio, special, prefix,
                                                             low, high):  # fmt: skip
    dist = vllm_random_prompt_lengths(input_len=input_len, range_ratio=ratio,
                                      special_tokens=special, prefix_len=prefix)  # fmt: skip
    assert (dist.low_tokens, dist.high_tokens) == (low, high)
    x = _draw(dist)
    assert (x.min(), x.max()) == (low, high)


def test_random_dataset_output_bounds_are_at_least_one():
    assert vllm_random_output_lengths(output_len=10, range_ratio=0.95) == Uniform(1, 20)
    assert vllm_random_output_lengths(output_len=128, range_ratio=0.0) == Uniform(128, 128)
    assert vllm_random_output_lengths(output_len=3, range_ratio=0.5) == Uniform(1, 5)


def test_cli_random_dataset_draws_vllms_ranges(capsys):
    values = _json(capsys, "--num-prompts", "400", "--request-rate", "inf", "--random-input-len",
                   "200", "--random-output-len", "20", "--random-range-ratio", "0.5")  # fmt: skip
    # every prompt (100..300) is prefilled whole in its first step of the 8,192 budget, and the
    # outputs (10..30) average 20: 400 x 19 gaps after the first token
    assert values["requests_finished"] == 400
    assert values["itl_observations"] == pytest.approx(400 * 19, rel=0.05)


# ---- repeated prompts ---------------------------------------------------------------------------


def test_repeat_share_is_the_share_of_prompts_seen_before():
    n, share = 20_000, 0.3
    w = bench_workload(num_prompts=n, prompt_tokens=1000, output_tokens=10, seed=4)
    repeated = repeat_prompts(w, share=share, capacity_blocks=10**6, seed=9)
    seen = repeated.cached_prompt_tokens > 0  # a new prompt of fixed length: nothing cached
    expected = share * (n - 1) / n
    assert abs(seen.mean() - expected) < 4 * math.sqrt(expected * (1 - expected) / n)
    # the cache keeps every block: a repeat is served but its last partial block (999 // 16)
    assert set(repeated.cached_prompt_tokens[seen].tolist()) == {62 * 16}
    assert np.array_equal(repeated.arrival_seconds, w.arrival_seconds)


def test_repeats_take_the_earlier_prompt_and_a_small_cache_forgets_them():
    w = bench_workload(num_prompts=5000, prompt_tokens=Uniform(100, 3000), output_tokens=10,
                       seed=6)  # fmt: skip
    repeated = repeat_prompts(w, share=0.5, capacity_blocks=10**6, seed=1)
    lengths = set(w.prompt_tokens.tolist())
    assert set(repeated.prompt_tokens.tolist()) <= lengths
    # a repeat has an earlier request's length: lengths seen before are the repeats (or ties)
    first_seen = np.unique(repeated.prompt_tokens, return_index=True)[1]
    assert (repeated.cached_prompt_tokens[first_seen] == 0).all()
    # an LRU of 5 blocks holds less than one prompt (6+ blocks): nothing is ever served
    forgetful = repeat_prompts(w, share=0.5, capacity_blocks=5, seed=1)
    assert not forgetful.cached_prompt_tokens.any()


def test_cli_repeat_share_serves_prefills_from_the_cache(capsys):
    args = ["--num-prompts", "300", "--request-rate", "20", "--prompt-tokens", "2048",
            "--output-tokens", "16"]  # fmt: skip
    fresh = _json(capsys, *args)
    repeated = _json(capsys, *args, "--repeat-share", "0.8")
    assert repeated["ttft_mean_seconds"] < 0.6 * fresh["ttft_mean_seconds"]


# ---- the runs format ----------------------------------------------------------------------------

BASE = json.loads((REAL_RUNS / "real_runs_trainval.json").read_text())
RUN = next(r for r in BASE["runs"] if r["id"] == "trainval:64")  # Qwen2.5-7B, one H100


def bench_run(**workload) -> dict:
    """trainval:64's deployment with a vllm bench serve client and the fields given."""
    doc = copy.deepcopy({**BASE, "runs": [RUN]})
    w = doc["runs"][0]["workload"]
    for key in ("stages", "requests_expected", "system_prompts", "prompts_per_system_prompt",
                "system_prompt_tokens", "question_tokens", "distinct_prompts"):  # fmt: skip
        w[key] = None
    w.update(arrival="vllm-bench", num_prompts=40, request_rate_per_second="inf",
             prompt_tokens_mean=700.0, output_tokens_mean=64.0,
             output_tokens_target=None)  # fmt: skip
    w.update(workload)
    return doc


def only_run(doc):
    (parsed,) = parse_runs(doc, source="runs.json")
    return parsed


def test_existing_runs_keep_their_client():
    runs = parse_runs(BASE, source="fixture")
    assert all(r.workload.arrival == "poisson-fixed-count" for r in runs)
    assert all(r.workload.max_concurrency is None and r.workload.repeat_share == 0 for r in runs)


def test_a_runs_file_closed_loop_burst_simulates_as_sent():
    parsed = only_run(bench_run(max_concurrency=4))
    assert parsed.workload.requests == 40
    w = run_workload(parsed, capacity_blocks=10**5)
    assert w.max_concurrency == 4 and np.all(w.arrival_seconds == 0.0)
    assert np.all(w.prompt_tokens == 700)
    # vllm bench serve sent request 0's prompt before measuring: (700 - 1) // 16 = 43 full
    # blocks of it are cached (the last token is always computed); no other prompt is
    assert w.cached_prompt_tokens[0] == 43 * 16 and np.all(w.cached_prompt_tokens[1:] == 0)
    # a prompt of whole blocks keeps its last block to compute: 1,024 tokens, 63 blocks cached
    whole = run_workload(only_run(bench_run(prompt_tokens_mean=1024.0)), capacity_blocks=10**5)
    assert whole.cached_prompt_tokens[0] == 63 * 16
    prediction = predict_run(parsed)
    assert prediction.requests == 40 and prediction.unfinished == 0
    assert prediction.mean_running <= 4


def test_the_ready_check_prompt_is_served_from_cache_only_with_prefix_caching():
    doc = bench_run(num_prompts=1)
    on = predict_run(only_run(doc))
    doc["runs"][0]["engine"]["prefix_caching"] = False
    off = predict_run(only_run(doc))
    # without it, a preempted request finds none of its blocks again either
    assert not run_config(only_run(doc)).enable_prefix_caching
    # one 700-token prompt: with the prefix cache its first step computes 12 tokens (a decode-
    # sized step), without it all 700; TTFT is that first step
    assert on.ttft_mean_seconds < 0.5 * off.ttft_mean_seconds
    # an inference-perf client sends no ready check: nothing cached before its first request
    perf = only_run({**BASE, "runs": [RUN]})
    short = replace(perf, workload=replace(perf.workload, stages=(Stage(1.0, 10.0),)))
    assert run_workload(short, capacity_blocks=10**5).cached_prompt_tokens[0] == 0
    # ... nor when it draws its prompts from a distribution
    drawn = bench_run(prompt_tokens_distribution={"kind": "fixed", "tokens": 700})
    drawn["runs"][0]["workload"].update(
        arrival="poisson-fixed-count",
        num_prompts=None,
        request_rate_per_second=None,
        stages=[{"rate_per_second": 1.0, "duration_seconds": 10.0}],
    )
    assert not run_workload(only_run(drawn), capacity_blocks=10**5).cached_prompt_tokens.any()


def test_prompts_an_earlier_run_sent_are_found_in_the_prefix_cache_newest_first():
    from itlkit.sim.run_workload import sent_before_cached

    # prompts of 100, 40 and 32 tokens hold 6, 2 and 1 full blocks of 16 before their last
    # token, which is always computed: (100 - 1) // 16, (40 - 1) // 16, (32 - 1) // 16
    w = make_workload(arrival_seconds=[0.0, 0.0, 0.0], prompt_tokens=[100, 40, 32],
                      output_tokens=4)  # fmt: skip
    roomy = sent_before_cached(w, 3, capacity_blocks=100, block_size=16)
    assert list(roomy.cached_prompt_tokens) == [96, 32, 16]
    # an LRU of 4 blocks keeps the two sent last; the first was evicted
    small = sent_before_cached(w, 3, capacity_blocks=4, block_size=16)
    assert list(small.cached_prompt_tokens) == [0, 32, 16]
    # an older prompt than an evicted one was evicted before it, however small: 20 tokens (1
    # block) sent before 100 (6) and 40 (2), with room for 4 blocks, keep only the last
    older = make_workload(arrival_seconds=[0.0, 0.0, 0.0], prompt_tokens=[20, 100, 40],
                          output_tokens=4)  # fmt: skip
    lru = sent_before_cached(older, 3, capacity_blocks=4, block_size=16)
    assert list(lru.cached_prompt_tokens) == [0, 0, 32]
    # only the prompts sent before: the first two
    assert list(sent_before_cached(w, 2, capacity_blocks=100, block_size=16)
                .cached_prompt_tokens) == [96, 32, 0]  # fmt: skip


def test_a_shorter_earlier_run_leaves_the_full_blocks_of_its_prompts_start():
    from itlkit.sim.run_workload import sent_before_cached

    # the earlier run sent each prompt's first 40 tokens: 2 full blocks of 16 (40 // 16) of the
    # 100-token prompt are found; a 32-token prompt, shorter than that start, was sent whole:
    # its (32 - 1) // 16 = 1 block before the last token
    w = make_workload(arrival_seconds=[0.0, 0.0], prompt_tokens=[100, 32], output_tokens=4)
    got = sent_before_cached(w, 2, capacity_blocks=100, block_size=16, prefix_tokens=40)
    assert list(got.cached_prompt_tokens) == [32, 16]
    # a start that fills whole blocks: 64 tokens are 4 blocks
    got = sent_before_cached(w, 1, capacity_blocks=100, block_size=16, prefix_tokens=64)
    assert list(got.cached_prompt_tokens) == [64, 0]


def test_a_run_says_how_much_of_its_prompts_was_sent_before():
    # 700-token prompts after a 320-token run under the same seed: 320 // 16 = 20 blocks of
    # each are found (request 0, the ready check's prompt sent just before, is found whole)
    again = bench_run(prompts_sent_before=40, prefix_tokens_sent_before=320)
    w = run_workload(only_run(again), capacity_blocks=10**5)
    assert np.all(w.cached_prompt_tokens[1:] == 20 * 16)
    with pytest.raises(ConfigError, match="give workload.prompts_sent_before"):
        only_run(bench_run(prefix_tokens_sent_before=320))
    with pytest.raises(ConfigError, match="workload.prefix_tokens_sent_before must be"):
        only_run(bench_run(prompts_sent_before=40, prefix_tokens_sent_before=0))


def test_a_run_after_one_with_the_same_seed_finds_its_prompts_cached():
    # vllm bench serve with the seed of a run before it on the same server: its 40 prompts of
    # 700 tokens were all sent before, 43 blocks each cached; every first step is decode-sized
    again = bench_run(prompts_sent_before=40)
    w = run_workload(only_run(again), capacity_blocks=10**5)
    assert np.all(w.cached_prompt_tokens == 43 * 16)
    cold, warm = predict_run(only_run(bench_run())), predict_run(only_run(again))
    assert warm.ttft_mean_seconds < 0.5 * cold.ttft_mean_seconds
    # without a prefix cache the earlier run leaves nothing behind
    for doc in (again, bench_run()):
        doc["runs"][0]["engine"]["prefix_caching"] = False
    off, off_again = predict_run(only_run(bench_run())), predict_run(only_run(again))
    assert off_again.ttft_mean_seconds == pytest.approx(
        predict_run(
            only_run(
                {
                    **again,
                    "runs": [
                        {
                            **again["runs"][0],
                            "workload": {
                                **again["runs"][0]["workload"],
                                "prompts_sent_before": None,
                            },
                        }
                    ],
                }
            )
        ).ttft_mean_seconds
    )
    assert off.ttft_mean_seconds > warm.ttft_mean_seconds
    # bad counts get one line naming the field
    for bad in (-1, 2.5, True):
        with pytest.raises(ConfigError, match="workload.prompts_sent_before"):
            only_run(bench_run(prompts_sent_before=bad))


def test_a_runs_file_draws_lengths_and_repeats():
    parsed = only_run(bench_run(
        num_prompts=4000, request_rate_per_second=50,
        prompt_tokens_distribution={"kind": "vllm-random", "tokens": 700, "range_ratio": 0.2},
        output_tokens_distribution={"kind": "quantiles", "levels": [0, 0.5, 1],
                                    "tokens": [10, 64, 200]},
        repeat_share=0.25,
    ))  # fmt: skip
    w = run_workload(parsed, capacity_blocks=10**6)
    assert w.prompt_tokens.min() == 560 and w.prompt_tokens.max() == 840
    assert w.output_tokens.min() >= 10 and w.output_tokens.max() <= 200
    assert w.arrival_seconds[-1] == pytest.approx(4000 / 50)
    seen = (w.cached_prompt_tokens > 0).mean()
    assert abs(seen - 0.25) < 4 * math.sqrt(0.25 * 0.75 / 4000)


def test_a_lognormal_in_a_runs_file_by_mean_and_spread():
    lognormal = {"kind": "lognormal", "mean_tokens": 600, "sd_tokens": 200, "max_tokens": 3000}
    parsed = only_run(bench_run(prompt_tokens_distribution=lognormal))
    dist = parsed.workload.prompt_distribution
    assert dist.mean_tokens == pytest.approx(600) and dist.max_tokens == 3000


# ---- bad input: one line, naming the field or flag ----------------------------------------------


@pytest.mark.parametrize(
    ("workload", "message"),
    [
        ({"max_concurrency": 0},
         "run 'trainval:64': workload.max_concurrency must be a whole number from 1 to "
         "1,000,000, got 0"),
        ({"arrival": "poisson"}, "workload.arrival must be one of 'poisson-fixed-count', "
         "'vllm-bench', got 'poisson'"),
        ({"num_prompts": None}, "workload.num_prompts is missing"),
        ({"request_rate_per_second": "fast"},
         "workload.request_rate_per_second must be a number, got 'fast'"),
        ({"request_rate_per_second": 0}, "workload.request_rate_per_second must be a finite "
         "number > 0"),
        ({"stages": [{"rate_per_second": 1, "duration_seconds": 10}]},
         "workload.stages must be null with arrival 'vllm-bench'"),
        ({"repeat_share": 1.5}, "workload.repeat_share must be a share from 0 to 1, got 1.5"),
        ({"prompt_tokens_distribution": {"kind": "zipf"}},
         "workload.prompt_tokens_distribution.kind must be an object whose kind is one of fixed, "
         "uniform, lognormal, quantiles, vllm-random, got 'zipf'"),
        ({"prompt_tokens_distribution": {"kind": "quantiles", "levels": [0, 0.5],
                                         "tokens": [10, 20]}},
         "workload.prompt_tokens_distribution is not usable: quantile levels must run from 0 to "
         "1 (every request needs a length), got 0 to 0.5"),
        ({"output_tokens_distribution": {"kind": "uniform", "low_tokens": 50,
                                         "high_tokens": 10}},
         "workload.output_tokens_distribution is not usable: uniform lengths need low <= high"),
        ({"prompt_tokens_distribution": {"kind": "lognormal", "median_tokens": 500}},
         "workload.prompt_tokens_distribution a lognormal needs median_tokens and sigma"),
        ({"prompt_tokens_distribution": {"kind": "lognormal", "median_tokens": 500,
                                         "sigma": 1}},
         "workload.prompt_tokens_distribution can draw prompts of 100,000,000 and outputs of 64 "
         "tokens, more than engine.max_model_len (4,096)"),
        ({"prompt_tokens_distribution": {"kind": "vllm-random", "tokens": 700,
                                         "range_ratio": 1.0}},
         "the random range ratio must be in [0, 1)"),
        ({"prompt_tokens_distribution": {"kind": "fixed", "tokens": 0}},
         "workload.prompt_tokens_distribution is not usable: a fixed length must be from 1"),
    ],
)  # fmt: skip
def test_runs_file_client_errors_name_the_field(workload, message):
    with pytest.raises(ConfigError) as info:
        parse_runs(bench_run(**workload), source="runs.json")
    text = str(info.value)
    assert "\n" not in text and text.startswith("runs.json: run 'trainval:64': ")
    assert message in text


def test_cycled_prompts_refuse_a_repeat_share():
    doc = copy.deepcopy({**BASE, "runs": [RUN]})
    doc["runs"][0]["workload"]["repeat_share"] = 0.5
    with pytest.raises(ConfigError, match="workload.repeat_share applies to prompts drawn per "
                       "request, but this run cycles"):  # fmt: skip
        parse_runs(doc, source="runs.json")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: make_workload(arrival_seconds=[0.0], prompt_tokens=10, output_tokens=2,
                               max_concurrency=0),
         "max_concurrency must be from 1 to 10,000,000 requests in flight, got 0"),
        (lambda: bench_workload(num_prompts=0), "the number of prompts must be an integer >= 1"),
        (lambda: bench_arrivals(num_prompts=5, request_rate_per_second=0.0),
         "the request rate must be > 0 requests/s or inf"),
        (lambda: Quantiles((0.0, 1.0), (300.0, 200.0)), "lengths must not decrease"),
        (lambda: Quantiles((0.0, 0.0, 1.0), (1.0, 2.0, 3.0)), "levels must increase strictly"),
        (lambda: Quantiles((0.0,), (5.0,)), "at least two rows"),
        (lambda: LogNormal.from_mean(0.5, 1.0), "the lognormal MEAN must be from 1"),
        (lambda: LogNormal.from_mean_sd(10.0, 1e6), "a log-space spread of"),
        (lambda: vllm_random_prompt_lengths(input_len=1, range_ratio=0.5, special_tokens=1),
         "can draw prompts of 0 tokens; vLLM refuses that"),
        (lambda: repeat_prompts(bench_workload(num_prompts=3), share=2.0, capacity_blocks=10),
         "the repeat share must be from 0 to 1, got 2.0"),
        (lambda: run(bench_workload(num_prompts=3, max_concurrency=1), disaggregated=True),
         "a closed-loop client (max_concurrency) with disaggregated prefill is not simulated"),
    ],
)  # fmt: skip
def test_library_errors(build, message):
    with pytest.raises(ConfigError) as info:
        build()
    assert message in str(info.value) and "\n" not in str(info.value)


def _cli(*argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(list(map(str, argv)))
        except SystemExit as exc:  # argparse refuses a flag's value itself, with code 2
            code = exc.code
    return code, out.getvalue(), err.getvalue()


def _json(capsys, *args) -> dict:
    code, out, err = _cli("simulate", "--json", *args)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-concurrency", "0"],
         "argument --max-concurrency: '0' is not a number of requests in flight from 1 to "
         "10,000,000"),
        (["--request-rate", "inf"],
         "--request-rate inf sends every request at t = 0 and needs --num-prompts (how many)"),
        (["--request-rate", "fast"],
         "argument --request-rate: 'fast' is not an arrival rate in requests/s from 1e-06 to "
         "1e+06, or inf (all at t = 0)"),
        (["--num-prompts", "0"], "argument --num-prompts: '0' is not a number of prompts from 1"),
        (["--num-prompts", "5", "--rate-profile", "0:1"],
         "give --num-prompts or --rate-profile, not both"),
        (["--rate", "2", "--request-rate", "3"], "give --request-rate or --rate, not both"),
        (["--burstiness", "0.5"], "--burstiness shapes the sends of --num-prompts"),
        (["--max-concurrency", "2", "--disaggregated"],
         "give --max-concurrency or --disaggregated, not both"),
        (["--random-input-len", "100", "--prompt-tokens", "50"],
         "give --random-input-len (vllm bench serve's random dataset, both lengths) or "
         "--prompt-tokens, not both"),
        (["--random-range-ratio", "1"], "the random range ratio must be in [0, 1)"),
        (["--repeat-share", "1.5"], "argument --repeat-share: '1.5' is not a share from 0 to 1"),
        (["--prompt-tokens", "lognormal-mean:0:1"],
         "argument --prompt-tokens: 'lognormal-mean:0:1': the lognormal MEAN must be from 1"),
        (["--output-tokens", "lognormal-mean-sd:10:1e9"],
         "the lognormal SD must be a number of tokens from 0 to 100,000,000"),
        (["--prompt-tokens", "gamma:1:2"], "'gamma:1:2' is not N, uniform:LOW:HIGH or "
         "lognormal:MEDIAN:SIGMA; also lognormal-mean:MEAN:SIGMA"),
        (["--prompt-tokens", "quantiles:/nonexistent/q.csv"],
         "argument --prompt-tokens: 'quantiles:/nonexistent/q.csv': /nonexistent/q.csv"),
    ],
)  # fmt: skip
def test_cli_client_errors_are_one_line(args, message):
    code, _, err = _cli("simulate", "--duration", "5", *args)
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert message in err


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("level,tokens\n0,10\n0.9,100\n", "quantile levels must run from 0 to 1"),
        ("level,tokens\n0,10\n1,5\n", "lengths must not decrease"),
        ("quantile,tokens\n0,10\n1,20\n", ":1: the header must be 'level,tokens'"),
        ("level,tokens\n0,10\n1,x\n", ":3: '1,x' is not a level and a number of tokens"),
        ("level,tokens\n0,10,3\n1,20\n", ":2: a row holds a level and a length, got 3 values"),
    ],
)  # fmt: skip
def test_bad_quantile_tables_name_their_line(tmp_path, table, message):
    path = tmp_path / "q.csv"
    path.write_text(table)
    code, _, err = _cli("simulate", "--duration", "5", "--prompt-tokens", f"quantiles:{path}")
    assert code == 2 and err.count("\n") == 1, err
    assert message in err


def test_fixed_lengths_keep_their_old_meaning():
    assert Fixed(7).mean_tokens == 7 and Fixed(7).most_tokens == 7


def test_the_format_readme_example_reads():
    text = (REAL_RUNS / "README.md").read_text()
    example = text.split("```json\n")[-1].split("```")[0]
    doc = copy.deepcopy({**BASE, "runs": [RUN]})
    doc["runs"][0]["workload"] = json.loads("{" + example + "}")["workload"]
    w = run_workload(only_run(doc), capacity_blocks=10**5)
    assert w.num_requests == 1000 and w.max_concurrency == 64
    assert np.all(w.arrival_seconds == 0) and np.all(w.prompt_tokens == 1024)
    assert np.all(w.output_tokens == 128)


def test_unknown_workload_says_which_runs_can_be_rebuilt():
    from itlkit.sim.run_workload import unknown_workload

    runs = parse_runs(BASE, source="fixture")
    reasons = {r.id: unknown_workload(r) for r in runs}
    # the fixture's 6 runs with stages and a prompt shape, and the 7 -lite ones without rates
    assert sum(reason is None for reason in reasons.values()) == 6
    assert sum(reason == "arrival rates unknown (stages null)" for reason in reasons.values()) == 7
    assert unknown_workload(only_run(bench_run())) is None
    assert unknown_workload(only_run(bench_run(prompt_tokens_mean=None))) == (
        "prompt lengths unknown"
    )


def test_the_calibration_takes_bench_client_runs():
    # calibration/fit.py's `simulable` used to skip every run without inference-perf stages
    from itlkit.calibration.fit import simulable
    from itlkit.calibration.predict import request_blocks

    runs = [only_run(bench_run()), only_run(bench_run(prompt_tokens_mean=None))]
    ok, skipped = simulable(runs)
    assert ok == runs[:1]
    assert skipped == [f"{runs[1].id}: prompt lengths unknown, not used"]
    # a request holds its prompt and output at the end: ceil((700 + 64) / 16) blocks
    assert request_blocks(runs[0]) == math.ceil((700 + 64) / 16)
    drawn = only_run(bench_run(prompt_tokens_mean=None, prompt_tokens_distribution={
        "kind": "fixed", "tokens": 512}))  # fmt: skip
    assert request_blocks(drawn) == math.ceil((512 + 64) / 16)
