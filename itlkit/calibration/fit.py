"""`itlkit calibrate`: fit the calibration's constants to real runs, and say how well they hold.

The step-time constants enter each step linearly once the engine's schedule is fixed:

    step = e x GPU time + b x all-reduce calls + host per step + host per sequence x sequences

with e = 1 / efficiency and b = e x all-reduce latency per call. So a run's ITL mean, as the
harness defines it, is linear in (e, b, host per step, host per sequence) around a simulation:
its token-weighted means of GPU time, calls and sequences are the coefficients. The fit
alternates: simulate every run at the current constants, solve the bounded least squares of the
relative ITL errors for new constants, simulate again, until the constants stop moving (the
schedule's response to slower steps, more sequences in flight, is what the repeat catches).
The TTFT pipeline (steps + seconds) is then fitted to the relative TTFT errors by least absolute
deviations, on the runs that can resolve it: not those whose TTFT beats an uncached prefill
(`ttft_floor`), nor those that waited more than PIPELINE_MAX_TTFT_SECONDS (a cell of such runs
takes the global pipeline); it moves no step, so no repeat is needed. The step jitter is fitted
last, to the per-token ITL quantiles of the runs that report them (a one-dimensional search,
each point a simulation).

Leave-one-out: for each run, the constants are refitted on the other runs from the features of
the global fit's last simulations (one linear solve; the schedule is not re-simulated per fold),
and the held-out run is then simulated with them. Runs whose arrival rates are unknown cannot be
simulated and are left out of the fit (said in the output); so is a fit the data cannot support.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from itlkit.calibration.parallel import run_all
from itlkit.calibration.predict import (
    RunPrediction,
    client_latencies,
    harness_itl_mean,
    predict_run,
    run_deployment,
    simulate_run,
    token_quantiles,
)
from itlkit.calibration.ttft_floor import served_from_cache
from itlkit.errors import ConfigError
from itlkit.physics.calibration import BOUNDS, INTERCONNECTS, Calibration
from itlkit.physics.roofline import (
    ALLREDUCES_PER_LAYER,
    ENGINE,
    ENGINE_MFU,
    NETWORK_BYTES_PER_SECOND,
    step_coefficients,
)
from itlkit.sim.results import SimulationResult
from itlkit.sim.run_workload import unknown_workload
from itlkit.sim.runs import Run
from itlkit.units import format_release

# The per-call all-reduce latency is fitted per link the runs' TP crosses (NVLink, PCIe, network).
LINK_TERMS = tuple(f"allreduce_seconds_per_call.{link}" for link in INTERCONNECTS)
STEP_TERMS = ("efficiency", "mfu", *LINK_TERMS, "host_seconds_per_step",
              "host_seconds_per_sequence", "network_bytes_per_second",
              "pcie_bandwidth_share")  # fmt: skip
MAX_ROUNDS = 8
CONVERGED = 0.003  # relative change of every ITL prediction between two rounds
# a typical change of each
SCALE = np.array([0.1, 0.1, 10e-6, 30e-6, 100e-6, 1e-3, 10e-6, 1.0, 0.1])
MIN_RUNS = 3
# A TTFT pipeline is tens of milliseconds (the bundled global fit: 21 ms). Against a TTFT mean
# above this, spent queueing behind a burst, it is a few percent at most, below what the fit's
# other errors leave: such runs cannot tell its size, and their slight relative pulls drove a
# cell made of them alone to a bound (vLLM V0 on H100 64 GB, 10 steps, whose bursts wait 58 s
# or more, then 75-520% over on short bursts of 10 and 40 prompts on vLLM 0.5.4).
PIPELINE_MAX_TTFT_SECONDS = 2.0
# A weak prior on (1 / efficiency, 1 / MFU, its x all-reduce latency over NVLink, PCIe and a
# network, host per step, host per sequence, its x the network's slowness against 100 Gb/s,
# its x PCIe's slowness against the datasheet):
# centred on the uncalibrated roofline (no overheads), with spreads of physically plausible
# size; each counts as a pseudo-observation weighted PRIOR_WEIGHT against the runs' relative
# errors. It keeps a constant that few runs see (the all-reduce latency: 3 of 6 runs use TP)
# from trading off freely against efficiency. The weight 0.1 was picked from 0, 0.02, 0.05, 0.1,
# 0.2, 0.4 by the leave-one-out ITL error on the fixture (one global choice, not per run).
PRIOR_MEAN = np.array([1.0, 1.0 / ENGINE_MFU, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0])
# A cell's MFU is centred on the global fit's instead (`solve_step_terms(prior_mfu=...)`): runs
# whose steps are mostly decodes cannot tell their MFU, and the roofline's 0.8 is the best shape
# an H100 reaches, not the steps vLLM runs. The H100 cell's six vLLM 0.15.1 runs left it at the
# prior's 0.800 while the 170 vLLM runs put it at 0.56; held out, vLLM 0.14.1 serving Qwen3-32B
# on 8 H100 and 8 H200 then came out 14 to 28 % fast in mean TTFT on the engine model.
PRIOR_SPREAD = np.array([0.5, 0.5, 30e-6, 100e-6, 500e-6, 2e-3, 50e-6, 10.0, 10.0])
PRIOR_WEIGHT = 0.1
# The TTFT pipeline's least absolute deviations: reweighting rounds, and the smallest residual
# a weight divides by (1 % relative error; below it a run counts as fitted).
LAD_ROUNDS = 20
LAD_FLOOR = 0.01
# Whether the global fit fits the PCIe bandwidth share: no. It is fitted within a cell (the
# runs over PCIe are one publisher's A100 pods, at 0.28 of the datasheet); in the global fit it
# traded against the host constants every other deployment inherits (host per step 0.16 ->
# 1.06 ms) and put new publishers farther off: with a full refit per publisher
# (benchmarks/bench_loso.py), BSC 19.1 -> 26.6 % and inference-sim 25.0 -> 32.6 % in mean ITL.
GLOBAL_PCIE_SHARE = False
# The jitter search (`fit_jitter`): the log spread's range, the three first points (simulated
# at once), at most this many more, and the distance between the next parabola's minimum and a
# point already simulated below which it stops.
JITTER_RANGE = (0.0, 0.6)
JITTER_START = (0.1, 0.25, 0.4)
JITTER_MORE = 5
JITTER_TOLERANCE = 0.005


@dataclass(frozen=True)
class RunFeatures:
    """What one simulated run's ITL mean is made of (token-weighted means over its steps)."""

    gpu_seconds: float  # the roofline's GPU time at efficiency 1, all-reduce latency excluded
    compute_seconds: float  # engine model: GEMM and attention time at MFU 1 (reference: 0)
    network_seconds: float  # engine model, TP across nodes: all-reduce bytes at 100 Gb/s
    pcie_seconds: float  # engine model, TP over PCIe: all-reduce bytes at the datasheet's PCIe
    link_calls: tuple[float, ...]  # all-reduce calls per step over each of INTERCONNECTS
    sequences: float  # sequences in a step
    rest_seconds: float  # what the step terms do not explain (preemption gaps, ...)
    ttft_engine_seconds: float  # the engine's mean TTFT, before the pipeline
    first_step_seconds: float  # mean duration of the step that emitted a first token


