"""Read vLLM metrics from where users keep them into one tidy table.

Sources: Prometheus text exposition (a string, a file, or a folder of timestamped scrapes) and a
`vllm bench serve --save-result --save-detailed` JSON file (read by `metrics.bench`, binned
here). Every reader returns the same tidy
`pandas.DataFrame`, one row per sample, with the columns in `TIDY_COLUMNS`:

- `timestamp_seconds`: scrape time (seconds since the epoch, UTC); NaN when unknown.
- `source`: the file (or "<string>") the row came from.
- `metric`: itlkit's key for the metric (`itl`, `ttft`, `running`, … see `metrics.vllm_metrics`).
- `family`: the name vLLM exposed (`vllm:inter_token_latency_seconds` or the older
  `vllm:time_per_output_token_seconds`; within one scrape only the newest present name is kept,
  so ITL is never counted twice).
- `sample`: `bucket`, `sum`, `count` (histograms) or `value` (counters, gauges).
- `model_name`, `engine`: those labels, "" when absent (label order in the text does not matter).
- `labels`: every other label except `le`, as sorted `key=value` pairs joined by ",".
- `le`: the bucket's upper bound (inf for +Inf), NaN for non-bucket rows.
- `value`: the sample value (counts and sums checked: finite and >= 0).
- `line`: the sample's line number in its source (0 for binned bench results).

A sample's own timestamp, where the page gives one, times its row: milliseconds in the text
format, seconds in OpenMetrics (a page ending in `# EOF`), so an OpenMetrics file of a whole run
reads as the time series it is.

A folder's scrapes are timed by the names of their files (`metrics.scrape_names`). From the table
to histogram snapshots and series over time: `metrics.series`.

Text is parsed by `prometheus_client.parser.text_string_to_metric_families`; lines of families
itlkit does not read are filtered out first (with a regular expression) for speed.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals
from prometheus_client.parser import text_string_to_metric_families

from itlkit.errors import SourceError
from itlkit.input_files import read_input_text
from itlkit.metrics.bench import (
    BenchResult,
    BenchSamples,
    parse_bench_result,
    read_bench_result,
    require_latencies,
)
from itlkit.metrics.histogram import from_samples
from itlkit.metrics.scrape_names import SCRAPE_SUFFIXES, timestamp_from_name
from itlkit.metrics.sglang_metrics import SGLANG_PREFIX
from itlkit.metrics.vllm_metrics import (
    ITL_BUCKETS_SECONDS,
    METRICS,
    TTFT_BUCKETS_SECONDS,
    metric,
)

TIDY_COLUMNS = (
    "timestamp_seconds",
    "source",
    "metric",
    "family",
    "sample",
    "model_name",
    "engine",
    "labels",
    "le",
    "value",
    "line",
)
_CATEGORICAL = ("source", "metric", "family", "sample", "model_name", "engine", "labels")


# --- parsing one page -----------------------------------------------------------------------


def _sample_table(keys) -> dict[str, tuple[str, str, str]]:
    """Exposed sample name → (metric key, family name, sample kind)."""
    table = {}
    for key in keys:
        m = metric(key)
        for family in m.names:
            if m.kind == "histogram":
                for suffix in ("bucket", "sum", "count"):
                    table[f"{family}_{suffix}"] = (m.key, family, suffix)
            else:
                table[family] = (m.key, family, "value")
    return table


_LABEL_BLOCK = r'\{(?:[^"}\n]|"(?:[^"\\\n]|\\.)*")*\}'


def _line_filter(sample_names) -> re.Pattern:
    """One wanted sample line split into name, label block and the rest."""
    names = sorted({*sample_names, *(_family_of(n) for n in sample_names)}, key=len, reverse=True)
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(
        rf"[ \t]*(?P<name>{alternatives})(?P<labels>{_LABEL_BLOCK})?(?P<rest>[ \t].*)"
    )


def _family_of(sample_name: str) -> str:
    for suffix in ("_bucket", "_sum", "_count"):
        if sample_name.endswith(suffix):
            return sample_name[: -len(suffix)]
    return sample_name


_NAME = re.compile(r"[ \t]*([a-zA-Z_:][a-zA-Z0-9_:]*)")


@dataclass(frozen=True)
class _Parser:
    """Compiled filters for one set of metric keys."""

    table: dict
    keep: re.Pattern
    names: frozenset

    @classmethod
    def for_keys(cls, keys) -> _Parser:
        table = _sample_table(keys)
        names = frozenset({*table, *(_family_of(n) for n in table)})
        return cls(table, _line_filter(table), names)


# What the diagnosis reads; pass `metrics=ALL_METRICS` (or a list of keys) for more.
DEFAULT_METRICS = (
    "itl", "sglang_tpot", "ttft", "e2e", "running", "waiting", "kv_usage", "preemptions",
    "prompt_tokens", "generation_tokens", "prefix_cache_queries", "prefix_cache_hits",
    "request_prompt_tokens_sum", "request_prompt_tokens_count", "request_generation_tokens_sum",
    "forward_seconds", "spec_drafts", "spec_accepted", "spec_accepted_per_position",
    "spec_accept_length",
)  # fmt: skip
ALL_METRICS = tuple(METRICS)
_DEFAULT = _Parser.for_keys(DEFAULT_METRICS)


@functools.lru_cache(maxsize=65536)
def _labels_of(block: str) -> tuple[tuple[str, str], ...]:
    """Labels of one `{...}` block, parsed once by prometheus_client and remembered."""
    (family,) = text_string_to_metric_families(f"x{block} 0\n")
    return tuple(family.samples[0].labels.items())


def _line_of(text: str, name: str) -> int:
    """The line number where sample name `name` first starts a line (0: nowhere)."""
    at = 0 if text.startswith(name) else text.find(f"\n{name}") + 1
    return text.count("\n", 0, at) + 1 if at or text.startswith(name) else 0


def _names_in_page(text: str, parser: _Parser, *, source: str = "<string>") -> frozenset:
    """Sample names to read from this page: of a metric exposed under several names (ITL and the
    deprecated TPOT carry the same observations) only the newest name present, so none counts twice.
    A page with one metric under two engines' names (vLLM's and SGLang's) is two servers' pages
    run together: refused, naming both lines, since neither can be told to be this server's.
    """
    drop = set()
    for key in {k for k, _, _ in parser.table.values()}:
        names = metric(key).names
        present = [n for n in names if n in parser.names or f"{n}_count" in parser.table]
        found = [n for n in present if f"\n{n}" in text or text.startswith(n)]
        if len({n.split(":")[0] for n in found}) > 1:
            a, b = found[0], next(n for n in found if n.split(":")[0] != found[0].split(":")[0])
            raise SourceError(
                f"{source}:{_line_of(text, a)}: {a} and, at line {_line_of(text, b)}, {b}: one "
                "page holds vLLM's and SGLang's metrics, two servers' pages run together; "
                "read each server's page on its own"
            )
        newest = found[0] if found else None
        drop.update(n for n in present if newest is not None and n != newest)
    if not drop:
        return parser.names
    return frozenset(n for n in parser.names if _family_of(n) not in drop)


def _malformed(source: str, number: int, raw: str, detail: str = "") -> SourceError:
    return SourceError(f"{source}:{number}: malformed exposition line{detail}: {raw[:120]!r}")


def _wanted_lines(text: str, *, source: str, names: frozenset, parser: _Parser):
    """The page's sample lines of wanted families, each with its label block swapped for an index.

    Returns (line number, raw line) of each kept line, the rewritten lines and the label blocks
    they index; a line that is neither a comment, blank nor a sample raises SourceError.
    """
    matches, lines, blocks = [], [], []
    last = text.count("\n") + 1 if not text.endswith("\n") else 0
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw or raw[0] == "#":
            continue
        name = _NAME.match(raw)
        end = name.end() if name else 0
        if name is None or end == len(raw) or raw[end] not in "{ \t":
            if raw.strip():
                raise _malformed(source, number, raw)
            continue
        if name.group(1) not in names:
            continue
        m = parser.keep.fullmatch(raw)
        if m is None:
            raise _malformed(source, number, raw)
        if number == last:
            raise SourceError(
                f"{source}:{number}: the page ends inside this sample line, without the final "
                f"newline the text format requires (cut off in transfer?): {raw[:120]!r}"
            )
        matches.append((number, raw))
        block = m.group("labels") or "{}"
        try:
            _labels_of(block)
        except ValueError as exc:
            raise SourceError(
                f"{source}:{number}: malformed labels ({exc}): {raw[:120]!r}"
            ) from None
        lines.append(f'{m.group("name")}{{i="{len(blocks)}"}}{m.group("rest")}')
        blocks.append(block)
    return matches, lines, blocks


def _sample_problem(line_text: str) -> str:
    """What is wrong after the labels of a sample line, in the text format's terms."""
    fields = line_text.rsplit("}", 1)[-1].split()
    if len(fields) > 2:
        return (
            f"{len(fields)} fields after the labels; a sample is a value and an optional timestamp"
        )
    if not fields:
        return "no value after the labels"
    try:
        float(fields[0])
    except ValueError:
        return f"the value {fields[0][:40]!r} is not a number (digits, NaN, +Inf or -Inf)"
    if len(fields) == 2 and not re.fullmatch(r"-?\d+(\.\d+)?", fields[1]):
        return f"the timestamp {fields[1][:40]!r} is not a number of milliseconds"
    return "not a sample line of the text format"


