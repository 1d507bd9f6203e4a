"""Read a `vllm bench serve --save-result` JSON file: its summary, and its samples when saved.

Every result file holds the summary vLLM prints (`completed`, `duration`, and per metric
`mean_<m>_ms`, `median_<m>_ms`, `std_<m>_ms`, `p<P>_<m>_ms` for the `--metric-percentiles`
asked for; metrics `ttft`, `tpot`, `itl`, and `e2el` when selected; vllm
`vllm/benchmarks/serve.py`). With `--save-detailed` it also holds per-request lists: `ttfts`,
`itls` (one list of gaps per request), `input_lens`, `output_lens`, `errors`. Sweeps usually
store summaries only, so both kinds are read, and every subcommand reads a file through
`read_bench_result` to reach the same verdict about it.

A server that speculated adds what the client read off its spec-decode counters over the run
(`benchmark` in vllm/benchmarks/serve.py @ 009e6d4a1cd6ba3fb2a9fc00f4ec06f5297232a1):
`spec_decode_num_drafts`, `_draft_tokens`, `_accepted_tokens` (their increases),
`spec_decode_acceptance_rate` (accepted / draft tokens x 100), `spec_decode_acceptance_length`
(1 + accepted / drafts) and `spec_decode_per_position_acceptance_rates` (accepted at position i
/ drafts, fractions). They are read into a `SpeculationReading`, each checked against the others.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field

import numpy as np

from itlkit.errors import SourceError
from itlkit.input_files import parse_json_text, read_input_text
from itlkit.metrics.speculative_metrics import SpeculationReading

SUMMARY_METRICS = ("ttft", "tpot", "itl", "e2el")
_PERCENTILE_KEY = re.compile(r"p(\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el)_ms")
MAX_BENCH_BYTES = 512_000_000


@dataclass(frozen=True)
class MetricSummary:
    """One metric's summary statistics in seconds (NaN where the file has none)."""

    mean_seconds: float
    median_seconds: float
    std_seconds: float
    percentiles_seconds: dict[float, float] = field(default_factory=dict)  # q in (0, 1] -> s


@dataclass(frozen=True)
class BenchSamples:
    """Exact per-request samples from a detailed result file (failed requests dropped)."""

    ttft_seconds: np.ndarray
    itl_seconds: np.ndarray  # every inter-token gap of every successful request, concatenated
    itl_per_request_seconds: tuple[np.ndarray, ...]
    source: str

    def values_seconds(self, metric_key: str) -> np.ndarray | None:
        """The samples of itlkit metric `metric_key` ("itl", "ttft"); None for a metric the
        file keeps no per-request values of (tpot, e2e)."""
        return {"itl": self.itl_seconds, "ttft": self.ttft_seconds}.get(metric_key)


@dataclass(frozen=True)
class BenchRequests:
    """How the client sent its requests, as far as the file says (each field checked)."""

    max_concurrency: int | None  # None: the file does not say (an open loop)
    request_rate_per_second: float  # inf: all at once; NaN: not said
    total_input_tokens: int | None
    total_output_tokens: int | None
    input_lens: np.ndarray | None  # per request, with --save-detailed
    output_lens: np.ndarray | None
    start_times_seconds: np.ndarray | None  # per request, newer vLLM with --save-detailed
    errors: tuple[str, ...] | None  # per request ("" for a success)


@dataclass(frozen=True)
class BenchResult:
    """What a bench result file says: the summary always, the samples when it was detailed."""

    source: str
    model_id: str
    completed: int  # -1 when the file does not say
    failed: int
    duration_seconds: float
    summaries: dict[str, MetricSummary]
    samples: BenchSamples | None
    requests: BenchRequests | None = None
    speculation: SpeculationReading | None = None  # the server speculated (its counters)


