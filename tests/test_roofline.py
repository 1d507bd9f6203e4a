"""The step-time model against the worked example and published measurements."""

import json
import math

import numpy as np
import pytest
from _paths import DATA
from hypothesis import given
from hypothesis import strategies as st

from itlkit.errors import ConfigError
from itlkit.physics.roofline import (
    Deployment,
    capacity,
    check_fits,
    compute_bound_tokens_per_step,
    decode_step,
    mbu,
    mixed_step,
    prefill_cost,
    ridge_tokens_per_step,
    step_seconds,
    step_time,
)

MS = 1e-3


@pytest.fixture(scope="module")
def h100_8b():
    return Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")


# ---- the worked example (shared/spec/worked-example.txt), number by number -------------------
def test_weights_16_06_gb_read_in_4_79_ms(h100_8b):
    step = decode_step(h100_8b, batch_size=64, context_tokens=4096)
    assert step.weight_bytes == 8_030_261_248 * 2
    assert round(step.weight_bytes / 1e9, 2) == 16.06
    assert round(step.weight_read_seconds / MS, 2) == 4.79


def test_kv_reads_34_36_gb_in_10_26_ms(h100_8b):
    step = decode_step(h100_8b, batch_size=64, context_tokens=4096)
    assert step.kv_bytes == 64 * 4096 * 131_072
    assert round(step.kv_bytes / 1e9, 2) == 34.36
    assert round(step.kv_read_seconds / MS, 2) == 10.26


def test_floor_is_15_05_ms(h100_8b):
    step = decode_step(h100_8b, batch_size=64, context_tokens=4096)
    assert round(step.floor_seconds / MS, 2) == 15.05
    assert step.step_seconds == step.floor_seconds  # no extra terms by default at TP=1


def test_measured_24_ms_is_63_percent_mbu(h100_8b):
    floor = decode_step(h100_8b, batch_size=64, context_tokens=4096).floor_seconds
    assert round(100 * mbu(floor_seconds=floor, measured_seconds=0.024)) == 63


def test_ridge_295_flop_per_byte(h100_8b):
    assert round(h100_8b.ridge_flops_per_byte) == 295
    # A dense BF16 step's GEMMs reach the ridge at 295 tokens (2 FLOP per 2-byte param each).
    assert round(ridge_tokens_per_step(h100_8b)) == 295
    assert compute_bound_tokens_per_step(h100_8b) == pytest.approx(295.3 / 2, rel=1e-3)


def test_mixed_step_with_2048_chunk_is_79_ms_and_5_2x(h100_8b):
    step = mixed_step(h100_8b, batch_size=64, context_tokens=4096, chunk_tokens=2048)
    assert step.tokens == 2112
    assert round(step.matmul_flops / 1e12, 1) == 33.9  # 2 x 8.03e9 x 2,112
    assert round(step.matmul_seconds / MS, 1) == 68.6  # at 50% of 989 TFLOP/s
    assert round(step.kv_read_seconds / MS, 1) == 10.3
    assert round(step.step_seconds / MS) == 79
    assert round(step.over_floor, 1) == 5.2
    assert step.compute_bound


def test_mixed_step_with_512_chunk_is_29_ms(h100_8b):
    step = mixed_step(h100_8b, batch_size=64, context_tokens=4096, chunk_tokens=512)
    assert round(step.step_seconds / MS) == 29


def test_prefill_takes_2_steps_at_2048_and_8_at_512(h100_8b):
    big = prefill_cost(h100_8b, prompt_tokens=4096, chunk_tokens=2048)
    small = prefill_cost(h100_8b, prompt_tokens=4096, chunk_tokens=512)
    assert (big.steps, small.steps) == (2, 8)
    # The TTFT price: the smaller budget spends more time prefilling the same prompt.
    busy = prefill_cost(
        h100_8b, prompt_tokens=4096, chunk_tokens=512, batch_size=64, context_tokens=4096
    )
    assert (
        busy.seconds
        > prefill_cost(
            h100_8b, prompt_tokens=4096, chunk_tokens=2048, batch_size=64, context_tokens=4096
        ).seconds
    )
    assert len(busy.step_seconds) == 8


