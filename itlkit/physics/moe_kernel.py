"""One fused-MoE layer as vLLM's kernel benchmark times it: its FLOPs, the weight bytes it reads,
the rows its tiles compute, and a time model fitted to published timings.

`benchmarks/kernels/benchmark_moe.py` times `fused_moe` on one GPU for a model's expert shape at
a TP size: `num_tokens` rows of `hidden_size`, E experts whose gate and up projections are `w1`
(E, 2 x N, hidden) and down projection `w2` (E, hidden, N), N the expert's intermediate size over
TP, top-k routing from random gating, each call replayed ten times in a CUDA graph and the mean
reported as "Kernel time" (vllm-project/vllm @ 005b07cd). Published tables of those times
(`data/moe-kernels/`) measure what a step model assumes of expert GEMMs;
`benchmarks/bench_moe_kernels.py` fits `fused_moe_seconds` to them and prints how far itlkit's
engine step model is from each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from itlkit.physics.hardware import Hardware, get_gpu
from itlkit.physics.model import Model, experts_touched

GATED_MATRICES = 3  # gate and up (w1, 2 x N rows) and down (w2): 3 x N x hidden per expert
# The rows of one tile of the fused-MoE kernel's default config: each expert's rows are padded to
# a multiple of BLOCK_SIZE_M, 16 while the call has no more tokens than experts and 64 above (and
# 64 for block-quantized FP8), an expert with no row getting no tile (`get_default_config` and
# `moe_align_block_size`, vllm/model_executor/layers/fused_moe/, vllm-project/vllm @ 000d1458).
SMALL_BLOCK_ROWS, BLOCK_ROWS = 16, 64
# `fit_kernel_shares` over the 11 mapped tables of data/moe-kernels/ (BF16 and FP8 w8a8 on H100,
# H200, A100, L40S; `benchmarks/bench_moe_kernels.py` prints it): the tile FLOPs at this share of
# the BF16 peak, the touched weights at this share of the HBM bandwidth. Each table held out of
# the fit: median 13 % at its largest call (tests/test_moe_kernel.py refits and checks).
FUSED_MOE_SHARE_OF_BF16_PEAK = 0.709
FUSED_MOE_BANDWIDTH_SHARE = 0.890
# The kernel those tables time: vLLM's Triton fused-MoE with 16-bit or FP8 w8a8 experts on NVIDIA
# GPUs (MXFP4 / int4 experts take other kernels, Marlin or FlashInfer; AMD GPUs take AITER).
MEASURED_WEIGHT_PRECISIONS = ("bf16", "fp16", "fp8")


@dataclass(frozen=True, slots=True)
class MoeKernelShape:
    """The expert weights one GPU holds for one MoE layer: E experts of N = intermediate / TP
    rows over `hidden` columns, top-k routing (from a catalog `Model` with `from_model`)."""

    experts: int
    shard_intermediate: int
    hidden: int
    top_k: int

    @classmethod
    def from_model(cls, model: Model, *, tp: int) -> MoeKernelShape:
        return cls(model.num_experts, model.moe_intermediate_size // tp, model.hidden_size,
                   model.experts_per_token)  # fmt: skip

    @property
    def params_per_expert(self) -> int:
        return GATED_MATRICES * self.shard_intermediate * self.hidden

    def flops(self, *, tokens):
        """Both expert GEMMs of `tokens` routed rows: 2 x tokens x top-k x 3 x N x hidden."""
        return 2.0 * np.asarray(tokens, dtype=float) * self.top_k * self.params_per_expert

    def experts_touched(self, *, tokens):
        """Distinct experts `tokens` rows hit under uniform top-k routing (the weight read's
        formula, `model.experts_touched`)."""
        return experts_touched(self.experts, self.top_k, tokens=tokens)

    def weight_bytes(self, *, tokens, bytes_per_param: float):
        """Expert weight bytes a call over `tokens` rows reads: the touched experts, whole."""
        return self.experts_touched(tokens=tokens) * self.params_per_expert * bytes_per_param

    def tile_rows(self, *, tokens):
        """Rows the kernel's tiles compute: each touched expert's mean rows, rounded up to the
        default tile (SMALL_BLOCK_ROWS while tokens <= E, else BLOCK_ROWS)."""
        t = np.asarray(tokens, dtype=float)
        touched = self.experts_touched(tokens=t)
        block = np.where(t <= self.experts, SMALL_BLOCK_ROWS, BLOCK_ROWS)
        return touched * np.ceil(t * self.top_k / touched / block) * block


def fused_moe_seconds(shape: MoeKernelShape, *, tokens, bytes_per_param: float,
                      hbm_bytes_per_second: float, bf16_peak_flops_per_second: float,
                      share_of_bf16_peak: float, bandwidth_share: float):  # fmt: skip
    """One fused-MoE call: the touched weights' read plus the tiles' FLOPs, one after the
    other (the published times grow by both: a fixed read, then FLOPs at a steady rate), the
    FLOPs at a share of the BF16 peak whatever the weights' precision."""
    read = shape.weight_bytes(tokens=tokens, bytes_per_param=bytes_per_param) / (
        hbm_bytes_per_second * bandwidth_share
    )
    tiles = 2.0 * shape.tile_rows(tokens=tokens) * shape.params_per_expert
    return read + tiles / (bf16_peak_flops_per_second * share_of_bf16_peak)