def _parse_families(matches: list, lines: list[str], *, source: str) -> list:
    """prometheus_client's families of the rewritten lines; on failure, name the first bad line."""
    try:
        return list(text_string_to_metric_families("\n".join(lines) + "\n"))
    except ValueError:
        for (number, raw), line_text in zip(matches, lines, strict=True):
            try:
                list(text_string_to_metric_families(line_text + "\n"))
            except ValueError:
                raise _malformed(source, number, raw, f" ({_sample_problem(line_text)})") from None
        raise SourceError(f"{source}: not Prometheus text exposition") from None


def _bucket_bound(labels: dict, *, sample_name: str, source: str) -> float:
    """A bucket's `le` label as a float (inf for +Inf), taken out of `labels`."""
    raw = labels.pop("le", None)
    if raw is None:
        raise SourceError(f"{source}: {sample_name} sample without an le label")
    try:
        bound = float(raw)
    except ValueError:
        raise SourceError(f"{source}: {sample_name} has a bad le label {raw[:40]!r}") from None
    if not bound >= 0:  # NaN too
        raise SourceError(
            f'{source}: {sample_name} has le="{raw[:40]}": a bucket bound of a latency or a token '
            "count is a number >= 0"
        )
    return bound


def _parse_rows(text: str, *, source: str, timestamp_seconds: float, parser: _Parser) -> list:
    """Rows (tuples in TIDY_COLUMNS order) for one exposition page.

    Only sample lines of wanted families reach the parser (samples are matched by name, so
    HELP/TYPE lines are not needed). Label blocks repeat on every line and in every scrape and
    cost about half the parse time, so each distinct block is parsed once (`_labels_of`) and
    the page goes to the parser with a short index label in its place.
    """
    names = _names_in_page(text, parser, source=source)
    matches, lines, blocks = _wanted_lines(text, source=source, names=names, parser=parser)
    openmetrics = _is_openmetrics(text)
    rows = []
    stamps: dict[tuple, tuple[float, int]] = {}  # series -> (its time, the line that set it)
    for family in _parse_families(matches, lines, source=source):
        for s in family.samples:
            hit = parser.table.get(s.name)
            if hit is None:
                continue
            key, family_name, kind = hit
            i = int(s.labels["i"])
            where = f"{source}:{matches[i][0]}"
            labels = dict(_labels_of(blocks[i]))
            le = math.nan
            if kind == "bucket":
                le = _bucket_bound(labels, sample_name=s.name, source=where)
            model_name = labels.pop("model_name", "")
            if family_name.startswith(SGLANG_PREFIX):
                if not _sglang_rank_zero(labels):
                    continue  # another TP / PP rank's copy of the same gauge
                model_name = model_name or labels.pop("name", "")  # SGLang 0.3.5's label
            engine = labels.pop("engine", "")
            other = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
            value = _checked_value(s, kind=kind, metric=metric(key), where=where)
            when = timestamp_seconds
            if s.timestamp is not None:
                # prometheus_client reads every stamp as milliseconds (divides by 1,000)
                stamp = round(s.timestamp * 1e3, 6) if openmetrics else s.timestamp
                when = _sample_time(stamp, where=where)
            if not openmetrics:
                _one_time_per_series(stamps, (family_name, blocks[i]), when, matches[i][0], where)
            rows.append(
                (when, source, key, family_name, kind, model_name, engine, other, le, value,
                 matches[i][0])
            )  # fmt: skip
    return rows


