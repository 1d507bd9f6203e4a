"""Read vLLM metrics from where users keep them, into one tidy table and histogram series.

Sources: Prometheus text exposition (a string, a file, or a folder of timestamped scrapes) and a
`vllm bench serve --save-result --save-detailed` JSON file. Every reader returns the same tidy
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
- `value`: the sample value.

Folder naming scheme: every file whose name ends in `.prom`, `.txt` or `.metrics` is one scrape and
must carry its UTC time as an ISO 8601 timestamp in the name, basic or extended, e.g.
`metrics-20261202T152436.250Z.prom` or `2026-12-02T15:24:36Z.txt` (a name without a zone is read
as UTC). `itlkit scrape` writes this form.

Text is parsed by `prometheus_client.parser.text_string_to_metric_families`; lines of families
itlkit does not read are filtered out first (with a regular expression) for speed.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
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

from itlkit.errors import HistogramError, SourceError
from itlkit.metrics.histogram import Histogram, HistogramSeries, from_samples
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
)
SCRAPE_SUFFIXES = (".prom", ".txt", ".metrics")
_CATEGORICAL = ("source", "metric", "family", "sample", "model_name", "engine", "labels")


# --- timestamps in file names ---------------------------------------------------------------

_ISO_IN_NAME = re.compile(
    r"(\d{4})-?(\d{2})-?(\d{2})T(\d{2})[:\-]?(\d{2})[:\-]?(\d{2})(\.\d+)?(Z|[+\-]\d{2}:?\d{2})?"
)


def timestamp_from_name(name: str) -> float | None:
    """Seconds since the epoch from an ISO 8601 timestamp inside a file name (UTC if no zone)."""
    m = _ISO_IN_NAME.search(Path(name).name)
    if not m:
        return None
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    fraction = float(m.group(7)) if m.group(7) else 0.0
    zone = m.group(8)
    tz = dt.UTC
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        tz = dt.timezone(sign * dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
    try:
        when = dt.datetime(year, month, day, hour, minute, second, tzinfo=tz)
    except ValueError as exc:
        raise SourceError(f"{name}: bad timestamp in file name ({exc})") from None
    return when.timestamp() + fraction


def timestamp_to_name(timestamp_seconds: float) -> str:
    """The basic ISO 8601 form `YYYYMMDDTHHMMSS.mmmZ` used for scrape file names."""
    when = dt.datetime.fromtimestamp(timestamp_seconds, tz=dt.UTC)
    return when.strftime("%Y%m%dT%H%M%S.") + f"{when.microsecond // 1000:03d}Z"


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
    "itl", "ttft", "e2e", "running", "waiting", "kv_usage", "preemptions", "prompt_tokens",
    "generation_tokens", "prefix_cache_queries", "prefix_cache_hits", "request_prompt_tokens_sum",
    "request_prompt_tokens_count", "request_generation_tokens_sum",
)  # fmt: skip
ALL_METRICS = tuple(METRICS)
_DEFAULT = _Parser.for_keys(DEFAULT_METRICS)


@functools.lru_cache(maxsize=65536)
def _labels_of(block: str) -> tuple[tuple[str, str], ...]:
    """Labels of one `{...}` block, parsed once by prometheus_client and remembered."""
    (family,) = text_string_to_metric_families(f"x{block} 0\n")
    return tuple(family.samples[0].labels.items())


def _names_in_page(text: str, parser: _Parser) -> frozenset:
    """Sample names to read from this page: of a metric exposed under several names (ITL and the
    deprecated TPOT carry the same observations) only the newest name present, so none counts twice.
    """
    drop = set()
    for key in {k for k, _, _ in parser.table.values()}:
        names = metric(key).names
        present = [n for n in names if n in parser.names or f"{n}_count" in parser.table]
        newest = next((n for n in present if f"\n{n}" in text or text.startswith(n)), None)
        drop.update(n for n in present if newest is not None and n != newest)
    if not drop:
        return parser.names
    return frozenset(n for n in parser.names if _family_of(n) not in drop)


def _parse_rows(text: str, *, source: str, timestamp_seconds: float, parser: _Parser) -> list:
    """Rows (tuples in TIDY_COLUMNS order) for one exposition page.

    Only sample lines of wanted families reach the parser (samples are matched by name, so
    HELP/TYPE lines are not needed). Label blocks repeat on every line and in every scrape and
    cost about half the parse time, so each distinct block is parsed once (`_labels_of`) and
    the page goes to the parser with a short index label in its place.
    """
    names = _names_in_page(text, parser)
    matches, lines, blocks = [], [], []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw or raw[0] == "#":
            continue
        name = _NAME.match(raw)
        end = name.end() if name else 0
        if name is None or end == len(raw) or raw[end] not in "{ \t":
            if raw.strip():
                raise SourceError(f"{source}:{number}: malformed exposition line: {raw[:120]!r}")
            continue
        if name.group(1) not in names:
            continue
        m = parser.keep.fullmatch(raw)
        if m is None:
            raise SourceError(f"{source}:{number}: malformed exposition line: {raw[:120]!r}")
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
    try:
        families = list(text_string_to_metric_families("\n".join(lines) + "\n"))
    except ValueError as exc:
        for (number, raw), line_text in zip(matches, lines, strict=True):  # name the bad line
            try:
                list(text_string_to_metric_families(line_text + "\n"))
            except ValueError as line_exc:
                raise SourceError(
                    f"{source}:{number}: malformed exposition line ({line_exc}): {raw[:120]!r}"
                ) from None
        raise SourceError(f"{source}: cannot parse exposition text ({exc})") from None
    rows = []
    for family in families:
        for s in family.samples:
            hit = parser.table.get(s.name)
            if hit is None:
                continue
            key, family_name, kind = hit
            labels = dict(_labels_of(blocks[int(s.labels["i"])]))
            le = math.nan
            if kind == "bucket":
                raw = labels.pop("le", None)
                if raw is None:
                    raise SourceError(f"{source}: {s.name} sample without an le label")
                try:
                    le = float(raw)
                except ValueError:
                    raise SourceError(f"{source}: {s.name} has a bad le label {raw!r}") from None
            model_name = labels.pop("model_name", "")
            engine = labels.pop("engine", "")
            other = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
            rows.append(
                (timestamp_seconds, source, key, family_name, kind, model_name, engine, other,
                 le, float(s.value))
            )  # fmt: skip
    return rows


def _frame(rows: list) -> pd.DataFrame:
    frame = pd.DataFrame.from_records(rows, columns=list(TIDY_COLUMNS))
    frame = frame.astype({"timestamp_seconds": float, "le": float, "value": float})
    for column in _CATEGORICAL:
        frame[column] = frame[column].astype("category")
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
        )
    )


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SourceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not data:
        raise SourceError(f"{path}: empty file (0 bytes)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


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
        )
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
    return _frame(rows)


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
    return pd.DataFrame(columns)


# --- vllm bench serve JSON -------------------------------------------------------------------


@dataclass(frozen=True)
class BenchSamples:
    """Exact per-request samples from a `vllm bench serve` result file (failed requests dropped)."""

    ttft_seconds: np.ndarray
    itl_seconds: np.ndarray  # every inter-token gap of every successful request, concatenated
    itl_per_request_seconds: tuple[np.ndarray, ...]
    source: str


def read_bench_samples(path) -> BenchSamples:
    """Per-request `ttfts` and `itls` (seconds) of a `vllm bench serve --save-result` JSON."""
    path = Path(path)
    return parse_bench_json(_read_text(path), source=str(path))


def parse_bench_json(text: str, *, source: str = "<string>") -> BenchSamples:
    """Per-request `ttfts` and `itls` (seconds) from the text of a bench result file."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(f"{source}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if not isinstance(doc, dict) or "itls" not in doc or "ttfts" not in doc:
        raise SourceError(
            f"{source}: no per-request 'itls'/'ttfts' lists (run vllm bench serve with "
            "--save-result --save-detailed)"
        )
    ttfts, itls = doc["ttfts"], doc["itls"]
    errors = doc.get("errors") or [""] * len(ttfts)
    if not (len(ttfts) == len(itls) == len(errors)):
        raise SourceError(
            f"{source}: 'ttfts' ({len(ttfts)}), 'itls' ({len(itls)}) and 'errors' "
            f"({len(errors)}) differ in length"
        )
    ok = [i for i, e in enumerate(errors) if not e]
    try:
        per_request = tuple(np.asarray(itls[i], dtype=float) for i in ok)
        ttft = np.asarray([ttfts[i] for i in ok], dtype=float)
    except (TypeError, ValueError) as exc:
        raise SourceError(f"{source}: non-numeric ITL or TTFT value ({exc})") from None
    flat = np.concatenate(per_request) if per_request else np.zeros(0)
    for name, values in (("ttfts", ttft), ("itls", flat)):
        if not np.isfinite(values).all() or (values < 0).any():
            raise SourceError(f"{source}: '{name}' holds a NaN, infinite or negative value")
    return BenchSamples(ttft, flat, per_request, source)


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
            rows.append((*common, "bucket", "", "", "", float(le), float(c)))
        rows.append((*common, "sum", "", "", "", math.nan, h.sum))
        rows.append((*common, "count", "", "", "", math.nan, h.count))
    return _frame(rows)


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
        elif path.exists():
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
            frames.append(bench_frame(parse_bench_json(text, source=str(name))))
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


