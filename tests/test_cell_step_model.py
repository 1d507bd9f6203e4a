"""A calibration cell's step model and MFU: chosen by what its runs can tell, not by noise.

A cell (GPU family, engine, model class) keeps the reference step model only where its runs
show it better than the engine model beyond chance (a one-sided Wilcoxon signed-rank test of
the paired held-out errors), and a cell's MFU prior is centred on the global fit's MFU. The
expected p-values below are counted by hand from the signed-rank distribution.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from itlkit.calibration.fit import RunFeatures, solve_step_terms
from itlkit.calibration.groups import ITL, RANK_TEST_LEVEL, chosen_fit, reference_gain_p
from itlkit.physics.roofline import ENGINE, ENGINE_MFU, REFERENCE


def _feats(gpu_seconds, compute_seconds):
    return RunFeatures(gpu_seconds=gpu_seconds, compute_seconds=compute_seconds,
                       network_seconds=0.0, pcie_seconds=0.0, link_calls=(0.0, 0.0, 0.0),
                       sequences=8.0, rest_seconds=0.0, ttft_engine_seconds=0.1,
                       first_step_seconds=0.02)  # fmt: skip


def _runs(feats, *, efficiency, mfu):
    """Runs measured as `efficiency` of the GPU time plus compute at `mfu`, 1 ms per step."""
    itl = [f.gpu_seconds / efficiency + f.compute_seconds / mfu + 1e-3 for f in feats]
    return [SimpleNamespace(id=str(i), measured={ITL: v}) for i, v in enumerate(itl)]


def test_runs_that_cannot_tell_the_mfu_leave_it_at_the_prior_they_are_given():
    # decode-bound runs: compute is a nanosecond of a 10-30 ms step, so only the prior decides
    feats = [_feats(0.010, 1e-9), _feats(0.020, 1e-9), _feats(0.030, 1e-9), _feats(0.015, 1e-9)]
    runs = _runs(feats, efficiency=0.8, mfu=0.6)
    own, _, _ = solve_step_terms(runs, feats, prior_weight=0.1)
    centred, _, _ = solve_step_terms(runs, feats, prior_weight=0.1, prior_mfu=0.56)
    assert own["mfu"] == pytest.approx(ENGINE_MFU, rel=1e-3)
    assert centred["mfu"] == pytest.approx(0.56, rel=1e-3)
    # the MFU's prior moves nothing else: the efficiency is the decodes' either way
    assert centred["efficiency"] == pytest.approx(own["efficiency"], rel=1e-6)


def test_runs_that_do_tell_the_mfu_outweigh_the_prior():
    # prefill-heavy runs: compute is half the step and varies apart from the GPU time
    feats = [_feats(0.010, 0.020), _feats(0.020, 0.005), _feats(0.030, 0.040), _feats(0.015, 0.0)]
    runs = _runs(feats, efficiency=0.8, mfu=0.6)
    for prior in (None, 0.3, 0.9):
        got, _, _ = solve_step_terms(runs, feats, prior_weight=0.0, prior_mfu=prior)
        assert got["mfu"] == pytest.approx(0.6, rel=1e-6)


def _p(gains):
    """reference_gain_p of fits whose reference |errors| are the engine's plus `gains`."""
    engine = [0.5] * len(gains)
    reference = [0.5 + g for g in gains]
    return reference_gain_p([_fit(ENGINE, engine), _fit(REFERENCE, reference)])


def test_the_reference_model_is_kept_only_when_its_runs_show_it_better_beyond_chance():
    assert RANK_TEST_LEVEL == 0.05
    # 8 runs, the reference model 0.03-0.14 better on six, 0.012 and 0.017 worse on two: the
    # losses rank 1 and 2, W = 3; 5 of the 2^8 sign patterns reach W <= 3 ({}, {1}, {2}, {3},
    # {1, 2}): p = 5 / 256
    assert _p([0.012, 0.017, -0.127, -0.136, -0.033, -0.129, -0.036, -0.047]) == pytest.approx(
        5 / 256)  # fmt: skip
    # 6 runs, three each way (the H100 cell of vLLM 0.15.1): losses rank 1, 2, 4, W = 7; 18 of
    # the 64 patterns reach W <= 7 (sums 0-7: 1, 1, 1, 2, 2, 3, 4, 4 subsets of 1..6), though
    # the reference's median is the smaller
    assert _p([-0.022, 0.010, -0.056, 0.011, -0.046, 0.044]) == pytest.approx(18 / 64)
    # better on every one of 5 runs: p = 1 / 32; on every one of 4: 1 / 16
    assert _p([-0.01, -0.02, -0.03, -0.04, -0.05]) == pytest.approx(1 / 32)
    assert _p([-0.01, -0.02, -0.03, -0.04]) == pytest.approx(1 / 16)
    # no difference anywhere: nothing to show
    assert _p([0.0, 0.0, 0.0]) == 1.0


