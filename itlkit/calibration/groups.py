"""Calibration per GPU family, engine and model class, and the errors that say how far it carries.

The global fit (`fit.calibrate`) is one set of constants for every run. Real servers differ by
GPU family more than by anything else the runs record (an A100's host and all-reduce overheads
and its reachable bandwidth are not an H100's), then by engine (vLLM V0's and SGLang's host sides
are not V1's) and by model class (an MoE's grouped-expert GEMMs run far from dense peak). Each
run is fitted in one cell of these (`physics.calibration.fit_keys`: `gpu:a100`, `gpu:h100/V0`,
`gpu:h200/SGLang/MoE`; an MoE cell with fewer than `MIN_RUNS` runs joins its engine's dense cell
on the family); the step terms and the TTFT pipeline are refitted on each cell's runs, starting
from the global constants, where a cell has at least `MIN_RUNS` runs and is not every run, once
under each step model; the group keeps the engine model unless the reference model predicts its
held-out runs' mean ITL better beyond chance (`chosen_fit`). A prediction takes the nearest
group its deployment has (`group_keys`), else the global constants. The jitter stays global.

Held-out errors are computed the cheap way the global leave-one-out is: from the features of the
fit's last simulations, the constants are re-solved without the held runs (the global ones, and
their family's group where enough of its runs remain), and the held runs are then simulated.
Leave-one-source-out holds out every run of one publisher at once: a new source is the usual case
for a user's own runs.
"""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial

from itlkit.calibration.fit import (
    GLOBAL_PCIE_SHARE,
    MIN_RUNS,
    RunFeatures,
    _with_step_terms,
    fit_step_terms,
    lent_links,
    median_abs,
    release_versions,
    residuals,
    solve_pipeline,
    solve_step_terms,
)
from itlkit.calibration.parallel import run_all
from itlkit.calibration.predict import predict_run
from itlkit.physics.calibration import GROUP_KEYS, Calibration, fit_keys
from itlkit.physics.roofline import ENGINE, REFERENCE, STEP_MODELS
from itlkit.sim.runs import Run

ITL = "itl_mean_seconds"  # the metric a group's step model is chosen by
TTFT = "ttft_mean_seconds"
# A group keeps the reference step model only where its runs show it better than the engine
# model beyond chance (`chosen_fit`): by a signed-rank test, not by the smaller median. The
# engine model prices what vLLM computes, apart from the bandwidth; the reference model's one
# efficiency also slows the GEMMs, which runs made mostly of decodes cannot check. Picked by
# the smaller median alone, the H100 cell's six vLLM 0.15.1 runs (reference 5.1 %, engine
# 7.3 %; each model the better one on three of the six) chose the reference model, whose
# prefill then ran at 0.5 x 0.79 of peak: held out, vLLM 0.14.1 serving Qwen3-32B on 8 H100
# and 8 H200 came out +7 to +31 % in mean TTFT (the engine model: -11 to +9 %).
RANK_TEST_LEVEL = 0.05
# What a prediction from a group's own constants is told of their error (`fit_groups`)
GROUP_ERROR_METRICS = (ITL, TTFT, "e2e_mean_seconds")


def group_values(calibration: Calibration) -> dict:
    """The constants a group holds (`GROUP_KEYS`)."""
    values = {key: getattr(calibration, key) for key in GROUP_KEYS}
    values["allreduce_seconds_per_call"] = dict(values["allreduce_seconds_per_call"])
    return values


def by_group(runs) -> dict[str, list[Run]]:
    """{cell: its runs} for every cell with `MIN_RUNS` runs or more that is not every run; the
    runs of a smaller cell move to their next cell (`fit_keys`) where they have one."""
    chains = {run.id: fit_keys(run.gpu, run.engine, moe=run.model.is_moe) for run in runs}
    at = dict.fromkeys(chains, 0)  # run id -> its cell's place in its chain
    moved = True
    while moved:
        groups = defaultdict(list)
        for run in runs:
            groups[chains[run.id][at[run.id]]].append(run)
        small = [run for members in groups.values() if len(members) < MIN_RUNS
                 for run in members if at[run.id] + 1 < len(chains[run.id])]  # fmt: skip
        for run in small:
            at[run.id] += 1
        moved = bool(small)
    return {key: members for key, members in groups.items()
            if MIN_RUNS <= len(members) < len(runs)}  # fmt: skip


