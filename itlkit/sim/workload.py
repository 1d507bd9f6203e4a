"""Workloads for the scheduler simulator: who arrives when, with how many prompt and output tokens.

A workload is three aligned arrays sorted by arrival (seconds, prompt tokens, output tokens) plus
how many of each prompt's tokens a shared prefix serves from vLLM's automatic prefix cache (they
skip prefill but still occupy KV). Arrivals come from a Poisson process at a fixed rate, from a
piecewise-constant rate profile (bursts), from `vllm bench serve`'s client (`--num-prompts` at
`--request-rate`, inf: all at t = 0), or from a replay: explicit lists, a CSV, or a
`vllm bench serve --save-result` JSON. A workload may carry a closed-loop client
(`max_concurrency`, as `vllm bench serve --max-concurrency`): its arrival times are then when the
client wants to send, and the engine sends each request only once one of the N slots is free.
Lengths are fixed, uniform, lognormal, a table of quantiles, drawn from observed values, or
`--dataset-name random`'s ranges. Every random draw goes through an explicit
`numpy.random.Generator`, so a seed reproduces a run.
"""

from __future__ import annotations

import csv
import io
import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from itlkit.errors import ConfigError
from itlkit.input_files import file_problem, read_input_text

Seed = int | np.random.Generator | None

# The longest request length a distribution may give: no model reads 100M tokens, and token
# counts times KV bytes per token stay finite (the workload CSV's columns share the bound).
MOST_TOKENS = 10**8
# The widest lognormal spread: sigma 3 already puts the p99 length 1,000x above the median
# (exp(2.33 x 3)); measured prompt and output lengths spread with sigma ~0.5-1.5.
MOST_LOGNORMAL_SIGMA = 3.0


