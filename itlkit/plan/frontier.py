"""From a sweep's results: the best candidate for an objective, the Pareto frontier of cost
against each SLO, and what each knob of the best one bought."""

from __future__ import annotations

import math
from dataclasses import dataclass

from itlkit.errors import ConfigError
from itlkit.plan.space import OBJECTIVES, Slo
from itlkit.plan.sweep import Result
from itlkit.units import format_seconds


def objective_value(result: Result, objective: str) -> float:
    """Dollars per hour, dollars per million output tokens, or GPUs (lower is better)."""
    if objective == "cost_per_hour":
        return result.cost_per_hour
    if objective == "gpus":
        return float(result.candidate.gpus)
    if objective == "cost_per_million_tokens":
        rate = result.outcome.output_tokens_per_second if result.outcome else 0.0
        return result.cost_per_hour / (rate * 3600 / 1e6) if rate > 0 else math.inf
    raise ConfigError(f"unknown objective {objective!r}; known: {', '.join(OBJECTIVES)}")


def ranked(results, slo: Slo, objective: str) -> list[Result]:
    """The candidates that meet `slo`, best first (ties: cheaper per hour, then fewer GPUs)."""
    meeting = [r for r in results if r.meets(slo)]
    return sorted(meeting, key=lambda r: (objective_value(r, objective), r.cost_per_hour,
                                          r.candidate.gpus, r.candidate.label()))  # fmt: skip


def nothing_meets(results, slo: Slo) -> str:
    """One line: no candidate meets the SLO; the constraint that binds and by how much."""
    simulated = [r for r in results if r.outcome is not None and not r.outcome.problem]
    if not simulated:
        reasons = {r.pruned or (r.outcome.problem if r.outcome else "") for r in results}
        return (f"no candidate meets the SLO: all {len(results)} were ruled out before "
                f"simulation, e.g. {sorted(reasons)[0]}")  # fmt: skip
    closest = min(simulated, key=lambda r: max(r.misses(slo).values()))
    missed = closest.misses(slo)
    worst = max(missed, key=missed.get)
    measured = getattr(closest.outcome, f"{worst}_seconds")
    target = getattr(slo, f"{worst}_seconds")
    return (f"no candidate meets the SLO: {worst.replace('_', ' ').upper()} binds; the closest, "
            f"{closest.candidate.label()}, reaches {format_seconds(measured)} against "
            f"{format_seconds(target)} ({missed[worst]:.2f}x the target)")  # fmt: skip


def pareto(results, slo_key: str) -> list[Result]:
    """Simulated candidates no other beats on both cost per hour and the SLO quantity
    (`itl_p99` or `ttft_p99`), cheapest first."""
    points = [r for r in results if r.outcome is not None and not r.outcome.problem]
    value = lambda r: getattr(r.outcome, f"{slo_key}_seconds")  # noqa: E731
    points.sort(key=lambda r: (r.cost_per_hour, value(r)))
    frontier, best = [], math.inf
    for r in points:
        if value(r) < best:
            frontier.append(r)
            best = value(r)
    return frontier


@dataclass(frozen=True)
class KnobEffect:
    """The best candidate with one knob moved to another value, and what changed."""

    knob: str
    value: object
    result: Result


def knob_effects(best: Result, results) -> list[KnobEffect]:
    """For each knob of `best`, the simulated candidates that differ from it in that knob alone."""
    base = best.candidate.as_dict()
    effects = []
    for r in results:
        other = r.candidate.as_dict()
        diff = [k for k in base if other[k] != base[k]]
        if len(diff) == 1:
            effects.append(KnobEffect(diff[0], other[diff[0]], r))
    return sorted(effects, key=lambda e: (e.knob, str(e.value)))
