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

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from itlkit.diagnosis.deployment import PLAUSIBLE_GPUS
from itlkit.diagnosis.evidence import Timeline
from itlkit.diagnosis.findings import TITLES, TYPICAL_MBU, Finding, explain, measurement_notes
from itlkit.diagnosis.fingerprint import (
    GAP_SECONDS,
    PLAUSIBLE_MBU_LOW,
    SLOW_FACTOR,
    Fingerprint,
    fingerprint,
)
from itlkit.diagnosis.speculation import acceptance_drop_note, speculation_notes
from itlkit.metrics.histogram import Histogram, locate_quantile
from itlkit.physics.calibration import Calibration, load_calibration
from itlkit.physics.roofline import Deployment
from itlkit.units import format_seconds

__all__ = [
    "CAUSES", "HEALTHY_BELOW", "PLAUSIBLE_GPUS", "RULES", "TITLES", "TYPICAL_MBU", "Alternative",
    "Diagnosis", "diagnose", "floor_beaten", "floor_contradiction",
]  # fmt: skip

CAUSES = ("prefill_interference", "batch_or_context_growth", "host_overhead", "preemption",
          "speculation_cost")  # fmt: skip
UNEXPLAINED_SHARE = 0.01  # a slower cluster this big is reported when no cause explains it
UNEXPLAINED_OBSERVATIONS = 10  # or this many behind an empty bucket (not bucket noise)
HEALTHY_BELOW = 0.5  # a cause is named at this score; under MIN_OBSERVATIONS / 2 none can be
MIN_OBSERVATIONS = 500  # below this, scores shrink in proportion
GATE = None  # a rule without a weight multiplies the cause's score by its credit
IMPOSSIBLE = "below_floor"  # the verdict where the observed steps beat the bandwidth floor


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
    engines: tuple[str, ...] = ("vllm", "sglang")  # whose metrics the row judges

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


VLLM, SGLANG = ("vllm",), ("sglang",)
RULES: tuple[Rule, ...] = (
    # prefill interference: the shape gates, the arrival link adds.
    Rule("prefill_interference", "window_slow_share", 0.01, 0.05, GATE,
         "a slow mode needs a few percent of the observations; ~1% is bucket noise",
         engines=VLLM),
    Rule("prefill_interference", "window_slow_share", 0.95, 0.7, GATE,
         "when nearly every observation is slow, the fast mode moved: no second mode",
         engines=VLLM),
    Rule("prefill_interference", "slow_mode_factor", SLOW_FACTOR - 1, SLOW_FACTOR, GATE,
         "a doubled batch at most doubles the floor (weights + batch x KV), so a mode up to 2x "
         "can be growth inside one window; the worked example's 2048-token chunk step is 5.2x",
         engines=VLLM),
    # SGLang runs a prefill batch alone before the running batch decodes: a queue of prompts
    # holds every stream for batch after batch, so its stalls are few and long (past 1 s under
    # load) where vLLM's are one slow step per chunk. Their time, not their count, shows them.
    Rule("prefill_interference", "stall_time_share", 0.02, 0.08, GATE,
         "the streams spend a few percent of their time in stalls past the slow-mode cut (each "
         "window's); ~1% is a step's own spread", engines=SGLANG),
    Rule("prefill_interference", "prefill_gpu_share", 0.02, 0.2, 0.2,
         "SGLang's device timer measures the GPU's time in prefill batches (alone or mixed): "
         "the stall's own cause, seen directly", engines=SGLANG),
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
    Rule("preemption", "gaps_per_preemption", 40, 4, GATE,
         "a preemption gives its own request one long gap (its recompute): up to a few per "
         "preemption are its, tens are not (SGLang's prefill batches, a stalled host)",
         missing=1.0),
    Rule("preemption", "preemptions", 0, 1, 0.55,
         "vLLM increments num_preemptions_total only when the KV cache is full: the counter "
         "alone names the cause"),
    Rule("preemption", "gap_observations", 0, 5, 0.3,
         f"ITL observations above {GAP_SECONDS:g} s: a preempted request waits for its recompute"),
    Rule("preemption", "gap_correlation", 0.0, 1.0, 0.15,
         "preemptions and gaps in the same windows"),
    # speculative decoding that costs more than it saves: past its crossover batch the
    # verification step's b (k + 1) tokens are compute-bound and grow faster than the tokens
    # they emit (`physics.speculative`, priced from the page's per-position acceptance).
    Rule("speculation_cost", "spec_speedup", 1.0, 0.85, GATE,
         "per-token time with speculation (verification step / tokens per step, at the "
         "incident's batch and context) over the plain step's: at 1 it stops paying, 15% past "
         "it clears the step model's own error (the draft's cost, left out, only adds)"),
    Rule("speculation_cost", None, 0, 1, 0.6,
         "priced past its crossover alone earns a verdict (0.6 > 0.5)"),
    Rule("speculation_cost", "spec_tokens_per_step", 2.0, 1.3, 0.4,
         "few accepted drafts (a workload unlike the draft's data, a high temperature): each "
         "step pays k + 1 tokens of GEMM for little"),
)  # fmt: skip


