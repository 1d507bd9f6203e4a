"""Bounds from the roofline that rule a candidate out before any simulation.

Each bound is one that the simulator can never beat, so a pruned candidate would miss its SLO
in a full simulation too (tests/test_plan.py checks it over random spaces):

- ITL: every engine step streams the weights at most at the HBM's datasheet bandwidth, and every
  ITL observation spans at least one step, so ITL p99 >= the weight read of one token's step
  (`StepCoefficients.weight_read_seconds`; calibration only slows steps: efficiency <= 1).
- TTFT: a request's first token comes after its prompt's uncached tokens went through the GEMMs,
  at most at the GPU's dense peak (the simulator prices them at MFU <= 1 of it), so each TTFT >=
  uncached tokens x GEMM FLOPs per token / peak, and the p99 of TTFT >= the p99 of those bounds.
- TPOT: a request's tokens come at most k + 1 a step (speculation; 1 without), so its TPOT >=
  the weight read / (k + 1), and so is the p99.
- Memory: the weights must fit with room for KV (`roofline.capacity`), and the KV cache must
  hold the longest request, or the deployment cannot serve the traffic at all.
"""

from __future__ import annotations

import numpy as np

from itlkit.errors import ConfigError, UnknownNameError
from itlkit.physics.roofline import Deployment, capacity, step_coefficients
from itlkit.plan.space import Candidate, Slo
from itlkit.units import format_seconds


def deployment_of(candidate: Candidate, model: str) -> Deployment:
    """The roofline deployment of one replica of `candidate` (ConfigError when invalid)."""
    return Deployment.create(model=model, gpu=candidate.gpu, tp=candidate.tp,
                             weight_precision=candidate.weight_precision,
                             kv_precision=candidate.kv_precision)  # fmt: skip


def ttft_floor_seconds(dep: Deployment, uncached_prompt_tokens) -> np.ndarray:
    """Each prompt's GEMMs at the dense peak: no TTFT can be shorter."""
    c = step_coefficients(dep)
    tokens = np.asarray(uncached_prompt_tokens, dtype=float)
    return tokens * c.matmul_flops_per_token / dep.peak_flops_per_second


def prune_reason(candidate: Candidate, model: str, slo: Slo, workload) -> str | None:
    """Why `candidate` cannot meet `slo` for its share of the traffic (`workload`, one
    replica's), by the bounds above; None when only a simulation can tell."""
    try:
        dep = deployment_of(candidate, model)
    except (ConfigError, UnknownNameError) as exc:
        return f"not a valid deployment: {exc}"
    context = float((workload.prompt_tokens + workload.output_tokens).max(initial=1))
    if not capacity(dep, context_tokens=context).weights_fit:
        return f"the weights do not fit on {candidate.tp} x {candidate.gpu}"
    weight_read = step_coefficients(dep).weight_read_seconds
    if slo.itl_p99_seconds is not None and weight_read > slo.itl_p99_seconds:
        return (f"every step streams the weights: {format_seconds(weight_read)} per step at full "
                "bandwidth, above the ITL p99 target "
                f"{format_seconds(slo.itl_p99_seconds)}")  # fmt: skip
    tokens_per_step = candidate.spec_k + 1  # a verification step emits at most k + 1 tokens
    if slo.tpot_p99_seconds is not None and weight_read / tokens_per_step > slo.tpot_p99_seconds:
        return (f"every step streams the weights and emits at most {tokens_per_step} token(s): "
                f"{format_seconds(weight_read / tokens_per_step)} a token, above the TPOT p99 "
                f"target {format_seconds(slo.tpot_p99_seconds)}")  # fmt: skip
    if slo.ttft_p99_seconds is not None and workload.num_requests:
        uncached = workload.prompt_tokens - workload.cached_prompt_tokens
        floor = float(np.quantile(ttft_floor_seconds(dep, uncached), 0.99,
                                  method="inverted_cdf"))  # fmt: skip
        if floor > slo.ttft_p99_seconds:
            return (f"the p99 prompt's GEMMs alone take {format_seconds(floor)} at the GPU's "
                    "peak, above the TTFT p99 target "
                    f"{format_seconds(slo.ttft_p99_seconds)}")  # fmt: skip
    return None
