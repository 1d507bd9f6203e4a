"""One vocabulary for ITL: each definition computed by hand on two requests.

Definitions from the engines' and clients' code (cited in itlkit/metrics/itl_vocabulary.py):
vLLM observes one gap per output event; SGLang k observations of gap / k for an output of k
tokens; vllm bench serve one gap per streamed chunk and TPOT = (E2E - TTFT) / (tokens - 1) per
request; MLPerf constrains the 99th percentile of that TPOT over requests.

Request A: outputs at 0, 0.1, 0.5, 0.6 s carrying 1, 1, 4, 1 tokens (a speculative step at 0.5).
Request B: outputs at 0, 0.02, 0.04, 2.04 s, one token each (a 2-s stall at the end).
"""

import math

import numpy as np
import pytest

from itlkit.errors import ConfigError
from itlkit.metrics.histogram import Histogram
from itlkit.metrics.itl_vocabulary import definition_of, per_token_histogram, views
from itlkit.sim.scheduler import SchedulerConfig, constant_step_function, simulate
from itlkit.sim.workload import make_workload

V = views([[0, 0.1, 0.5, 0.6], [0, 0.02, 0.04, 2.04]], [[1, 1, 4, 1], [1, 1, 1, 1]])


def test_vllm_and_a_client_count_one_gap_per_output():
    # gaps 0.1, 0.4, 0.1 (A) and 0.02, 0.02, 2.0 (B): six, mean 2.64 / 6
    for key in ("vllm_event", "client_chunk"):
        assert V.mean(key) == pytest.approx(2.64 / 6)
        assert V.quantile(key, 0.5) == pytest.approx(0.1)  # the 3rd of 0.02 0.02 0.1 0.1 0.4 2
        assert V.quantile(key, 0.99) == pytest.approx(2.0)


def test_sglang_splits_the_speculative_output_into_four_tokens():
    # A's 0.4-s gap carried 4 tokens: 4 observations of 0.1; nine in all, 2.64 s between them
    assert V.token_weights.sum() == 9
    assert V.mean("sglang_token") == pytest.approx(2.64 / 9)
    assert V.quantile("sglang_token", 0.5) == pytest.approx(0.1)
    # the 0.4-s gap is gone from the per-token view: its largest below B's stall is 0.1
    assert 0.4 not in V.token_seconds


def test_tpot_is_one_mean_per_request_and_mlperf_takes_its_99th_percentile():
    # A: 0.6 s over 6 tokens after the first = 0.1; B: 2.04 s over 3 = 0.68
    assert sorted(V.request_tpot) == pytest.approx([0.1, 0.68])
    assert V.mean("request_tpot") == pytest.approx(0.39)
    assert V.quantile("mlperf_p99_tpot", 0.5) == pytest.approx(0.68)  # always the 99th


def test_each_definition_keeps_its_own_weights_when_views_share_the_values():
    # One array of gaps, weighted 1 each per output and 1, 1, 8 per token: the per-output
    # median is 0.2 (the 2nd of 0.1 0.2 0.3), the per-token one 0.3 (8 of the 10 observations).
    # Asked in either order on one object, each definition answers with its own weights.
    from itlkit.metrics.itl_vocabulary import ItlViews

    gaps, tpot = np.array([0.3, 0.1, 0.2]), np.array([0.2])
    for order in (("vllm_event", "sglang_token"), ("sglang_token", "vllm_event")):
        v = ItlViews(gaps, np.ones(3), gaps, np.array([8.0, 1.0, 1.0]), tpot)
        got = {key: v.quantile(key, 0.5) for key in order}
        assert got == {"vllm_event": pytest.approx(0.2), "sglang_token": pytest.approx(0.3)}
        assert v.quantile("request_tpot", 0.5) == pytest.approx(0.2)


def test_a_per_event_histogram_becomes_per_token_when_every_event_carries_k():
    # 10 gaps of 30 ms in (25, 50] and 2 of 200 ms in (100, 250] ms, each event 2 tokens:
    # 24 observations, bounds halved, the same 0.7 s in all
    h = Histogram.create(upper_bounds=[0.025, 0.05, 0.1, 0.25, math.inf],
                         cumulative_counts=[0, 10, 10, 12, 12], sum=0.7)  # fmt: skip
    t = per_token_histogram(h, tokens_per_event=2)
    assert list(t.upper_bounds) == [0.0125, 0.025, 0.05, 0.125, math.inf]
    assert list(t.cumulative_counts) == [0, 20, 20, 24, 24] and t.sum == 0.7 and t.count == 24
    with pytest.raises(ConfigError, match="whole number >= 1"):
        per_token_histogram(h, tokens_per_event=1.5)


def test_each_family_says_which_definition_it_holds():
    assert definition_of("vllm:inter_token_latency_seconds").per == "output event"
    assert definition_of("sglang:inter_token_latency_seconds").per == "token"
    assert definition_of("tpot").key == "request_tpot"
    with pytest.raises(ConfigError, match="no ITL definition known for 'sglang:tpot'"):
        definition_of("sglang:tpot")


def test_bad_outputs_are_refused():
    with pytest.raises(ConfigError, match="every output carries a token"):
        views([[0, 1]], [[1, 0]])
    with pytest.raises(ConfigError, match="must not go back"):
        views([[1, 0]], [[1, 1]])


def test_the_simulators_views_are_its_own_token_times():
    # test_engine_v0's trace: A's tokens at 1, 2, 3, 5 (it waited out B's prefill), B's at 4, 5
    w = make_workload(arrival_seconds=[0.0, 2.5], prompt_tokens=[4, 4], output_tokens=[4, 2])
    config = SchedulerConfig(max_num_batched_tokens=16, max_num_seqs=4,
                             enable_chunked_prefill=False, prefill_only_steps=True)  # fmt: skip
    r = simulate(w, step_function=constant_step_function(1.0), kv_capacity_tokens=100,
                 config=config)  # fmt: skip
    v = r.itl_views()
    assert sorted(np.repeat(v.output_seconds, v.output_weights.astype(int))) == [1, 1, 1, 2]
    assert sorted(v.request_tpot) == pytest.approx([1.0, 4 / 3])  # B: 5-4; A: (5-1)/3