def _sglang_rank_zero(labels: dict) -> bool:
    """SGLang's scheduler metrics come once per rank (`tp_rank`, `pp_rank`, ...), each the same
    instance's view: rank 0's is read and the rank labels dropped."""
    for rank in ("tp_rank", "pp_rank", "dp_rank", "moe_ep_rank"):
        if labels.pop(rank, "0") != "0":
            return False
    return True


def _one_time_per_series(stamps: dict, series: tuple, when: float, number: int, where: str):
    """In a text page (one scrape), a histogram's samples share one time: a stamp on some of
    its lines and not on others would split it across two scrapes."""
    key = (series[0], re.sub(r',?\s*le="[^"]*"', "", series[1]))
    first = stamps.setdefault(key, (when, number))
    if first[0] != when and not (math.isnan(first[0]) and math.isnan(when)):
        raise SourceError(
            f"{where}: this sample's time ({_stamp(when)}) differs from line {first[1]}'s "
            f"({_stamp(first[0])}) for the same series; in a text page a series is read at one "
            "instant: stamp all its lines alike, or none"
        )


def _stamp(unix_seconds: float) -> str:
    return "none" if math.isnan(unix_seconds) else f"{unix_seconds:.3f} s"


def _is_openmetrics(text: str) -> bool:
    """OpenMetrics ends with `# EOF` (and stamps samples in seconds, not milliseconds)."""
    return text.rstrip().endswith("\n# EOF") or text.strip() == "# EOF"


