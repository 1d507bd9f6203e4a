"""The fit's walk across the roofline ridge (`calibration.ridge`, `fit.solve_step_terms`).

Expected values are computed here step by step from the engine model's GEMM part, max(weight
read x e, GEMMs x u) with e = 1 / efficiency and u = 1 / MFU, over steps this test invents.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from itlkit.calibration.fit import RunFeatures, linear_itl, solve_step_terms
from itlkit.calibration.ridge import ridge_of
from itlkit.physics.calibration import INTERCONNECTS

RNG = np.random.default_rng(7)


def _steps(n: int, compute_share: float):
    """n steps: weight reads of 5-15 ms, GEMMs mostly far below them (decodes) and a share
    from a third of them to thrice them (prefill chunks), token weights 1-64."""
    weight = RNG.uniform(0.005, 0.015, n)
    prefill = RNG.random(n) < compute_share
    gemm = weight * np.where(prefill, RNG.uniform(0.35, 3.0, n), RNG.uniform(0.05, 0.3, n))
    return weight, gemm, RNG.integers(1, 64, n).astype(float)


def _exact(weight, gemm, tokens, *, e: float, u: float) -> float:
    """The token-weighted mean of max(W e, G u), one step at a time."""
    total = sum(k * max(w * e, g * u) for w, g, k in zip(weight, gemm, tokens, strict=True))
    return total / tokens.sum()


@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.3, 0.8, 1.0, 2.5, 10.0, "a step's own"])
def test_the_split_at_any_ratio_is_each_step_on_its_side(ratio):
    weight, gemm, tokens = _steps(200, 0.3)
    if ratio == "a step's own":  # exactly at the ridge: W x e = G x u, the step reads
        ratio = gemm[10] / weight[10]
    ran = np.ones(200, dtype=bool)
    ran[::7] = False  # steps that did not run weigh in the mean's denominator only
    memory, compute = ridge_of(weight, gemm, tokens, ran).split(ratio)
    reads = (gemm / weight <= ratio) & ran
    assert memory == pytest.approx((tokens * weight)[reads].sum() / tokens.sum(), rel=1e-12)
    works = (gemm / weight > ratio) & ran
    assert compute == pytest.approx((tokens * gemm)[works].sum() / tokens.sum(), rel=1e-12)


def _features(weight, gemm, tokens, *, ratio: float) -> RunFeatures:
    """A run's features split at e / u = `ratio`, as a simulation at such constants splits them."""
    ridge = ridge_of(weight, gemm, tokens, np.ones(weight.size, dtype=bool))
    memory, compute = ridge.split(ratio)
    return RunFeatures(gpu_seconds=memory, compute_seconds=compute, network_seconds=0.0,
                       pcie_seconds=0.0, link_calls=(0.0,) * len(INTERCONNECTS), sequences=0.0,
                       rest_seconds=0.0, ttft_engine_seconds=0.0, first_step_seconds=0.0,
                       ridge=ridge, ratio=ratio)  # fmt: skip


def test_the_solve_moves_steps_across_the_ridge_to_the_constants_that_made_them():
    # Truth: efficiency 0.7, MFU 0.3, 1 ms host per step. Split at the fit's start (efficiency
    # 1, MFU 0.8: e / u = 0.8) the prefill steps of G / W 0.43-0.8 read, where at the truth
    # (e / u = 0.43) they compute: held on their first side, no constants reproduce the runs.
    e, u, host = 1 / 0.7, 1 / 0.3, 0.001
    runs, feats = [], []
    for i, share in enumerate((0.0, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8)):
        steps = _steps(300, share)
        itl = _exact(*steps, e=e, u=u) + host
        runs.append(SimpleNamespace(id=f"run{i}", measured={"itl_mean_seconds": itl}))
        feats.append(_features(*steps, ratio=0.8))
    values, _, undetermined = solve_step_terms(runs, feats, prior_weight=0.0, pcie_share=False)
    assert "mfu" not in undetermined
    assert values["efficiency"] == pytest.approx(0.7, rel=1e-6)
    assert values["mfu"] == pytest.approx(0.3, rel=1e-6)
    assert values["host_seconds_per_step"] == pytest.approx(host, rel=1e-6)
    for run, f in zip(runs, feats, strict=True):  # the fit's equation, re-split at its constants
        assert linear_itl(f, values) == pytest.approx(run.measured["itl_mean_seconds"], rel=1e-9)