def test_128_sequences_put_the_kv_term_at_20_5_ms(h100_8b):
    step = decode_step(h100_8b, batch_size=128, context_tokens=4096)
    assert round(step.kv_read_seconds / MS, 1) == 20.5


def test_fp8_kv_halves_the_kv_term():
    bf16 = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", kv_precision="bf16")
    fp8 = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", kv_precision="fp8")
    kv_bf16 = decode_step(bf16, batch_size=64, context_tokens=4096).kv_read_seconds
    kv_fp8 = decode_step(fp8, batch_size=64, context_tokens=4096).kv_read_seconds
    assert round(kv_bf16 / MS, 1) == 10.3
    assert round(kv_fp8 / MS, 1) == 5.1
    assert kv_fp8 == pytest.approx(kv_bf16 / 2)


def test_70b_at_tp4_reads_35_3_gb_per_gpu_in_10_5_ms():
    dep = Deployment.create(model="llama-3.1-70b", gpu="h100-sxm", tp=4)
    step = decode_step(dep, batch_size=1, context_tokens=1)
    assert round(step.weight_bytes / 1e9, 1) == 35.3
    assert round(step.weight_read_seconds / MS, 1) == 10.5
    # The all-reduce term exists under TP and is zero on one GPU.
    assert step.allreduce_seconds > 0
    one_gpu = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    assert decode_step(one_gpu, batch_size=1, context_tokens=1).allreduce_seconds == 0


def test_ring_allreduce_bytes():
    dep = Deployment.create(model="llama-3.1-70b", gpu="h100-sxm", tp=4)
    step = decode_step(dep, batch_size=8, context_tokens=100)
    # 2 all-reduces x 80 layers, each 8 tokens x 8192 x 2 B, ring sends 2(p-1)/p of it.
    expected = 2 * 80 * 2 * 3 / 4 * 8 * 8192 * 2
    assert step.allreduce_bytes == pytest.approx(expected)
    assert step.allreduce_seconds == pytest.approx(expected / 450e9)


# ---- optional terms are off by default and change what they should ---------------------------
def test_optional_terms_add_only_themselves(h100_8b):
    base = mixed_step(h100_8b, batch_size=64, context_tokens=4096, chunk_tokens=2048)
    host = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", host_overhead_seconds=2e-3)
    with_host = mixed_step(host, batch_size=64, context_tokens=4096, chunk_tokens=2048)
    assert with_host.step_seconds == pytest.approx(base.step_seconds + 2e-3)
    attn = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", prefill_attention=True)
    with_attn = mixed_step(attn, batch_size=64, context_tokens=4096, chunk_tokens=2048)
    # 2 x 32 layers x 32 heads x (128 + 128) x 2048 x 1024 causal pairs
    flops = 2 * 32 * 32 * 256 * 2048 * 1024
    assert with_attn.prefill_attention_flops == pytest.approx(flops)
    assert with_attn.step_seconds == pytest.approx(base.step_seconds + flops / 494.7e12)
    gather = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", exclude_input_embedding=True)
    # 14.74 ms in the spec's refinement (embedding row gather not streamed).
    no_embed = decode_step(gather, batch_size=64, context_tokens=4096)
    assert round(no_embed.floor_seconds / MS, 2) == 14.74


def test_step_seconds_fast_path_agrees_with_step_time(h100_8b):
    full = mixed_step(h100_8b, batch_size=64, context_tokens=4096, chunk_tokens=2048)
    fast = step_seconds(h100_8b, decode_tokens=64, prefill_tokens=2048, kv_tokens=64 * 4096)
    assert fast == pytest.approx(full.step_seconds, rel=1e-12)


def test_uneven_batch_from_per_request_contexts(h100_8b):
    uneven = step_time(h100_8b, request_context_tokens=[1000, 3000, 8288])
    even = decode_step(h100_8b, batch_size=3, context_tokens=4096)
    assert uneven.kv_bytes == pytest.approx(even.kv_bytes)
    assert uneven.batch_size == 3