def _checked_value(sample, *, kind: str, metric, where: str) -> float:
    """A sample's value; counts, sums, counters and gauges of requests must be finite and >= 0
    (NaN stays NaN)."""
    value = float(sample.value)
    if math.isnan(value) or (math.isfinite(value) and value >= 0):
        return value
    if kind != "value" or metric.kind == "counter":
        what = "a count, sum or counter"
    elif metric.unit == "requests":
        what = "a number of requests"
    else:
        return value
    raise SourceError(f"{where}: {sample.name} is {value:g}; {what} must be a finite number >= 0")


_PLAUSIBLE_UNIX_SECONDS = (9.46e8, 4.1e9)  # 2000 to 2099


def _sample_time(seconds: float, *, where: str) -> float:
    low, high = _PLAUSIBLE_UNIX_SECONDS
    if not low <= seconds <= high:
        raise SourceError(
            f"{where}: sample timestamp {seconds:g} s is not a Unix time between 2000 and 2099 "
            "(the text format stamps milliseconds; OpenMetrics, ending in # EOF, seconds)"
        )
    return seconds


def _frame(rows: list, sources) -> pd.DataFrame:
    """The tidy frame of `rows`; `attrs["sources"]` names what was read, rows or not, so an
    error about a missing metric can name the files that lack it."""
    frame = pd.DataFrame.from_records(rows, columns=list(TIDY_COLUMNS))
    frame = frame.astype(
        {"timestamp_seconds": float, "le": float, "value": float, "line": np.int64}
    )
    for column in _CATEGORICAL:
        frame[column] = frame[column].astype("category")
    frame.attrs["sources"] = tuple(str(s) for s in sources)
    return frame


