"""GPU memory as vLLM sees it: the total CUDA reports, what vLLM takes off it, and the KV cache
that is left, in blocks.

The datasheet's "80 GB" is not what vLLM sizes its cache from. vLLM V1 asks CUDA for the device's
total (`torch.cuda.mem_get_info()[1]`), takes `gpu_memory_utilization` of that, and subtracts the
weights, the activation peak of one `max_num_batched_tokens` forward pass and the memory outside
torch (vllm/v1/worker/gpu_worker.py `determine_available_memory`, vllm/utils `memory_profiling`;
v0.10.1.1). The KV cache is then whole blocks of 16 tokens. Sources and derivations:
docs/research/gpu-memory-as-vllm-sees-it.md.

The reference analysis keeps its own simplification (datasheet GB x utilisation - weights,
`roofline.capacity`); `explain` shows this view beside it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from itlkit.physics.hardware import Hardware
from itlkit.physics.roofline import Deployment

GIB = 2**30
BLOCK_TOKENS = 16  # vLLM's default block_size
# Activation peak + non-torch memory: 0.55 GiB (TP 1) and 0.67 GiB (TP 2, NCCL included) for a 7B
# model at max_num_batched_tokens 2048 on A100 80GB, vLLM 0.10.1.1 (the dennislee22 start-up logs
# of shared/fixtures/real_world_more, docs/research/gpu-memory-as-vllm-sees-it.md section 3): 0.6
# GiB reproduces the logged KV tokens within 1 %.
PROFILED_OVERHEAD_BYTES = 0.6 * GIB

_AMD_ESTIMATE = "an estimate: ROCm's VRAM %d GiB less the 16 MiB the MI300X's HIP total shows"
# torch.cuda.mem_get_info()[1] (= deviceQuery's totalGlobalMem), bytes, with its source; it moves
# by about 0.1 GiB with the driver. GPUs not listed fall back to the datasheet figure, said so.
CUDA_TOTAL_BYTES: dict[str, tuple[float, str]] = {
    "a100-80gb-sxm": (85_100_068_864, "deviceQuery, thamada/nvidia-smi gls/A100SXMx4 @c4c8a46"),
    "a100-40gb-sxm": (42_298_834_944, "deviceQuery, bottlerocket-os/bottlerocket#3873"),
    "h100-sxm": (85_045_477_376, "deviceQuery, thamada/nvidia-smi gls/H100SXMx8 @c4c8a46"),
    "h100-nvl": (99_861_594_112, "deviceQuery, thamada/nvidia-smi gls/H100NVLx2 @c4c8a46"),
    # torch's "total capacity of 139.80 GiB" (its device total, rounded to 0.01 GiB): 8 x H200 in
    # PrimeIntellect-ai/prime-rl benchmarks/results/BENCHMARKS.md (2026-01-13 version), where
    # the same runs print 79.21 GiB for the H100 (above: 79.205) and 178.36 for the B200 (below:
    # 178.35)
    "h200-sxm": (
        150_109_106_995,  # 139.80 GiB
        "torch's total capacity 139.80 GiB, PrimeIntellect-ai/prime-rl "
        "benchmarks/results/BENCHMARKS.md (2026-01-13)",
    ),
    "l4": (23_570_219_008, "deviceQuery, thamada/nvidia-smi gls/L4 @c4c8a46"),
    "l40s": (47_803_596_800, "deviceQuery, thamada/nvidia-smi gls/L40S @c4c8a46"),
    "a10": (23_609_475_072, "deviceQuery, aalanwyr/face2cuda @9ad8156"),
    "rtx-3090": (25_327_697_920, "deviceQuery, thamada/nvidia-smi gls/RTX3090 @c4c8a46"),
    "rtx-4090": (25_386_352_640, "deviceQuery, thamada/nvidia-smi gls/RTX4090 @c4c8a46"),
    "b200": (191.50e9, "cudaDeviceProp 178.35 GiB, pytorch/ao#4002"),
    "mi300x": (206_141_652_992, "HIP totalGlobalMem, thamada/nvidia-smi gls/MI300X_x4 @c4c8a46"),
    # AMD gives VRAM in GiB (ROCm/legacy-rocm-build docs/reference/gpu-arch-specs.rst @ 089d7513:
    # MI300X 192, MI325X 256, MI350X / MI355X 288), and the MI300X's HIP total above is its
    # 192 GiB less 16 MiB: the same 16 MiB off the others is an estimate (HIP out-of-memory
    # messages from 288 GB Instinct GPUs print "total capacity of 287.98 GiB", which it matches)
    "mi325x": (274_861_129_728, _AMD_ESTIMATE % 256),  # 256 GiB - 16 MiB
    "mi355x": (309_220_868_096, _AMD_ESTIMATE % 288),  # 288 GiB - 16 MiB = 287.98 GiB
}


def cuda_total_bytes(gpu: Hardware) -> tuple[float, str]:
    """The total CUDA reports for `gpu`, and where that figure comes from."""
    if gpu.slug in CUDA_TOTAL_BYTES:
        return CUDA_TOTAL_BYTES[gpu.slug]
    return gpu.hbm_bytes, "no measured CUDA total: the datasheet figure, an estimate"


@dataclass(frozen=True)
class EngineMemory:
    """The KV cache vLLM sizes on one GPU, and the terms it comes from (bytes per GPU)."""

    total_bytes: float
    total_source: str
    utilization: float
    weight_bytes: float
    overhead_bytes: float
    kv_bytes_per_token: float
    block_tokens: int

    @property
    def kv_bytes(self) -> float:
        """What is left for the KV cache (negative: vLLM refuses to start)."""
        return self.total_bytes * self.utilization - self.weight_bytes - self.overhead_bytes

    @property
    def blocks(self) -> int:
        """Whole KV blocks (0 when nothing is left)."""
        per_block = self.block_tokens * self.kv_bytes_per_token
        return max(math.floor(self.kv_bytes / per_block), 0)

    @property
    def kv_tokens(self) -> int:
        return self.blocks * self.block_tokens


def vllm_kv_cache(
    deployment: Deployment,
    *,
    overhead_bytes: float = PROFILED_OVERHEAD_BYTES,
    block_tokens: int = BLOCK_TOKENS,
) -> EngineMemory:
    """The KV cache vLLM V1 would size for `deployment` (its `gpu_memory_utilization`), after
    the weights as vLLM holds them (`Deployment.resident_weight_bytes_per_gpu`)."""
    dep = deployment
    total, source = cuda_total_bytes(dep.gpu)
    weights = dep.resident_weight_bytes_per_gpu()
    return EngineMemory(total, source, dep.gpu_memory_utilization, weights, overhead_bytes,
                        float(dep.kv_bytes_per_token_per_gpu), block_tokens)  # fmt: skip


def sglang_kv_cache(deployment: Deployment) -> EngineMemory:
    """The KV pool SGLang would size for `deployment`, its `gpu_memory_utilization` read as
    SGLang's `mem_fraction_static`: the static pools (weights + KV) take that share of the GPU,
    so the KV pool is the share less the weights, in pages of one token (SGLang's default
    page_size). `profile_max_num_token`: rest = available after the weights - total x (1 -
    mem_fraction_static), python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py @
    001ccef0072a4537d4ec6bdd50a73e6feb2c907d. The CUDA context (~0.5 GiB, outside torch) is not
    taken off: an upper bound by that much."""
    dep = deployment
    total, source = cuda_total_bytes(dep.gpu)
    weights = dep.model.total_params * dep.weights.bytes_per_element / dep.tp
    return EngineMemory(total, source, dep.gpu_memory_utilization, weights, 0.0,
                        float(dep.kv_bytes_per_token_per_gpu), 1)  # fmt: skip