def test_arrays_broadcast_for_plot_axes(h100_8b):
    batches = np.array([1, 16, 64, 256])
    steps = decode_step(h100_8b, batch_size=batches, context_tokens=4096)
    assert steps.floor_seconds.shape == (4,)
    assert round(steps.floor_seconds[2] / MS, 2) == 15.05


@given(
    batch=st.integers(1, 2048),
    context=st.integers(1, 200_000),
    extra_batch=st.integers(1, 64),
    extra_context=st.integers(1, 4096),
)
def test_floor_grows_with_batch_and_context(batch, context, extra_batch, extra_context):
    dep = Deployment.create(model="mixtral-8x7b-v0.1", gpu="h100-sxm", tp=2)
    floor = decode_step(dep, batch_size=batch, context_tokens=context).floor_seconds
    more_batch = decode_step(dep, batch_size=batch + extra_batch, context_tokens=context)
    more_context = decode_step(dep, batch_size=batch, context_tokens=context + extra_context)
    assert more_batch.floor_seconds > floor
    assert more_context.floor_seconds > floor


@given(chunk=st.integers(0, 16384), extra=st.integers(1, 4096))
def test_bigger_chunks_never_make_a_step_faster(chunk, extra):
    dep = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    a = mixed_step(dep, batch_size=64, context_tokens=4096, chunk_tokens=chunk)
    b = mixed_step(dep, batch_size=64, context_tokens=4096, chunk_tokens=chunk + extra)
    assert b.step_seconds >= a.step_seconds
    assert a.step_seconds >= a.floor_seconds


# ---- the floor is a true lower bound of published measurements ------------------------------
MEASUREMENTS = json.loads((DATA / "measurements.json").read_text())["measurements"]
# Unstated precisions take the smallest plausible format, so the floor stays a lower bound.
WEIGHTS = {
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "fp8 (block-scaled)": "fp8",
    "int8 weight-only": "int8",
    "unstated (fp16/bf16 likely)": "bf16",
}
KV = {
    "bf16": "bf16",
    "fp16": "fp16",
    "fp8": "fp8",
    "bf16 (default; not stated)": "bf16",
    "bf16 latent (MLA)": "bf16",
    "unknown (fp8 likely)": "fp8",
    "fp8 (likely; not stated)": "fp8",
    "unstated": "fp8",
}


def _usable(row) -> bool:
    # Skipped: the row the spec marks "suspect (do not use)", and the two expert-parallel /
    # DP-attention rows whose per-GPU expert placement the spec leaves uncomputed.
    if row["confidence"].startswith("suspect"):
        return False
    return row["reference_floor_naive"].get("bw_floor_ms") is not None or row["kind"].startswith(
        "prefill"
    )


@pytest.mark.parametrize("row", [r for r in MEASUREMENTS if _usable(r)], ids=lambda r: r["id"])
def test_floor_never_exceeds_a_published_step_time(row):
    dep = Deployment.create(
        model=row["model"],
        gpu=row["gpu"],
        tp=row["tp"],
        weight_precision=WEIGHTS[row["weight_precision"]],
        kv_precision=KV[row["kv_precision"]],
        mfu=1.0,  # the bound at dense peak
    )
    if row["kind"].startswith("prefill"):
        bound = step_seconds(dep, decode_tokens=0, prefill_tokens=row["input_len"], kv_tokens=0)
    else:
        context = row["input_len"] + row["output_len"] / 2
        bound = decode_step(dep, batch_size=row["batch"], context_tokens=context).floor_seconds
    assert bound <= row["step_ms"] * MS
    # ...and not a vacuous one: within 4x of the mature stacks' decode numbers.
    if row["kind"] == "decode" and row["confidence"].startswith("high"):
        assert bound > row["step_ms"] * MS / 4


def test_usable_measurement_rows_are_most_of_the_table():
    assert sum(_usable(r) for r in MEASUREMENTS) == len(MEASUREMENTS) - 3


