"""A sweep as a one-page plan (Markdown): the inputs, the best configurations, the frontier,
what each knob of the best one bought, and what was pruned and why."""

from __future__ import annotations

from collections import Counter

from itlkit.plan.frontier import knob_effects, nothing_meets, objective_value, pareto, ranked
from itlkit.plan.space import Slo, Traffic
from itlkit.units import format_seconds


def _lengths(value) -> str:
    """A length or distribution in words: its tokens, or its kind and mean."""
    if isinstance(value, int):
        return f"{value:,}"
    tokens = getattr(value, "tokens", None)
    if tokens is not None:
        return f"{tokens:,}"
    return f"{type(value).__name__.lower()} (mean {value.mean_tokens():,.0f})"


def _target(seconds: float | None) -> str:
    return "none" if seconds is None else format_seconds(seconds)


def _row(r) -> str:
    o = r.outcome
    return (f"| {r.candidate.label()} | ${r.cost_per_hour:,.2f} | "
            f"{format_seconds(o.itl_p99_seconds)} | "
            f"{format_seconds(o.ttft_p99_seconds)} |")  # fmt: skip


def plan_markdown(results, *, model: str, traffic: Traffic, slo: Slo, objective: str,
                  prices_note: str, top: int = 5) -> str:  # fmt: skip
    """The one-page plan of a sweep's `results`."""
    best = ranked(results, slo, objective)
    lines = [
        f"# Capacity plan: {model}",
        "",
        f"Traffic: {traffic.rate_per_second:g} requests/s (Poisson), prompts "
        f"{_lengths(traffic.prompt_tokens)}, outputs {_lengths(traffic.output_tokens)} tokens, "
        f"{traffic.duration_seconds:g} s simulated per candidate. SLOs: ITL p99 "
        f"{_target(slo.itl_p99_seconds)}, TTFT p99 {_target(slo.ttft_p99_seconds)}. "
        f"Objective: {objective.replace('_', ' ')}. Prices: {prices_note}.",
        "",
    ]
    if best:
        lines += ["## Best configurations", "",
                  "| configuration | $/hour | ITL p99 | TTFT p99 |", "|---|---|---|---|",
                  *(_row(r) for r in best[:top]), ""]  # fmt: skip
        lines += ["## What the best one's knobs buy (each moved alone)", ""]
        for e in knob_effects(best[0], results):
            verdict = ("pruned: " + e.result.pruned if e.result.pruned else
                       "meets the SLO" if e.result.meets(slo) else "misses the SLO")  # fmt: skip
            lines.append(f"- {e.knob} = {e.value}: ${e.result.cost_per_hour:,.2f}/h, {verdict}")
        lines.append("")
        value = objective_value(best[0], objective)
        lines.insert(2, f"**Choose {best[0].candidate.label()}** ({objective.replace('_', ' ')} "
                        f"{value:,.3g}).")  # fmt: skip
        lines.insert(3, "")
    else:
        lines += [f"**{nothing_meets(results, slo)}**", ""]
    lines += ["## Frontier: cost against ITL p99", "",
              "| configuration | $/hour | ITL p99 | TTFT p99 |", "|---|---|---|---|",
              *(_row(r) for r in pareto(results, "itl_p99")), ""]  # fmt: skip
    pruned = Counter(r.pruned.split(":")[0] for r in results if r.pruned)
    simulated = sum(1 for r in results if r.outcome is not None)
    why = "".join(f"; {n} as {reason}" for reason, n in pruned.most_common(3))
    lines.append(f"{len(results)} candidates: {simulated} simulated, "
                 f"{sum(pruned.values())} pruned by the roofline{why}.")  # fmt: skip
    return "\n".join(lines) + "\n"
