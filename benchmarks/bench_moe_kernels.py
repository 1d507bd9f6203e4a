"""Published fused-MoE kernel times against itlkit's expert-GEMM pricing (issue 20, item 6).

Run: .venv/bin/python benchmarks/bench_moe_kernels.py

Reads `data/moe-kernels/published_kernel_times.json` (vLLM's own `benchmark_moe.py` times of one
MoE layer, posted with tuned-config pull requests; the tables whose shape and GPU itlkit knows).
Prints, per table, the share of the dense peak the largest calls reach, the share the extra rows
of the last interval reach, and predicted / measured - 1 at the largest call of:
  roofline  max(touched weights / HBM bandwidth, FLOPs / dense peak of the weights' precision);
  engine    itlkit's uncalibrated engine step model for the experts alone, as
            `StepCoefficients.matmul_seconds` prices them: max(weights, FLOPs x (m + 128) / m /
            (0.8 x that peak)), m the rows per expert;
  fitted    `moe_kernel.fused_moe_seconds` (weight read + tile FLOPs at a share of the BF16
            peak), its two shares fitted to all tables (least |log error| over the points of
            64 tokens and more), and each table's error with its own points left out of the fit.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from itlkit.physics.hardware import get_gpu
from itlkit.physics.moe_kernel import (
    KernelTable,
    fit_kernel_shares,
    read_kernel_tables,
    table_seconds,
)
from itlkit.physics.roofline import ENGINE_MFU, ENGINE_MFU_HALF_TOKENS

ROOT = Path(__file__).resolve().parents[1]
TABLES = ROOT / "data" / "moe-kernels" / "published_kernel_times.json"


def dtype_peak(table: KernelTable) -> float:
    gpu = get_gpu(table.gpu)
    key = "fp8" if table.dtype.startswith("fp8") else "bf16"
    return gpu.peak_flops_per_second[key]


def roofline(table: KernelTable, tokens):
    gpu = get_gpu(table.gpu)
    read = table.shape.weight_bytes(tokens=tokens, bytes_per_param=table.bytes_per_param)
    return np.maximum(read / gpu.hbm_bytes_per_second, table.shape.flops(tokens=tokens)
                      / dtype_peak(table))  # fmt: skip


def engine(table: KernelTable, tokens):
    gpu = get_gpu(table.gpu)
    read = table.shape.weight_bytes(tokens=tokens, bytes_per_param=table.bytes_per_param)
    rows = table.shape.top_k * np.asarray(tokens, dtype=float) / table.shape.experts
    gemm = table.shape.flops(tokens=tokens) * (rows + ENGINE_MFU_HALF_TOKENS) / rows
    return np.maximum(read / gpu.hbm_bytes_per_second, gemm / (ENGINE_MFU * dtype_peak(table)))


def main() -> int:
    tables = read_kernel_tables(TABLES)
    shares = fit_kernel_shares(tables)
    print(f"{len(tables)} tables; fitted: FLOPs at {shares[0]:.3f} of the BF16 peak, weights at "
          f"{shares[1]:.3f} of the HBM bandwidth")  # fmt: skip
    print(f"{'table':52} {'tokens':>6} {'share':>6} {'marg.':>6} {'roofline':>9} {'engine':>8} "
          f"{'fitted':>7} {'held out':>8}")  # fmt: skip
    held = []
    for t in tables:
        last = t.tokens[-1]
        share = t.shape.flops(tokens=last) / (t.seconds[-1] * dtype_peak(t))
        extra = t.shape.flops(tokens=t.tokens[-1]) - t.shape.flops(tokens=t.tokens[-2])
        marginal = extra / ((t.seconds[-1] - t.seconds[-2]) * dtype_peak(t))
        others = fit_kernel_shares([o for o in tables if o.id != t.id])
        row = [
            roofline(t, last),
            engine(t, last),
            table_seconds(t, shares, tokens=last),
            table_seconds(t, others, tokens=last),
        ]
        errors = [float(v / t.seconds[-1] - 1) for v in row]
        held.append(abs(errors[-1]))
        print(
            f"{t.id[:52]:52} {last:6.0f} {share:6.3f} {marginal:6.3f} "
            + " ".join(f"{e:+8.0%}" for e in errors)
        )
    print(f"held out, median |error| at the largest call: {statistics.median(held):.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