# Bounds beyond any real benchmark: a larger number is a corrupted or hand-edited file, and
# would overflow the arithmetic built on it (token counts times KV bytes, for one).
MOST_REQUESTS = 10**9
MOST_TOKENS_PER_REQUEST = 10**8  # no model reads 100M tokens
MOST_TOTAL_TOKENS = MOST_REQUESTS * 10**4
MOST_SECONDS = 1e8  # three years
MOST_MILLISECONDS = MOST_SECONDS * 1e3


def _shown(value) -> str:
    """A value as the error shows it: short, one line."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _number(doc: dict, key: str, source: str, *, most: float = MOST_MILLISECONDS) -> float:
    value = doc.get(key)
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SourceError(f"{source}: {key!r} must be a number, got {_shown(value)}")
    if not math.isfinite(value) or not 0 <= value <= most:
        raise SourceError(
            f"{source}: {key!r} is {_shown(value)}; it must be a finite number from 0 to {most:g}"
        )
    return float(value)


def _whole(doc: dict, key: str, source: str, *, most: int, least: int = 0) -> int | None:
    """A whole number in [least, most] under `key`, or None when the file does not say."""
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise SourceError(f"{source}: {key!r} must be a whole number, got {_shown(value)}")
    if not least <= value <= most:
        raise SourceError(f"{source}: {key!r} is {_shown(value)}; it must be {least} to {most:,}")
    return value


def _summary(doc: dict, name: str, source: str) -> MetricSummary | None:
    stats = [_number(doc, f"{stat}_{name}_ms", source) / 1e3 for stat in ("mean", "median", "std")]
    percentiles = {}
    for key in doc:
        match = _PERCENTILE_KEY.fullmatch(key)
        if match and match.group(2) == name:
            q = round(float(match.group(1)) / 100, 12)
            if not 0 < q <= 1:
                raise SourceError(f"{source}: {key!r} is not a percentile in (0, 100]")
            percentiles[q] = _number(doc, key, source) / 1e3
    if all(math.isnan(s) for s in stats) and not percentiles:
        return None
    percentiles = dict(sorted(percentiles.items()))
    levels = [(f"p{q * 100:g}", v) for q, v in percentiles.items()]
    if not math.isnan(stats[1]):  # the median is the 50th percentile
        levels = sorted([*levels, ("median", stats[1])], key=lambda kv: _level(kv[0]))
    for (low, a), (high, b) in itertools.pairwise(levels):
        if b < a * (1 - 1e-9):
            raise SourceError(
                f"{source}: {high}_{name}_ms ({b * 1e3:g}) is below {low}_{name}_ms "
                f"({a * 1e3:g}); a higher percentile cannot be lower: the file was edited or "
                "mixes two runs"
            )
    _check_mean(stats[0], [*percentiles.items(), (0.5, stats[1])], name, source)
    return MetricSummary(*stats, percentiles_seconds=percentiles)


def _check_mean(mean: float, levels, name: str, source: str) -> None:
    """A mean of values >= 0 is at least (1 - q) x their q-quantile: at least a share 1 - q of
    them reach it (Markov's inequality read backwards)."""
    for q, value in levels:
        least = (1 - q) * value
        if not math.isnan(mean) and not math.isnan(value) and mean < least * (1 - 1e-9):
            raise SourceError(
                f"{source}: mean_{name}_ms ({mean * 1e3:g}) is below what its "
                f"{'median' if q == 0.5 else f'p{q * 100:g}'} of {value * 1e3:g} ms allows "
                f"({least * 1e3:g}: a share {1 - q:g} of the values reach it); the file was "
                "edited or mixes two runs"
            )


def _level(name: str) -> float:
    return 50.0 if name == "median" else float(name[1:])


def _list_of(doc: dict, key: str, source: str) -> list:
    value = doc[key]
    if not isinstance(value, list):
        raise SourceError(f"{source}: {key!r} must be a list (one entry per request)")
    return value


def _floats(values, what: str, source: str, *, most: float = MOST_SECONDS) -> np.ndarray:
    bad = next((i for i, v in enumerate(values)
                if isinstance(v, bool) or not isinstance(v, int | float)), None)  # fmt: skip
    if bad is not None:
        raise SourceError(f"{source}: {what}[{bad}] is {_shown(values[bad])}, not a number")
    array = np.asarray(values, dtype=float)
    wrong = ~(np.isfinite(array) & (array >= 0) & (array <= most))
    if wrong.any():
        i = int(np.argmax(wrong))
        raise SourceError(
            f"{source}: {what}[{i}] is {values[i]!r}; it must be a finite number from 0 to {most:g}"
        )
    return array


def _token_counts(doc: dict, key: str, source: str) -> np.ndarray | None:
    """A per-request list of token counts (whole numbers >= 0), or None when absent."""
    if doc.get(key) is None:
        return None
    values = _list_of(doc, key, source)
    bad = next((i for i, v in enumerate(values) if isinstance(v, bool) or not isinstance(v, int)
                or not 0 <= v <= MOST_TOKENS_PER_REQUEST), None)  # fmt: skip
    if bad is not None:
        raise SourceError(
            f"{source}: {key}[{bad}] is {_shown(values[bad])}; a token count is a whole number "
            f"from 0 to {MOST_TOKENS_PER_REQUEST:,}"
        )
    return np.asarray(values, dtype=np.int64)


def _request_rate(doc: dict, source: str) -> float:
    """`request_rate`: requests per second, inf (vLLM writes "inf" or Infinity), NaN if absent."""
    value = doc.get("request_rate")
    if value is None:
        return math.nan
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return math.inf
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise SourceError(
            f"{source}: 'request_rate' is {_shown(value)}; it must be a number of requests per "
            'second above 0, or "inf" (all at once)'
        )
    return float(value)


def _requests(doc: dict, source: str) -> BenchRequests:
    """How the client sent the requests (see BenchRequests), each field checked."""
    concurrency = doc.get("max_concurrency", doc.get("max_concurrent_requests"))
    key = "max_concurrency" if "max_concurrency" in doc else "max_concurrent_requests"
    starts = None
    if doc.get("start_times") is not None:
        starts = _floats(_list_of(doc, "start_times", source), "start_times", source)
    errors = None
    if doc.get("errors") is not None:
        errors = tuple(str(e or "") for e in _list_of(doc, "errors", source))
    lengths = {k: _token_counts(doc, k, source) for k in ("input_lens", "output_lens")}
    sizes = {k: len(v) for k, v in [*lengths.items(), ("start_times", starts), ("errors", errors)]
             if v is not None}  # fmt: skip
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{k} {n}" for k, n in sizes.items())
        raise SourceError(f"{source}: per-request lists differ in length ({listed})")
    return BenchRequests(
        max_concurrency=None if concurrency is None
        else _whole({key: concurrency}, key, source, most=MOST_REQUESTS, least=1),
        request_rate_per_second=_request_rate(doc, source),
        total_input_tokens=_whole(doc, "total_input_tokens", source, most=MOST_TOTAL_TOKENS),
        total_output_tokens=_whole(doc, "total_output_tokens", source, most=MOST_TOTAL_TOKENS),
        input_lens=lengths["input_lens"],
        output_lens=lengths["output_lens"],
        start_times_seconds=starts,
        errors=errors,
    )  # fmt: skip


def _samples(doc: dict, source: str) -> BenchSamples | None:
    if "ttfts" not in doc and "itls" not in doc:
        return None
    if "ttfts" not in doc or "itls" not in doc:
        raise SourceError(f"{source}: has {'ttfts' if 'ttfts' in doc else 'itls'} but not both")
    ttfts, itls = _list_of(doc, "ttfts", source), _list_of(doc, "itls", source)
    errors = _list_of(doc, "errors", source) if doc.get("errors") is not None else [""] * len(ttfts)
    if not (len(ttfts) == len(itls) == len(errors)):
        raise SourceError(
            f"{source}: 'ttfts' ({len(ttfts)}), 'itls' ({len(itls)}) and 'errors' "
            f"({len(errors)}) differ in length"
        )
    ok = [i for i, e in enumerate(errors) if not e]
    for i in ok:
        if not isinstance(itls[i], list):
            raise SourceError(f"{source}: itls[{i}] must be the list of one request's gaps")
    per_request = tuple(_floats(itls[i], f"itls[{i}]", source) for i in ok)
    ttft = _floats([ttfts[i] for i in ok], "ttfts", source)
    flat = np.concatenate(per_request) if per_request else np.zeros(0)
    return BenchSamples(ttft, flat, per_request, source)


def _load(text: str, source: str) -> dict:
    doc = parse_json_text(text, source=source, kind="bench result", error=SourceError)
    if not isinstance(doc, dict):
        raise SourceError(
            f"{source}: not a vllm bench serve result (the top level is not an object)"
        )
    return doc


def _nothing_completed(source: str) -> SourceError:
    return SourceError(
        f"{source}: the benchmark completed no request (every request failed): nothing was "
        "measured; see the server's log for the cause"
    )


def parse_bench_result(text: str, *, source: str = "<string>") -> BenchResult:
    """The summary (and samples, if saved) of the text of a bench result file."""
    doc = _load(text, source)
    if _whole(doc, "completed", source, most=MOST_REQUESTS) == 0:
        raise _nothing_completed(source)
    summaries = {m: s for m in SUMMARY_METRICS if (s := _summary(doc, m, source)) is not None}
    samples = _samples(doc, source)
    has_lengths = "input_lens" in doc and "output_lens" in doc
    if not summaries and samples is None and not has_lengths:
        raise SourceError(
            f"{source}: not a vllm bench serve result (no mean_itl_ms / median_ttft_ms summary, "
            "no per-request ttfts/itls or input_lens/output_lens)"
        )
    completed = _whole(doc, "completed", source, most=MOST_REQUESTS)
    if samples is not None:
        completed = len(samples.ttft_seconds)
    if completed == 0:
        raise _nothing_completed(source)
    failed = _whole(doc, "failed", source, most=MOST_REQUESTS)
    total = _whole(doc, "num_prompts", source, most=MOST_REQUESTS)
    if failed is None:  # without num_prompts or completed the failures are unknown: 0
        failed = total - completed if total is not None and completed is not None else 0
    return BenchResult(
        source=source,
        model_id=str(doc.get("model_id") or ""),
        completed=-1 if completed is None else completed,
        failed=max(failed, 0),
        duration_seconds=_number(doc, "duration", source, most=MOST_SECONDS),
        summaries=summaries,
        samples=samples,
        requests=_requests(doc, source),
        speculation=_speculation(doc, source),
    )


SPEC_FIELDS = ("spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
               "spec_decode_acceptance_length", "spec_decode_acceptance_rate",
               "spec_decode_per_position_acceptance_rates")  # fmt: skip
_SPEC_ROUNDING = 0.01  # the file keeps floats; a rate printed and re-read drifts less than this


def _speculation(doc: dict, source: str) -> SpeculationReading | None:
    """The speculation the client read off the server, each field checked; None without."""
    if not any(key in doc for key in SPEC_FIELDS):
        return None
    drafts = _whole(doc, "spec_decode_num_drafts", source, most=MOST_TOTAL_TOKENS)
    tokens = _whole(doc, "spec_decode_draft_tokens", source, most=MOST_TOTAL_TOKENS)
    accepted = _whole(doc, "spec_decode_accepted_tokens", source, most=MOST_TOTAL_TOKENS)
    length = _number(doc, "spec_decode_acceptance_length", source, most=1e4)
    if drafts is None or accepted is None:
        if not math.isfinite(length) or length < 1:
            raise SourceError(f"{source}: speculative decoding fields without "
                              "spec_decode_num_drafts and spec_decode_accepted_tokens, or an "
                              "spec_decode_acceptance_length of at least 1")  # fmt: skip
        return SpeculationReading(length, None, None, f"{source}: spec_decode_acceptance_length")
    if drafts == 0:
        raise SourceError(f"{source}: spec_decode_num_drafts is 0 with speculative fields: no "
                          "step was verified, so no acceptance can be read")  # fmt: skip
    if tokens is not None and accepted > tokens:
        raise SourceError(
            f"{source}: spec_decode_accepted_tokens ({accepted:,}) exceeds "
            f"spec_decode_draft_tokens ({tokens:,}): no draft is accepted twice"
        )
    e = 1 + accepted / drafts
    if math.isfinite(length) and abs(length - e) > _SPEC_ROUNDING * e:
        raise SourceError(f"{source}: spec_decode_acceptance_length {length:g} is not 1 + "
                          f"accepted / drafts = {e:.4g}")  # fmt: skip
    rates = _per_position(doc, source, drafts=drafts, accepted=accepted)
    k = len(rates) if rates else (round(tokens / drafts) if tokens else None)
    if k is not None and e > k + 1 + 1e-9:
        raise SourceError(f"{source}: {e:.3g} tokens a step (1 + accepted / drafts) is more "
                          f"than the {k + 1} that {k} drafts a step can give")  # fmt: skip
    return SpeculationReading(e, k, rates, f"{source}: 1 + spec_decode_accepted_tokens / "
                              "spec_decode_num_drafts")  # fmt: skip


def _per_position(doc: dict, source: str, *, drafts: int, accepted: int) -> tuple | None:
    """Each position's acceptance (fractions, non-increasing, summing to accepted / drafts)."""
    key = "spec_decode_per_position_acceptance_rates"
    raw = doc.get(key)
    if not raw:
        return None
    rates = _floats(_list_of(doc, key, source), key, source, most=1.0)
    if np.any(np.diff(rates) > _SPEC_ROUNDING):
        raise SourceError(f"{source}: {key} rises ({_shown(raw)}): a draft is accepted only if "
                          "the one before it was")  # fmt: skip
    if abs(rates.sum() - accepted / drafts) > _SPEC_ROUNDING * max(accepted / drafts, 1):
        raise SourceError(f"{source}: {key} sum to {rates.sum():.4g}, not accepted / drafts = "
                          f"{accepted / drafts:.4g}")  # fmt: skip
    return tuple(float(r) for r in rates)


def sample_quantiles(values_seconds, quantiles) -> dict[float, float]:
    """Quantiles of a bench file's own samples, as `vllm bench serve` computes its
    `p<P>_<metric>_ms` and `median_<metric>_ms`: numpy's percentile with its default linear
    interpolation over every successful request's values, concatenated (vllm
    `vllm/benchmarks/serve.py` `calculate_metrics`: `itls += outputs[i].itl`, then
    `np.percentile(itls or 0, p)`). NaN for no samples."""
    values = np.asarray(values_seconds, dtype=float)
    if values.size == 0:
        return {float(q): math.nan for q in quantiles}
    found = np.percentile(values, [100 * q for q in quantiles])
    return {float(q): float(v) for q, v in zip(quantiles, found, strict=True)}


def require_latencies(result: BenchResult) -> BenchResult:
    """`result`, if it measured latencies at all (a summary or per-request samples)."""
    if not result.summaries and result.samples is None:
        raise SourceError(
            f"{result.source}: holds request lengths but no latencies (no mean_itl_ms summary, "
            "no ttfts/itls): nothing to read as a histogram"
        )
    return result


def read_bench_result(path) -> BenchResult:
    """`parse_bench_result` of a file; a folder, a FIFO or a huge file is refused by name."""
    text = read_input_text(path, kind="bench result", max_bytes=MAX_BENCH_BYTES, error=SourceError)
    return parse_bench_result(text, source=str(path))