# --- from the tidy table to histograms and series -------------------------------------------


def _select(frame: pd.DataFrame, key: str, model_name, engine) -> pd.DataFrame:
    m = metric(key)
    rows = frame[frame["metric"] == m.key]
    if model_name is not None:
        rows = rows[rows["model_name"] == model_name]
    if engine is not None:
        rows = rows[rows["engine"] == str(engine)]
    if rows.empty:
        where = ", ".join(sorted({str(s) for s in frame["source"].unique()})[:3]) or "the input"
        extra = "".join(
            f" with {k}={v!r}"
            for k, v in (("model_name", model_name), ("engine", engine))
            if v is not None
        )
        raise SourceError(f"no {' or '.join(m.names)}{extra} in {where}")
    return rows


def _with_scrape_ids(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Number the scrapes (source, timestamp) in time order; NaN times sort last, in file order."""
    rows = rows.assign(source=rows["source"].astype(str))
    ids = rows.groupby(["timestamp_seconds", "source"], dropna=False, sort=True).ngroup()
    rows = rows.assign(scrape=ids.to_numpy())
    order = rows.drop_duplicates("scrape").sort_values("scrape")[["timestamp_seconds", "source"]]
    return rows, order.reset_index(drop=True)


def histogram_series(
    frame: pd.DataFrame, metric_key: str = "itl", *, model_name=None, engine=None
) -> HistogramSeries:
    """The snapshots of one histogram metric over time, summed by `le` across label sets.

    Bucket layouts must agree between label sets and between scrapes; errors name the file and
    label set. Scrapes are ordered by timestamp; those without one come last, by file name.
    """
    if metric(metric_key).kind != "histogram":
        raise SourceError(f"{metric_key} is a {metric(metric_key).kind}, not a histogram")
    rows, order = _with_scrape_ids(_select(frame, metric_key, model_name, engine))
    other = rows["labels"].astype(str)
    series_id = (
        rows["family"].astype(str) + '{model_name="' + rows["model_name"].astype(str)
        + '",engine="' + rows["engine"].astype(str) + '"'
        + other.where(other == "", "," + other) + "}"
    )  # fmt: skip
    rows = rows.assign(series=series_id)
    nan_rows = rows[rows["value"].isna()]
    if not nan_rows.empty:
        r = nan_rows.iloc[0]
        raise SourceError(f"{r['source']}: {r['series']} {r['sample']} is NaN")
    buckets = rows[rows["sample"] == "bucket"]
    if buckets.empty:
        raise SourceError(f"{rows['source'].iloc[0]}: {metric_key} has no _bucket samples")
    table = buckets.pivot_table(
        index=["scrape", "series"],
        columns="le",
        values="value",
        aggfunc="sum",
        dropna=False,
        observed=True,
    )
    bounds = np.asarray(table.columns, dtype=float)
    missing = table.isna().to_numpy()
    if missing.any():
        i, j = np.argwhere(missing)[0]
        have = ",".join(f"{b:g}" for b, gap in zip(bounds, missing[i], strict=True) if not gap)
        scrape, series = table.index[i]
        source = order["source"][scrape]
        raise SourceError(
            f"{source}: {series} has no le={bounds[j]:g} bucket; bucket layouts differ between "
            f"scrapes or label sets (this one has le={have})"
        )
    counts = table.to_numpy()
    sums_counts = (
        rows[rows["sample"].isin(["sum", "count"])]
        .pivot_table(
            index=["scrape", "series"],
            columns="sample",
            values="value",
            aggfunc="sum",
            observed=True,
        )
        .reindex(table.index)
    )
    if "sum" not in sums_counts or "count" not in sums_counts or sums_counts.isna().any().any():
        scrape, series = table.index[0]
        raise SourceError(f"{order['source'][scrape]}: {series} lacks its _sum or _count sample")
    per_series_sum = sums_counts["sum"].to_numpy()
    per_series_count = sums_counts["count"].to_numpy()
    sources = order["source"].to_numpy()
    # Validate every (scrape, label set) at once; on a failure, let Histogram.create word it.
    bad = ~np.isclose(per_series_count, counts[:, -1], rtol=1e-9, atol=1e-9)
    bad |= (np.diff(counts, axis=1) < 0).any(axis=1) | (counts < 0).any(axis=1)
    if not math.isinf(bounds[-1]) or bad.any():
        i = int(np.argmax(bad)) if bad.any() else 0
        scrape, series = table.index[i]
        try:
            Histogram.create(
                upper_bounds=bounds,
                cumulative_counts=counts[i],
                sum=per_series_sum[i],
                count=per_series_count[i],
                where=f"{sources[scrape]}: {series}",
            )
        except HistogramError as exc:
            raise SourceError(str(exc)) from None
    index = table.index.get_level_values("scrape")
    per_scrape = pd.DataFrame(counts, index=index).groupby(level=0).sum().sort_index()
    totals = (
        pd.DataFrame({"sum": per_series_sum, "count": per_series_count}, index=index)
        .groupby(level=0)
        .sum()
        .sort_index()
    )
    bounds.flags.writeable = False
    return HistogramSeries(
        timestamps_seconds=order["timestamp_seconds"].to_numpy(dtype=float),
        upper_bounds=bounds,
        cumulative_counts=per_scrape.to_numpy(),
        sums=totals["sum"].to_numpy(),
        counts=totals["count"].to_numpy(),
        sources=tuple(sources),
    )


def scalar_series(
    frame: pd.DataFrame, metric_key: str, *, model_name=None, engine=None, how: str = "sum"
) -> pd.Series:
    """A counter or gauge over time (index: timestamp_seconds), label sets combined by `how`."""
    if metric(metric_key).kind == "histogram":
        raise SourceError(f"{metric_key} is a histogram; use histogram_series")
    rows = _select(frame, metric_key, model_name, engine)
    nan_rows = rows[rows["value"].isna()]
    if not nan_rows.empty:
        r = nan_rows.iloc[0]
        raise SourceError(f"{r['source']}: {r['family']} is NaN")
    rows, order = _with_scrape_ids(rows)
    values = rows.groupby("scrape")["value"].agg(how).sort_index()
    values.index = pd.Index(order["timestamp_seconds"].to_numpy(), name="timestamp_seconds")
    values.name = metric_key
    return values