def _fit(model, errors):
    cal = SimpleNamespace(step_model=model)
    return (cal, [], {}, {str(i): {ITL: round(e, 9)} for i, e in enumerate(errors)})


def test_a_cell_keeps_the_engine_model_unless_the_test_says_otherwise():
    engine = [0.033, 0.003, 0.079, 0.068, 0.157, 0.080]
    even = [0.011, 0.013, 0.023, 0.079, 0.111, 0.124]  # smaller median, 3 of 6 better
    clear = [e - 0.02 * (i + 1) for i, e in enumerate([0.2] * 6)]  # better on all six
    assert chosen_fit([_fit(REFERENCE, even), _fit(ENGINE, engine)])[0].step_model == ENGINE
    chosen = chosen_fit([_fit(ENGINE, [0.2] * 6), _fit(REFERENCE, clear)])
    assert chosen[0].step_model == REFERENCE
    # a run one model could not predict is left out of the pairs, not counted as a tie
    partial = _fit(ENGINE, [0.2] * 6)
    partial[3]["5"] = {}
    assert chosen_fit([partial, _fit(REFERENCE, clear)])[0].step_model == REFERENCE


def test_a_majority_of_small_wins_against_large_losses_keeps_the_engine_model():
    # better by 0.001-0.004 on four runs, worse by 0.05 and 0.06 on two: a majority, a smaller
    # median, but the losses rank 5 and 6: W = 11 of at most 21, p = 0.89
    engine = [0.10] * 6
    reference = [0.099, 0.098, 0.097, 0.096, 0.15, 0.16]
    assert chosen_fit([_fit(REFERENCE, reference), _fit(ENGINE, engine)])[0].step_model == ENGINE


class _Stop(Exception):
    pass


def test_a_cell_centres_its_mfu_on_the_global_fits(monkeypatch):
    from itlkit.calibration import groups
    from itlkit.physics.calibration import Calibration

    seen = {}

    def capture(runs, start, *, seed, solver):
        seen["solver"] = solver
        raise _Stop

    monkeypatch.setattr(groups, "fit_step_terms", capture)
    with pytest.raises(_Stop):
        groups._fit_group([], Calibration(mfu=0.56, step_model=ENGINE), seed=0, prior_weight=0.1)
    feats = [_feats(0.010, 1e-9), _feats(0.020, 1e-9), _feats(0.030, 1e-9)]
    got, _, _ = seen["solver"](_runs(feats, efficiency=0.8, mfu=0.6), feats)
    assert got["mfu"] == pytest.approx(0.56, rel=1e-3)
    # and its leave-one-out folds re-solve it on the same prior
    monkeypatch.setattr(groups, "fit_step_terms", lambda runs, start, **k: (start, [], {}, {}, 1))
    monkeypatch.setattr(groups, "solve_pipeline", lambda *a, **k: (0.0, 0.0))
    monkeypatch.setattr(groups, "held_out_errors", lambda *a, **k: seen.update(folds=k) or {})
    groups._fit_group([], Calibration(mfu=0.56, step_model=ENGINE), seed=0, prior_weight=0.1)
    assert seen["folds"]["prior_mfu"] == 0.56


def test_a_held_out_fold_centres_each_cell_on_the_folds_own_global_mfu(monkeypatch):
    from itlkit.calibration import groups
    from itlkit.physics.calibration import Calibration

    priors = []

    def solve(runs, feats, base, prior_weight, lent=None, pcie_share=True, fallback=None,
              prior_mfu=None):  # fmt: skip
        priors.append(prior_mfu)
        return Calibration(mfu=0.5 if fallback is None else 0.7), {}

    monkeypatch.setattr(groups, "_solve", solve)
    runs = [SimpleNamespace(id=i, release=None, gpu="h100-sxm") for i in "abcd"]
    cells = {"gpu:h100": dict.fromkeys("abcd")}
    cal = Calibration(groups={"gpu:h100": groups.group_values(Calibration())})
    groups.refit_without(runs, dict.fromkeys("abcd"), cells, {"a"}, cal, prior_weight=0.1)
    assert priors == [None, 0.5]  # the global solve on its own prior, the cell on its MFU
    priors.clear()
    groups.refit_without(runs, dict.fromkeys("abcd"), cells, {"a"}, cal, prior_weight=0.1,
                         prior_mfu=0.6)  # fmt: skip
    assert priors == [0.6, 0.5]
