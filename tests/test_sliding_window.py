"""Sliding-window layers in the simulator's step: a decode reads, and a prefill position attends
to, at most the window there.

Expected values from gpt-oss-120b's config, written out here: 36 layers, 18 of them with a
window of 128 tokens; 8 KV heads of 64 dimensions, so at TP 8 one KV head per GPU, and a token
adds K and V of 64 BF16 values each per layer: 2 x 64 x 2 B = 256 B per layer per GPU. Its 64
query heads of 64 (qk) + 64 (v) dimensions give 2 x 64 x 128 / 8 = 2,048 attention FLOPs per
(query, key) pair per layer per GPU.
"""

from __future__ import annotations

import pytest

from itlkit.physics.roofline import Deployment, step_coefficients, step_time
from itlkit.sim.scheduler import roofline_step_function

PER_LAYER = 256  # KV bytes per token per layer per GPU (TP 8)
FULL, SLIDING, WINDOW = 18, 18, 128
PAIR_PER_LAYER = 2 * 64 * (64 + 64) / 8


@pytest.fixture(scope="module", params=["reference", "engine"])
def gpt_oss(request):
    dep = Deployment.create(model="gpt-oss-120b", gpu="h200-sxm", weight_precision="int4", tp=8,
                            prefill_attention=True)  # fmt: skip
    return dep.as_engine() if request.param == "engine" else dep


def test_a_decode_reads_only_the_window_of_a_sliding_layer(gpt_oss):
    c = step_coefficients(gpt_oss)
    # ten sequences of 2,000 tokens: the full layers read all 20,000, the sliding ones 10 x 128
    expected = PER_LAYER * (FULL * 20_000 + SLIDING * 10 * WINDOW)
    assert c.decode_kv_bytes(20_000, 10) == pytest.approx(expected, rel=1e-12)


def test_contexts_inside_the_window_are_read_whole(gpt_oss):
    c = step_coefficients(gpt_oss)
    assert c.decode_kv_bytes(10 * 100, 10) == pytest.approx(PER_LAYER * 36 * 1_000, rel=1e-12)


@pytest.mark.parametrize("context", [100, 2_000, 15_000])
def test_the_simulators_step_is_the_per_sequence_step(gpt_oss, context):
    # `step_time` (explain, the notebooks) sums each sequence's KV through the model's own
    # window rule; the simulator's step gets only the summed context and caps the sliding
    # layers at sequences x window. For an even batch both must give the same step.
    step = roofline_step_function(gpt_oss)
    simulated = step(decode_tokens=32, prefill_tokens=0, kv_tokens=32 * context)
    per_sequence = step_time(gpt_oss, batch_size=32, context_tokens=context).step_seconds
    assert simulated == pytest.approx(float(per_sequence), rel=1e-12)


def test_a_prefill_position_attends_to_at_most_the_window(gpt_oss):
    c = step_coefficients(gpt_oss)
    # a 1,024-token chunk from the start: a full layer sees 1,024 x 512 pairs (causal), a
    # sliding one 128^2 / 2 for the first 128 positions and 128 for each of the other 896
    full = 1_024 * 512
    sliding = WINDOW**2 / 2 + WINDOW * (1_024 - WINDOW)
    expected = PAIR_PER_LAYER * (FULL * full + SLIDING * sliding)
    assert c.attention_flops(chunk_tokens=1_024) == pytest.approx(expected, rel=1e-12)
    # a chunk after 4,096 cached tokens: every sliding position sees the whole window
    expected = PAIR_PER_LAYER * (FULL * 1_024 * (4_096 + 512) + SLIDING * 1_024 * WINDOW)
    assert c.attention_flops(chunk_tokens=1_024, prior_tokens=4_096) == pytest.approx(
        expected, rel=1e-12
    )


def test_a_model_without_windows_reads_every_token():
    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", prefill_attention=True)
    c = step_coefficients(dep)
    # 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B per token
    assert c.decode_kv_bytes(50_000, 10) == 131_072 * 50_000
    assert c.attention_flops(chunk_tokens=1_024) == pytest.approx(
        2 * 32 * 32 * 256 * 1_024 * 512, rel=1e-12
    )