def fit_groups(runs, calibration: Calibration, *, seed: int, prior_weight: float, log=None,
               lent: dict[str, float] | None = None):  # fmt: skip
    """({group: constants}, {group: {run id: features of the group's last simulations}},
    {group: its runs and their leave-one-out median |error| by metric, under the step model
    kept}); `lent`: the global fit's link constants, for a link no run of a group crossed."""
    cells = sorted(by_group(runs).items())
    fit = partial(_fit_group, seed=seed, prior_weight=prior_weight, lent=lent)
    # every cell under every step model at once: their simulations share the workers
    with ThreadPoolExecutor(max_workers=max(len(cells) * len(STEP_MODELS), 1)) as threads:
        pending = [[threads.submit(fit, members, replace(calibration, step_model=model))
                    for model in STEP_MODELS] for _, members in cells]  # fmt: skip
        done = [[future.result() for future in futures] for futures in pending]
    groups, feats, errors = {}, {}, {}
    for (key, group_runs), fits in zip(cells, done, strict=True):
        cal, group_feats, loo, _ = chosen_fit(fits)
        if log:
            log(f"group {key}: {len(group_runs)} runs, {cal.step_model} step model "
                "(leave-one-out ITL / TTFT "
                + ", ".join(f"{f[0].step_model} {f[2][ITL]:.1%} / {f[2].get(TTFT, 0):.1%}"
                            for f in fits)
                + f"; reference better by chance: p {reference_gain_p(fits):.3f})")  # fmt: skip
        groups[key] = group_values(cal)
        feats[key] = {run.id: f for run, f in zip(group_runs, group_feats, strict=True)}
        errors[key] = {"runs": len(group_runs),
                       **{k: loo[k] for k in GROUP_ERROR_METRICS if k in loo}}  # fmt: skip
    return groups, feats, errors


def _fit_group(runs, start: Calibration, *, seed: int, prior_weight: float, lent=None):
    """(the group's constants under `start`'s step model, their features, their leave-one-out
    median |error| by metric, each run's held-out |errors|): `chosen_fit` keeps one step model
    by them (cross-validation; the reference model's one MFU, or the engine's terms)."""
    solver = partial(solve_step_terms, prior_weight=prior_weight, lent=lent, prior_mfu=start.mfu)
    cal, feats, *_ = fit_step_terms(runs, start, seed=seed, solver=solver)
    steps, seconds = solve_pipeline(runs, feats, fallback=start)
    cal = replace(cal, ttft_pipeline_steps=steps, ttft_pipeline_seconds=seconds, groups={})
    by_id = {run.id: f for run, f in zip(runs, feats, strict=True)}
    folds = held_out_errors(runs, by_id, {}, cal, seed=seed, prior_weight=prior_weight,
                            key=lambda run: run.id, lent=lent, pcie_share=True,
                            prior_mfu=start.mfu)  # fmt: skip
    return cal, feats, median_abs(folds), folds


def chosen_fit(fits):
    """The fit a group keeps of its fits under each step model ((calibration, features, median
    errors, {run id: its held-out |errors|}) each): the engine model's, unless the reference
    model predicted its runs' held-out mean ITL better beyond chance (`reference_gain_p` below
    RANK_TEST_LEVEL)."""
    by_model = {fit[0].step_model: fit for fit in fits}
    engine, reference = by_model[ENGINE], by_model[REFERENCE]
    return reference if reference_gain_p(fits) < RANK_TEST_LEVEL else engine


def reference_gain_p(fits) -> float:
    """How likely chance alone makes the reference model's held-out |errors| of mean ITL this
    much smaller than the engine model's, run by run: the one-sided Wilcoxon signed-rank test
    of the paired differences (scipy's: exact for small samples, ties and zeros handled); 1
    where they never differ. A run either model could not predict is left out."""
    from scipy.stats import wilcoxon  # half a second to import: `calibrate` only

    by_model = {fit[0].step_model: fit[3] for fit in fits}
    engine, reference = by_model[ENGINE], by_model[REFERENCE]
    gains = [reference[run][ITL] - engine[run][ITL] for run in reference
             if ITL in reference[run] and ITL in engine.get(run, {})]  # fmt: skip
    if not any(gains):
        return 1.0
    return float(wilcoxon(gains, alternative="less").pvalue)


