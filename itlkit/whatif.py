"""What-if: replay an incident's traffic through the simulator with other engine settings.

The traffic is rebuilt from the metrics themselves: arrivals follow the observed rate of first
tokens window by window (a Poisson process with that piecewise rate), and prompts and outputs
take the mean lengths the counters give. The engine runs at the bandwidth efficiency the
diagnosis fitted (plus the per-step host overhead it inferred, when the fit is too low for
bandwidth alone), so the baseline replay can be checked against what was observed before any
knob is turned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from itlkit.diagnosis import PLAUSIBLE_MBU, TYPICAL_MBU, Diagnosis
from itlkit.histogram import Histogram
from itlkit.models import ConfigError
from itlkit.scheduler import SchedulerConfig, simulate_deployment
from itlkit.units import kv_precision
from itlkit.vllm_metrics import ITL_BUCKETS_SECONDS, TTFT_BUCKETS_SECONDS
from itlkit.workload import RateProfile, Workload, synthetic_workload

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
    """The incident's traffic: observed arrival rate per window, mean prompt and output."""
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
    return synthetic_workload(
        duration_seconds=duration,
        profile=RateProfile(tuple(starts[keep]), tuple(rates[keep])),
        prompt_tokens=max(round(prompt), 1),
        output_tokens=max(round(output), 1),
        seed=seed,
    )


def engine_speed(diagnosis: Diagnosis) -> tuple[float, float]:
    """(efficiency, host overhead seconds) that reproduce the observed fast mode."""
    fit = diagnosis.mbu_fit
    if math.isfinite(fit) and fit >= PLAUSIBLE_MBU[0]:
        return float(min(fit, 1.0)), 0.0
    # Bandwidth efficiency alone cannot explain a fast mode this slow: the rest is host time.
    host = diagnosis.fast_mode_seconds - diagnosis.floor_seconds / TYPICAL_MBU
    return TYPICAL_MBU, max(float(host), 0.0)


def predict(diagnosis: Diagnosis, setting: Setting, *, seed: int = 0) -> Prediction:
    """Replay the incident's traffic under `setting`; histograms in the observed layouts."""
    dep = diagnosis.deployment
    if setting.kv_precision != dep.kv.name:
        dep = replace(dep, kv=kv_precision(setting.kv_precision))
    efficiency, host = engine_speed(diagnosis)
    result = simulate_deployment(
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
