"""Workloads for the scheduler simulator: who arrives when, with how many prompt and output tokens.

A workload is three aligned arrays sorted by arrival (seconds, prompt tokens, output tokens) plus
how many of each prompt's tokens a shared prefix serves from vLLM's automatic prefix cache (they
skip prefill but still occupy KV). Arrivals come from a Poisson process at a fixed rate, from a
piecewise-constant rate profile (bursts), from `vllm bench serve`'s client (`--num-prompts` at
`--request-rate`, inf: all at t = 0), or from a replay: explicit lists, a CSV, or a
`vllm bench serve --save-result` JSON. A workload may carry a closed-loop client
(`max_concurrency`, as `vllm bench serve --max-concurrency`): its arrival times are then when the
client wants to send, and the engine sends each request only once one of the N slots is free.
Arrivals live in `sim.arrivals`, lengths in `sim.lengths`; every random draw goes through an
explicit `numpy.random.Generator`, so a seed reproduces a run.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from itlkit.errors import ConfigError
from itlkit.input_files import file_problem, read_input_text
from itlkit.sim.arrivals import RateProfile, bench_arrivals, profile_arrivals
from itlkit.sim.lengths import (
    MOST_TOKENS,
    Lengths,
    Seed,
    as_lengths,
    make_rng,
    positive_int,
)


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
        arrival_seconds=np.zeros(positive_int("running requests", running)),
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
