"""The KV cache as vLLM sizes it (issue 20, item 2: memory as the engine sees it).

Expected values are the KV tokens vLLM 0.10.1.1 logged at start-up on A100 80GB for Qwen2-7B
(28 layers, 4 KV heads of 128, bf16: 57,344 B per token; dennislee22's logs, transcribed in
shared/fixtures/real_world_more/runs/05_dennislee22_a100_vllm01011, whose numbers may be used with
their source), and the CUDA totals measured with deviceQuery (docs/research/gpu-memory-as-vllm-
sees-it.md, section 2)."""

from __future__ import annotations

import pytest
from _paths import DATA

from itlkit.physics.engine_memory import GIB, cuda_total_bytes, vllm_kv_cache
from itlkit.physics.hardware import get_gpu
from itlkit.physics.roofline import Deployment, capacity

QWEN2_7B = DATA / "hf_configs" / "qwen2.5-7b" / "config.json"  # the same shapes as Qwen2-7B
# (TP, gpu_memory_utilization, "GPU KV cache size: N tokens" as logged)
LOGGED = [(1, 0.25, 93_872), (1, 0.50, 464_848), (2, 0.25, 450_192), (2, 0.50, 1_192_160)]


@pytest.mark.parametrize(("tp", "utilization", "logged"), LOGGED)
def test_the_kv_tokens_vllm_logged_on_a100(tp, utilization, logged):
    dep = Deployment.create(model=QWEN2_7B, gpu="a100-80gb-sxm", tp=tp,
                            gpu_memory_utilization=utilization)  # fmt: skip
    memory = vllm_kv_cache(dep)
    assert memory.kv_bytes_per_token == 2 * 28 * 4 * 128 * 2 / tp
    assert memory.kv_tokens == pytest.approx(logged, rel=0.01)
    assert memory.kv_tokens % 16 == 0  # whole blocks
    # the reference view (80e9 B, no overhead) holds fewer tokens than vLLM did: 4-11 % here
    reference = capacity(dep, context_tokens=1).kv_budget_bytes / memory.kv_bytes_per_token
    assert reference < 0.97 * logged


def test_the_a100_total_is_80_gib_as_cuda_reports_it():
    # the logs alone bound it: 0.25 x T = KV(0.50) - KV(0.25) gives T in [85.089e9, 85.097e9] B
    total, source = cuda_total_bytes(get_gpu("a100-80gb-sxm"))
    assert 85.089e9 <= total <= 85.101e9 and "deviceQuery" in source
    assert total / GIB == pytest.approx(79.26, abs=0.01)


def test_a_gpu_without_a_measurement_says_so():
    total, source = cuda_total_bytes(get_gpu("b300"))
    assert total == get_gpu("b300").hbm_bytes and "estimate" in source


@pytest.mark.parametrize(("slug", "vram_gib"), [("mi325x", 256), ("mi355x", 288)])
def test_amd_totals_are_rocm_vram_in_gib_less_what_the_mi300x_shows(slug, vram_gib):
    # ROCm's table gives VRAM in GiB (MI300X 192); HIP's measured MI300X total is 196,592 MiB,
    # 16 MiB under it. The 288 GiB parts' out-of-memory messages print 287.98 GiB.
    mi300x = cuda_total_bytes(get_gpu("mi300x"))[0]
    assert mi300x == 196_592 * 2**20 == 192 * GIB - 16 * 2**20
    total, source = cuda_total_bytes(get_gpu(slug))
    assert total == vram_gib * 1024 * 2**20 - 16 * 2**20 and "estimate" in source
    assert total > get_gpu(slug).hbm_bytes  # the datasheet's decimal GB
    if vram_gib == 288:
        assert round(total / GIB, 2) == 287.98


def test_the_h200_total_is_what_torch_reports_beside_the_h100_and_b200():
    # One source prints torch's "total capacity of X GiB" (2 decimals) for 8 x H100 HBM3, 8 x
    # H200 and 8 x B200 runs: 79.21, 139.80 and 178.36 GiB. The H100 and B200 figures of the
    # catalog (deviceQuery, cudaDeviceProp) agree to the rounding, so the H200's is taken as read.
    h100, h200, b200 = (
        cuda_total_bytes(get_gpu(g))[0] / GIB for g in ("h100-sxm", "h200-sxm", "b200")
    )
    assert h100 == pytest.approx(79.21, abs=0.006)
    assert b200 == pytest.approx(178.36, abs=0.015)
    assert h200 == pytest.approx(139.80, abs=0.005)
    assert cuda_total_bytes(get_gpu("h200-sxm"))[0] > get_gpu("h200-sxm").hbm_bytes  # 141e9 B


def test_no_room_left_is_zero_blocks_not_a_negative_cache():
    dep = Deployment.create(model="llama-3.1-70b", gpu="a100-80gb-sxm")  # 141 GB of weights
    memory = vllm_kv_cache(dep)
    assert memory.kv_bytes < 0 and memory.blocks == 0 and memory.kv_tokens == 0
