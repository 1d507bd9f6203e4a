"""Which GPUs a server could be on, from the KV cache size it reports.

vLLM sizes its KV cache as what is left of `gpu_memory_utilization x HBM` after the weights and
the activation / CUDA-graph reserve, and reports it (`num_gpu_blocks` blocks of `block_size`
tokens in `vllm:cache_config_info`). So
    HBM ~= (weights per GPU + KV per GPU + reserve) / gpu_memory_utilization,
and a card whose memory is far from that cannot be the one the server ran on. The reserve is
unknown: between 0 and RESERVE_BYTES + RESERVE_SHARE of the engine's memory.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from itlkit.physics.hardware import GPUS
from itlkit.physics.roofline import Deployment

RESERVE_BYTES = 3e9  # CUDA graphs, the sampler, NCCL buffers (measured: 1-3 GB on 8B models)
RESERVE_SHARE = 0.10  # and activations, which grow with the token budget
GIB_PER_GB = 2**30 / 1e9  # a "24 GB" card in a datasheet may hold 24 GiB (vLLM counts bytes)


@dataclass(frozen=True)
class KvEvidence:
    """The memory a page's cache config implies, per GPU."""

    kv_bytes_per_gpu: float
    weight_bytes_per_gpu: float
    gpu_memory_utilization: float
    low_hbm_bytes: float  # no reserve at all
    high_hbm_bytes: float  # the largest plausible reserve


def kv_evidence(deployment: Deployment, *, num_gpu_blocks: int, block_size: int,
                gpu_memory_utilization: float) -> KvEvidence:  # fmt: skip
    """The HBM range a cache of `num_gpu_blocks` x `block_size` tokens implies."""
    kv = num_gpu_blocks * block_size * deployment.kv_bytes_per_token_per_gpu
    weights = float(deployment.weight_bytes_per_gpu(tokens=1)) if not deployment.model.is_moe else (
        deployment.model.total_params * deployment.weights.bytes_per_element / deployment.tp
    )  # fmt: skip
    util = gpu_memory_utilization
    low = (weights + kv) / util / GIB_PER_GB
    high = (weights + kv + RESERVE_BYTES) / (util * (1 - RESERVE_SHARE))
    return KvEvidence(kv, weights, util, low, high)


def gpus_matching(deployment: Deployment, evidence: KvEvidence, names=None) -> tuple[str, ...]:
    """Catalog GPUs (or `names`) whose HBM lies in the range the evidence implies."""
    names = tuple(GPUS) if names is None else tuple(names)
    return tuple(
        name for name in names
        if evidence.low_hbm_bytes <= replace(deployment, gpu=GPUS[name]).gpu.hbm_bytes
        <= evidence.high_hbm_bytes
    )  # fmt: skip