# A cause the input must show before it is judged at all (else it is left out of the report):
# only a page with speculative decoding's counters can judge what speculation costs.
REQUIRES = {"speculation_cost": "spec_tokens_per_step"}


def cause_applies(cause: str, fp: Fingerprint) -> bool:
    """Whether the input can judge `cause` at all (`REQUIRES`)."""
    feature = REQUIRES.get(cause)
    return feature is None or math.isfinite(float(getattr(fp, feature)))


def cause_score(cause: str, fp: Fingerprint, rules: tuple[Rule, ...] = RULES) -> float:
    """Product of the cause's gates times the sum of its weighted credits, in [0, 1]."""
    gate, total = 1.0, 0.0
    for rule in rules:
        if rule.cause == cause and fp.engine in rule.engines:
            if rule.weight is GATE:
                gate *= rule.credit(fp)
            else:
                total += rule.weight * rule.credit(fp)
    return float(np.clip(gate * total, 0.0, 1.0))


@dataclass(frozen=True)
class Alternative:
    """The verdict the same evidence gets on another GPU (the page did not name its own)."""

    gpu: str
    verdict: str  # a cause, "healthy", or IMPOSSIBLE (the steps beat the floor there)
    score: float  # the top cause's score
    floor_seconds: float
    step_seconds: float
    weights_fit: bool
    scores: tuple[tuple[str, float], ...] = ()  # every cause's score there, in CAUSES order
    impossible: str = ""  # why the steps rule this GPU out ("" when they do not)

    @property
    def plausible(self) -> bool:
        """The weights fit and the observed steps do not beat the floor there."""
        return self.weights_fit and self.verdict != IMPOSSIBLE


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
    impossible: str = ""  # why the deployment cannot have made these steps ("" when it can)
    assumptions: tuple[str, ...] = ()  # what of the deployment was read off the page or assumed

    @property
    def verdict_key(self) -> str:
        """The top cause, "healthy", or IMPOSSIBLE (the steps beat this deployment's floor)."""
        if self.impossible:
            return IMPOSSIBLE
        return "healthy" if self.healthy else self.named[0].cause

    @property
    def plausible_gpus(self) -> tuple[Alternative, ...]:
        """The GPUs the page may have run on: the weights fit, the steps do not beat the floor."""
        return tuple(a for a in self.alternatives if a.plausible)

    @property
    def flips(self) -> tuple[Alternative, ...]:
        """The plausible GPUs on which the verdict would differ."""
        return tuple(a for a in self.plausible_gpus if a.verdict != self.verdict_key)

    def __getattr__(self, name: str):
        if name == "fingerprint":  # not yet set (copy, unpickle): no recursion
            raise AttributeError(name)
        return getattr(self.fingerprint, name)

    @property
    def healthy(self) -> bool:
        return not self.impossible and not self.named

    @property
    def top(self) -> Finding:
        return self.findings[0]

    @property
    def named(self) -> tuple[Finding, ...]:
        """The findings at or above HEALTHY_BELOW, best first; when the page did not name its
        GPU, only those at or above it on every plausible GPU (a cause one guess names and
        another does not is `depends_on_gpu`). None when the steps beat the floor: no score
        means anything against a deployment that cannot have made them."""
        if self.impossible:
            return ()
        return tuple(f for f in self.findings if all(
            score >= HEALTHY_BELOW for score in self._scores_everywhere(f)))  # fmt: skip

    @property
    def depends_on_gpu(self) -> tuple[Finding, ...]:
        """The findings named on some plausible GPUs and not on others."""
        if self.impossible:
            return ()
        return tuple(f for f in self.findings if f not in self.named and any(
            score >= HEALTHY_BELOW for score in self._scores_everywhere(f)))  # fmt: skip

    def _scores_everywhere(self, finding: Finding) -> list[float]:
        plausible = self.plausible_gpus
        return [dict(a.scores)[finding.cause] for a in plausible] if plausible else [finding.score]

    def gpus_naming(self, cause: str) -> list[str]:
        """The plausible GPUs on which `cause` is named."""
        return [a.gpu for a in self.plausible_gpus if dict(a.scores)[cause] >= HEALTHY_BELOW]

    @property
    def ranked(self) -> tuple[Finding, ...]:
        """The findings in the verdict's order: named, then the rest; by this report's score
        within each (a cause named on some plausible GPUs only says so where it stands)."""
        named = self.named
        return (*named, *(f for f in self.findings if f not in named))

    @property
    def lead(self) -> Finding:
        """The finding a verdict leads with: the best named one, else the best scored."""
        return (self.named or self.findings)[0]

    @property
    def verdict(self) -> str:
        p50, floor = self.itl_quantiles_seconds[0.5], self.floor_seconds
        if self.impossible:
            return (
                f"No cause can be named: {self.impossible}. These metrics did not come from "
                f"{self.deployment.label}; state the model (a name or a config.json), its "
                "precision, the TP and the GPU (--model, --weights-precision, --tp, --gpu)."
            )
        if self.healthy and self.depends_on_gpu:
            return (
                f"No cause is named on every GPU the page may have run on: ITL p50 "
                f"{format_seconds(p50)} is {p50 / floor:.1f}x the {format_seconds(floor)} floor "
                f"on {self.deployment.gpu.slug}, and "
                + "; ".join(f"{f.title} is named only on {', '.join(self.gpus_naming(f.cause))}"
                            for f in self.depends_on_gpu)
                + ". Pass --gpu to decide." + self.unexplained_clusters_text
            )  # fmt: skip
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
        plausible = [a.gpu for a in self.plausible_gpus]
        ruled_out = [a.gpu for a in self.alternatives if a.weights_fit and not a.plausible]
        gpu = self.deployment.gpu.slug
        if not plausible:
            return (
                f"No cause can be named: the observed steps beat the floor of "
                f"{self.deployment.model.slug} {self.deployment.weights.name} at TP "
                f"{self.deployment.tp} on every GPU it fits ({', '.join(ruled_out)}), so the "
                "model, its precision or the TP is not what was assumed; state them (--model "
                "NAME or a config.json, --weights-precision, --tp)."
            )
        text = self.verdict
        if not self.depends_on_gpu:
            text += f" It holds on every plausible GPU ({', '.join(plausible)})."
        elif self.named:
            text += f" Named on every plausible GPU ({', '.join(plausible)}); " + "; ".join(
                f"{f.title} only on {', '.join(self.gpus_naming(f.cause))}"
                for f in self.depends_on_gpu) + f" (this report's scores are {gpu}'s)."  # fmt: skip
        if ruled_out:
            text += (
                f" Ruled out: {', '.join(ruled_out)} (the steps beat the floor of "
                f"{self.deployment.model.slug} {self.deployment.weights.name} there)."
            )
        return text

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
                    "named": f in self.named,
                    "evidence": list(f.evidence),
                    "confirm": list(f.confirm),
                    "fixes": [vars(x) for x in f.fixes],
                }
                for f in self.ranked
            ],
            "notes": list(self.notes),
            "impossible": self.impossible or None,
            "gpu_range": None if not self.alternatives else {
                "gpu_stated": False,
                "judged_on": self.deployment.gpu.slug,
                "verdict_holds": bool(self.plausible_gpus) and not self.depends_on_gpu,
                "depends_on_gpu": [f.cause for f in self.depends_on_gpu],
                "flipped_by": [a.gpu for a in self.flips],
                "ruled_out": [a.gpu for a in self.alternatives
                              if a.weights_fit and not a.plausible],
                "gpus": [{**vars(a), "scores": dict(a.scores), "plausible": a.plausible}
                         for a in self.alternatives],
            },
            "clusters": [vars(c) for c in fp.clusters],
            "step_seconds": fp.step_seconds,
            "healthy_host_seconds": fp.healthy_host_seconds,
        }  # fmt: skip


