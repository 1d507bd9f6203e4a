"""What-if: replay an incident's traffic through the simulator with other engine settings.

The traffic is rebuilt from the metrics themselves: arrivals follow the observed rate of first
tokens window by window (a Poisson process with that piecewise rate), and prompts and outputs
take the mean lengths the counters give. The engine's speed is calibrated first: the
replay of the current settings must reproduce the observed mean ITL (the one exact statistic a
histogram keeps), and the baseline replay is checked against the observed histogram before
any knob is turned (`replay_quality`, carried by the current setting's prediction).

A prediction's quantiles are exact quantiles of the simulated samples (the simulator knows every
gap), so they move with a knob as the steps do; the same samples in the observed buckets are kept
beside them (`itl`, `ttft`, `itl_bucket_quantile`), which is what the replay is compared with the
observed histogram by, bucket to bucket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from itlkit.diagnosis.scoring import TYPICAL_MBU, Diagnosis
from itlkit.diagnosis.sglang import mixing
from itlkit.errors import ConfigError
from itlkit.metrics.histogram import Histogram
from itlkit.metrics.vllm_metrics import ITL_BUCKETS_SECONDS, TTFT_BUCKETS_SECONDS
from itlkit.physics.roofline import step_coefficients
from itlkit.sim.results import weighted_quantile
from itlkit.sim.scheduler import SchedulerConfig, simulate_deployment
from itlkit.sim.workload import RateProfile, Workload, synthetic_workload
from itlkit.units import format_percent, format_seconds, kv_precision

MAX_REPLAY_SECONDS = 3600.0  # longer incidents replay their first hour
# The quantile levels a prediction keeps exactly (the simulated samples are not kept: a widget
# holds hundreds of predictions). 0.25 is the level the diagnosis calls the fast mode.
EXACT_LEVELS = (0.25, 0.5, 0.9, 0.95, 0.99, 0.999)
FAST_MODE_LEVEL = 0.25
# How far the replay of the current settings may miss an observed quantile (ITL p50, ITL p99,
# TTFT p99; relative, both in the observed buckets) before the what-if warns. Why a fifth: a
# knob is read by how far it moves a quantile from the replay, and the smaller budget steps move
# ITL p99 by about that much (mixed incident: budget 512 -> 640, +16%; 512 -> 768, +33%); a
# replay that misses by more cannot tell such a change from its own error, so its predictions
# are directions, not values. Measured on the bundled incidents (replay vs observed, worst of
# the three): healthy, host_overhead, prefill_interference and batch_or_context_growth (clean)
# within 2%; clean mixed 26% (ITL p99 -25%, TTFT p99 -26%); clean preemption 98% (ITL p99);
# the calibrated and noisy ones (step jitter and host time the replay lacks) 4-79%.
REPLAY_TOLERANCE = 0.20


@dataclass(frozen=True)
class Setting:
    """The engine knobs a what-if can turn (vLLM names)."""

    max_num_batched_tokens: int
    max_num_seqs: int = 1024
    kv_precision: str = "bf16"
    disaggregated: bool = False
    # SGLang's default: a prefill batch runs alone and the decodes wait (`sim.sglang`); off,
    # the decodes ride in it (vLLM's step, SGLang's --enable-mixed-chunk)
    prefill_alone: bool = False

    @property
    def label(self) -> str:
        parts = [f"budget {self.max_num_batched_tokens}", f"max_num_seqs {self.max_num_seqs}"]
        parts.append(f"KV {self.kv_precision}")
        if self.disaggregated:
            parts.append("disaggregated")
        if self.prefill_alone:
            parts.append("prefill batches alone")
        return ", ".join(parts)


@dataclass(frozen=True)
class ReplayQuality:
    """How far the replay of the current settings lands from what was observed: relative errors
    (replayed / observed - 1) of ITL p50, ITL p99 and TTFT p99, both read by Prometheus'
    `histogram_quantile` from the observed bucket layout (like with like); NaN without TTFT."""

    itl_p50_relative_error: float
    itl_p99_relative_error: float
    ttft_p99_relative_error: float
    tolerance: float
    line: str  # the three comparisons in one sentence
    warning: str | None  # set when an error exceeds the tolerance

    @property
    def poor(self) -> bool:
        return self.warning is not None


@dataclass(frozen=True)
class Prediction:
    """What the simulator predicts under one setting: exact quantiles of its samples, and the
    samples in the observed bucket layouts beside them.

    `replay` is set on the prediction of the current settings (how far it lands from what was
    observed); `notes` say what a reader would otherwise misread (a prediction below the
    observed fast mode, and why)."""

    setting: Setting
    itl: Histogram  # the simulated gaps in the observed ITL buckets
    ttft: Histogram
    preemptions: int
    requests_finished: int
    itl_exact_seconds: dict[float, float] = field(default_factory=dict)  # EXACT_LEVELS -> s
    ttft_exact_seconds: dict[float, float] = field(default_factory=dict)
    replay: ReplayQuality | None = None
    notes: tuple[str, ...] = ()

    def itl_quantile(self, q: float) -> float:
        """The exact q-quantile of the simulated ITL samples (q one of EXACT_LEVELS)."""
        return _exact(self.itl_exact_seconds, q, "ITL")

    def ttft_quantile(self, q: float) -> float:
        """The exact q-quantile of the simulated TTFT samples (q one of EXACT_LEVELS)."""
        return _exact(self.ttft_exact_seconds, q, "TTFT")

    def itl_bucket_quantile(self, q: float) -> float:
        """The q-quantile the observed buckets would give (Prometheus' histogram_quantile)."""
        return self.itl.quantile(q)

    def ttft_bucket_quantile(self, q: float) -> float:
        return self.ttft.quantile(q)

    @property
    def itl_fast_mode_seconds(self) -> float:
        """The predicted fast mode: the exact p25, the level the diagnosis calls fast mode."""
        return self.itl_quantile(FAST_MODE_LEVEL)


def _exact(quantiles: dict[float, float], q: float, what: str) -> float:
    if q not in quantiles:
        levels = ", ".join(f"{level:g}" for level in EXACT_LEVELS)
        raise ConfigError(f"the {what} quantile {q!r} is not kept exactly; kept: {levels}")
    return quantiles[q]


def current_setting(diagnosis: Diagnosis) -> Setting:
    """The setting the incident ran with (as far as the diagnosis knows it): for SGLang's
    metrics, its prefill batches alone unless its device timer shows them mixed."""
    return Setting(
        max_num_batched_tokens=diagnosis.max_num_batched_tokens,
        kv_precision=diagnosis.deployment.kv.name,
        prefill_alone=diagnosis.timeline.engine == "sglang" and not mixing(diagnosis.fingerprint),
    )


@dataclass(frozen=True)
class IncidentTraffic:
    """An incident's traffic as the metrics show it: arrivals per window (first tokens per
    second), mean prompt and output, and the prefix cache's hit share of each prompt."""

    profile: RateProfile
    duration_seconds: float
    prompt_tokens: int
    output_tokens: int
    shared_prefix_tokens: int


def incident_traffic(timeline, *, context_tokens: float) -> IncidentTraffic:
    """The traffic of a scrape series (`context_tokens`: the prompt when the counters do not
    give one); ConfigError without a time axis or arrivals."""
    t = timeline
    if not t.has_time_axis:
        raise ConfigError("a what-if needs a scrape series (a time axis), not a single scrape")
    rates = np.nan_to_num(t.first_tokens_per_second)
    if not np.any(rates > 0):
        raise ConfigError("no arrivals observed (the TTFT count never rose): nothing to replay")
    starts = t.start_seconds - t.start_seconds[0]
    keep = starts < MAX_REPLAY_SECONDS
    duration = min(float(t.end_seconds[-1] - t.start_seconds[0]), MAX_REPLAY_SECONDS)
    output = t.mean_output_tokens()
    prompt = t.mean_prompt_tokens()
    if not math.isfinite(prompt):
        prompt = context_tokens
    if not math.isfinite(output):
        output = 256.0
    prompt_tokens = max(round(prompt), 1)
    return IncidentTraffic(
        RateProfile(tuple(starts[keep]), tuple(rates[keep])), duration, prompt_tokens,
        max(round(output), 1),
        # The prefix cache's observed hit rate, spread evenly over the prompts.
        round(t.prefix_cache_hit_rate() * prompt_tokens),
    )  # fmt: skip


def replay_workload(diagnosis: Diagnosis, *, seed: int = 0) -> Workload:
    """The incident's traffic (`incident_traffic`) drawn as a workload."""
    traffic = incident_traffic(diagnosis.timeline, context_tokens=diagnosis.context_tokens)
    return synthetic_workload(
        duration_seconds=traffic.duration_seconds,
        profile=traffic.profile,
        prompt_tokens=traffic.prompt_tokens,
        output_tokens=traffic.output_tokens,
        shared_prefix_tokens=traffic.shared_prefix_tokens,
        seed=seed,
    )


@dataclass(frozen=True)
class EngineSpeed:
    """How fast the replayed engine runs: GPU time / efficiency + host seconds per step."""

    efficiency: float
    host_overhead_seconds: float
    replay_itl_mean_seconds: float
    observed_itl_mean_seconds: float


def _simulate(diagnosis: Diagnosis, setting: Setting, speed, *, seed: int):
    dep = diagnosis.deployment
    if setting.kv_precision != dep.kv.name:
        dep = replace(dep, kv=kv_precision(setting.kv_precision))
    efficiency, host = speed
    return simulate_deployment(
        replay_workload(diagnosis, seed=seed),
        deployment=dep,
        config=scheduler_config(setting),
        efficiency=efficiency,
        host_overhead_seconds=host,
        until_seconds=min(diagnosis.timeline.duration_seconds, MAX_REPLAY_SECONDS),
    )


def scheduler_config(setting: Setting) -> SchedulerConfig:
    """The simulator's knobs for a what-if setting."""
    alone = setting.prefill_alone and not setting.disaggregated
    seqs = int(setting.max_num_seqs)
    return SchedulerConfig(
        max_num_batched_tokens=int(setting.max_num_batched_tokens),
        # in mixed steps each running request needs a token of the budget (vLLM caps
        # max_num_seqs at it); a decode step between prefill batches has no budget
        max_num_seqs=seqs if alone else min(seqs, int(setting.max_num_batched_tokens)),
        disaggregated=bool(setting.disaggregated),
        prefill_only_steps=alone,
    )


def _mean_itl(result) -> float:
    values, weights = result.itl_weighted()
    return float(np.average(values, weights=weights)) if np.sum(weights) > 0 else math.nan


def calibrate(diagnosis: Diagnosis, *, seed: int = 0, iterations: int = 8) -> EngineSpeed:
    """Find the engine speed whose replay of the current settings gives the observed mean ITL.

    The mean is the one exact statistic a histogram keeps (sum / count), so it is matched by
    bisection on the efficiency; when even a slow GPU (efficiency 0.15) replays too fast, the
    efficiency stays at a typical 60% and the rest is bisected as per-step host time.
    """
    target = diagnosis.timeline.itl_total.mean
    setting = current_setting(diagnosis)

    def mean_at(efficiency: float, host: float) -> float:
        return _mean_itl(_simulate(diagnosis, setting, (efficiency, host), seed=seed))

    low, high = 0.15, 1.0
    if mean_at(low, 0.0) >= target:
        for _ in range(iterations):  # the mean falls as the efficiency rises
            mid = math.sqrt(low * high)
            low, high = (mid, high) if mean_at(mid, 0.0) > target else (low, mid)
        efficiency, host = math.sqrt(low * high), 0.0
    else:
        low_host, high_host = 0.0, target
        for _ in range(iterations):
            mid = (low_host + high_host) / 2
            low_host, high_host = (
                (low_host, mid) if mean_at(TYPICAL_MBU, mid) > target else (mid, high_host)
            )
        efficiency, host = TYPICAL_MBU, (low_host + high_host) / 2
    return EngineSpeed(efficiency, host, mean_at(efficiency, host), target)


def _relative_error(replayed: float, observed: float) -> float:
    return replayed / observed - 1 if observed > 0 else math.nan


def replay_quality(diagnosis: Diagnosis, baseline: Prediction) -> ReplayQuality:
    """How far `baseline` (the replay of the current settings) lands from the observed ITL
    p50/p99 and TTFT p99, both in the observed buckets; a warning beyond REPLAY_TOLERANCE."""
    t = diagnosis.timeline
    pairs = [
        ("ITL p50", baseline.itl_bucket_quantile(0.5), t.itl_total.quantile(0.5)),
        ("ITL p99", baseline.itl_bucket_quantile(0.99), t.itl_total.quantile(0.99)),
    ]
    if t.ttft_total is not None and t.ttft_total.count > 0:
        pairs.append(("TTFT p99", baseline.ttft_bucket_quantile(0.99), t.ttft_total.quantile(0.99)))
    errors = {name: _relative_error(replayed, observed) for name, replayed, observed in pairs}
    line = (
        "replay of the current settings vs observed (both in the observed buckets): "
        + ", ".join(
            f"{name} {format_seconds(replayed)} vs {format_seconds(observed)} ({errors[name]:+.0%})"
            for name, replayed, observed in pairs
        )
    )
    missed = [name for name, e in errors.items() if abs(e) > REPLAY_TOLERANCE]
    warning = None
    if missed:
        by = " and ".join(f"{name} by {errors[name]:+.0%}" for name in missed)
        warning = (
            f"the replay of the current settings misses {by}, beyond the "
            f"{format_percent(REPLAY_TOLERANCE)} at which a what-if can be read as values: "
            "compare each prediction with the replay (its direction and size), not with the "
            "observed numbers or an SLO; the replay rebuilds the traffic from mean prompt and "
            "output lengths and a Poisson arrival rate per window, and this incident has "
            "something that rebuild lacks"
        )
    return ReplayQuality(
        itl_p50_relative_error=errors["ITL p50"],
        itl_p99_relative_error=errors["ITL p99"],
        ttft_p99_relative_error=errors.get("TTFT p99", math.nan),
        tolerance=REPLAY_TOLERANCE,
        line=line,
        warning=warning,
    )


def _decode_step_seconds(diagnosis: Diagnosis, kv: str, speed: EngineSpeed) -> float:
    """A pure decode step of the diagnosis' batch and context at the replay's speed, with the KV
    cache in `kv` (the simulator's step formula, roofline.step_coefficients)."""
    dep = diagnosis.deployment
    if kv != dep.kv.name:
        dep = replace(dep, kv=kv_precision(kv))
    c = step_coefficients(
        dep, efficiency=speed.efficiency, host_overhead_seconds=speed.host_overhead_seconds
    )
    batch = float(diagnosis.batch_size)
    return float(c.seconds(batch, batch * float(diagnosis.context_tokens), sequences=batch))


def below_fast_mode_notes(
    diagnosis: Diagnosis, prediction: Prediction, speed: EngineSpeed
) -> tuple[str, ...]:
    """Why a prediction's ITL p99 sits below the observed fast mode, when it does.

    The report's fixes that remove chunks from decode steps (disaggregation, a smaller budget)
    keep the fast mode, the ordinary decode step; only a knob that shortens that step itself
    takes every gap below it: an FP8 KV cache (half the KV read) or a max_num_seqs below the
    running batch. Anything else below it is the replay running decode steps faster than
    observed."""
    fast = float(diagnosis.fast_mode_seconds)
    p99 = prediction.itl_quantile(0.99)
    if not (math.isfinite(fast) and p99 < fast):
        return ()
    moved = format_seconds(prediction.itl_fast_mode_seconds)
    head = (
        f"predicted ITL p99 {format_seconds(p99)} is below the observed fast mode "
        f"{format_seconds(fast)}"
    )
    current = current_setting(diagnosis)
    reasons = []
    if prediction.setting.kv_precision != current.kv_precision:
        before = _decode_step_seconds(diagnosis, current.kv_precision, speed)
        after = _decode_step_seconds(diagnosis, prediction.setting.kv_precision, speed)
        reasons.append(
            f"{prediction.setting.kv_precision.upper()} KV shortens the decode step itself "
            f"(~{diagnosis.batch_size:.0f} sequences of ~{diagnosis.context_tokens:,.0f} "
            f"tokens: {format_seconds(before)} -> {format_seconds(after)} at the replay's speed)"
        )
    if prediction.setting.max_num_seqs < diagnosis.batch_size:
        reasons.append(
            f"max_num_seqs {prediction.setting.max_num_seqs} caps the ~"
            f"{diagnosis.batch_size:.0f} running sequences, so each step reads less KV"
        )
    if reasons:
        return (
            f"{head}: {'; '.join(reasons)}. Removing chunks alone keeps the fast mode; this "
            f"setting also moves it (predicted fast mode {moved})",
        )
    return (
        f"{head}, though no knob in this setting shortens the decode step itself: the replay "
        f"runs decode steps faster than observed (predicted fast mode {moved}); read it "
        "against the replay",
    )


def predict(
    diagnosis: Diagnosis, setting: Setting, *, speed: EngineSpeed | None = None, seed: int = 0
) -> Prediction:
    """Replay the incident's traffic under `setting` (calibrated first unless `speed` is
    given): exact quantiles of the samples, the samples in the observed layouts, and for the
    current settings how far the replay lands from what was observed."""
    speed = speed or calibrate(diagnosis, seed=seed)
    result = _simulate(
        diagnosis, setting, (speed.efficiency, speed.host_overhead_seconds), seed=seed
    )
    t = diagnosis.timeline
    itl_bounds = t.itl_total.upper_bounds if t.itl_total is not None else ITL_BUCKETS_SECONDS
    ttft_bounds = t.ttft_total.upper_bounds if t.ttft_total is not None else TTFT_BUCKETS_SECONDS
    values, weights = result.itl_weighted()
    ttfts = result.ttft_seconds
    # inverted-CDF sample quantiles: each is a gap (or a TTFT) the simulation really produced
    itl_exact = np.atleast_1d(weighted_quantile(values, weights, list(EXACT_LEVELS)))
    ttft_exact = (
        np.quantile(ttfts, EXACT_LEVELS, method="inverted_cdf")
        if ttfts.size
        else np.full(len(EXACT_LEVELS), math.nan)
    )
    prediction = Prediction(
        setting=setting,
        itl=result.itl_histogram(upper_bounds=itl_bounds),
        ttft=result.ttft_histogram(upper_bounds=ttft_bounds),
        preemptions=int(result.preemptions),
        requests_finished=int(result.finished.sum()),
        itl_exact_seconds={q: float(v) for q, v in zip(EXACT_LEVELS, itl_exact, strict=True)},
        ttft_exact_seconds={q: float(v) for q, v in zip(EXACT_LEVELS, ttft_exact, strict=True)},
    )
    replay = (
        replay_quality(diagnosis, prediction) if setting == current_setting(diagnosis) else None
    )
    return replace(
        prediction, replay=replay, notes=below_fast_mode_notes(diagnosis, prediction, speed)
    )
