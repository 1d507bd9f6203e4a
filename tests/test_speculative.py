"""Speculative decoding on the roofline, derived by hand from the worked example's numbers.

shared/spec/worked-example.txt: Llama 3.1 8B in BF16 on an H100 SXM streams 8,030,261,248 params x
2 B at 3.35 TB/s (4.79 ms), reads 131,072 B of KV per context token, and prices GEMMs at 50% of
989 TFLOP/s (2 x 8.03e9 FLOP per token). A verification step of b sequences and k drafts each
reads the weights and each sequence's KV once and multiplies b (k + 1) tokens.
"""

import math

import pytest

from itlkit.drill.scenarios import drill_deployment
from itlkit.errors import ConfigError
from itlkit.physics.speculative import (
    Speculation,
    crossover_batch,
    speculation_from_mean_length,
    speculative_step,
)

DEP = drill_deployment(model="llama-3.1-8b", gpu="h100-sxm")  # the reference's terms
PARAMS = 8_030_261_248
WEIGHTS_S = PARAMS * 2 / 3.35e12  # 4.79 ms
GEMM_PER_TOKEN_S = 2 * PARAMS / (0.5 * 989e12)  # 32.5 us
KV_PER_CONTEXT_TOKEN_S = 131_072 / 3.35e12


def test_tokens_per_step_is_one_plus_the_accepted_positions():
    # geometric acceptance 0.6 with k = 3: 1 + 0.6 + 0.36 + 0.216
    assert Speculation(3, 0.6).tokens_per_step == pytest.approx(2.176)
    assert Speculation(2, (0.9, 0.5)).tokens_per_step == pytest.approx(2.4)
    assert speculation_from_mean_length(3, 2.176).per_position == pytest.approx([0.6, 0.36, 0.216])


def test_at_batch_one_speculation_divides_the_step_by_its_tokens():
    # 4 tokens of GEMMs (130 us) stay far under the 4.79 ms weight read: the verification step
    # is the decode step, so n-gram drafts (free) speed a token up by exactly E
    s = speculative_step(DEP, batch_size=1, context_tokens=4096, spec=Speculation(3, 0.6))
    assert s.verify_seconds == pytest.approx(s.plain_step_seconds, rel=1e-12)
    assert s.speedup == pytest.approx(2.176, rel=1e-12)
    assert s.plain_step_seconds == pytest.approx(WEIGHTS_S + 4096 * KV_PER_CONTEXT_TOKEN_S,
                                                 rel=2e-3)  # fmt: skip


def test_a_draft_head_costs_k_passes_of_its_weights():
    # an EAGLE head of ~one decoder layer (218e6 params): 3 passes of 218e6 x 2 B / 3.35 TB/s
    spec = Speculation(3, 0.6, method="eagle", draft_params=218e6)
    s = speculative_step(DEP, batch_size=1, context_tokens=4096, spec=spec)
    assert s.draft_seconds == pytest.approx(3 * 218e6 * 2 / 3.35e12, rel=2e-3)
    assert s.speedup == pytest.approx(
        s.plain_step_seconds / ((s.plain_step_seconds + s.draft_seconds) / 2.176), rel=1e-12
    )


def test_the_crossover_batch_derived_by_hand():
    # context 512: KV per sequence 512 x 131,072 B / 3.35 TB/s = 20.0 us. Past b = 37 the
    # verification's 4b tokens are compute-bound: (4 x 32.48 + 20.0) us x b, per token / 2.176;
    # the plain step stays memory-bound to b = 147: 4,794 + 20.0 b us. Equal at
    # b = 4,794 / ((4 x 32.48 + 20.0) / 2.176 - 20.0) = 98.1: speculation stops paying at 99
    kv = 512 * KV_PER_CONTEXT_TOKEN_S
    per_token = (4 * GEMM_PER_TOKEN_S + kv) / 2.176
    b = WEIGHTS_S / (per_token - kv)
    assert 98 < b < 99
    assert crossover_batch(DEP, context_tokens=512, spec=Speculation(3, 0.6)) == math.ceil(b)
    # at 4K the KV read (shared by the k + 1 tokens) dominates and speculation pays throughout
    assert crossover_batch(DEP, context_tokens=4096, spec=Speculation(3, 0.8)) is None


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Speculation(3, 1.2), "acceptance must lie in \\[0, 1\\]"),
        (lambda: Speculation(2, (0.5, 0.7)), "must not rise"),
        (lambda: Speculation(0, 0.5), "k must be a whole number >= 1"),
        (lambda: speculation_from_mean_length(3, 4.5), "impossible with k = 3"),
        (lambda: Speculation(3, (0.9, 0.5)).per_position, "2 acceptance rates given for k = 3"),
        (lambda: Speculation(3, 0.6, method="eagle"), "an eagle draft runs a model"),
    ],
)
def test_impossible_speculation_is_refused_in_one_line(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_explain_prints_the_verification_step_and_the_crossover(capsys):
    import json

    from itlkit.cli import main

    args = ["explain", "--batch", "64", "--context", "512", "--spec-k", "3",
            "--spec-acceptance", "0.6", "--json"]  # fmt: skip
    assert main(args) == 0
    values = json.loads(capsys.readouterr().out)
    assert values["spec_tokens_per_step"] == pytest.approx(2.176)
    assert values["spec_crossover_batch"] == 99  # derived above
    # 256 tokens of GEMMs (8.3 ms) beside 64 x 20 us of KV: compute-bound, 9.6 ms
    expected = 256 * GEMM_PER_TOKEN_S + 64 * 512 * KV_PER_CONTEXT_TOKEN_S
    assert values["spec_verify_seconds"] == pytest.approx(expected, rel=2e-3)
    assert main(["explain", "--spec-k", "2", "--spec-acceptance", "0.5,0.7"]) == 2
    assert "must not rise" in capsys.readouterr().err