# A healthy host is vLLM 0.15's (V1, async output processing): the bundled calibration's
# constants for the GPU its vLLM 0.15.1 runs used. Host work is CPU time, so it is the standard
# for every GPU; slower hosts (V0, older releases, one GPU per pod) are what the cause names.
HEALTHY_HOST_GPU = "h100-sxm"


@functools.cache
def healthy_host_calibration() -> Calibration:
    """The bundled calibration (`data/calibration.json`) for the vLLM 0.15.1 H100 runs: its host
    terms are what a healthy vLLM host costs per step."""
    return load_calibration().for_gpu(HEALTHY_HOST_GPU)


def default_max_num_batched_tokens(deployment: Deployment, engine: str = "vllm") -> int:
    """vLLM's `vllm serve` default token budget: 8192 on >= 70 GiB GPUs except A100, else 2048;
    SGLang's default --chunked-prefill-size by the GPU's memory (`sim.sglang.chunk_tier`)."""
    gpu = deployment.gpu
    if engine == "sglang":
        from itlkit.physics.engine_memory import cuda_total_bytes
        from itlkit.sim.sglang import chunk_tier

        return chunk_tier(cuda_total_bytes(gpu)[0])[0]
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
    """Score every cause (`CAUSES`) from a timeline for a deployment; batch/context from the metrics
    (running gauge; prompt and generation counters) unless given; a healthy host's cost from
    `calibration` (default: the bundled one)."""
    host = calibration if calibration is not None else healthy_host_calibration()
    fp = fingerprint(
        timeline,
        deployment,
        max_num_batched_tokens=max_num_batched_tokens
        or default_max_num_batched_tokens(deployment, timeline.engine),
        batch_size=batch_size,
        context_tokens=context_tokens,
        prompt_tokens=prompt_tokens,
        host_seconds_per_step=host.host_seconds_per_step,
        host_seconds_per_sequence=host.host_seconds_per_sequence,
    )
    notes = [*timeline.notes, *measurement_notes(fp, deployment),
             *speculation_notes(timeline.speculation, fp, deployment)]  # fmt: skip
    if drop := acceptance_drop_note(timeline):
        notes.append(drop)
    thin = min(1.0, fp.observations / MIN_OBSERVATIONS)
    if thin < 1:
        notes.append(
            f"only {fp.observations:,.0f} ITL observations (< {MIN_OBSERVATIONS}): every score "
            f"is scaled by {thin:.2f}"
        )
    findings = [
        explain(cause, round(cause_score(cause, fp) * thin, 3), fp, timeline, deployment)
        for cause in CAUSES
        if cause_applies(cause, fp)
    ]
    findings.sort(key=lambda f: -f.score)
    impossible = floor_contradiction(fp, timeline.itl_total, deployment)
    return Diagnosis(deployment, timeline, fp, tuple(findings), tuple(dict.fromkeys(notes)),
                     impossible=impossible)  # fmt: skip


