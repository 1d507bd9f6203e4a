"""Request lengths for the scheduler simulator: fixed, uniform, lognormal, a table of quantiles,
drawn from observed values, or `vllm bench serve --dataset-name random`'s ranges; and the checks
every token count and rate goes through. Every random draw goes through an explicit
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
        checked_tokens("a fixed length", self.tokens)

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
        low = checked_tokens("uniform LOW", self.low_tokens)
        high = checked_tokens("uniform HIGH", self.high_tokens)
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
            checked_tokens("a lognormal max_tokens", self.max_tokens)

    @classmethod
    def from_mean(cls, mean_tokens: float, sigma: float, max_tokens: int | None = None):
        """The lognormal of mean `mean_tokens` and log-space spread `sigma`: its median is
        mean x exp(-sigma^2 / 2) (the lognormal's mean is exp(mu + sigma^2 / 2))."""
        checked_mean_tokens("the lognormal MEAN", mean_tokens)
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
        checked_mean_tokens("the lognormal MEAN", mean_tokens)
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
            checked_tokens("a sampled length", value)

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
            checked_mean_tokens("a quantile table's length", value)
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
    checked_tokens("--random-input-len", input_len)
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
    checked_tokens("--random-output-len", output_len)
    low = max(math.floor(output_len * (1 - ratio)), 1)
    return Uniform(low, max(math.ceil(output_len * (1 + ratio)), 1))


# ---- arrival processes ---------------------------------------------------------------------


def checked_mean_tokens(name: str, value) -> float:
    """A (possibly fractional) number of tokens from 1 to MOST_TOKENS, or a ConfigError."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.number):
        raise ConfigError(f"{name} must be a number of tokens, got {value!r:.40}")
    if not 1 <= value <= MOST_TOKENS:  # NaN fails too
        raise ConfigError(f"{name} must be from 1 to {MOST_TOKENS:,} tokens, got {value!r:.40}")
    return float(value)


def checked_tokens(name: str, value) -> int:
    """A whole number of tokens from 1 to MOST_TOKENS, or a ConfigError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigError(f"{name} must be a whole number of tokens, got {value!r:.40}")
    if not 1 <= value <= MOST_TOKENS:
        raise ConfigError(f"{name} must be from 1 to {MOST_TOKENS:,} tokens, got {value:,}")
    return int(value)


def positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def positive_float(name: str, value) -> float:
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ConfigError(f"{name} must be a finite number > 0, got {value}")
    return value
