"""The fused-MoE layers' elementwise traffic in the step (`roofline.moe_elementwise_bytes`).

vLLM's fused-MoE layer (TritonExperts.apply, fused_moe.py @ vllm-project/vllm 000d1458) moves
each (token, expert) pair's activations through caches between its kernels. Its two elementwise
kernels do no math to hide that traffic under: silu_and_mul reads intermediate_cache1
(2 x intermediate per pair) and writes intermediate_cache2 (intermediate per pair); moe_sum
reads intermediate_cache3 (a hidden row per pair) and writes one hidden row per token. Expected
bytes derived here from gpt-oss-120b's config: 36 MoE layers, top-4 of 128 experts, hidden
2,880, expert intermediate 2,880 (360 per GPU at TP 8), BF16 activations (2 B).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from itlkit.physics.roofline import Deployment, step_coefficients, step_time
from itlkit.sim.scheduler import roofline_step_function

LAYERS, TOP_K, HIDDEN, WIDTH, BYTES = 36, 4, 2_880, 360, 2
PER_TOKEN = LAYERS * BYTES * (TOP_K * (2 * WIDTH + WIDTH + HIDDEN) + HIDDEN)  # 1,347,840 B
H200 = 4.8e12  # B/s


@pytest.fixture(scope="module", params=["reference", "engine"])
def gpt_oss(request):
    dep = Deployment.create(model="gpt-oss-120b", gpu="h200-sxm", weight_precision="int4", tp=8)
    return dep.as_engine() if request.param == "engine" else dep


def test_the_bytes_per_token_are_the_elementwise_kernels(gpt_oss):
    assert step_coefficients(gpt_oss).moe_elementwise_bytes_per_token == pytest.approx(
        PER_TOKEN, rel=1e-12
    )


def test_an_8192_token_step_pays_them_after_the_gemms(gpt_oss):
    without = step_time(gpt_oss, batch_size=64, context_tokens=100, chunk_tokens=8_128)
    assert without.moe_elementwise_seconds == pytest.approx(PER_TOKEN * 8_192 / H200)
    # the bandwidth floor stays the weights and the KV: activations are not the floor's
    assert without.floor_seconds == pytest.approx((without.weight_bytes + without.kv_bytes) / H200)


@pytest.mark.parametrize("decode,prefill,kv", [(64, 0, 64_000), (10, 8_182, 1_000)])
def test_the_simulators_step_is_explains_step(gpt_oss, decode, prefill, kv):
    # (with a chunk, contexts inside gpt-oss' 128-token window: the simulator's window cap
    # counts the prefilling sequence too, an upper bound `step_time` need not share)
    step = roofline_step_function(gpt_oss)
    simulated = step(decode_tokens=decode, prefill_tokens=prefill, kv_tokens=kv)
    explained = step_time(gpt_oss, batch_size=decode, context_tokens=kv // decode,
                          chunk_tokens=prefill).step_seconds  # fmt: skip
    assert simulated == pytest.approx(float(explained), rel=1e-12)


def test_the_step_grows_by_exactly_that_traffic(gpt_oss):
    # the same step with the term zeroed is shorter by the traffic (over the efficiency in the
    # reference model, where every memory term is divided by it: 1 here)
    from dataclasses import replace

    c = step_coefficients(gpt_oss)
    bare = replace(c, moe_elementwise_bytes_per_token=0.0)
    args = (8_192, 64 * 100, c.attention_flops(chunk_tokens=8_128))
    grown = c.seconds(*args, sequences=65) - bare.seconds(*args, sequences=65)
    assert grown == pytest.approx(PER_TOKEN * 8_192 / H200, rel=1e-9)


def test_a_dense_model_has_none():
    c = step_coefficients(Deployment.create(model="llama-3.1-8b", gpu="h100-sxm"))
    assert c.moe_elementwise_bytes_per_token == 0.0


def test_explain_names_the_term_for_an_moe_only():
    def explain(*args):
        out = subprocess.run([sys.executable, "-m", "itlkit", "explain", *args, "--batch", "64",
                              "--context", "100", "--chunk", "8128", "--json"],
                             capture_output=True, text=True, check=True)  # fmt: skip
        return json.loads(out.stdout)

    moe = explain("--model", "gpt-oss-120b", "--gpu", "h200-sxm", "--weights-precision", "int4",
                  "--tp", "8")  # fmt: skip
    assert moe["mixed_step_moe_elementwise_seconds"] == pytest.approx(PER_TOKEN * 8_192 / H200)
    dense = explain("--model", "llama-3.1-8b", "--gpu", "h100-sxm")
    assert "mixed_step_moe_elementwise_seconds" not in dense