def floor_contradiction(fp: Fingerprint, total: Histogram, deployment: Deployment) -> str:
    """Why `deployment` cannot have made the observed gaps, or "" when it can: `floor_beaten`
    against the lowest window floor (the smallest batch and context seen)."""
    floors = np.asarray(fp.floor_seconds_by_window, dtype=float)
    floors = floors[np.isfinite(floors) & (floors > 0)]
    floor = float(floors.min()) if floors.size else fp.floor_seconds
    where = f"the {format_seconds(floor)} floor of {deployment.label} at batch ~{fp.batch_size:.0f}"
    return floor_beaten(total, floor, where)


def floor_beaten(total: Histogram, floor_seconds: float, where: str) -> str:
    """Why the gaps of `total` cannot come from steps bounded below by `floor_seconds`, or "".
    Each gap is at least one step, and no step reads the weights and the KV cache faster than
    the datasheet's HBM bandwidth allows: so neither a quarter of the gaps ending below the
    floor (the p25's whole bucket below it) nor the fastest gaps averaging below it can happen.
    The fastest gaps' mean is bounded exactly, without a guess inside a bucket: the `_sum` less
    what each slower gap holds at least (its bucket's lower bound), over their count."""
    if total.count <= 0:
        return ""
    upper = locate_quantile(0.25, total.upper_bounds, total.cumulative_counts).bucket_upper
    if math.isfinite(upper) and upper < floor_seconds:
        return (f"a quarter of the gaps take at most {format_seconds(upper)} (where the "
                f"p25's bucket ends), below {where}")  # fmt: skip
    bound = fastest_gaps_mean_bound(total)
    if bound is not None and bound[2] < floor_seconds:
        share, within, mean = bound
        return (f"the fastest {share:.0%} of the gaps (those within {format_seconds(within)}) "
                f"average at most {format_seconds(mean)} (the _sum less what the slower gaps "
                f"hold at least), below {where}")  # fmt: skip
    return ""


def fastest_gaps_mean_bound(total: Histogram, at_least: float = 0.25):
    """(share, bucket bound, mean bound) for the prefix of buckets holding at least `at_least`
    of the observations whose mean is bounded lowest, or None: the observations in buckets up
    to bound b have a sum of at most `_sum` less, for every slower bucket, its count times its
    lower bound."""
    bounds, cumulative = total.upper_bounds, np.asarray(total.cumulative_counts, dtype=float)
    count = float(cumulative[-1])
    if count <= 0 or not math.isfinite(total.sum):
        return None
    counts = np.diff(cumulative, prepend=0.0)
    lower = np.concatenate(([0.0], bounds[:-1]))
    slower_at_least = np.cumsum((counts * lower)[::-1])[::-1]  # from bucket k upward
    best = None
    for k in range(len(bounds) - 1):
        if cumulative[k] < at_least * count or cumulative[k] <= 0:
            continue
        mean = (total.sum - slower_at_least[k + 1]) / cumulative[k]
        if best is None or mean < best[2]:
            best = (cumulative[k] / count, float(bounds[k]), float(mean))
    return best
