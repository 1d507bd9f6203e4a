"""The simulator with speculative decoding: drawn acceptance, multi-token steps, per-token views.

Expected values are derived here: the acceptance law (draft i accepted given i - 1 with
p_i / p_(i-1), so P(at least i accepted) = p_i), the events of a request at full acceptance, and
a lone request's TPOT from the worked example's step terms (shared/spec/worked-example.txt:
Llama 3.1 8B BF16 on an H100 SXM streams 8,030,261,248 x 2 B at 3.35 TB/s and reads 131,072 B
of KV per context token; GEMMs at 50% of 989 TFLOP/s).
"""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from itlkit.drill.scenarios import drill_deployment
from itlkit.physics.speculative import Speculation
from itlkit.sim.config import SchedulerConfig
from itlkit.sim.scheduler import (
    constant_step_function,
    simulate,
    simulate_deployment,
    simulate_speculative,
)
from itlkit.sim.speculative import accepted_drafts, draw_events, kv_scale
from itlkit.sim.workload import make_workload

DEP = drill_deployment(model="llama-3.1-8b", gpu="h100-sxm")
WEIGHTS_S = 8_030_261_248 * 2 / 3.35e12
KV_S_PER_TOKEN = 131_072 / 3.35e12
BIG_KV = 1_000_000


def test_drafts_are_accepted_as_the_per_position_rates_say():
    spec = Speculation(3, (0.9, 0.6, 0.3))
    accepted = accepted_drafts(spec, np.random.default_rng(7), 400_000)
    at_least = [(accepted >= i).mean() for i in (1, 2, 3)]
    assert at_least == pytest.approx([0.9, 0.6, 0.3], abs=0.004)
    assert (1 + accepted).mean() == pytest.approx(spec.tokens_per_step, abs=0.01)  # 2.8


def test_geometric_acceptance_gives_its_mean_length():
    spec = Speculation(4, 0.7)  # E = 1 + .7 + .49 + .343 + .2401 = 2.7731
    accepted = accepted_drafts(spec, np.random.default_rng(1), 400_000)
    assert (1 + accepted).mean() == pytest.approx(2.7731, abs=0.01)


def test_full_acceptance_emits_k_plus_one_tokens_a_step_and_cuts_the_last():
    events = draw_events([9, 10, 1], Speculation(3, 1.0), seed=0)
    # 9: the prefill's token, then 4 + 4; 10: 1, 4, 4, 1; 1: the prefill's token alone
    assert events.tokens.tolist() == [1, 4, 4, 1, 4, 4, 1, 1]
    assert events.events.tolist() == [3, 4, 1]


@settings(max_examples=60, deadline=None)
@given(
    outputs=st.lists(st.integers(1, 400), min_size=1, max_size=30),
    k=st.integers(1, 6),
    rate=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31),
)
def test_every_request_gets_exactly_its_output(outputs, k, rate, seed):
    events = draw_events(outputs, Speculation(k, rate), seed=seed)
    for i, n in enumerate(outputs):
        own = events.tokens[events.offsets[i] : events.offsets[i + 1]]
        assert own.sum() == n and own[0] == 1
        assert own.min() >= 1 and own.max() <= k + 1


def test_kv_scale_is_the_decode_weighted_context_in_tokens_over_events():
    w = make_workload(arrival_seconds=[0, 0], prompt_tokens=[1000, 3000], output_tokens=[9, 10])
    events = draw_events(w.output_tokens, Speculation(3, 1.0))  # 3 and 4 events
    tokens = (1000 + 4.5) * 3 + (3000 + 5.0) * 4
    counted = (1000 + 1.5) * 3 + (3000 + 2.0) * 4
    assert kv_scale(w, events) == pytest.approx(tokens / counted, rel=1e-12)


def test_a_lone_requests_tpot_is_its_verification_steps_over_its_tokens():
    # Prompt 1,000, 9 tokens, k = 3 all accepted: the prefill emits one, two verification steps
    # emit 4 + 4. At batch 1 a step of 4 tokens (130 us of GEMM) is the weight read + its KV.
    w = make_workload(arrival_seconds=[0.0], prompt_tokens=1000, output_tokens=9)
    r = simulate_deployment(w, deployment=DEP, kv_tokens=BIG_KV, speculation=Speculation(3, 1.0))
    step = WEIGHTS_S + 1004 * KV_S_PER_TOKEN  # context ~1,000 + a few tokens
    assert r.generated_tokens.tolist() == [9]
    assert r.itl_views().mean("request_tpot") == pytest.approx(2 * step / 8, rel=2e-3)
    plain = simulate_deployment(w, deployment=DEP, kv_tokens=BIG_KV)
    assert plain.itl_views().mean("request_tpot") == pytest.approx(step, rel=2e-3)


def test_vllm_counts_a_step_per_event_and_sglang_splits_it_per_token():
    w = make_workload(arrival_seconds=[0.0], prompt_tokens=100, output_tokens=10)
    r = simulate_speculative(w, step_function=constant_step_function(0.01), deployment=DEP,
                             spec=Speculation(3, 1.0), kv_capacity_tokens=BIG_KV)  # fmt: skip
    views = r.itl_views()
    # events after the first carry 4, 4, 1 tokens, each 10 ms after the one before
    assert views.output_seconds.tolist() == pytest.approx([0.01] * 3)
    assert views.token_seconds.tolist() == pytest.approx([0.0025, 0.0025, 0.01])
    assert views.token_weights.tolist() == [4, 4, 1]
    assert views.mean("request_tpot") == pytest.approx(0.03 / 9)