def _solve(runs, feats, base: Calibration, prior_weight: float, lent=None, pcie_share=True,
           fallback: Calibration | None = None, prior_mfu: float | None = None):  # fmt: skip
    """(the calibration solved on these runs' features, the link constants it determined);
    `fallback`: a group's global constants, for a TTFT pipeline its runs cannot resolve;
    `prior_mfu`: where the MFU's prior is centred (`solve_step_terms`)."""
    values, _, undetermined = solve_step_terms(runs, feats, prior_weight=prior_weight, lent=lent,
                                               pcie_share=pcie_share,
                                               prior_mfu=prior_mfu)  # fmt: skip
    steps, seconds = solve_pipeline(runs, feats, fallback=fallback)
    cal = _with_step_terms(base, values)
    cal = replace(cal, ttft_pipeline_steps=steps, ttft_pipeline_seconds=seconds)
    return cal, lent_links(values, undetermined)


def refit_without(runs, feats: dict[str, RunFeatures],
                  group_feats: dict[str, dict[str, RunFeatures]], held: set[str],
                  calibration: Calibration, prior_weight: float,
                  lent=None, pcie_share: bool = GLOBAL_PCIE_SHARE,
                  prior_mfu: float | None = None) -> Calibration:  # fmt: skip
    """The calibration re-solved without the `held` runs (global, then each group that keeps
    `MIN_RUNS` runs, lent the links and centred on the MFU the re-solved global constants
    determined); `pcie_share`: whether the first solve fits the PCIe share (a group's own
    folds: it does); `prior_mfu`: the first solve's MFU prior (a group's own folds: the global
    fit's MFU)."""
    train = [run for run in runs if run.id not in held]
    base = [run for run in train if run.id in feats]  # the global fit's runs (`global_runs`)
    cal, links = _solve(base, [feats[run.id] for run in base], calibration, prior_weight, lent,
                        pcie_share=pcie_share, prior_mfu=prior_mfu)  # fmt: skip
    groups, versions = {}, {}
    for key, key_feats in group_feats.items():
        members = [run for run in train if run.id in key_feats]
        versions[f"version@{key}"] = release_versions(members)  # for `nearest_release_cell`
        versions[f"gpu@{key}"] = sorted({run.gpu for run in members})  # for lending's scale
        if key in calibration.groups and len(members) >= MIN_RUNS:
            group_cal, _ = _solve(
                members,
                [key_feats[run.id] for run in members],
                calibration.group_calibration(key),
                prior_weight,
                links,
                fallback=cal,
                prior_mfu=cal.mfu,
            )
            groups[key] = group_values(group_cal)
    return replace(cal, groups=groups, coverage=versions)


def held_out_errors(runs, feats, group_feats, calibration: Calibration, *, seed: int,
                    prior_weight: float, key, lent=None,
                    pcie_share: bool = GLOBAL_PCIE_SHARE,
                    prior_mfu: float | None = None) -> dict[str, dict]:  # fmt: skip
    """{held-out set: {metric: median |error|}} holding out each set of runs `key(run)` names
    (`lent`: link constants for a fit whose runs crossed no such link, `solve_step_terms`;
    `prior_mfu`: the first solve's MFU prior, `refit_without`)."""
    sets = defaultdict(list)
    for run in runs:
        sets[key(run)].append(run)
    held_runs, held_cals, names = [], [], []
    for name, held in sorted(sets.items()):
        if len(held) == len(runs):
            continue
        cal = refit_without(runs, feats, group_feats, {run.id for run in held}, calibration,
                            prior_weight, lent, pcie_share, prior_mfu)  # fmt: skip
        held_runs += held
        held_cals += [cal] * len(held)
        names += [name] * len(held)
    predicted = run_all(partial(predict_run, seed=seed), held_runs, held_cals)
    rows = defaultdict(dict)
    for name, run, prediction in zip(names, held_runs, predicted, strict=True):
        rows[name][run.id] = residuals(run, prediction)
    return {name: median_abs(rows[name]) for name in sorted(rows)}