# ---- capacity and bad input ------------------------------------------------------------------
def test_capacity_of_the_worked_example(h100_8b):
    cap = capacity(h100_8b, context_tokens=4096)
    # 80 GB x 0.9 - 16.06 GB = 55.94 GB of KV; 0.537 GB per 4K sequence -> 104 sequences.
    assert cap.kv_budget_bytes == pytest.approx(72e9 - 16_060_522_496)
    assert cap.max_sequences == math.floor((72e9 - 16_060_522_496) / (4096 * 131072))
    assert cap.fits(batch_size=64)
    assert not cap.fits(batch_size=128)
    with pytest.raises(ConfigError, match="does not fit"):
        check_fits(h100_8b, batch_size=128, context_tokens=4096)


def test_weights_that_do_not_fit_are_reported():
    dep = Deployment.create(model="llama-3.1-405b", gpu="h100-sxm")
    cap = capacity(dep, context_tokens=1)
    assert not cap.weights_fit
    assert "raise TP or quantize" in cap.explain(batch_size=1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(batch_size=0, context_tokens=4096), "batch size must be a finite number > 0"),
        (dict(batch_size=-3, context_tokens=4096), "batch size"),
        (dict(batch_size=8, context_tokens=0), "context tokens must be"),
        (dict(batch_size=8, context_tokens=float("nan")), "context tokens"),
        (dict(batch_size=8, context_tokens=4096, chunk_tokens=-1), "chunk tokens must be"),
    ],
)
def test_non_positive_workloads_are_clear_errors(h100_8b, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        step_time(h100_8b, **kwargs)


def test_bad_deployments_are_clear_errors():
    with pytest.raises(ConfigError, match="TP=3 does not divide"):
        Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", tp=3)
    with pytest.raises(ConfigError, match="MFU must be in"):
        Deployment.create(model="llama-3.1-8b", gpu="h100-sxm", mfu=1.5)
    with pytest.raises(ConfigError, match="measured step seconds"):
        mbu(floor_seconds=0.015, measured_seconds=0)


def test_every_expert_is_resident_in_memory():
    # Mixtral 8x7B in BF16: 46,702,792,704 params x 2 B = 93.4 GB, more than an 80 GB H100,
    # even though a batch-1 step reads only 2 of the 8 experts.
    dep = Deployment.create(model="mixtral-8x7b-v0.1", gpu="h100-sxm")
    cap = capacity(dep, context_tokens=1)
    assert cap.weight_bytes == 46_702_792_704 * 2
    assert not cap.weights_fit
    assert capacity(Deployment.create(model="mixtral-8x7b-v0.1", gpu="h100-sxm", tp=2),
                    context_tokens=1).weights_fit  # fmt: skip


# ---- one formula: step_seconds (token counts) == step_time (the decomposition) ---------------
@pytest.mark.parametrize(
    ("model", "tp", "terms"),
    [
        ("llama-3.1-8b", 1, {}),
        ("llama-3.1-70b", 2, {}),
        ("llama-3.1-70b", 4, {"allreduce_latency_seconds": 5e-6, "host_overhead_seconds": 1e-3}),
        ("llama-3.1-70b", 8, {"weight_precision": "fp8", "kv_precision": "fp8"}),
        ("mixtral-8x7b-v0.1", 2, {}),  # MoE: weight bytes grow with the experts touched
        ("mixtral-8x7b-v0.1", 8, {"weight_precision": "fp8", "allreduce_latency_seconds": 3e-6}),
        ("qwen3-30b-a3b", 4, {"prefill_attention": True, "exclude_input_embedding": True}),
    ],
)
def test_step_seconds_is_step_time_at_any_tp(model, tp, terms):
    dep = Deployment.create(model=model, gpu="h100-sxm", tp=tp, **terms)
    assert (dep.allreduce and tp > 1) == (step_time(dep, batch_size=1, context_tokens=1)
                                          .allreduce_seconds > 0)  # fmt: skip
    for batch in (1, 7, 64, 256):
        for context in (100, 4096):
            for chunk in (0, 512, 2048):
                full = step_time(dep, batch_size=batch, context_tokens=context, chunk_tokens=chunk)
                fast = step_seconds(
                    dep, decode_tokens=batch, prefill_tokens=chunk, kv_tokens=batch * context
                )
                assert fast == pytest.approx(full.step_seconds, rel=1e-12), (batch, context, chunk)