def simulable(runs) -> tuple[list[Run], list[str]]:
    """(runs that can be simulated, one line for each that cannot)."""
    ok, skipped = [], []
    for run in runs:
        why = None if run.replay is not None else unknown_workload(run)
        if why is None:
            ok.append(run)
        else:
            skipped.append(f"{run.id}: {why}, not used")
    return ok, skipped


def features(run: Run, result: SimulationResult, calibration: Calibration) -> RunFeatures:
    """Split a simulated run's steps into the fit's terms (exact for a jitter-free run)."""
    calibration = calibration.for_run(run)
    dep = run_deployment(run, calibration)
    c = step_coefficients(dep, efficiency=calibration.efficiency)
    calls = ALLREDUCES_PER_LAYER * dep.model.num_layers if dep.allreduce and dep.tp > 1 else 0
    sequences = result.step_decode_tokens + (result.step_prefill_tokens > 0)
    host = c.host_seconds(sequences)
    latency = calls * dep.allreduce_latency_seconds
    if dep.is_engine:
        gpu, compute, network, pcie = _engine_parts(result, c, calibration, latency, dep)
    else:
        gpu = (result.step_duration_seconds - host) * calibration.efficiency - latency
        compute = network = pcie = np.zeros_like(gpu)
    weights = result.step_itl_observations.astype(float)
    mean = lambda values: float((values * weights).sum() / weights.sum())  # noqa: E731
    engine_only = replace(calibration, ttft_pipeline_steps=0.0, ttft_pipeline_seconds=0.0)
    ttft, e2e = client_latencies(run, result, engine_only)
    return RunFeatures(
        gpu_seconds=mean(gpu),
        compute_seconds=mean(compute),
        network_seconds=mean(network),
        pcie_seconds=mean(pcie),
        link_calls=tuple(float(calls) if dep.link_kind == k else 0.0 for k in INTERCONNECTS),
        sequences=mean(sequences),
        rest_seconds=harness_itl_mean(run, ttft, e2e) - mean(result.step_duration_seconds),
        ttft_engine_seconds=float(ttft.mean()),
        first_step_seconds=first_token_step_seconds(result),
    )


