"""What-if: replay an incident's traffic through the simulator with other engine settings.

The traffic is rebuilt from the metrics themselves: arrivals follow the observed rate of first
tokens window by window (a Poisson process with that piecewise rate), and prompts and outputs
take the mean lengths the counters give. The engine's speed is calibrated first: the
replay of the current settings must reproduce the observed mean ITL (the one exact statistic a
histogram keeps), and the baseline replay can be checked against the observed histogram before
any knob is turned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from itlkit.diagnosis.scoring import TYPICAL_MBU, Diagnosis
from itlkit.errors import ConfigError
from itlkit.metrics.histogram import Histogram
from itlkit.metrics.vllm_metrics import ITL_BUCKETS_SECONDS, TTFT_BUCKETS_SECONDS
from itlkit.sim.scheduler import SchedulerConfig, simulate_deployment
from itlkit.sim.workload import RateProfile, Workload, synthetic_workload
from itlkit.units import kv_precision

MAX_REPLAY_SECONDS = 3600.0  # longer incidents replay their first hour


@dataclass(frozen=True)
class Setting:
    """The engine knobs a what-if can turn (vLLM names)."""

    max_num_batched_tokens: int
    max_num_seqs: int = 1024
    kv_precision: str = "bf16"
    disaggregated: bool = False

    @property
    def label(self) -> str:
        parts = [f"budget {self.max_num_batched_tokens}", f"max_num_seqs {self.max_num_seqs}"]
        parts.append(f"KV {self.kv_precision}")
        if self.disaggregated:
            parts.append("disaggregated")
        return ", ".join(parts)


@dataclass(frozen=True)
class Prediction:
    """What the simulator predicts under one setting, in the observed bucket layouts."""

    setting: Setting
    itl: Histogram
    ttft: Histogram
    preemptions: int
    requests_finished: int

    def itl_quantile(self, q: float) -> float:
        return self.itl.quantile(q)

    def ttft_quantile(self, q: float) -> float:
        return self.ttft.quantile(q)


def current_setting(diagnosis: Diagnosis) -> Setting:
    """The setting the incident ran with (as far as the diagnosis knows it)."""
    return Setting(
        max_num_batched_tokens=diagnosis.max_num_batched_tokens,
        kv_precision=diagnosis.deployment.kv.name,
    )


def replay_workload(diagnosis: Diagnosis, *, seed: int = 0) -> Workload:
    """The incident's traffic: observed arrival rate per window, mean prompt and output, and
    the prefix cache's hit rate."""
    t = diagnosis.timeline
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
        prompt = diagnosis.context_tokens
    if not math.isfinite(output):
        output = 256.0
    prompt_tokens = max(round(prompt), 1)
    return synthetic_workload(
        duration_seconds=duration,
        profile=RateProfile(tuple(starts[keep]), tuple(rates[keep])),
        prompt_tokens=prompt_tokens,
        output_tokens=max(round(output), 1),
        # The prefix cache's observed hit rate, spread evenly over the prompts.
        shared_prefix_tokens=round(t.prefix_cache_hit_rate() * prompt_tokens),
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
        config=SchedulerConfig(
            max_num_batched_tokens=int(setting.max_num_batched_tokens),
            # vLLM caps max_num_seqs at the token budget: each running request needs a token.
            max_num_seqs=min(int(setting.max_num_seqs), int(setting.max_num_batched_tokens)),
            disaggregated=bool(setting.disaggregated),
        ),
        efficiency=efficiency,
        host_overhead_seconds=host,
        until_seconds=min(diagnosis.timeline.duration_seconds, MAX_REPLAY_SECONDS),
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


def predict(
    diagnosis: Diagnosis, setting: Setting, *, speed: EngineSpeed | None = None, seed: int = 0
) -> Prediction:
    """Replay the incident's traffic under `setting` (calibrated first unless `speed` is
    given); histograms in the observed layouts."""
    speed = speed or calibrate(diagnosis, seed=seed)
    result = _simulate(
        diagnosis, setting, (speed.efficiency, speed.host_overhead_seconds), seed=seed
    )
    t = diagnosis.timeline
    itl_bounds = t.itl_total.upper_bounds if t.itl_total is not None else ITL_BUCKETS_SECONDS
    ttft_bounds = t.ttft_total.upper_bounds if t.ttft_total is not None else TTFT_BUCKETS_SECONDS
    return Prediction(
        setting=setting,
        itl=result.itl_histogram(upper_bounds=itl_bounds),
        ttft=result.ttft_histogram(upper_bounds=ttft_bounds),
        preemptions=int(result.preemptions),
        requests_finished=int(result.finished.sum()),
    )
