"""Arrival times for the scheduler simulator: a Poisson process at a fixed rate, a piecewise-
constant rate profile (bursts), or `vllm bench serve`'s client (`--num-prompts` at
`--request-rate`, gamma gaps; inf: all at t = 0)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from itlkit.errors import ConfigError
from itlkit.sim.lengths import Seed, make_rng, positive_float, positive_int


@dataclass(frozen=True)
class RateProfile:
    """A piecewise-constant arrival rate: `rates_per_second[i]` from `start_seconds[i]` on."""

    start_seconds: tuple[float, ...]
    rates_per_second: tuple[float, ...]

    def __post_init__(self) -> None:
        starts = np.asarray(self.start_seconds, dtype=float)
        rates = np.asarray(self.rates_per_second, dtype=float)
        if starts.size == 0 or starts.shape != rates.shape:
            raise ConfigError("a rate profile needs one rate per start time, at least one")
        if starts[0] != 0 or np.any(np.diff(starts) <= 0):
            raise ConfigError("rate profile start times must begin at 0 and increase")
        if np.any(~np.isfinite(rates)) or np.any(rates < 0):
            raise ConfigError("rate profile rates must be finite numbers >= 0 requests/s")

    def rate_at(self, seconds):
        """The arrival rate in requests/s at time(s) `seconds`."""
        index = np.searchsorted(self.start_seconds, seconds, side="right") - 1
        return np.asarray(self.rates_per_second, dtype=float)[np.maximum(index, 0)]


def bursty_profile(
    *,
    base_rate_per_second: float,
    burst_rate_per_second: float,
    period_seconds: float,
    burst_seconds: float,
    duration_seconds: float,
) -> RateProfile:
    """A base rate with a burst of `burst_seconds` at the start of every period."""
    if not 0 < burst_seconds < period_seconds:
        raise ConfigError("bursts need 0 < burst_seconds < period_seconds")
    starts, rates = [], []
    for begin in np.arange(0.0, duration_seconds, period_seconds):
        starts += [float(begin), float(begin + burst_seconds)]
        rates += [burst_rate_per_second, base_rate_per_second]
    return RateProfile(tuple(starts), tuple(rates))


def poisson_arrivals(*, rate_per_second: float, duration_seconds: float, seed: Seed = None):
    """Arrival times of a homogeneous Poisson process on [0, duration) (exponential gaps)."""
    return profile_arrivals(
        profile=RateProfile((0.0,), (float(rate_per_second),)),
        duration_seconds=duration_seconds,
        seed=seed,
    )


def profile_arrivals(*, profile: RateProfile, duration_seconds: float, seed: Seed = None):
    """Arrival times of an inhomogeneous Poisson process (time change of a unit-rate one)."""
    duration = positive_float("duration seconds", duration_seconds)
    rng = make_rng(seed)
    starts = np.asarray(profile.start_seconds, dtype=float)
    rates = np.asarray(profile.rates_per_second, dtype=float)
    keep = starts < duration
    knots = np.append(starts[keep], duration)
    # Cumulative intensity at each knot: a piecewise-linear, non-decreasing map of time.
    intensity = np.concatenate(([0.0], np.cumsum(rates[keep] * np.diff(knots))))
    total = intensity[-1]
    if total <= 0:
        return np.zeros(0)
    count = rng.poisson(total)
    # Given the count, the points of a Poisson process are uniform in cumulative intensity.
    unit = np.sort(rng.uniform(0.0, total, size=count))
    # Invert the intensity; flat stretches (rate 0) never receive points.
    segment = np.searchsorted(intensity, unit, side="right") - 1
    segment = np.clip(segment, 0, len(rates[keep]) - 1)
    rate = rates[keep][segment]
    # A point exactly on the edge of a zero-rate stretch belongs to that edge.
    offset = np.divide(unit - intensity[segment], rate, out=np.zeros_like(unit), where=rate > 0)
    return knots[segment] + offset


def bench_arrivals(
    *, num_prompts: int, request_rate_per_second: float, burstiness: float = 1.0, seed: Seed = None
) -> np.ndarray:
    """When `vllm bench serve` sends `num_prompts` requests at `--request-rate` (inf: all at
    t = 0), before any `--max-concurrency` holds them back.

    `get_request` in vllm/benchmarks/serve.py (vllm-project/vllm @
    009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1): gaps drawn gamma(shape = burstiness, scale =
    1 / (rate x burstiness)) (burstiness 1: exponential, a Poisson process), summed from the
    first gap (the first request waits one gap), then rescaled so that the last request goes
    at num_prompts / rate. (Versions without the rescale send at the plain sums: the same gaps,
    a total span off by about 1 / sqrt(num_prompts).)
    """
    n = positive_int("the number of prompts", num_prompts)
    rate = float(request_rate_per_second)
    if not rate > 0:  # NaN fails too
        raise ConfigError(f"the request rate must be > 0 requests/s or inf, got {rate}")
    if math.isinf(rate):
        return np.zeros(n)
    if isinstance(burstiness, bool) or not (0 < burstiness < math.inf):
        raise ConfigError(f"burstiness must be a finite number > 0, got {burstiness!r:.40}")
    gaps = make_rng(seed).gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    sends = np.cumsum(gaps)
    if sends[-1] > 0:
        sends *= (n / rate) / sends[-1]
    return sends


# ---- the workload --------------------------------------------------------------------------