def marginal_share_of_peak(shape: MoeKernelShape, *, tokens, seconds, peak_flops_per_second):
    """The share of a peak the extra rows between consecutive measured calls reach: the FLOPs
    they add over the time they add, so that the fixed part of a call (launch, routing, the
    weight read) cancels. One value per interval, len(tokens) - 1 of them."""
    t = np.asarray(tokens, dtype=float)
    s = np.asarray(seconds, dtype=float)
    extra = shape.flops(tokens=t[1:]) - shape.flops(tokens=t[:-1])
    return extra / ((s[1:] - s[:-1]) * peak_flops_per_second)


@dataclass(frozen=True, slots=True)
class KernelTable:
    """One published table of fused-MoE call times: a shape on a catalog GPU, and its points."""

    id: str
    url: str
    gpu: str
    dtype: str
    shape: MoeKernelShape
    bytes_per_param: float
    tokens: np.ndarray
    seconds: np.ndarray


def read_kernel_tables(path) -> list[KernelTable]:
    """The tables of `data/moe-kernels/published_kernel_times.json` that itlkit maps onto a
    catalog GPU and a whole expert shape (their `itlkit` object); the others are left out."""
    import json
    from pathlib import Path

    doc = json.loads(Path(path).read_text())
    tables = []
    for t in doc["tables"]:
        mapped = t.get("itlkit")
        if not mapped:
            continue
        points = np.array(t["points"], dtype=float)
        shape = MoeKernelShape(mapped["experts"], mapped["shard_intermediate"], mapped["hidden"],
                               mapped["top_k"])  # fmt: skip
        tables.append(KernelTable(t["id"], t["source"]["url"], mapped["gpu"], t["dtype"], shape,
                                  float(mapped["bytes_per_param"]), points[:, 0],
                                  points[:, 1] * 1e-6))  # fmt: skip
    return tables


# The fit's points: calls of at least this many tokens (below, a call is its launch and routing,
# which no term here prices), and where its search starts (share of the BF16 peak, of the HBM
# bandwidth).
LEAST_FITTED_TOKENS = 64
FIT_START = (0.5, 0.8)


def table_seconds(table: KernelTable, shares, *, tokens=None):
    """`fused_moe_seconds` for a table's shape on its GPU, at `shares` = (share of the BF16
    peak, share of the HBM bandwidth); at the table's own token counts unless given."""
    gpu = get_gpu(table.gpu)
    return fused_moe_seconds(
        table.shape,
        tokens=table.tokens if tokens is None else tokens,
        bytes_per_param=table.bytes_per_param,
        hbm_bytes_per_second=gpu.hbm_bytes_per_second,
        bf16_peak_flops_per_second=gpu.peak_flops_per_second["bf16"],
        share_of_bf16_peak=shares[0],
        bandwidth_share=shares[1],
    )


def fit_kernel_shares(tables: list[KernelTable]) -> np.ndarray:
    """The (share of the BF16 peak, share of the HBM bandwidth) that minimise the mean
    |log(predicted / measured)| over the tables' calls of LEAST_FITTED_TOKENS or more."""
    from scipy.optimize import minimize

    least = LEAST_FITTED_TOKENS

    def loss(shares):
        if not (0 < shares[0] <= 1 and 0 < shares[1] <= 1.5):
            return np.inf
        errors = [np.abs(np.log(table_seconds(t, shares) / t.seconds))[t.tokens >= least]
                  for t in tables]  # fmt: skip
        return float(np.mean(np.concatenate(errors)))

    return minimize(loss, FIT_START, method="Nelder-Mead").x


def measured_kernel_applies(gpu: Hardware, *, weight_precision: str) -> bool:
    """Whether the published tables time the kernel a deployment's experts run on."""
    return gpu.vendor == "NVIDIA" and weight_precision in MEASURED_WEIGHT_PRECISIONS