def make_rng(seed: Seed) -> np.random.Generator:
    """A Generator from an int seed (or the Generator itself; None draws fresh entropy)."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


# ---- length distributions ------------------------------------------------------------------


@dataclass(frozen=True)
class Fixed:
    """Every request has the same length in tokens."""

    tokens: int

    def __post_init__(self) -> None:
        _tokens("a fixed length", self.tokens)

    @property
    def mean_tokens(self) -> float:
        return float(self.tokens)

    @property
    def most_tokens(self) -> int:
        return self.tokens

    def sample(self, rng: np.random.Generator, *, size: int) -> np.ndarray:
        return np.full(size, self.tokens, dtype=np.int64)


@dataclass(frozen=True)
class Uniform:
    """Lengths drawn uniformly from the integers `low_tokens..high_tokens` (inclusive)."""

    low_tokens: int
    high_tokens: int

    def __post_init__(self) -> None:
        low = _tokens("uniform LOW", self.low_tokens)
        high = _tokens("uniform HIGH", self.high_tokens)
        if high < low:
            raise ConfigError(f"uniform lengths need low <= high, got LOW {low} > HIGH {high}")

    @property
    def mean_tokens(self) -> float:
        return (self.low_tokens + self.high_tokens) / 2.0

    @property
    def most_tokens(self) -> int:
        return self.high_tokens

    def sample(self, rng: np.random.Generator, *, size: int) -> np.ndarray:
        return rng.integers(self.low_tokens, self.high_tokens + 1, size=size, dtype=np.int64)


@dataclass(frozen=True)
class LogNormal:
    """Lengths whose logarithm is normal: median `median_tokens`, log-space spread `sigma`."""

    median_tokens: float
    sigma: float
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        median, sigma = self.median_tokens, self.sigma
        if isinstance(median, bool) or not (1 <= median <= MOST_TOKENS):  # NaN fails too
            raise ConfigError(
                f"the lognormal MEDIAN must be a number of tokens from 1 to {MOST_TOKENS:,}, "
                f"got {median!r:.40}"
            )
        if isinstance(sigma, bool) or not (0 <= sigma <= MOST_LOGNORMAL_SIGMA):
            raise ConfigError(
                f"the lognormal SIGMA must be a number from 0 to {MOST_LOGNORMAL_SIGMA:g} (at 3 "
                f"the p99 is already 1,000x the median), got {sigma!r:.40}"
            )
        if self.max_tokens is not None:
            _tokens("a lognormal max_tokens", self.max_tokens)

    @classmethod
    def from_mean(cls, mean_tokens: float, sigma: float, max_tokens: int | None = None):
        """The lognormal of mean `mean_tokens` and log-space spread `sigma`: its median is
        mean x exp(-sigma^2 / 2) (the lognormal's mean is exp(mu + sigma^2 / 2))."""
        _mean_tokens("the lognormal MEAN", mean_tokens)
        if isinstance(sigma, bool) or not (0 <= sigma <= MOST_LOGNORMAL_SIGMA):
            raise ConfigError(
                f"the lognormal SIGMA must be a number from 0 to {MOST_LOGNORMAL_SIGMA:g} (at 3 "
                f"the p99 is already 1,000x the median), got {sigma!r:.40}"
            )
        median = max(mean_tokens * math.exp(-sigma * sigma / 2.0), 1.0)
        return cls(median, sigma, max_tokens)

    @classmethod
    def from_mean_sd(cls, mean_tokens: float, sd_tokens: float, max_tokens: int | None = None):
        """The lognormal of mean `mean_tokens` and standard deviation `sd_tokens` (in tokens):
        sigma^2 = ln(1 + (sd / mean)^2), the lognormal's moments inverted."""
        _mean_tokens("the lognormal MEAN", mean_tokens)
        if isinstance(sd_tokens, bool) or not (0 <= sd_tokens <= MOST_TOKENS):
            raise ConfigError(
                f"the lognormal SD must be a number of tokens from 0 to {MOST_TOKENS:,}, "
                f"got {sd_tokens!r:.40}"
            )
        sigma = math.sqrt(math.log1p((sd_tokens / mean_tokens) ** 2))
        if sigma > MOST_LOGNORMAL_SIGMA:
            raise ConfigError(
                f"the lognormal SD {sd_tokens:g} is {sd_tokens / mean_tokens:,.0f}x its MEAN "
                f"{mean_tokens:g}: a log-space spread of {sigma:.2f}, beyond "
                f"{MOST_LOGNORMAL_SIGMA:g}"
            )
        return cls.from_mean(mean_tokens, sigma, max_tokens)

    @property
    def mean_tokens(self) -> float:
        """The unclipped lognormal's mean (draws are rounded and clipped to 1..max_tokens)."""
        return self.median_tokens * math.exp(self.sigma * self.sigma / 2.0)

    @property
    def most_tokens(self) -> int:
        return self.max_tokens or MOST_TOKENS

    def sample(self, rng: np.random.Generator, *, size: int) -> np.ndarray:
        draws = rng.lognormal(mean=math.log(self.median_tokens), sigma=self.sigma, size=size)
        # A draw past MOST_TOKENS is longer than any KV cache: the simulation refuses it either way.
        tokens = np.clip(np.rint(draws), 1, self.max_tokens or MOST_TOKENS).astype(np.int64)
        return tokens


@dataclass(frozen=True)
class Sampled:
    """Lengths drawn with replacement from observed values (e.g. a trace's prompt lengths)."""

    values_tokens: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.values_tokens:
            raise ConfigError("sampled lengths need at least one value")
        for value in self.values_tokens:
            _tokens("a sampled length", value)

    @property
    def mean_tokens(self) -> float:
        return float(np.mean(self.values_tokens))

    @property
    def most_tokens(self) -> int:
        return max(self.values_tokens)

    def sample(self, rng: np.random.Generator, *, size: int) -> np.ndarray:
        return rng.choice(np.asarray(self.values_tokens, dtype=np.int64), size=size, replace=True)


@dataclass(frozen=True)
class Quantiles:
    """Lengths from a table of quantiles: `levels` from 0 to 1 and the length at each, joined
    by straight lines (a piecewise-linear inverse CDF: a uniform draw u gives the length
    interpolated at level u, rounded to whole tokens)."""

    levels: tuple[float, ...]
    values_tokens: tuple[float, ...]

    def __post_init__(self) -> None:
        levels, values = self.levels, self.values_tokens
        if len(levels) != len(values) or len(levels) < 2:
            raise ConfigError(
                f"a quantile table needs one length per level and at least two rows (levels 0 "
                f"and 1), got {len(levels)} levels and {len(values)} lengths"
            )
        for level in levels:
            if isinstance(level, bool) or not isinstance(level, int | float | np.number):
                raise ConfigError(f"quantile levels must be numbers, got {level!r:.40}")
        for value in values:
            _mean_tokens("a quantile table's length", value)
        if levels[0] != 0 or levels[-1] != 1:
            raise ConfigError(
                f"quantile levels must run from 0 to 1 (every request needs a length), got "
                f"{levels[0]:g} to {levels[-1]:g}"
            )
        if any(b <= a for a, b in itertools.pairwise(levels)):  # NaN fails too
            raise ConfigError("quantile levels must increase strictly, one row per level")
        if any(b < a for a, b in itertools.pairwise(values)):
            raise ConfigError(
                "a quantile table's lengths must not decrease as the level rises (a higher "
                "quantile is never shorter)"
            )

    @property
    def mean_tokens(self) -> float:
        """The mean of the piecewise-linear inverse CDF: the trapezoids' areas over [0, 1]."""
        levels, values = np.asarray(self.levels), np.asarray(self.values_tokens, dtype=float)
        return float(np.sum(np.diff(levels) * (values[1:] + values[:-1]) / 2.0))

    @property
    def most_tokens(self) -> int:
        return round(self.values_tokens[-1])

    def quantile_tokens(self, level):
        """The length (unrounded) at `level` (0..1): the table interpolated."""
        return np.interp(level, self.levels, self.values_tokens)

    def sample(self, rng: np.random.Generator, *, size: int) -> np.ndarray:
        draws = self.quantile_tokens(rng.random(size))
        return np.clip(np.rint(draws), 1, MOST_TOKENS).astype(np.int64)


Lengths = Fixed | Uniform | LogNormal | Sampled | Quantiles


def as_lengths(value: int | Lengths) -> Lengths:
    """An int means a fixed length; distributions pass through."""
    if isinstance(value, Fixed | Uniform | LogNormal | Sampled | Quantiles):
        return value
    if isinstance(value, int | np.integer):
        return Fixed(int(value))
    raise ConfigError(
        f"lengths must be an int or Fixed/Uniform/LogNormal/Sampled/Quantiles, got {value!r}"
    )


def read_quantiles_csv(path: str | Path) -> Quantiles:
    """Read a quantile table: a CSV with the header `level,tokens` and one row per level, from
    level 0 (the shortest) to level 1 (the longest)."""
    path = Path(path)
    problem = file_problem(path, kind="quantile table")
    if problem:
        raise ConfigError(f"{path}: {problem}")
    text = read_input_text(path, kind="quantile table", max_bytes=10_000_000)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [cell.strip() for cell in next(reader, [])]
        if header != ["level", "tokens"]:
            raise ConfigError(
                f"{path}:1: the header must be 'level,tokens', got {','.join(header)[:60]!r}"
            )
        levels, values = [], []
        for row in reader:
            if not row or not "".join(row).strip():
                continue
            where = f"{path}:{reader.line_num}"
            if len(row) != 2:
                raise ConfigError(
                    f"{where}: a row holds a level and a length, got {len(row)} values"
                )
            try:
                level, value = float(row[0]), float(row[1])
            except ValueError:
                raise ConfigError(
                    f"{where}: {','.join(row)[:60]!r} is not a level and a number of tokens"
                ) from None
            levels.append(level)
            values.append(value)
    except csv.Error as exc:
        raise ConfigError(f"{path}:{reader.line_num}: not a CSV row ({exc})") from None
    try:
        return Quantiles(tuple(levels), tuple(values))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


# `vllm bench serve --dataset-name random`: lengths drawn uniformly from integer ranges around
# --random-input-len / --random-output-len, `RandomDataset.get_sampling_params` in
# vllm/benchmarks/datasets.py (vllm-project/vllm @ 0056b87fc1fda2642f39dda4392824c425dd1638):
# low = floor(len x (1 - ratio)), high = ceil(len x (1 + ratio)), ratio in [0, 1); the input
# length first loses the tokenizer's special tokens (the server adds them back), the output's
# bounds are at least 1, and a fixed random prefix of --random-prefix-len tokens comes first.


def _range_ratio(range_ratio: float) -> float:
    if isinstance(range_ratio, bool) or not (0.0 <= range_ratio < 1.0):  # NaN fails too
        raise ConfigError(
            f"the random range ratio must be in [0, 1) (vLLM's RandomDataset refuses more), got "
            f"{range_ratio!r:.40}"
        )
    return float(range_ratio)


def vllm_random_prompt_lengths(
    *, input_len: int, range_ratio: float = 0.0, prefix_len: int = 0, special_tokens: int = 0
) -> Uniform:
    """Served prompt lengths of `--dataset-name random`: prefix + U[low, high] + the special
    tokens the server adds, low/high from `input_len - special_tokens` (see above)."""
    ratio = _range_ratio(range_ratio)
    _tokens("--random-input-len", input_len)
    for name, value in (("--random-prefix-len", prefix_len), ("special tokens", special_tokens)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ConfigError(f"{name} must be a whole number of tokens, got {value!r:.40}")
        if not 0 <= value <= MOST_TOKENS:
            raise ConfigError(f"{name} must be from 0 to {MOST_TOKENS:,} tokens, got {value:,}")
    real = max(0, int(input_len) - int(special_tokens))
    low, high = math.floor(real * (1 - ratio)), math.ceil(real * (1 + ratio))
    if prefix_len + low < 1:  # vLLM's own check: the shortest prompt must hold a token
        raise ConfigError(
            f"--random-input-len {input_len} with {special_tokens} special tokens and range "
            f"ratio {ratio:g} can draw prompts of {prefix_len + low} tokens; vLLM refuses that"
        )
    extra = int(prefix_len) + int(special_tokens)
    return Uniform(low + extra, high + extra)


def vllm_random_output_lengths(*, output_len: int, range_ratio: float = 0.0) -> Uniform:
    """Output lengths of `--dataset-name random`: U[max(floor(len x (1 - r)), 1),
    ceil(len x (1 + r))] (see above)."""
    ratio = _range_ratio(range_ratio)
    _tokens("--random-output-len", output_len)
    low = max(math.floor(output_len * (1 - ratio)), 1)
    return Uniform(low, max(math.ceil(output_len * (1 + ratio)), 1))


# ---- arrival processes ---------------------------------------------------------------------


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
    duration = _positive_float("duration seconds", duration_seconds)
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
    n = _positive_int("the number of prompts", num_prompts)
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


@dataclass(frozen=True, eq=False)
class Workload:
    """Requests sorted by arrival; `cached_prompt_tokens` of each prompt come from prefix cache.

    Of those cached tokens, the first `shared_prompt_tokens` are a prefix that every request of
    the same `prefix_group` starts with (a system prompt): vLLM holds those KV blocks once, however
    many running requests use them (its block pool counts references). -1: no group.

    A workload read from a file keeps where each request came from, so that an error can point
    at it: `origin` (its CSV line, its index in a bench file) and `source`, a template that
    names origin k in the user's words (`'trace.csv:{}'`).

    `max_concurrency` N makes the client a closed loop (`vllm bench serve --max-concurrency`):
    the arrival times are when the client wants to send, and request k is sent at the later of
    its arrival and the moment one of the N requests in flight finishes (first come, first
    served). None: an open loop, every request sent at its arrival.
    """

    arrival_seconds: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    cached_prompt_tokens: np.ndarray
    shared_prompt_tokens: np.ndarray = None  # None: zeros (nothing shared)
    prefix_group: np.ndarray = None  # None: -1 everywhere
    origin: np.ndarray | None = None  # each request's place in `source` (None: not from a file)
    source: str | None = None
    max_concurrency: int | None = None  # a closed-loop client's slots (None: open loop)

    def __post_init__(self) -> None:
        n = len(self.arrival_seconds)
        if self.max_concurrency is not None:
            _concurrency(self.max_concurrency)
        if self.shared_prompt_tokens is None:
            object.__setattr__(self, "shared_prompt_tokens", np.zeros(n, dtype=np.int64))
        if self.prefix_group is None:
            object.__setattr__(self, "prefix_group", np.full(n, -1, dtype=np.int64))
        for name in ("prompt_tokens", "output_tokens", "cached_prompt_tokens",
                     "shared_prompt_tokens", "prefix_group"):  # fmt: skip
            if len(getattr(self, name)) != n:
                raise ConfigError(
                    f"workload {name} has {len(getattr(self, name))} entries, not {n}"
                )
        if n and (
            np.any(~np.isfinite(self.arrival_seconds))
            or np.any(self.arrival_seconds < 0)
            or np.any(np.diff(self.arrival_seconds) < 0)
        ):
            raise ConfigError("arrival times must be finite, >= 0 seconds and sorted")
        if n and (np.any(self.prompt_tokens < 1) or np.any(self.output_tokens < 1)):
            raise ConfigError("every request needs >= 1 prompt token and >= 1 output token")
        cached = self.cached_prompt_tokens
        if n and (np.any(cached < 0) or np.any(cached >= self.prompt_tokens)):
            raise ConfigError("cached prompt tokens must be >= 0 and below the prompt length")
        shared, group = self.shared_prompt_tokens, self.prefix_group
        if n and (np.any(shared < 0) or np.any(shared > cached)):
            raise ConfigError("shared prompt tokens must be >= 0 and at most the cached ones")
        if n and np.any(group < -1):
            raise ConfigError(f"prefix groups must be >= 0 (or -1: none), got {int(group.min())}")
        if n and np.any((shared > 0) & (group < 0)):
            raise ConfigError("a request that shares prompt tokens needs a prefix group >= 0")

    @property
    def num_requests(self) -> int:
        return len(self.arrival_seconds)

    @property
    def last_arrival_seconds(self) -> float:
        return float(self.arrival_seconds[-1]) if self.num_requests else 0.0

    def request_name(self, i: int) -> str:
        """Request `i` as its user finds it: its file's line or index, and its arrival time."""
        at = f"arriving at {float(self.arrival_seconds[i]):.3f} s"
        if self.source is None or self.origin is None:
            return f"the request {at}"
        return f"{self.source.format(int(self.origin[i]))} ({at})"


def make_workload(
    *,
    arrival_seconds,
    prompt_tokens,
    output_tokens,
    cached_prompt_tokens=0,
    shared_prompt_tokens=0,
    prefix_group=-1,
    origin=None,
    source: str | None = None,
    max_concurrency: int | None = None,
) -> Workload:
    """A workload from explicit arrays (sorted by arrival here; scalars broadcast). `origin` and
    `source`: where each request came from; `max_concurrency`: a closed-loop client's slots
    (see `Workload`)."""
    arrival = np.asarray(arrival_seconds, dtype=float).reshape(-1)
    n = arrival.size
    order = np.argsort(arrival, kind="stable")

    def column(name, values):
        try:
            values = np.asarray(values, dtype=np.int64)
        except OverflowError:  # a Python int past 2**63: far beyond any real request
            raise ConfigError(f"workload {name} holds a number too large to count") from None
        return np.broadcast_to(values, (n,))[order].copy()

    return Workload(
        arrival_seconds=arrival[order].copy(),
        prompt_tokens=column("prompt_tokens", prompt_tokens),
        output_tokens=column("output_tokens", output_tokens),
        cached_prompt_tokens=column("cached_prompt_tokens", cached_prompt_tokens),
        shared_prompt_tokens=column("shared_prompt_tokens", shared_prompt_tokens),
        prefix_group=column("prefix_group", prefix_group),
        origin=None if origin is None else column("origin", origin),
        source=source,
        max_concurrency=max_concurrency,
    )


def synthetic_workload(
    *,
    duration_seconds: float,
    rate_per_second: float | None = None,
    profile: RateProfile | None = None,
    prompt_tokens: int | Lengths = 4096,
    output_tokens: int | Lengths = 256,
    shared_prefix_tokens: int = 0,
    shared_prefix_fraction: float = 1.0,
    max_concurrency: int | None = None,
    seed: Seed = None,
) -> Workload:
    """Poisson arrivals (fixed rate or profile) with drawn lengths and an optional shared prefix.

    A fraction `shared_prefix_fraction` of requests starts with the same `shared_prefix_tokens`
    system prompt; prefix caching serves those tokens (at most all but one prompt token), and
    their KV is held once (prefix group 0). `max_concurrency`: a closed-loop client (see
    `Workload`); the arrivals are then when it wants to send.
    """
    if (rate_per_second is None) == (profile is None):
        raise ConfigError("give exactly one of rate_per_second and profile")
    _check_shared_prefix(shared_prefix_tokens, shared_prefix_fraction)
    if max_concurrency is not None:
        _concurrency(max_concurrency)
    rng = make_rng(seed)
    if profile is None:
        if not (rate_per_second > 0 and math.isfinite(rate_per_second)):
            raise ConfigError(f"arrival rate must be > 0 requests/s, got {rate_per_second}")
        profile = RateProfile((0.0,), (float(rate_per_second),))
    arrival = profile_arrivals(profile=profile, duration_seconds=duration_seconds, seed=rng)
    return _drawn_requests(
        arrival, rng, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
        shared_prefix_tokens=shared_prefix_tokens, shared_prefix_fraction=shared_prefix_fraction,
        max_concurrency=max_concurrency,
    )  # fmt: skip


def bench_workload(
    *,
    num_prompts: int,
    request_rate_per_second: float = math.inf,
    burstiness: float = 1.0,
    max_concurrency: int | None = None,
    prompt_tokens: int | Lengths = 1024,
    output_tokens: int | Lengths = 128,
    shared_prefix_tokens: int = 0,
    seed: Seed = None,
) -> Workload:
    """What `vllm bench serve --num-prompts N --request-rate R [--max-concurrency C]` sends:
    N requests at `bench_arrivals`' times (R inf: a burst, all at t = 0), held back by a
    closed-loop client of C slots when C is given (see `Workload`). Lengths are drawn per
    request (`vllm_random_prompt_lengths` / `vllm_random_output_lengths` give
    `--dataset-name random`'s), and every request starts with the same `shared_prefix_tokens`
    (`--random-prefix-len`: one random prefix for all), which the prefix cache serves."""
    _check_shared_prefix(shared_prefix_tokens, 1.0)
    if max_concurrency is not None:
        _concurrency(max_concurrency)
    rng = make_rng(seed)
    arrival = bench_arrivals(
        num_prompts=num_prompts, request_rate_per_second=request_rate_per_second,
        burstiness=burstiness, seed=rng,
    )  # fmt: skip
    return _drawn_requests(
        arrival, rng, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
        shared_prefix_tokens=shared_prefix_tokens, shared_prefix_fraction=1.0,
        max_concurrency=max_concurrency,
    )  # fmt: skip


def _drawn_requests(arrival, rng, *, prompt_tokens, output_tokens, shared_prefix_tokens,
                    shared_prefix_fraction, max_concurrency) -> Workload:  # fmt: skip
    """Requests at `arrival` with drawn lengths; a share of them starts with the shared prefix."""
    n = arrival.size
    prompt = as_lengths(prompt_tokens).sample(rng, size=n)
    output = as_lengths(output_tokens).sample(rng, size=n)
    shares = rng.random(n) < shared_prefix_fraction
    cached = np.where(shares, np.minimum(shared_prefix_tokens, prompt - 1), 0)
    return make_workload(
        arrival_seconds=arrival,
        prompt_tokens=prompt,
        output_tokens=output,
        cached_prompt_tokens=cached,
        shared_prompt_tokens=cached,
        prefix_group=np.where(shares, 0, -1),
        max_concurrency=max_concurrency,
    )


def steady_workload(*, running: int, prompt_tokens: int, output_tokens: int) -> Workload:
    """`running` identical requests all arriving at t = 0 (steady decode, no later arrivals)."""
    return make_workload(
        arrival_seconds=np.zeros(_positive_int("running requests", running)),
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
    )


# ---- replay from files ---------------------------------------------------------------------


# The workload CSV's columns: (converter, least, most, what the value is). The bounds are beyond
# any real request (no model reads 100M tokens; three years of arrivals) and keep the arithmetic
# on them (tokens x KV bytes) finite.
_CSV_COLUMNS = {
    "arrival_seconds": (float, 0.0, 1e8, "a number of seconds"),
    "prompt_tokens": (int, 1, 10**8, "a whole number of tokens"),
    "output_tokens": (int, 1, 10**8, "a whole number of tokens"),
    "cached_prompt_tokens": (int, 0, 10**8, "a whole number of tokens"),
    "prefix_group": (int, -1, 10**9, "a whole number (-1 or empty: no group)"),
}
_CSV_DEFAULTS = {"cached_prompt_tokens": 0, "prefix_group": -1}


def _csv_value(row: dict, column: str, where: str):
    convert, least, most, what = _CSV_COLUMNS[column]
    if column not in row:  # an optional column the header does not name
        return _CSV_DEFAULTS[column]
    raw = row[column]
    if raw is None:  # DictReader's filler for the values a short row lacks
        raise ConfigError(
            f"{where}: the row has fewer values than the header has columns (no {column})"
        )
    if not raw.strip() and column in _CSV_DEFAULTS:
        return _CSV_DEFAULTS[column]
    try:
        value = convert(raw)
    except ValueError:
        value = None
    if value is None or not (least <= value <= most):  # NaN fails too
        shown = raw if len(raw) <= 40 else raw[:37] + "..."
        raise ConfigError(
            f"{where}: {column} is {shown!r}; it must be {what} from {least:,} to {most:,}"
        )
    return value


def read_workload_csv(path: str | Path) -> Workload:
    """Read `arrival_seconds,prompt_tokens,output_tokens[,cached_prompt_tokens][,prefix_group]`
    rows (header). Requests of one `prefix_group` (an integer >= 0; empty or -1: none) share their
    cached tokens: they are one prefix, held once in the KV cache."""
    path = Path(path)
    text = read_input_text(path, kind="workload CSV", max_bytes=1_000_000_000)
    reader = csv.DictReader(io.StringIO(text, newline=""))
    columns = {name: [] for name in _CSV_COLUMNS}
    lines = []
    try:
        missing = {"arrival_seconds", "prompt_tokens", "output_tokens"} - set(
            name.strip() for name in reader.fieldnames or ()
        )
        if missing:
            raise ConfigError(
                f"{path}:1: the CSV header lacks {', '.join(sorted(missing))} (it reads "
                f"{','.join(reader.fieldnames or [])[:80]!r})"
            )
        for row in reader:
            where = f"{path}:{reader.line_num}"
            row = {(k or "").strip(): v for k, v in row.items()}
            if "" in row:  # DictReader keeps the values past the header under None
                raise ConfigError(f"{where}: the row has more values than the header has columns")
            for name in columns:
                columns[name].append(_csv_value(row, name, where))
            lines.append(reader.line_num)
    except csv.Error as exc:
        if "field larger than field limit" in str(exc):
            raise ConfigError(  # the reader stops before it counts the line it failed on
                f"{path}:{reader.line_num + 1}: a value longer than {csv.field_size_limit():,} "
                "characters: not a row of numbers"
            ) from None
        raise ConfigError(f"{path}:{reader.line_num}: not a CSV row ({exc})") from None
    groups = np.asarray(columns["prefix_group"], dtype=np.int64)
    try:
        return make_workload(
            arrival_seconds=columns["arrival_seconds"],
            prompt_tokens=columns["prompt_tokens"],
            output_tokens=columns["output_tokens"],
            cached_prompt_tokens=columns["cached_prompt_tokens"],
            shared_prompt_tokens=np.where(groups >= 0, columns["cached_prompt_tokens"], 0),
            prefix_group=groups,
            origin=lines,
            source=f"{path}:{{}}",
        )
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _bench_arrivals(sent, n: int, ok: np.ndarray, seed: Seed, path: Path) -> np.ndarray:
    if sent.start_times_seconds is not None:
        arrival = sent.start_times_seconds
        return arrival - arrival[ok].min() if ok.any() else arrival
    rate = sent.request_rate_per_second
    if math.isnan(rate):
        raise ConfigError(
            f"{path}: neither start_times nor request_rate says when the requests were sent"
        )
    if math.isinf(rate):
        return np.zeros(n)
    most = _CSV_COLUMNS["arrival_seconds"][2]  # the span a replayed workload may have
    if n / rate > most:
        raise ConfigError(
            f"{path}: request_rate {rate:g} requests/s spreads its {n:,} requests over about "
            f"{n / rate:.3g} s, more than the {most:g} s (three years) a replay may span"
        )
    arrival = np.cumsum(make_rng(seed).exponential(1.0 / rate, size=n))
    return arrival - arrival[0]


def _mean_lengths_hint(sent, completed: int) -> str:
    tokens = (sent.total_input_tokens, sent.total_output_tokens) if sent else (None, None)
    if not all(n for n in tokens) or completed <= 0:
        return ""
    prompt, output = (n / completed for n in tokens)
    return f" (its mean lengths: --prompt-tokens {prompt:.0f} --output-tokens {output:.0f})"


def read_vllm_bench_result(path: str | Path, *, seed: Seed = None) -> Workload:
    """Replay a `vllm bench serve --save-result` JSON: `input_lens`, `output_lens`, start times.

    The file is read as every subcommand reads it (`metrics.bench`, which checks each field),
    so a failed run or a malformed file gets the same message here as in `histogram`. Newer
    files carry per-request `start_times` (perf-counter seconds); older ones only the
    `request_rate`, so arrivals are redrawn as Poisson at that rate (all at 0 when it is inf).
    Failed requests (non-empty `errors` entry or 0 output tokens) are dropped.
    """
    from itlkit.metrics.bench import read_bench_result

    path = Path(path)
    result = read_bench_result(path)
    sent = result.requests
    if sent is None or sent.input_lens is None or sent.output_lens is None:
        raise ConfigError(
            f"{path}: a summary-only bench result has no per-request input_lens/output_lens to "
            "replay (save it with --save-detailed), or describe the workload by flags"
            + _mean_lengths_hint(sent, result.completed)
        )
    prompt, output = sent.input_lens, sent.output_lens
    ok = (prompt > 0) & (output > 0)
    if sent.errors is not None:
        ok &= np.array([not e for e in sent.errors], dtype=bool)
    if not ok.any():
        raise ConfigError(
            f"{path}: none of its {len(prompt):,} requests can be replayed (each has "
            "input_lens or output_lens 0, or an entry in errors)"
        )
    arrival = _bench_arrivals(sent, len(prompt), ok, seed, path)
    return make_workload(
        arrival_seconds=arrival[ok],
        prompt_tokens=prompt[ok],
        output_tokens=output[ok],
        origin=np.flatnonzero(ok),
        source=f"{path}: request input_lens[{{}}]",
    )


def read_workload(path: str | Path, *, seed: Seed = None) -> Workload:
    """Read a workload from a CSV or a vllm bench result JSON, by extension."""
    path = Path(path)
    problem = file_problem(path, kind="workload")  # /dev/zero or a FIFO would never end
    if problem:
        raise ConfigError(f"{path}: {problem}")
    if path.suffix.lower() == ".json":
        return read_vllm_bench_result(path, seed=seed)
    if path.suffix.lower() == ".csv":
        return read_workload_csv(path)
    raise ConfigError(f"{path}: workload files are .csv or a vllm bench result .json")


# ---- helpers -------------------------------------------------------------------------------


def _check_shared_prefix(tokens, fraction) -> None:
    if not 0 <= fraction <= 1:
        raise ConfigError(f"shared prefix fraction must be in [0, 1], got {fraction}")
    if isinstance(tokens, bool) or not 0 <= tokens <= MOST_TOKENS:
        raise ConfigError(f"shared prefix tokens must be from 0 to {MOST_TOKENS:,}, got {tokens}")


# The most client slots: far beyond any benchmark client (vllm bench serve caps its own
# connection pool with it), and a count the engine's lists hold comfortably.
MOST_CONCURRENCY = 10**7


def _concurrency(value) -> int:
    """A closed-loop client's slots: a whole number from 1 to MOST_CONCURRENCY."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigError(f"max_concurrency must be a whole number of requests, got {value!r:.40}")
    if not 1 <= value <= MOST_CONCURRENCY:
        raise ConfigError(
            f"max_concurrency must be from 1 to {MOST_CONCURRENCY:,} requests in flight, got "
            f"{value:,} (0 would never send a request)"
        )
    return int(value)


def _mean_tokens(name: str, value) -> float:
    """A (possibly fractional) number of tokens from 1 to MOST_TOKENS, or a ConfigError."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ConfigError(f"{name} must be a number of tokens, got {value!r:.40}")
    if not 1 <= value <= MOST_TOKENS:  # NaN fails too
        raise ConfigError(f"{name} must be from 1 to {MOST_TOKENS:,} tokens, got {value!r:.40}")
    return float(value)


def _tokens(name: str, value) -> int:
    """A whole number of tokens from 1 to MOST_TOKENS, or a ConfigError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigError(f"{name} must be a whole number of tokens, got {value!r:.40}")
    if not 1 <= value <= MOST_TOKENS:
        raise ConfigError(f"{name} must be from 1 to {MOST_TOKENS:,} tokens, got {value:,}")
    return int(value)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _positive_float(name: str, value) -> float:
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{name} must be a finite number > 0, got {value}")
    return value