def test_nothing_accepted_is_plain_decoding_in_wider_steps():
    w = make_workload(arrival_seconds=np.arange(20) * 0.05, prompt_tokens=500, output_tokens=40)
    step = constant_step_function(0.02)
    spec = simulate_speculative(w, step_function=step, deployment=DEP, spec=Speculation(2, 0.0),
                                kv_capacity_tokens=BIG_KV)  # fmt: skip
    plain = simulate(w, step_function=step, kv_capacity_tokens=BIG_KV)
    assert spec.itl_views().mean("request_tpot") == pytest.approx(
        plain.itl_views().mean("request_tpot"), rel=1e-12
    )
    assert spec.finish_seconds.tolist() == pytest.approx(plain.finish_seconds.tolist())


def test_the_drafts_of_every_decode_take_the_token_budget():
    # 4 requests decode with k = 3: 16 of a 20-token budget, so a 100-token prompt arriving
    # later is prefilled 4 tokens a step (vLLM's scheduler counts spec tokens in the budget)
    w = make_workload(arrival_seconds=[0, 0, 0, 0, 0.5], prompt_tokens=[4, 4, 4, 4, 100],
                      output_tokens=[400, 400, 400, 400, 2])  # fmt: skip
    config = SchedulerConfig(max_num_batched_tokens=20, max_num_seqs=8)
    r = simulate_speculative(w, step_function=constant_step_function(0.01), deployment=DEP,
                             spec=Speculation(3, 0.0), kv_capacity_tokens=BIG_KV,
                             config=config)  # fmt: skip
    chunks = r.step_prefill_tokens[r.step_start_seconds >= 0.5]
    assert chunks[chunks > 0].tolist() == [4] * 25


def test_speculation_pays_at_small_batch_and_costs_past_the_ridge():
    # E = 2.176 at acceptance 0.6 and k = 3: at a few requests TPOT falls by about E; at 400
    # running requests each step carries 1,600 tokens, past the H100's ridge (~295 tokens at
    # 50% MFU), and the verification step grows ~4x while it emits ~2.2x the tokens.
    spec = Speculation(3, 0.6)
    light = make_workload(arrival_seconds=np.arange(4) * 0.001, prompt_tokens=512,
                          output_tokens=200)  # fmt: skip
    tpot = {
        s: simulate_deployment(light, deployment=DEP, kv_tokens=BIG_KV, speculation=s)
        .itl_views()
        .mean("request_tpot")
        for s in (None, spec)
    }
    assert tpot[None] / tpot[spec] == pytest.approx(2.176, rel=0.06)
    heavy = make_workload(arrival_seconds=np.zeros(400), prompt_tokens=512, output_tokens=200)
    config = SchedulerConfig(max_num_batched_tokens=8192, max_num_seqs=1024)
    runs = {
        s: simulate_deployment(
            heavy, deployment=DEP, kv_tokens=BIG_KV, speculation=s, config=config
        )
        for s in (None, spec)
    }
    tpot = {s: r.itl_views().mean("request_tpot") for s, r in runs.items()}
    assert tpot[spec] > tpot[None]


def test_the_kv_each_step_reads_grows_by_the_tokens_emitted():
    # Prompt 16, 4,001 tokens at full acceptance (k = 3): 1,000 verification steps, the j-th
    # reading about 16 + 4j tokens of context (2,018 on average, not the 516 of one a step)
    w = make_workload(arrival_seconds=[0.0], prompt_tokens=16, output_tokens=4001)
    r = simulate_deployment(w, deployment=DEP, kv_tokens=BIG_KV, speculation=Speculation(3, 1.0))
    context = 16 + 4 * np.arange(1, 1001)
    expected = (1000 * WEIGHTS_S + KV_S_PER_TOKEN * context.sum()) / 4000
    assert r.itl_views().mean("request_tpot") == pytest.approx(expected, rel=2e-3)


def test_each_step_counts_the_tokens_it_emitted():
    w = make_workload(arrival_seconds=[0.0], prompt_tokens=100, output_tokens=10)
    r = simulate_speculative(w, step_function=constant_step_function(0.01), deployment=DEP,
                             spec=Speculation(3, 1.0), kv_capacity_tokens=BIG_KV)  # fmt: skip
    assert r.step_generation_tokens.tolist() == [1, 4, 4, 1]


def test_simulate_cli_says_what_speculation_it_assumed(capsys):
    from itlkit.cli import main

    args = ["simulate", "--duration", "20", "--rate", "2", "--prompt-tokens", "500",
            "--output-tokens", "200", "--spec-k", "3", "--spec-mean-length", "2.176"]  # fmt: skip
    assert main([*args, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["speculation"]["acceptance_per_position"] == pytest.approx([0.6, 0.36, 0.216])
    assert any(a.startswith("speculation:") for a in out["assumptions"])
    views = out["itl_definitions"]
    # a step of ~2.2 tokens: vLLM's per-event ITL is the step, TPOT about a step / 2.2
    ratio = views["vllm_event"]["mean_seconds"] / views["request_tpot"]["mean_seconds"]
    assert ratio == pytest.approx(2.176, rel=0.15)
    assert main(args) == 0
    assert "2.18 tokens a step" in capsys.readouterr().out


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--spec-k", "3", "--spec-mean-length", "4.5"], "impossible with k = 3"),
        (["--spec-k", "2", "--spec-acceptance", "0.5,0.7"], "must not rise"),
        (["--spec-k", "2", "--spec-acceptance", "1.2"], "[0, 1]"),
        (["--spec-acceptance", "0.5"], "needs --spec-k"),
        (["--spec-k", "2", "--spec-method", "draft", "--spec-acceptance", "0.5"], "parameters"),
    ],
)
def test_bad_speculation_is_one_line(capsys, flags, says):
    from itlkit.cli import main

    assert main(["simulate", "--duration", "5", "--rate", "1", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0]
