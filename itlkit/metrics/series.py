"""From the tidy table of `metrics.readers` to histogram snapshots and scalar series over time."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from itlkit.errors import HistogramError, SourceError
from itlkit.metrics.histogram import Histogram, HistogramSeries
from itlkit.metrics.sglang_metrics import (
    NO_KNOWN_ITL,
    SGLANG_PREFIX,
    not_an_itl_message,
    reading_notes,
)
from itlkit.metrics.speculative_metrics import speculation_note
from itlkit.metrics.vllm_metrics import family, metric

# vLLM V0 labels its series with model_name only (vllm/engine/metrics.py); V1 adds
# engine=str(engine_index), from 0 (vllm/v1/metrics/loggers.py, PrometheusStatLogger). Across an
# upgrade from one to the other, the label-less series is engine 0's.
_V0_ENGINE = "0"


def _newest_names(rows: pd.DataFrame) -> pd.Series:
    """Each row's metric under its engine's newest name (whichever name the page used): vLLM's,
    or SGLang's for a row read from an `sglang:` family."""
    engine = rows["family"].astype(str).str.split(":").str[0]
    pairs = rows["metric"].astype(str) + "|" + engine
    names = {pair: family(*pair.split("|")) for pair in pairs.unique()}
    return pairs.map(names).astype(str)


def _named(series: str) -> str:
    """A series as an error shows it: one line, at most 200 characters."""
    text = series.replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= 200 else text[:197] + "..."


def _engines(rows: pd.DataFrame) -> pd.Series:
    return rows["engine"].astype(str).replace("", _V0_ENGINE)


def _select(frame: pd.DataFrame, key: str, model_name, engine) -> pd.DataFrame:
    m = metric(key)
    rows = frame[frame["metric"] == m.key]
    if model_name is not None:
        rows = rows[rows["model_name"] == model_name]
    elif len(names := sorted({str(n) for n in rows["model_name"].unique()} - {""})) > 1:
        raise SourceError(
            f"{len(names)} models in the input ({', '.join(repr(n) for n in names[:8])}): their "
            f"{m.key} histograms are not one; choose one with --model-name (model_name=)"
        )
    if engine is not None:
        rows = rows[_engines(rows) == str(engine)]
    if rows.empty:
        read = sorted(
            {str(s) for s in frame["source"].unique()} | set(frame.attrs.get("sources", ()))
        )
        where = ", ".join(read[:3]) + (f" and {len(read) - 3} more" if len(read) > 3 else "")
        extra = "".join(
            f" with {k}={v!r}"
            for k, v in (("model_name", model_name), ("engine", engine))
            if v is not None
        )
        if key == "itl" and (frame["metric"] == "sglang_tpot").any():
            raise SourceError(f"{where}: {not_an_itl_message(frame['family'].unique())}")
        if key == "itl" and frame["family"].astype(str).str.startswith(SGLANG_PREFIX).any():
            raise SourceError(f"{where}: {NO_KNOWN_ITL}")
        raise SourceError(f"no {' or '.join(m.names)}{extra} in {where or 'the input'}")
    return rows