def _engine_parts(result: SimulationResult, c, calibration: Calibration, latency: float, dep):
    """Per step of the engine model: (memory-side seconds at efficiency 1, compute-side
    seconds at MFU 1, network bytes' seconds at 100 Gb/s, PCIe bytes' seconds at the GPU's
    datasheet PCIe bandwidth). The step is max(weight x e, GEMMs x u) + (KV + link bytes) x e +
    attention x u + latency x e + host (e = 1 / efficiency, u = 1 / MFU); the KV read, which the
    log does not keep, is what the duration leaves once the other terms are known. Over a
    network or PCIe the link bytes are a term of their own."""
    link_kind = dep.link_kind
    decode = result.step_decode_tokens.astype(float)
    prefill = result.step_prefill_tokens.astype(float)
    tokens, sequences = decode + prefill, decode + (prefill > 0)
    e, u = 1.0 / calibration.efficiency, 1.0 / calibration.mfu
    weight = np.broadcast_to(c.weight_read(tokens), tokens.shape)
    gemm = c.matmul_seconds(tokens, sequences) / u
    attention = c.attention_flops(chunk_tokens=prefill) / c.flops_per_second / u
    link = c.allreduce_bytes(tokens) / c.link_bytes_per_second
    memory_bound = weight * e >= gemm * u
    known = np.where(memory_bound, weight * e, gemm * u) + attention * u + (link + latency) * e
    kv = (result.step_duration_seconds - c.host_seconds(sequences) - known) / e
    ran = tokens > 0
    apart = link_kind in ("network", "pcie")
    memory = np.where(ran, np.where(memory_bound, weight, 0.0) + kv + (0 if apart else link), 0.0)
    compute = np.where(ran, np.where(memory_bound, 0.0, gemm) + attention, 0.0)
    none = np.zeros_like(memory)
    if link_kind == "network":
        return memory, compute, np.where(ran, link * c.link_bytes_per_second
                                         / NETWORK_BYTES_PER_SECOND, 0.0), none  # fmt: skip
    if link_kind == "pcie":
        datasheet = dep.gpu.pcie_bytes_per_second
        return memory, compute, none, np.where(ran, link * c.link_bytes_per_second / datasheet, 0.0)
    return memory, compute, none, none


def first_token_step_seconds(result: SimulationResult) -> float:
    """Mean duration of the steps in which the requests got their first token."""
    first = result.first_token_seconds[~np.isnan(result.first_token_seconds)]
    ends = result.step_end_seconds
    at = np.clip(np.searchsorted(ends, first, side="left"), 0, ends.size - 1)
    return float(result.step_duration_seconds[at].mean())