def _parser(metrics) -> _Parser:
    return _DEFAULT if metrics is None else _Parser.for_keys(metrics)


def parse_prometheus_text(
    text: str, *, source: str = "<string>", timestamp_seconds: float = math.nan, metrics=None
) -> pd.DataFrame:
    """Tidy rows of one Prometheus text page (the metrics in `metrics`, default DEFAULT_METRICS)."""
    return _frame(
        _parse_rows(
            text, source=source, timestamp_seconds=timestamp_seconds, parser=_parser(metrics)
        ),
        [source],
    )


MAX_PAGE_BYTES = 256_000_000  # a saved page or OpenMetrics run; a /metrics page is ~100 kB


def _read_text(path: Path) -> str:
    return read_input_text(path, kind="metrics page", max_bytes=MAX_PAGE_BYTES, error=SourceError)


def read_prometheus_text(
    path, *, timestamp_seconds: float | None = None, metrics=None
) -> pd.DataFrame:
    """Tidy rows of one saved /metrics page; its time comes from the file name unless given."""
    path = Path(path)
    if timestamp_seconds is None:
        timestamp_seconds = timestamp_from_name(path.name)
    return _frame(
        _parse_rows(
            _read_text(path),
            source=str(path),
            timestamp_seconds=math.nan if timestamp_seconds is None else timestamp_seconds,
            parser=_parser(metrics),
        ),
        [path],
    )