def _with_scrape_ids(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Number the scrapes (source, timestamp) in time order; NaN times sort last, in file order.

    Two sources stamped with the same instant (`...T150000Z` and `...T160000+01:00` name one
    moment) are two pages of one scrape, which cannot both be right: refused, never summed."""
    rows = rows.assign(source=rows["source"].astype(str))
    ids = rows.groupby(["timestamp_seconds", "source"], dropna=False, sort=True).ngroup()
    rows = rows.assign(scrape=ids.to_numpy())
    order = rows.drop_duplicates("scrape").sort_values("scrape")[["timestamp_seconds", "source"]]
    order = order.reset_index(drop=True)
    timed = order.dropna(subset=["timestamp_seconds"])
    twice = timed[timed.duplicated("timestamp_seconds", keep=False)]
    if not twice.empty:
        when = twice["timestamp_seconds"].iloc[0]
        pages = twice["source"][twice["timestamp_seconds"] == when].tolist()
        raise SourceError(
            f"{pages[0]} and {pages[1]} are both stamped {_utc(when)}: two pages of one instant "
            "cannot both be the server's state then; keep one (a name's time zone counts: "
            "T160000+01:00 is T150000Z)"
        )
    return rows, order


def _utc(unix_seconds: float) -> str:
    text = pd.Timestamp(unix_seconds, unit="s", tz="UTC").isoformat(timespec="milliseconds")
    return text.replace(".000", "").replace("+00:00", "Z")


def histogram_series(
    frame: pd.DataFrame, metric_key: str = "itl", *, model_name=None, engine=None
) -> HistogramSeries:
    """The snapshots of one histogram metric over time, summed by `le` across label sets.

    A series is its metric and full label set, whichever name vLLM exposed it under (a rename
    by an upgrade continues it) and with a missing `engine` label read as engine 0 (V0 pages).
    Each one's counters are read on their own: a drop is a reset (a restart), after which the
    series carries on from what it had; a series that appears later starts from zero (a new
    engine) and one that disappears keeps its last value. Only then are the series summed, so
    one engine's restart never hides another's increase. The same series twice in one scrape,
    and two pages stamped with one instant, are errors; so is a histogram without +Inf. Bucket
    layouts must agree between label sets and between scrapes; errors name the file and label
    set. Scrapes are ordered by timestamp; those without one come last, by file name.
    """
    if metric(metric_key).kind != "histogram":
        raise SourceError(f"{metric_key} is a {metric(metric_key).kind}, not a histogram")
    rows, order = _with_scrape_ids(_select(frame, metric_key, model_name, engine))
    rows = _with_series_ids(rows)
    _check_duplicates(rows, order)
    table = _bucket_table(rows, metric_key, order)
    _require_inf_bucket(rows, table, order)
    sums, totals, notes = _sums_and_counts(rows, table, order, metric_key)
    notes = (*notes, *reading_notes(rows["family"].unique()))
    if metric_key == "itl":
        spec = speculation_note(frame, str(rows["family"].iloc[0]))
        notes = (*notes, spec) if spec else notes
    bounds = np.asarray(table.columns, dtype=float)
    counts = table.to_numpy()
    sources = order["source"].to_numpy()
    _check_histograms(table, bounds, counts, sums, totals, sources)
    _check_sums(table, bounds, counts, sums, sources)
    values = np.column_stack([counts, sums, totals])
    carried, reset_scrapes = _carried_over_resets(table.index, values, scrapes=len(order))
    if not np.isfinite(carried[:, :-2]).all() or np.isinf(carried[:, -2:]).any():
        raise SourceError(
            f"{sources[0]}: {metric_key} counts overflow when added up across series and "
            "scrapes (values near 1e308 are not real counts)"
        )
    times = order["timestamp_seconds"].to_numpy(dtype=float)
    bounds.flags.writeable = False
    return HistogramSeries(
        timestamps_seconds=times,
        upper_bounds=bounds,
        cumulative_counts=carried[:, :-2],
        sums=carried[:, -2],
        counts=carried[:, -1],
        sources=tuple(sources),
        reset_times_seconds=tuple(float(times[i]) for i in reset_scrapes),
        notes=notes,
    )


def _check_duplicates(rows: pd.DataFrame, order: pd.DataFrame) -> None:
    """The same sample of the same series twice in one scrape: refuse rather than sum."""
    key = ["scrape", "series", "sample", "le"]
    twice = rows.duplicated(key, keep=False)
    if not twice.any():
        return
    r = rows[twice].iloc[0]
    sample = rows.groupby(key, dropna=False, sort=False, observed=True).ngroup()  # le NaN: sums
    lines = rows["line"][sample == sample[twice].iloc[0]][:2] if "line" in rows else ()
    where = f" (lines {', '.join(str(n) for n in lines)})" if len(lines) else ""
    le = f' le="{r["le"]:g}"' if r["sample"] == "bucket" else ""
    name = _named(r["series"])
    raise SourceError(
        f"{order['source'][r['scrape']]}: {name} _{r['sample']}{le} appears twice in one "
        f"scrape{where}; a series is its full label set, so this page repeats one"
    )


def _carried_over_resets(
    index: pd.MultiIndex, values: np.ndarray, *, scrapes: int
) -> tuple[np.ndarray, list[int]]:
    """Per series: undo counter resets, zero before it appears, hold after it goes; then sum.

    `values` has one row per (scrape, series) of `index`: buckets, then _sum, then _count.
    Returns the summed rows (one per scrape) and the scrapes at which some series reset.
    """
    total = np.zeros((scrapes, values.shape[1]))
    resets: set[int] = set()
    scrape_of = index.get_level_values("scrape").to_numpy()
    series_of = index.get_level_values("series").to_numpy()
    for name in pd.unique(series_of):
        mine = np.flatnonzero(series_of == name)
        at, v = scrape_of[mine], values[mine]
        order = np.argsort(at, kind="stable")
        at, v = at[order], v[order]
        dropped = np.zeros(len(at), dtype=bool)
        dropped[1:] = (np.diff(v[:, :-2], axis=0) < 0).any(axis=1) | (np.diff(v[:, -1]) < 0)
        carry = np.cumsum(np.where(dropped[:, None], np.roll(v, 1, axis=0), 0.0), axis=0)
        resets.update(int(s) for s in at[dropped])
        filled = np.zeros((scrapes, v.shape[1]))
        position = np.searchsorted(at, np.arange(scrapes), side="right") - 1
        seen = position >= 0
        filled[seen] = (v + carry)[position[seen]]
        with np.errstate(over="ignore"):  # an overflow is reported by the caller
            total += filled
    return total, sorted(resets)


def _with_series_ids(rows: pd.DataFrame) -> pd.DataFrame:
    """Name each series by what it counts, as Prometheus would print it; a NaN sample is an
    error. A series is its metric and labels, not the name it was exposed under: a family
    renamed by an upgrade (vllm:time_per_output_token_seconds -> inter_token_latency) and a V0
    series without an `engine` label continue as one series (its counter read on, or reset if
    it dropped), never as a second series that starts from zero beside the first."""
    other = rows["labels"].astype(str)
    names = _newest_names(rows)
    # vLLM's engine label (V0 pages have none: "0"); SGLang has no such label
    engine = ('",engine="' + _engines(rows) + '"').where(~names.str.startswith("sglang:"), '"')
    series_id = (
        names + '{model_name="' + rows["model_name"].astype(str) + engine
        + other.where(other == "", "," + other) + "}"
    )  # fmt: skip
    rows = rows.assign(series=series_id)
    nan_rows = rows[rows["value"].isna()]
    if not nan_rows.empty:
        r = nan_rows.iloc[0]
        raise SourceError(f"{r['source']}: {_named(r['series'])} {r['sample']} is NaN")
    return rows


def _bucket_table(rows: pd.DataFrame, metric_key: str, order: pd.DataFrame) -> pd.DataFrame:
    """Cumulative counts, one row per (scrape, label set), one column per `le`, all present."""
    buckets = rows[rows["sample"] == "bucket"]
    if buckets.empty:
        raise SourceError(f"{rows['source'].iloc[0]}: {metric_key} has no _bucket samples")
    table = buckets.pivot_table(
        index=["scrape", "series"],
        columns="le",
        values="value",
        aggfunc="first",
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
            f"{source}: {_named(series)} has no le={bounds[j]:g} bucket; bucket layouts differ "
            f"between scrapes or label sets (this one has le={have})"
        )
    return table


def _sums_and_counts(
    rows: pd.DataFrame, table: pd.DataFrame, order: pd.DataFrame, metric_key: str
) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """The `_sum` and `_count` of every row of the bucket table, and what had to be assumed.

    Without `_sum` anywhere the quantiles still hold and the mean is unknown (NaN); without
    `_count` it is the +Inf bucket's count, which Prometheus defines it to equal.
    """
    sums_counts = (
        rows[rows["sample"].isin(["sum", "count"])]
        .pivot_table(
            index=["scrape", "series"], columns="sample", values="value", aggfunc="first",
            observed=True,
        )
        .reindex(table.index)
    )  # fmt: skip
    notes = []
    if "sum" not in sums_counts or sums_counts["sum"].isna().all():
        sums_counts["sum"] = np.nan
        notes.append(
            f"{metric_key}: no _sum samples: quantiles and buckets hold, the mean is unknown"
        )
    if "count" not in sums_counts and math.isinf(float(table.columns[-1])):
        sums_counts["count"] = table.to_numpy()[:, -1]
    known_sums = sums_counts["sum"].notna().any()
    if (
        "count" not in sums_counts
        or sums_counts["count"].isna().any()
        or (known_sums and sums_counts["sum"].isna().any())
    ):
        scrape, series = table.index[0]
        raise SourceError(
            f"{order['source'][scrape]}: {_named(series)} lacks its _sum or _count sample"
        )
    return sums_counts["sum"].to_numpy(), sums_counts["count"].to_numpy(), tuple(notes)


def _require_inf_bucket(rows: pd.DataFrame, table: pd.DataFrame, order) -> None:
    """A histogram without its +Inf bucket is refused, as Prometheus' histogram_quantile
    answers NaN for it: every quantile would be a guess about the observations above the top."""
    if math.isinf(float(table.columns[-1])):
        return
    scrape, series = table.index[0]
    mine = rows[(rows["scrape"] == scrape) & (rows["series"] == series)]
    mine = mine[mine["sample"] == "bucket"]
    line = f":{int(mine['line'].max())}" if "line" in mine and mine["line"].max() > 0 else ""
    raise SourceError(
        f'{order["source"][scrape]}{line}: {_named(series)} has no le="+Inf" bucket (its highest '
        f"is le={float(table.columns[-1]):g}): the page is cut or hand-edited; Prometheus' "
        "histogram_quantile answers NaN without it, so no quantile can be read"
    )


def _check_histograms(table, bounds, counts, sums, totals, sources) -> None:
    """Validate every (scrape, label set) at once; on a failure, let Histogram.create word it."""
    bad = ~np.isclose(totals, counts[:, -1], rtol=1e-9, atol=1e-9)
    bad |= (np.diff(counts, axis=1) < 0).any(axis=1) | (counts < 0).any(axis=1)
    if not bad.any():
        return
    i = int(np.argmax(bad)) if bad.any() else 0
    scrape, series = table.index[i]
    try:
        Histogram.create(
            upper_bounds=bounds,
            cumulative_counts=counts[i],
            sum=sums[i],
            count=totals[i],
            where=f"{sources[scrape]}: {_named(series)}",
        )
    except HistogramError as exc:
        raise SourceError(str(exc)) from None


def _check_sums(table, bounds, counts, sums, sources) -> None:
    """A `_sum` must be possible for its buckets: each observation lies within its bucket.

    Bounds are loose by two observations of the largest finite bound, since a scrape may catch
    `_sum` and the buckets one observation apart.
    """
    per_bucket = np.diff(counts, axis=1, prepend=0.0)
    lower = np.concatenate([[0.0], bounds[:-1]])
    finite = np.isfinite(bounds)
    slack = 2 * bounds[finite][-1] if finite.any() else 0.0
    least = per_bucket[:, finite] @ lower[finite] + per_bucket[:, ~finite].sum(axis=1) * lower[-1]
    most = np.where(
        per_bucket[:, ~finite].sum(axis=1) > 0, np.inf, per_bucket[:, finite] @ bounds[finite]
    )
    bad = (sums < least - slack) | (sums > most + slack) | np.isinf(sums)  # NaN: not known
    if not bad.any():
        return
    i = int(np.argmax(bad))
    scrape, series = table.index[i]
    why = (
        " (SGLang's k-split adds a chunk's whole gap to _sum and k observations of gap / k to "
        "the buckets: the same seconds, so they must agree)"
        if str(series).startswith("sglang:inter_token_latency_seconds")
        else ""
    )
    raise SourceError(
        f"{sources[scrape]}: {_named(series)} _sum {sums[i]:g} is impossible for its buckets: "
        f"their {counts[i, -1]:g} observations add up to between {least[i]:g} and {most[i]:g}" + why
    )


def scalar_series(
    frame: pd.DataFrame,
    metric_key: str,
    *,
    model_name=None,
    engine=None,
    how: str = "sum",
    label: str | None = None,
) -> pd.Series:
    """A counter or gauge over time (index: timestamp_seconds), label sets combined by `how`;
    with `label` ("category=forward_extend"), only the series that carry it.

    Counters are corrected per series first, as in `histogram_series` (a restart of one engine
    never hides another's increase; a series that appears starts from zero, one that goes keeps
    its last value), so the combined counter only goes down where nothing was observed.
    """
    if metric(metric_key).kind == "histogram":
        raise SourceError(f"{metric_key} is a histogram; use histogram_series")
    rows = _select(frame, metric_key, model_name, engine)
    if label is not None:
        carries = rows["labels"].astype(str).str.split(",").map(lambda pairs: label in pairs)
        rows = rows[carries.to_numpy(dtype=bool)]
        if rows.empty:
            raise SourceError(f"no {metric_key} series with {label} in the input")
    rows, order = _with_scrape_ids(rows)
    rows = _with_series_ids(rows)
    _check_duplicates(rows, order)
    times = pd.Index(order["timestamp_seconds"].to_numpy(), name="timestamp_seconds")
    if metric(metric_key).kind == "counter" and how == "sum":
        table = rows.set_index(["scrape", "series"])["value"].sort_index()
        carried, _ = _carried_over_resets(
            table.index, table.to_numpy()[:, None], scrapes=len(order)
        )
        return pd.Series(carried[:, 0], index=times, name=metric_key)
    values = rows.groupby("scrape")["value"].agg(how).sort_index()
    values.index = times
    values.name = metric_key
    return values
