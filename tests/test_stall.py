"""The gap a running stream sees while a prompt chunk is served, per engine policy
(`itlkit.physics.stall`), on the worked example (expected values from `_reference`'s derivation
of shared/spec/worked-example.txt, not from itlkit's output)."""

import pytest
from _reference import (
    DECODES,
    FLOPS_PER_SECOND_AT_HALF_MFU,
    HBM_BYTES_PER_SECOND,
    KV_BYTES,
    PARAMETERS,
    mixed_step_ms,
)

from itlkit.physics.roofline import Deployment
from itlkit.physics.stall import POLICIES, stall

DEP = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
LOAD = dict(batch_size=DECODES, context_tokens=4096)
WEIGHTS_SECONDS = 2 * PARAMETERS / HBM_BYTES_PER_SECOND  # 4.79 ms: BF16 weights read once
FLOOR_SECONDS = WEIGHTS_SECONDS + KV_BYTES / HBM_BYTES_PER_SECOND  # 15.05 ms


def test_vllm_mixes_the_chunk_into_the_decodes_step():
    # the worked example's mixed step: 2,048 + 64 tokens of GEMMs at half MFU + the KV read
    s = stall(DEP, policy="vllm", chunk_tokens=2048, **LOAD)
    assert s.gap_seconds == pytest.approx(mixed_step_ms(2048) / 1e3, rel=1e-9)
    assert s.prefill_alone_seconds == 0 and "one step of the decodes" in s.how


def test_sglang_runs_the_batch_alone_then_the_decode_step():
    # Alone: 2,048 tokens of GEMMs (compute-bound: 66.5 ms > the 4.79 ms weight read), no KV of
    # running decodes. Then the stream's own decode step: the 15.05 ms floor. 81.5 ms in all,
    # against vLLM's 78.8 ms: the decodes' KV is read once more and the 64 decode rows move.
    alone = 2 * PARAMETERS * 2048 / FLOPS_PER_SECOND_AT_HALF_MFU
    s = stall(DEP, policy="sglang", chunk_tokens=2048, **LOAD)
    assert s.prefill_alone_seconds == pytest.approx(alone, rel=1e-9)
    assert s.decode_seconds == pytest.approx(FLOOR_SECONDS, rel=1e-9)
    assert s.gap_seconds == pytest.approx(alone + FLOOR_SECONDS, rel=1e-9)
    assert s.gap_seconds == pytest.approx(81.54e-3, abs=0.01e-3)
    assert "prefill batch of 2,048 tokens alone (66.5 ms) + decode step (15.1 ms)" == s.how


def test_mixed_chunk_sglang_is_vllms_step_and_unknown_policies_are_named():
    mixed = stall(DEP, policy="sglang-mixed", chunk_tokens=512, **LOAD)
    assert mixed.gap_seconds == pytest.approx(mixed_step_ms(512) / 1e3, rel=1e-9)
    with pytest.raises(ValueError, match="policy must be one of vllm, sglang, sglang-mixed"):
        stall(DEP, policy="trt", chunk_tokens=512, **LOAD)
    assert set(POLICIES) == {"vllm", "sglang", "sglang-mixed"}
