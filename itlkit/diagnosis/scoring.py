"""From a fingerprint to a ranked cause: "TTFT is fine, ITL is bad" has four usual suspects.

1. prefill_interference: steps that carry a prefill chunk are several times the floor, so the ITL
   histogram is bimodal and its slow share rises and falls with arrivals (first tokens per second).
2. batch_or_context_growth: the floor itself moved; the whole distribution shifts right and p50
   climbs with `vllm:num_requests_running`.
3. host_overhead: a unimodal histogram far above the floor (after allowing for real servers'
   50-70% bandwidth efficiency), worst at small batch: the GPU waits for the host.
4. preemption: rare multi-second gaps while `vllm:num_preemptions_total` rises.

Every number that decides lives in `RULES`, one row per (cause, feature) with the reason beside
it. A cause's score is the product of its gates times the sum of its weighted terms, each a ramp
of one fingerprint feature (`Rule.credit`), clipped to [0, 1]. Scores are scaled down, with a
note, when the evidence is thin (fewer than MIN_OBSERVATIONS observations), so a weak input never
produces a confident verdict. HEALTHY_BELOW is the score no cause reaches in a healthy service.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from itlkit.diagnosis.evidence import Timeline
from itlkit.diagnosis.findings import TITLES, TYPICAL_MBU, Finding, explain, measurement_notes
from itlkit.diagnosis.fingerprint import GAP_SECONDS, SLOW_FACTOR, Fingerprint, fingerprint
from itlkit.physics.roofline import Deployment
from itlkit.units import format_seconds

__all__ = ["CAUSES", "HEALTHY_BELOW", "RULES", "TITLES", "TYPICAL_MBU", "Diagnosis", "diagnose"]

CAUSES = ("prefill_interference", "batch_or_context_growth", "host_overhead", "preemption")
HEALTHY_BELOW = 0.5  # a cause is named at this score; under MIN_OBSERVATIONS / 2 none can be
MIN_OBSERVATIONS = 500  # below this, scores shrink in proportion
PLAUSIBLE_MBU_LOW = 0.35  # the worst bandwidth efficiency a working server shows in decode
GATE = None  # a rule without a weight multiplies the cause's score by its credit


@dataclass(frozen=True)
class Rule:
    """One row of the table: how much `feature` between `low` and `high` counts for `cause`.

    The credit is 0 at `low`, 1 at `high`, linear between (a rule with low > high credits low
    values); `missing` is the credit when the input cannot measure the feature. A rule with a
    weight adds weight x credit; a gate (weight None) multiplies. `feature` None is a constant
    term (credit 1)."""

    cause: str
    feature: str | None
    low: float
    high: float
    weight: float | None
    reason: str
    missing: float = 0.0

    def credit(self, fp: Fingerprint) -> float:
        """The ramp of this rule's feature in [0, 1]."""
        if self.feature is None:
            return 1.0
        x = float(getattr(fp, self.feature))
        if not math.isfinite(x):
            return self.missing
        low, high = sorted((self.low, self.high))
        rising = float(np.clip((x - low) / (high - low), 0.0, 1.0))
        return rising if self.high > self.low else 1.0 - rising