def _bounded_lstsq(a: np.ndarray, y: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Least squares with box bounds: solve, pin the coordinates that leave their box, repeat."""
    free = np.ones(a.shape[1], dtype=bool)
    x = np.clip(np.zeros(a.shape[1]), low, high)
    for _ in range(a.shape[1] + 1):
        rhs = y - a[:, ~free] @ x[~free]
        x[free] = np.linalg.lstsq(a[:, free], rhs, rcond=None)[0] if free.any() else x[free]
        out = free & ((x < low) | (x > high))
        if not out.any():
            return x
        x = np.clip(x, low, high)
        free &= ~out
    return x


def step_design(runs, feats, measured) -> tuple[np.ndarray, np.ndarray]:
    """Rows of the relative ITL equations: (features / measured, 1 - rest / measured)."""
    rows, rhs = [], []
    for run, f in zip(runs, feats, strict=True):
        m = measured[run.id]
        rows.append([f.gpu_seconds / m, f.compute_seconds / m, *(c / m for c in f.link_calls),
                     1.0 / m, f.sequences / m, f.network_seconds / m,
                     f.pcie_seconds / m])  # fmt: skip
        rhs.append(1.0 - f.rest_seconds / m)
    return np.array(rows), np.array(rhs)


def solve_step_terms(
    runs, feats, *, prior_weight: float = PRIOR_WEIGHT, lent: dict[str, float] | None = None,
    pcie_share: bool = True, prior_mfu: float | None = None,
) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:  # fmt: skip
    """(constants, standard errors, undetermined) of the step terms from these runs' features;
    a link (or network bandwidth) none of them crossed takes its value from `lent` where it has
    one (a group: the global constants fitted on runs that crossed it), else NVLink's.
    `pcie_share` False leaves the PCIe bandwidth at the datasheet's (`GLOBAL_PCIE_SHARE`);
    `prior_mfu` centres the MFU's prior there (a group: the global fit's MFU), not at
    ENGINE_MFU."""
    measured = {run.id: run.measured["itl_mean_seconds"] for run in runs}
    a, y = step_design(runs, feats, measured)
    undetermined = {}
    if not any(f.compute_seconds for f in feats):
        a[:, 1] = 0.0
        undetermined["mfu"] = "the reference step model prices every GEMM at one MFU: not fitted"
    for i, (link, key) in enumerate(zip(INTERCONNECTS, LINK_TERMS, strict=True)):
        if not any(f.link_calls[i] for f in feats):
            a[:, 2 + i] = 0.0
            undetermined[key] = f"no run with tensor parallelism over {link}: left at 0"
    if not any(f.network_seconds for f in feats):
        a[:, -2] = 0.0
        undetermined["network_bytes_per_second"] = "no run with TP across nodes: 100 Gb/s is used"
    if not pcie_share:  # its bytes at the datasheet's bandwidth, over the efficiency
        a[:, 0] += a[:, -1]
        a[:, -1] = 0.0
        undetermined["pcie_bandwidth_share"] = "fitted in a cell only: the datasheet's is used"
    elif not any(f.pcie_seconds for f in feats):
        a[:, -1] = 0.0
        undetermined["pcie_bandwidth_share"] = "no run with TP over PCIe: the datasheet's is used"
    link_high = [20 * BOUNDS["allreduce_seconds_per_call"][1]] * len(INTERCONNECTS)
    low = np.zeros(len(STEP_TERMS))
    low[:2] = 1.0
    low[-2:] = 0.01
    hosts = [BOUNDS["host_seconds_per_step"][1], BOUNDS["host_seconds_per_sequence"][1]]
    high = np.array([1 / BOUNDS["efficiency"][0], 1 / BOUNDS["mfu"][0], *link_high, *hosts,
                     100.0, 100.0])  # fmt: skip
    weight = prior_weight / PRIOR_SPREAD
    mean = PRIOR_MEAN.copy()
    if prior_mfu is not None:
        mean[1] = 1.0 / prior_mfu
    x = _bounded_lstsq(np.vstack([a, np.diag(weight)]), np.concatenate([y, weight * mean]),
                       low, high)  # fmt: skip
    e, u, *links, h0, h1, v, vp = (float(v) for v in x)
    network = np.clip(e * NETWORK_BYTES_PER_SECOND / v, *BOUNDS["network_bytes_per_second"])
    share = np.clip(e / vp, *BOUNDS["pcie_bandwidth_share"])
    values = {"efficiency": 1.0 / e, "mfu": 1.0 / u,
              **{key: b / e for key, b in zip(LINK_TERMS, links, strict=True)},
              "host_seconds_per_step": h0, "host_seconds_per_sequence": h1,
              "network_bytes_per_second": float(network),
              "pcie_bandwidth_share": float(share)}  # fmt: skip
    nvlink = LINK_TERMS[0]
    if "network_bytes_per_second" in undetermined:
        values["network_bytes_per_second"] = NETWORK_BYTES_PER_SECOND
    if "pcie_bandwidth_share" in undetermined:
        values["pcie_bandwidth_share"] = 1.0
    lent = {key: v for key, v in (lent or {}).items() if key in undetermined}
    for key, value in lent.items():
        values[key] = value
        undetermined[key] = "no run here crossed that link: the global constant is used"
    for key in LINK_TERMS[1:]:  # a link no run crossed: the NVLink latency, said so
        if key in undetermined and nvlink not in undetermined and key not in lent:
            values[key] = values[nvlink]
            undetermined[key] = undetermined[key].replace("left at 0", "the NVLink value is used")
    return values, _standard_errors(a, y, x, e), undetermined


def _standard_errors(a, y, x, e) -> dict[str, float]:
    """One standard error per step constant, from the relative residuals (nan if unknowable)."""
    dof = a.shape[0] - np.linalg.matrix_rank(a)
    if dof <= 0:
        return dict.fromkeys(STEP_TERMS, math.nan)
    sigma2 = float(((a @ x - y) ** 2).sum() / dof)
    cov = sigma2 * np.linalg.pinv(a.T @ a)
    se = np.sqrt(np.clip(np.diag(cov), 0, None))
    n = len(LINK_TERMS)
    return {"efficiency": float(se[0] / e**2), "mfu": float(se[1] * (1 / x[1]) ** 2),
            **{key: float(se[2 + i] / e) for i, key in enumerate(LINK_TERMS)},
            "host_seconds_per_step": float(se[2 + n]),
            "host_seconds_per_sequence": float(se[3 + n]),
            "network_bytes_per_second": float(se[4 + n] * e * NETWORK_BYTES_PER_SECOND
                                              / x[4 + n] ** 2),
            "pcie_bandwidth_share": float(se[5 + n] * e / x[5 + n] ** 2)}  # fmt: skip


def thin_solver(base: Calibration):
    """For one or two runs: refit the efficiency (and with two, the host time per step) from
    `base`, keeping its other step constants."""
    per_call = [base.allreduce_seconds_per_call.get(link, 0.0) for link in INTERCONNECTS]

    def solve(runs, feats):
        free = min(len(runs), 2)
        rows, rhs = [], []
        for run, f in zip(runs, feats, strict=True):
            m = run.measured["itl_mean_seconds"]
            held = f.rest_seconds + base.host_seconds_per_sequence * f.sequences
            held += f.compute_seconds / base.mfu
            held += f.network_seconds * NETWORK_BYTES_PER_SECOND / base.network_bytes_per_second
            if free < 2:
                held += base.host_seconds_per_step
            links = sum(a * c for a, c in zip(per_call, f.link_calls, strict=True))
            links += f.pcie_seconds / base.pcie_bandwidth_share  # over the efficiency, as links
            rows.append([(f.gpu_seconds + links) / m, 1.0 / m][:free])
            rhs.append(1.0 - held / m)
        low = np.array([1.0, 0.0])[:free]
        high = np.array([1 / BOUNDS["efficiency"][0], BOUNDS["host_seconds_per_step"][1]])[:free]
        x = _bounded_lstsq(np.array(rows), np.array(rhs), low, high)
        values = {**_step_values(base), "efficiency": 1.0 / float(x[0])}
        if free == 2:
            values["host_seconds_per_step"] = float(x[1])
        fitted = ("efficiency", "host_seconds_per_step")[:free]
        why = f"too few runs ({len(runs)}) to fit: kept from the base calibration {base.name!r}"
        kept = {k: why for k in STEP_TERMS if k not in fitted}
        return values, dict.fromkeys(STEP_TERMS, math.nan), kept

    return solve


def solve_pipeline_thin(runs, feats, base: Calibration) -> tuple[float, float]:
    """The TTFT pipeline's seconds from fewer than 3 runs, its steps kept from `base`."""
    steps = base.ttft_pipeline_steps
    gaps = [run.measured["ttft_mean_seconds"] - f.ttft_engine_seconds - steps * f.first_step_seconds
            for run, f in zip(runs, feats, strict=True)]  # fmt: skip
    return steps, float(np.clip(np.mean(gaps), *BOUNDS["ttft_pipeline_seconds"]))


