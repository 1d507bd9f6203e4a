"""Read a `vllm bench serve --save-result` JSON file: its summary, and its samples when saved.

Every result file holds the summary vLLM prints (`completed`, `duration`, and per metric
`mean_<m>_ms`, `median_<m>_ms`, `std_<m>_ms`, `p<P>_<m>_ms` for the `--metric-percentiles`
asked for; metrics `ttft`, `tpot`, `itl`, and `e2el` when selected; vllm
`vllm/benchmarks/serve.py`). With `--save-detailed` it also holds per-request lists: `ttfts`,
`itls` (one list of gaps per request), `input_lens`, `output_lens`, `errors`. Sweeps usually
store summaries only, so both kinds are read, and every subcommand reads a file through
`read_bench_result` to reach the same verdict about it.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from itlkit.errors import SourceError

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


def _number(doc: dict, key: str, source: str) -> float:
    value = doc.get(key)
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SourceError(f"{source}: {key!r} must be a finite number, got {value!r:.40}")
    if value < 0:
        raise SourceError(f"{source}: {key!r} is negative ({value:g})")
    return float(value)


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
    return MetricSummary(*stats, percentiles_seconds=dict(sorted(percentiles.items())))


def _list_of(doc: dict, key: str, source: str) -> list:
    value = doc[key]
    if not isinstance(value, list):
        raise SourceError(f"{source}: {key!r} must be a list (one entry per request)")
    return value


def _floats(values, what: str, source: str) -> np.ndarray:
    if any(isinstance(v, bool | list | dict | str) or v is None for v in values):
        raise SourceError(f"{source}: {what} holds a value that is not a number")
    array = np.asarray(values, dtype=float)
    if not np.isfinite(array).all() or (array < 0).any():
        raise SourceError(f"{source}: {what} holds a NaN, infinite or negative value")
    return array


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
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"{source}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise SourceError(f"{source}: JSON nested too deeply to be a bench result") from None
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
    if _number(doc, "completed", source) == 0:
        raise _nothing_completed(source)
    summaries = {m: s for m in SUMMARY_METRICS if (s := _summary(doc, m, source)) is not None}
    samples = _samples(doc, source)
    has_lengths = "input_lens" in doc and "output_lens" in doc
    if not summaries and samples is None and not has_lengths:
        raise SourceError(
            f"{source}: not a vllm bench serve result (no mean_itl_ms / median_ttft_ms summary, "
            "no per-request ttfts/itls or input_lens/output_lens)"
        )
    completed = _number(doc, "completed", source)
    if samples is not None:
        completed = len(samples.ttft_seconds)
    if completed == 0:
        raise _nothing_completed(source)
    failed = _number(doc, "failed", source)
    total = _number(doc, "num_prompts", source)
    if math.isnan(failed):
        failed = total - completed if not math.isnan(total) else 0.0
    if math.isnan(failed):  # num_prompts given, completed not: the failures are unknown
        failed = 0.0
    return BenchResult(
        source=source,
        model_id=str(doc.get("model_id") or ""),
        completed=-1 if math.isnan(completed) else int(completed),
        failed=int(max(failed, 0)),
        duration_seconds=_number(doc, "duration", source),
        summaries=summaries,
        samples=samples,
    )


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
    path = Path(path)
    try:
        if not path.is_file():
            raise SourceError(f"{path}: not a regular file")
        if path.stat().st_size > MAX_BENCH_BYTES:
            raise SourceError(f"{path}: over {MAX_BENCH_BYTES / 1e6:.0f} MB, too big for a result")
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise SourceError(f"{path}: not UTF-8 text") from None
    return parse_bench_result(text, source=str(path))