RULES: tuple[Rule, ...] = (
    # prefill interference: the shape gates, the arrival link adds.
    Rule("prefill_interference", "window_slow_share", 0.01, 0.05, GATE,
         "a slow mode needs a few percent of the observations; ~1% is bucket noise"),
    Rule("prefill_interference", "window_slow_share", 0.95, 0.7, GATE,
         "when nearly every observation is slow, the fast mode moved: no second mode"),
    Rule("prefill_interference", "slow_mode_factor", SLOW_FACTOR - 1, SLOW_FACTOR, GATE,
         "a doubled batch at most doubles the floor (weights + batch x KV), so a mode up to 2x "
         "can be growth inside one window; the worked example's 2048-token chunk step is 5.2x"),
    Rule("prefill_interference", "arrival_chunk_factor", 1.5, SLOW_FACTOR, GATE,
         "arrivals make the slow mode only if a step carrying one arriving prompt's uncached "
         "tokens is predicted that slow; else the slow steps come from elsewhere (a preempted "
         "request's recompute)"),
    Rule("prefill_interference", None, 0, 1, 0.45,
         "the shape alone earns just under a verdict (0.45 < 0.5)"),
    Rule("prefill_interference", "arrival_correlation", 0.0, 1.0, 0.55,
         "the slow share follows first tokens per second: chunks ride in steps when prompts "
         "arrive", missing=0.25),
    # batch or context growth: the fast mode moved, with the running requests.
    Rule("batch_or_context_growth", "fast_mode_growth", 1.15, 1.6, GATE,
         "the fast mode (window p25) moved from the first to the last third; 15% is noise"),
    Rule("batch_or_context_growth", None, 0, 1, 0.4,
         "the shift alone earns less than a verdict (0.4 < 0.5)"),
    Rule("batch_or_context_growth", "growth_correlation", 0.0, 1.0, 0.6,
         "the fast mode follows vllm:num_requests_running, as the floor does", missing=0.25),
    # host overhead: a fast mode no plausible bandwidth efficiency explains, in one hump.
    Rule("host_overhead", "fast_over_floor", 1 / PLAUSIBLE_MBU_LOW, 1 / PLAUSIBLE_MBU_LOW + 1.5,
         GATE, "real servers reach 35-105% of the roofline's bandwidth in decode; beyond 1/0.35 "
         "= 2.9x the floor the GPU waits for something else"),
    Rule("host_overhead", None, 0, 1, 0.3,
         "far above the floor alone earns less than a verdict (0.3 < 0.5)"),
    Rule("host_overhead", "slow_share", 0.1, 0.03, 0.7,
         "a unimodal histogram: every step pays the same fixed cost", missing=1.0),
    Rule("host_overhead", "batch_size", 32, 16, 0.15,
         "a fixed per-step cost weighs most at small batch, where the floor is short"),
    # preemption: the counter, the gaps, and their coincidence.
    Rule("preemption", "preemptions", 0, 1, 0.55,
         "vLLM increments num_preemptions_total only when the KV cache is full: the counter "
         "alone names the cause"),
    Rule("preemption", "gap_observations", 0, 5, 0.3,
         f"ITL observations above {GAP_SECONDS:g} s: a preempted request waits for its recompute"),
    Rule("preemption", "gap_correlation", 0.0, 1.0, 0.15,
         "preemptions and gaps in the same windows"),
)  # fmt: skip


def cause_score(cause: str, fp: Fingerprint, rules: tuple[Rule, ...] = RULES) -> float:
    """Product of the cause's gates times the sum of its weighted credits, in [0, 1]."""
    gate, total = 1.0, 0.0
    for rule in rules:
        if rule.cause == cause:
            if rule.weight is GATE:
                gate *= rule.credit(fp)
            else:
                total += rule.weight * rule.credit(fp)
    return float(np.clip(gate * total, 0.0, 1.0))