def resolves_pipeline(run: Run) -> bool:
    """Whether the run's measured TTFT mean can tell the TTFT pipeline's size: not served from
    the prefix cache (`ttft_floor`), and at most PIPELINE_MAX_TTFT_SECONDS."""
    return run.measured["ttft_mean_seconds"] <= PIPELINE_MAX_TTFT_SECONDS and not (
        served_from_cache(run))  # fmt: skip


def solve_pipeline(runs, feats, fallback: Calibration | None = None) -> tuple[float, float]:
    """TTFT pipeline (steps, seconds) from the relative TTFT errors of the runs that resolve it
    (`resolves_pipeline`). With a `fallback` (a group's: the global constants), fewer than
    MIN_RUNS such runs fit the seconds alone, its steps kept (`solve_pipeline_thin`), and none
    keep both; without one (the global fit), every run not served from the cache is used."""
    pairs = [(run, f) for run, f in zip(runs, feats, strict=True) if resolves_pipeline(run)]
    if len(pairs) < MIN_RUNS and fallback is not None:
        if not pairs:
            return fallback.ttft_pipeline_steps, fallback.ttft_pipeline_seconds
        return solve_pipeline_thin(*zip(*pairs, strict=True), fallback)
    if len(pairs) < MIN_RUNS:
        pairs = [(run, f) for run, f in zip(runs, feats, strict=True)
                 if not served_from_cache(run)]  # fmt: skip
    rows, rhs = [], []
    for run, f in pairs:
        m = run.measured["ttft_mean_seconds"]
        rows.append([f.first_step_seconds / m, 1.0 / m])
        rhs.append(1.0 - f.ttft_engine_seconds / m)
    low = np.array([BOUNDS["ttft_pipeline_steps"][0], BOUNDS["ttft_pipeline_seconds"][0]])
    high = np.array([BOUNDS["ttft_pipeline_steps"][1], BOUNDS["ttft_pipeline_seconds"][1]])
    steps, seconds = _bounded_lad(np.array(rows), np.array(rhs), low, high)
    return float(steps), float(seconds)