def scrape_files(folder) -> list[tuple[float, Path]]:
    """(timestamp_seconds, path) of every scrape file in a folder, in time order."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SourceError(f"{folder}: not a folder")
    found = []
    for path in folder.iterdir():
        if path.name.startswith(".") or path.suffix not in SCRAPE_SUFFIXES or not path.is_file():
            continue
        ts = timestamp_from_name(path.name)
        if ts is None:
            raise SourceError(
                f"{path}: no ISO 8601 timestamp in the file name "
                "(expected e.g. metrics-20261202T152436Z.prom)"
            )
        found.append((ts, path))
    if not found:
        raise SourceError(f"{folder}: no scrape files ({', '.join(SCRAPE_SUFFIXES)}) in the folder")
    found.sort()
    return found


def _read_files(paths_and_times, metrics) -> pd.DataFrame:
    parser = _parser(metrics)
    rows: list = []
    for ts, path in paths_and_times:
        rows.extend(
            _parse_rows(_read_text(path), source=str(path), timestamp_seconds=ts, parser=parser)
        )
    return _frame(rows, [path for _, path in paths_and_times])


def read_scrape_folder(folder, *, metrics=None, workers: int = 1) -> pd.DataFrame:
    """Tidy rows of every timestamped scrape in a folder (see the module docstring for names).

    `workers` > 1 parses the files in that many processes (a day of 15-s scrapes loads in about
    half the time on two cores); the result is the same.
    """
    files = scrape_files(folder)
    if workers <= 1 or len(files) < 2 * workers:
        return _read_files(files, metrics)
    chunks = [
        files[i * len(files) // workers : (i + 1) * len(files) // workers] for i in range(workers)
    ]
    context = multiprocessing.get_context("spawn")  # fork is unsafe in threaded hosts (Jupyter)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        return _concat(list(pool.map(_read_files, chunks, [metrics] * workers)))


def _concat(frames) -> pd.DataFrame:
    """Concatenate tidy frames, keeping the string columns categorical."""
    if len(frames) == 1:
        return frames[0]
    columns = {}
    for column in TIDY_COLUMNS:
        parts = [f[column] for f in frames]
        if column in _CATEGORICAL:
            columns[column] = union_categoricals([p.array for p in parts])
        else:
            columns[column] = np.concatenate([p.to_numpy() for p in parts])
    frame = pd.DataFrame(columns)
    frame.attrs["sources"] = tuple(s for f in frames for s in f.attrs.get("sources", ()))
    return frame


# --- vllm bench serve JSON -------------------------------------------------------------------


def _samples_of(result: BenchResult) -> BenchSamples:
    if require_latencies(result).samples is None:
        raise SourceError(
            f"{result.source}: a summary-only bench result (no per-request ttfts/itls: run vllm "
            "bench serve with --save-detailed); `itlkit histogram` prints its summary"
        )
    return result.samples


def read_bench_samples(path) -> BenchSamples:
    """Per-request `ttfts` and `itls` (seconds) of a detailed `vllm bench serve` result JSON."""
    return _samples_of(read_bench_result(path))


def bench_frame(
    samples: BenchSamples,
    *,
    itl_upper_bounds=ITL_BUCKETS_SECONDS,
    ttft_upper_bounds=TTFT_BUCKETS_SECONDS,
    timestamp_seconds: float = math.nan,
) -> pd.DataFrame:
    """Bench samples binned into buckets (vLLM's by default), as one tidy snapshot."""
    rows = []
    for key, values, bounds in (
        ("itl", samples.itl_seconds, itl_upper_bounds),
        ("ttft", samples.ttft_seconds, ttft_upper_bounds),
    ):
        h = from_samples(values, upper_bounds=bounds)
        family = metric(key).names[0]
        common = (timestamp_seconds, samples.source, key, family)
        for le, c in zip(h.upper_bounds, h.cumulative_counts, strict=True):
            rows.append((*common, "bucket", "", "", "", float(le), float(c), 0))
        rows.append((*common, "sum", "", "", "", math.nan, h.sum, 0))
        rows.append((*common, "count", "", "", "", math.nan, h.count, 0))
    return _frame(rows, [samples.source])


def read_bench_json(
    path,
    *,
    itl_upper_bounds=ITL_BUCKETS_SECONDS,
    ttft_upper_bounds=TTFT_BUCKETS_SECONDS,
    timestamp_seconds: float = math.nan,
) -> pd.DataFrame:
    """A bench result file binned into buckets (vLLM's by default), as one tidy snapshot."""
    return bench_frame(
        read_bench_samples(path),
        itl_upper_bounds=itl_upper_bounds,
        ttft_upper_bounds=ttft_upper_bounds,
        timestamp_seconds=timestamp_seconds,
    )


# --- one entry point for paths ---------------------------------------------------------------


def read_paths(paths, *, metrics=None) -> pd.DataFrame:
    """Tidy rows from files and folders: folders of scrapes, .json bench results, text pages."""
    frames = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            frames.append(read_scrape_folder(path, metrics=metrics))
        elif path.suffix == ".json":
            frames.append(read_bench_json(path))
        elif path.exists() or path.is_symlink():
            frames.append(read_prometheus_text(path, metrics=metrics))
        else:
            raise SourceError(f"{path}: no such file or folder")
    if not frames:
        raise SourceError("no input paths given")
    return _concat(frames)


def read_texts(named_texts, *, metrics=None) -> pd.DataFrame:
    """Tidy rows from in-memory files (name → text), e.g. notebook uploads; `.json` is a bench
    result, anything else a text page timed by the timestamp in its name."""
    frames = []
    for name, text in dict(named_texts).items():
        if not text:
            raise SourceError(f"{name}: empty file (0 bytes)")
        if str(name).endswith(".json"):
            frames.append(bench_frame(_samples_of(parse_bench_result(text, source=str(name)))))
            continue
        ts = timestamp_from_name(str(name))
        frames.append(
            parse_prometheus_text(
                text, source=str(name), timestamp_seconds=math.nan if ts is None else ts,
                metrics=metrics,
            )
        )  # fmt: skip
    if not frames:
        raise SourceError("no files given")
    return _concat(frames)
