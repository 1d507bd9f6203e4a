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

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import numpy as np

from itlkit.bundled import bundled_path
from itlkit.diagnosis.evidence import Timeline
from itlkit.diagnosis.findings import TITLES, TYPICAL_MBU, Finding, explain, measurement_notes
from itlkit.diagnosis.fingerprint import (
    GAP_SECONDS,
    PLAUSIBLE_MBU_LOW,
    SLOW_FACTOR,
    Fingerprint,
    fingerprint,
)
from itlkit.physics.calibration import Calibration, read_calibration
from itlkit.physics.hardware import get_gpu
from itlkit.physics.roofline import Deployment
from itlkit.units import format_seconds

__all__ = [
    "CAUSES", "HEALTHY_BELOW", "PLAUSIBLE_GPUS", "RULES", "TITLES", "TYPICAL_MBU", "Alternative",
    "Diagnosis", "diagnose", "diagnose_across_gpus",
]  # fmt: skip

CAUSES = ("prefill_interference", "batch_or_context_growth", "host_overhead", "preemption")
UNEXPLAINED_SHARE = 0.01  # a slower cluster this big is reported when no cause explains it
UNEXPLAINED_OBSERVATIONS = 10  # or this many behind an empty bucket (not bucket noise)
HEALTHY_BELOW = 0.5  # a cause is named at this score; under MIN_OBSERVATIONS / 2 none can be
MIN_OBSERVATIONS = 500  # below this, scores shrink in proportion
GATE = None  # a rule without a weight multiplies the cause's score by its credit
# When the page does not name its GPU: the range a vLLM deployment plausibly runs on, from a
# 300 GB/s inference card to a 8 TB/s one (names of itlkit.physics.hardware.GPUS).
PLAUSIBLE_GPUS = ("l4", "a10", "l40s", "a100-80gb-sxm", "h100-sxm", "h200-sxm", "b200")


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
    # host overhead: a step that neither the GPU (at its worst plausible efficiency) nor a
    # healthy host explains, most of it in one cluster.
    Rule("host_overhead", "host_excess_ratio", 0.5, 2.0, GATE,
         f"the step minus the slowest plausible GPU time (floor / {PLAUSIBLE_MBU_LOW}), in units "
         "of a healthy host's cost (the calibration: 0.58 ms per step + 3.6 us per sequence, "
         "fitted on vLLM 0.15.1 H100 runs; 0.5 of it is within its spread, twice it is not). "
         "For a sub-ms floor this is the absolute test: a few ms per step is host-bound on any "
         "GPU"),
    Rule("host_overhead", None, 0, 1, 0.3,
         "the unexplained step alone earns less than a verdict (0.3 < 0.5)"),
    Rule("host_overhead", "main_cluster_share", 0.9, 0.97, 0.7,
         "every step pays the same fixed cost: one cluster holds nearly everything; each percent "
         "in other clusters (steps that carry other work) takes its share of this credit",
         missing=1.0),
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


@dataclass(frozen=True)
class Alternative:
    """The verdict the same evidence gets on another GPU (the page did not name its own)."""

    gpu: str
    verdict: str  # a cause, or "healthy"
    score: float  # the top cause's score
    floor_seconds: float
    step_seconds: float
    weights_fit: bool