def _bounded_lad(a: np.ndarray, y: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Least absolute deviations with box bounds, by iteratively reweighted least squares (each
    row weighted 1 / sqrt(|residual|), floored at LAD_FLOOR). Relative TTFT errors have heavy
    tails (a run the fit cannot explain is off by 10x), which pin a least-squares fit to a
    bound; the median |error| that calibrate reports is what this fit lowers."""
    x = _bounded_lstsq(a, y, low, high)
    for _ in range(LAD_ROUNDS):
        w = 1.0 / np.sqrt(np.maximum(np.abs(a @ x - y), LAD_FLOOR))
        x = _bounded_lstsq(a * w[:, None], y * w, low, high)
    return x


# ---- the fit -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fit:
    """A calibration with what it was fitted on, its residuals and its leave-one-out error."""

    calibration: Calibration
    runs: tuple[Run, ...]
    skipped: tuple[str, ...]
    predictions: dict[str, RunPrediction]
    rounds: int


def _simulate_all(runs, calibration, *, seed: int) -> tuple[np.ndarray, list[RunFeatures]]:
    """(predicted ITL means, features) of every run simulated at `calibration`."""
    done = run_all(partial(_simulated, seed=seed), runs, [calibration] * len(runs))
    return np.array([itl for itl, _ in done]), [f for _, f in done]


def _simulated(run: Run, calibration: Calibration, *, seed: int) -> tuple[float, RunFeatures]:
    """One run's predicted ITL mean and features, read where it was simulated (a worker sends
    back these few numbers, not the simulation)."""
    result = simulate_run(run, calibration, seed=seed)
    itl = harness_itl_mean(run, *client_latencies(run, result, calibration))
    return itl, features(run, result, calibration)


def fit_step_terms(runs, start: Calibration, *, seed: int = 0, log=None,
                   prior_weight: float = PRIOR_WEIGHT, solver=None):  # fmt: skip
    """Alternate simulation and linear solve until the ITL predictions settle: a round's
    simulations agree within CONVERGED with the previous round's, or with the one before (a
    2-cycle: the A100 cell's solve swung between efficiency 0.783 and 0.820 for all MAX_ROUNDS
    rounds), or the next move would change no run's ITL by that much as the linear equation
    sees it (then the simulated constants are kept, unconfirmed moves being smaller than the
    tolerance).

    A solve ignores that slower steps keep more requests in flight, so the constants can
    overshoot and swing back; a step that reverses the previous one is halved (damped).
    Returns (calibration, features of its last simulations, standard errors, undetermined,
    rounds). `solver(runs, features)` replaces the full solve (thin data: `thin_solver`)."""
    if solver is None:

        def solver(runs, feats):
            return solve_step_terms(runs, feats, prior_weight=prior_weight,
                                    pcie_share=GLOBAL_PCIE_SHARE)  # fmt: skip

    calibration, history, move = replace(start, step_jitter=0.0), [], None
    for rounds in range(1, MAX_ROUNDS + 1):
        itl, feats = _simulate_all(runs, calibration, seed=seed)
        values, errors, undetermined = solver(runs, feats)
        if log:
            log(f"round {rounds}: " + ", ".join(f"{k} {v:.4g}" for k, v in values.items()))
        if any(np.all(np.abs(itl / before - 1) < CONVERGED) for before in history[-2:]):
            break  # settled, or swinging between two states (then both fit alike)
        history.append(itl)
        current = _step_values(calibration)
        now = np.array([current[k] for k in STEP_TERMS])
        step = np.array([values[k] for k in STEP_TERMS]) - now
        if move is not None and float(step @ (move / SCALE**2)) < 0:
            step = step / 2  # the swing back of an overshoot
        move = step
        new = {k: float(v) for k, v in zip(STEP_TERMS, now + step, strict=True)}
        if _settled(feats, current, new):
            break  # the move would change no run's ITL by CONVERGED: no round to confirm it
        calibration = _with_step_terms(calibration, new)
    return calibration, feats, errors, undetermined, rounds


def linear_itl(f: RunFeatures, values: dict[str, float]) -> float:
    """A run's ITL mean at these step constants, its schedule held fixed (the fit's equation)."""
    e = 1.0 / values["efficiency"]
    links = sum(calls * values[key] for calls, key in zip(f.link_calls, LINK_TERMS, strict=True))
    network = f.network_seconds * NETWORK_BYTES_PER_SECOND / values["network_bytes_per_second"]
    pcie = f.pcie_seconds / values["pcie_bandwidth_share"]
    return (e * (f.gpu_seconds + links + network + pcie) + f.compute_seconds / values["mfu"]
            + values["host_seconds_per_step"] + values["host_seconds_per_sequence"] * f.sequences
            + f.rest_seconds)  # fmt: skip


def _settled(feats, now: dict[str, float], new: dict[str, float]) -> bool:
    """Whether moving the constants from `now` to `new` changes every run's ITL mean by less
    than CONVERGED, as the linear equation sees it."""
    return all(abs(linear_itl(f, new) / linear_itl(f, now) - 1) < CONVERGED for f in feats)


def _step_values(calibration: Calibration) -> dict[str, float]:
    return {
        "efficiency": calibration.efficiency,
        "mfu": calibration.mfu,
        **{
            key: calibration.allreduce_seconds_per_call.get(link, 0.0)
            for link, key in zip(INTERCONNECTS, LINK_TERMS, strict=True)
        },
        "host_seconds_per_step": calibration.host_seconds_per_step,
        "host_seconds_per_sequence": calibration.host_seconds_per_sequence,
        "network_bytes_per_second": calibration.network_bytes_per_second,
        "pcie_bandwidth_share": calibration.pcie_bandwidth_share,
    }


def _with_step_terms(calibration: Calibration, values: dict) -> Calibration:
    links = {link: values[key] for link, key in zip(INTERCONNECTS, LINK_TERMS, strict=True)}
    return replace(
        calibration,
        efficiency=values["efficiency"],
        mfu=values["mfu"],
        allreduce_seconds_per_call=links,
        host_seconds_per_step=values["host_seconds_per_step"],
        host_seconds_per_sequence=values["host_seconds_per_sequence"],
        network_bytes_per_second=values["network_bytes_per_second"],
        pcie_bandwidth_share=values["pcie_bandwidth_share"],
    )


def quantile_error(run: Run, prediction_quantiles: dict[float, float]) -> float:
    """Mean squared log error of the predicted per-token ITL quantiles the run measured."""
    errors = [math.log(prediction_quantiles[q] / v) ** 2
              for q, v in run.itl_per_token_quantiles_seconds.items()]  # fmt: skip
    return float(np.mean(errors))


def fit_jitter(runs, calibration: Calibration, *, seed: int = 0) -> float | None:
    """The step jitter that best matches the measured per-token ITL quantiles (None: no run
    measured them): successive parabolic interpolation over [0, 0.6] of the log spread, from
    three points simulated at once, to JITTER_TOLERANCE (real steps spread 0.15-0.3). The loss
    is smooth and bowl-shaped there: on the bundled runs 47.0, 37.6, 32.1, 32.0, 32.8, 37.7, 60.4
    at 0, 0.1, 0.23, 0.24, 0.3, 0.4, 0.6, so a parabola through three points lands near its
    minimum and two or three more land on it (golden-section search took ten evaluations).
    Where the bottom lies outside the points so far, the search steps outwards to it first."""
    tails = [run for run in runs if run.itl_per_token_quantiles_seconds]
    if not tails:
        return None

    def losses(sigmas) -> list[float]:
        cals = [replace(calibration, step_jitter=s) for s in sigmas for _ in tails]
        errors = run_all(partial(_jitter_error, seed=seed), tails * len(sigmas), cals)
        return np.reshape(errors, (len(sigmas), len(tails))).sum(axis=1).tolist()

    seen = dict(zip(JITTER_START, losses(JITTER_START), strict=True))
    for _ in range(JITTER_MORE):
        sigma = _next_jitter(seen)
        if min(abs(sigma - x) for x in seen) < JITTER_TOLERANCE:
            return sigma
        seen[sigma] = losses([sigma])[0]
    return min(seen, key=seen.get)


def _next_jitter(seen: dict[float, float]) -> float:
    """The next log spread to simulate: where the parabola through the lowest point so far and
    its two neighbours is lowest; where the lowest point has no neighbour on one side, a step
    outwards past it, as far as its neighbour on the other side (within JITTER_RANGE)."""
    xs, ys = np.array(sorted(seen.items())).T
    low, high = JITTER_RANGE
    i = int(np.argmin(ys))
    if i in (0, xs.size - 1):  # not bracketed
        other = xs[1] if i == 0 else xs[-2]
        return float(np.clip(2 * xs[i] - other, low, high))
    near = slice(i - 1, i + 2)
    curve, slope, _ = np.polyfit(xs[near], ys[near], 2)  # convex: the middle one is the lowest
    return float(np.clip(-slope / (2 * curve), xs[i - 1], xs[i + 1]))


def _jitter_error(run: Run, calibration: Calibration, *, seed: int) -> float:
    result = simulate_run(run, calibration, seed=seed)
    return quantile_error(run, token_quantiles(result, run.itl_per_token_quantiles_seconds))


METRICS = ("itl_mean_seconds", "ttft_mean_seconds", "e2e_mean_seconds", "ttft_p99_seconds",
           "e2e_p99_seconds")  # fmt: skip


def residuals(run: Run, prediction: RunPrediction) -> dict[str, float]:
    """Relative error (predicted / measured - 1) of each measured statistic."""
    out = {key: getattr(prediction, key) / run.measured[key] - 1
           for key in METRICS if key in run.measured}  # fmt: skip
    for q, value in run.itl_per_token_quantiles_seconds.items():
        if q in prediction.itl_per_token_quantiles_seconds:
            out[f"itl_token_p{q:g}"] = prediction.itl_per_token_quantiles_seconds[q] / value - 1
    return out


def median_abs(rows: dict[str, dict[str, float]]) -> dict[str, float]:
    """Median absolute error of each metric over the runs that have it."""
    keys = sorted({key for row in rows.values() for key in row})
    return {key: float(np.median([abs(row[key]) for row in rows.values() if key in row]))
            for key in keys}  # fmt: skip


def calibrate(runs, *, seed: int = 0, leave_one_out: bool = True, log=None,
              name: str = "calibration", prior_weight: float = PRIOR_WEIGHT,
              base: Calibration | None = None, step_model: str = ENGINE) -> Fit:  # fmt: skip
    """Fit every constant the runs determine; residuals and leave-one-out error included
    (`prior_weight` 0: the data alone, as the identifiability test fits). With fewer than
    MIN_RUNS runs and a `base` calibration, only the efficiency (two runs: and the host time
    per step) and the TTFT pipeline's seconds are refitted; the rest is `base`'s."""
    usable, skipped = simulable(runs)
    thin = len(usable) < MIN_RUNS
    if not usable or (thin and base is None):
        raise ConfigError(
            f"only {len(usable)} of {len(runs)} runs can be simulated (known arrival rates and "
            f"prompt shape); fitting 4 step constants and the TTFT pipeline needs at least "
            f"{MIN_RUNS}" + ("" if not usable else ", or a base calibration to refit (--base)")
        )
    start = replace(base, fitted_on=()) if thin else Calibration(step_model=step_model)
    base_runs = usable if thin else global_runs(usable)
    cal, feats, errors, undetermined, rounds = fit_step_terms(
        base_runs, start, seed=seed, log=log, prior_weight=prior_weight,
        solver=thin_solver(base) if thin else None,
    )  # fmt: skip
    if thin:
        steps, seconds = solve_pipeline_thin(usable, feats, base)
        undetermined["ttft_pipeline_steps"] = f"kept from the base calibration {base.name!r}"
        leave_one_out = False
    else:
        steps, seconds = solve_pipeline(base_runs, feats)
    cal = replace(cal, ttft_pipeline_steps=steps, ttft_pipeline_seconds=seconds)
    lent = lent_links(_step_values(cal), undetermined)
    # The jitter and the groups are independent (a group is fitted jitter-free): fitted side by
    # side, their simulations share the workers, which one alone leaves idle between rounds.
    with ThreadPoolExecutor(max_workers=2) as threads:
        jitter = threads.submit(fit_jitter, base_runs, cal, seed=seed)
        grouped = None if thin else threads.submit(_groups, usable, cal, seed, prior_weight, log,
                                                   lent)  # fmt: skip
        sigma = jitter.result()
        groups, group_feats, group_errors = ({}, {}, {}) if grouped is None else grouped.result()
    if sigma is None:
        undetermined["step_jitter"] = "no run reports per-token ITL quantiles: left at 0"
    cal = replace(cal, step_jitter=sigma or 0.0, groups=groups)
    predicted = run_all(partial(predict_run, seed=seed), usable, [cal] * len(usable))
    predictions = {run.id: p for run, p in zip(usable, predicted, strict=True)}
    rows = {run.id: residuals(run, predictions[run.id]) for run in usable}
    loo, loso = {}, {}
    if leave_one_out:
        loo, loso = _held_out(usable, base_runs, feats, group_feats, cal, seed, prior_weight)
    cal = replace(
        cal, name=name, fitted_on=tuple(run.id for run in usable), uncertainty=errors,
        undetermined={**undetermined, **_scope_notes(usable)}, residuals=rows, leave_one_out=loo,
        leave_one_source_out=loso, coverage=_coverage(base_runs, group_feats, usable),
        group_leave_one_out=group_errors,
    )  # fmt: skip
    return Fit(cal, tuple(usable), tuple(skipped), predictions, rounds)


def _coverage(runs, group_feats, usable) -> dict[str, list[str]]:
    """The model classes, clients, vLLM releases and GPUs the global fit's runs covered, and
    each group's (its runs: those `group_feats` holds) under `model@<group>`, `client@<group>`,
    `version@<group>` and `gpu@<group>` (a prediction beyond them says so; a V1 deployment on an
    architecture without a cell takes the nearest release's: `Calibration.nearest_release_cell`;
    a cell lent to another GPU scales its matmuls by the GPUs' achievable shares)."""
    sets = {"": runs, **{f"@{key}": [run for run in usable if run.id in feats]
                         for key, feats in group_feats.items()}}  # fmt: skip
    coverage = {}
    for suffix, members in sets.items():
        coverage[f"model{suffix}"] = sorted({run.model.size_class for run in members})
        coverage[f"client{suffix}"] = sorted({run.workload.client for run in members})
        coverage[f"version{suffix}"] = release_versions(members)
        coverage[f"gpu{suffix}"] = sorted({run.gpu for run in members})
    return coverage


def release_versions(runs) -> list[str]:
    """The vLLM releases the runs name ("0.10.1.1"), oldest first (a bare "V1" names none)."""
    named = {run.release.release for run in runs
             if run.release is not None and not run.release.engine_only}  # fmt: skip
    return [format_release(release) for release in sorted(named)]


def _groups(runs, cal, seed, prior_weight, log, lent):
    from itlkit.calibration.groups import fit_groups

    return fit_groups(runs, cal, seed=seed, prior_weight=prior_weight, log=log, lent=lent)


LENT_TERMS = (*LINK_TERMS, "network_bytes_per_second", "pcie_bandwidth_share")


def lent_links(values: dict[str, float], undetermined) -> dict[str, float]:
    """The link constants a fit determined, for the groups whose runs never crossed them."""
    return {key: values[key] for key in LENT_TERMS if key not in undetermined}


def global_runs(runs) -> list:
    """The runs the global constants are fitted on: vLLM's where there are `MIN_RUNS` (SGLang's
    schedule and host side are its own: its runs are fitted in their cells, and a deployment
    with none on its GPU family takes vLLM's constants); else every run."""
    vllm = [run for run in runs if run.serving_engine == "vllm"]
    return vllm if len(vllm) >= MIN_RUNS else list(runs)


def _held_out(runs, base_runs, feats, group_feats, cal, seed, prior_weight):
    """(leave-one-out, leave-one-source-out) median |errors| (`calibration.groups`); `feats`
    are the global fit's, of `base_runs`."""
    from itlkit.calibration.groups import held_out_errors

    by_id = {run.id: f for run, f in zip(base_runs, feats, strict=True)}
    args = (runs, by_id, group_feats, cal)
    folds = held_out_errors(*args, seed=seed, prior_weight=prior_weight, key=lambda r: r.id)
    loo = median_abs(folds)
    loso = held_out_errors(*args, seed=seed, prior_weight=prior_weight, key=lambda r: r.source)
    return loo, loso


def _scope_notes(runs) -> dict[str, str]:
    """What the runs' spread cannot tell apart (said in CALIBRATION.json)."""
    notes = {}
    apart = len(runs) - len(global_runs(runs))
    if apart:
        notes["global_fit"] = (f"the global constants are fitted on the {len(runs) - apart} vLLM "
                               f"runs; the {apart} SGLang runs only in their cells")  # fmt: skip
    cached = [run.id for run in runs if served_from_cache(run)]
    if cached:
        notes["ttft_from_cache"] = (
            f"the TTFT of {len(cached)} runs ({', '.join(cached)}) is not fitted: each is below "
            "the uncached prefill's floor (the prefix cache held their prompts)"
        )
    gpus = sorted({run.gpu for run in runs})
    if len(gpus) == 1:
        notes["per_gpu_family"] = f"every run is on {gpus[0]}: one global fit, used for all GPUs"
    return notes