@dataclass(frozen=True, eq=False)
class Diagnosis:
    """The verdict: ranked findings plus the fingerprint they rest on (its fields read through:
    `d.floor_seconds` is `d.fingerprint.floor_seconds`)."""

    deployment: Deployment
    timeline: Timeline
    fingerprint: Fingerprint
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = field(default=())

    def __getattr__(self, name: str):
        if name == "fingerprint":  # not yet set (copy, unpickle): no recursion
            raise AttributeError(name)
        return getattr(self.fingerprint, name)

    @property
    def healthy(self) -> bool:
        return all(f.score < HEALTHY_BELOW for f in self.findings)

    @property
    def top(self) -> Finding:
        return self.findings[0]

    @property
    def named(self) -> tuple[Finding, ...]:
        """The findings at or above HEALTHY_BELOW, best first."""
        return tuple(f for f in self.findings if f.score >= HEALTHY_BELOW)

    @property
    def verdict(self) -> str:
        p50, floor = self.itl_quantiles_seconds[0.5], self.floor_seconds
        if self.healthy:
            return (
                f"No cause stands out (every score < {HEALTHY_BELOW}): ITL p50 "
                f"{format_seconds(p50)} is {p50 / floor:.1f}x the {format_seconds(floor)} floor."
            )
        first, *others = self.named
        text = f"Most likely: {first.title} (score {first.score:.2f})"
        if others:
            text += "; also " + ", ".join(f"{f.title} ({f.score:.2f})" for f in others)
        return text + "."

    def to_json(self) -> dict:
        """SI values for `itlkit diagnose --json`."""
        fp, total = self.fingerprint, self.timeline.itl_total
        q = fp.itl_quantiles_seconds
        keys = ("batch_size", "context_tokens", "floor_seconds", "fast_mode_seconds", "mbu_fit")
        return {
            "model": self.deployment.model.slug,
            "gpu": self.deployment.gpu.slug,
            "tp": self.deployment.tp,
            **{k: getattr(fp, k) for k in keys},
            "mbu_range": list(fp.mbu_range),
            "expected_mixed_step_seconds": fp.expected_mixed_step_seconds,
            "max_num_batched_tokens": fp.max_num_batched_tokens,
            "itl": {
                "count": total.count,
                "mean_seconds": total.mean,
                **{f"p{round(100 * k)}_seconds": q[k] for k in (0.5, 0.9, 0.99)},
                "p99_bucket_seconds": list(fp.itl_quantile_buckets[0.99]),
                "slow_share": fp.slow_share,
                "slow_cut_seconds": fp.slow_cut_seconds,
            },
            "windows": len(self.timeline),
            "duration_seconds": self.timeline.duration_seconds,
            "healthy": self.healthy,
            "healthy_below": HEALTHY_BELOW,
            "verdict": self.verdict,
            "causes": [
                {
                    "cause": f.cause,
                    "title": f.title,
                    "score": f.score,
                    "evidence": list(f.evidence),
                    "confirm": list(f.confirm),
                    "fixes": [vars(x) for x in f.fixes],
                }
                for f in self.findings
            ],
            "notes": list(self.notes),
        }


def default_max_num_batched_tokens(deployment: Deployment) -> int:
    """vLLM's `vllm serve` default token budget: 8192 on >= 70 GiB GPUs except A100, else 2048."""
    gpu = deployment.gpu
    if gpu.hbm_bytes >= 70 * 2**30 and "a100" not in gpu.slug:
        return 8192
    return 2048


def diagnose(
    timeline: Timeline,
    deployment: Deployment,
    *,
    batch_size: float | None = None,
    context_tokens: float | None = None,
    max_num_batched_tokens: int | None = None,
    prompt_tokens: float | None = None,
) -> Diagnosis:
    """Score the four causes from a timeline for a deployment; batch/context from the metrics
    (running gauge; prompt and generation counters) unless given."""
    fp = fingerprint(
        timeline,
        deployment,
        max_num_batched_tokens=max_num_batched_tokens or default_max_num_batched_tokens(deployment),
        batch_size=batch_size,
        context_tokens=context_tokens,
        prompt_tokens=prompt_tokens,
    )
    notes = [*timeline.notes, *measurement_notes(fp, deployment)]
    thin = min(1.0, fp.observations / MIN_OBSERVATIONS)
    if thin < 1:
        notes.append(
            f"only {fp.observations:,.0f} ITL observations (< {MIN_OBSERVATIONS}): every score "
            f"is scaled by {thin:.2f}"
        )
    findings = [
        explain(cause, round(cause_score(cause, fp) * thin, 3), fp, timeline, deployment)
        for cause in CAUSES
    ]
    findings.sort(key=lambda f: -f.score)
    return Diagnosis(deployment, timeline, fp, tuple(findings), tuple(dict.fromkeys(notes)))