@dataclass(frozen=True, eq=False)
class Diagnosis:
    """The verdict: ranked findings plus the fingerprint they rest on (its fields read through:
    `d.floor_seconds` is `d.fingerprint.floor_seconds`)."""

    deployment: Deployment
    timeline: Timeline
    fingerprint: Fingerprint
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = field(default=())
    alternatives: tuple[Alternative, ...] = field(default=())  # empty: the GPU was given

    @property
    def verdict_key(self) -> str:
        """The top cause, or "healthy"."""
        return "healthy" if self.healthy else self.top.cause

    @property
    def flips(self) -> tuple[Alternative, ...]:
        """The plausible GPUs (weights fit) on which the verdict would differ."""
        return tuple(
            a for a in self.alternatives if a.weights_fit and a.verdict != self.verdict_key
        )

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
                + self.unexplained_clusters_text
            )
        first, *others = self.named
        text = f"Most likely: {first.title} (score {first.score:.2f})"
        if others:
            text += "; also " + ", ".join(f"{f.title} ({f.score:.2f})" for f in others)
        return text + "."

    @property
    def unexplained_clusters_text(self) -> str:
        """What is left unexplained when no cause is named: the slower clusters that hold at
        least UNEXPLAINED_SHARE of the gaps (or UNEXPLAINED_OBSERVATIONS behind an empty
        bucket), and why the evidence cannot name their cause."""
        fp = self.fingerprint
        main = fp.clusters[fp.main_cluster] if fp.clusters else None
        slower = [c for i, c in enumerate(fp.clusters) if i > fp.main_cluster and (
            c.share >= UNEXPLAINED_SHARE
            or (c.behind_empty_bucket and c.observations >= UNEXPLAINED_OBSERVATIONS))]  # fmt: skip
        if main is None or not slower:
            return ""
        share = sum(c.share for c in slower)
        factor = slower[0].mean_seconds / main.mean_seconds if main.mean_seconds > 0 else math.nan
        why = (
            "one scrape has no time axis, so they cannot be tied to arriving prompts (prefill "
            "chunks) or to preemptions" if len(self.timeline) < 2 else
            "they follow neither arriving prompts, the running batch nor preemptions"
        )  # fmt: skip
        return (
            f" The evidence is not enough to name what makes the {share:.1%} of gaps in "
            f"{len(slower)} slower cluster{'s' if len(slower) > 1 else ''} (from "
            f"{factor:.1f}x the main one): {why}."
        )

    @property
    def verdict_with_range(self) -> str:
        """The verdict, and whether it hangs on the GPU the page did not name."""
        if not self.alternatives:
            return self.verdict
        fit = [a.gpu for a in self.alternatives if a.weights_fit]
        tail = (f" It holds on every plausible GPU ({len(fit)} checked)." if not self.flips else
                f" The page does not name its GPU; scores are the lowest over {len(fit)} "
                f"plausible GPUs, and on {', '.join(a.gpu for a in self.flips)} the verdict "
                "would differ (see GPU range).")  # fmt: skip
        return self.verdict + tail

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
            "verdict": self.verdict_with_range,
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
            "gpu_range": None if not self.alternatives else {
                "gpu_stated": False,
                "verdict_holds": not self.flips,
                "flipped_by": [a.gpu for a in self.flips],
                "gpus": [vars(a) for a in self.alternatives],
            },
            "clusters": [vars(c) for c in fp.clusters],
            "step_seconds": fp.step_seconds,
            "healthy_host_seconds": fp.healthy_host_seconds,
        }  # fmt: skip


@functools.cache
def healthy_host_calibration() -> Calibration:
    """The bundled calibration (`itlkit/data/calibration.json`): its host terms are what a
    healthy vLLM host costs per step, measured on real vLLM 0.15.1 H100 runs."""
    return read_calibration(bundled_path("calibration.json"))


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
    calibration: Calibration | None = None,
) -> Diagnosis:
    """Score the four causes from a timeline for a deployment; batch/context from the metrics
    (running gauge; prompt and generation counters) unless given; a healthy host's cost from
    `calibration` (default: the bundled one)."""
    host = calibration if calibration is not None else healthy_host_calibration()
    fp = fingerprint(
        timeline,
        deployment,
        max_num_batched_tokens=max_num_batched_tokens or default_max_num_batched_tokens(deployment),
        batch_size=batch_size,
        context_tokens=context_tokens,
        prompt_tokens=prompt_tokens,
        host_seconds_per_step=host.host_seconds_per_step,
        host_seconds_per_sequence=host.host_seconds_per_sequence,
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


def diagnose_across_gpus(
    timeline: Timeline, deployment: Deployment, gpus=PLAUSIBLE_GPUS, **settings
) -> Diagnosis:
    """`diagnose` for a page that does not name its GPU: each cause scores its lowest over
    `deployment` and every GPU of `gpus` its weights fit on (same model, precision, TP), so no
    verdict rests on the guess; the verdict on each GPU is attached (`alternatives`)."""
    from itlkit.physics.roofline import capacity

    base = diagnose(timeline, deployment, **settings)
    alternatives, lowest = [], {f.cause: f.score for f in base.findings}
    for name in gpus:
        other = dataclasses.replace(deployment, gpu=get_gpu(name))
        d = base if other.gpu == deployment.gpu else diagnose(timeline, other, **settings)
        fits = capacity(other, context_tokens=d.context_tokens).weights_fit
        if fits:
            for f in d.findings:
                lowest[f.cause] = min(lowest[f.cause], f.score)
        alternatives.append(Alternative(name, d.verdict_key, d.top.score, d.floor_seconds,
                                        d.step_seconds, fits))  # fmt: skip
    findings = sorted(
        (dataclasses.replace(f, score=lowest[f.cause]) for f in base.findings),
        key=lambda f: -f.score,
    )
    return dataclasses.replace(base, findings=tuple(findings), alternatives=tuple(alternatives))
