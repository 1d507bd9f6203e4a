"""`itlkit histogram PATH... [--metric itl] [--json]`: read a vLLM histogram as buckets.

PATHs are saved /metrics pages, folders of timestamped scrapes, or `vllm bench serve` JSON files
(summary-only files print their statistics beside). One scrape gives the histogram since the server
started; two or more give the window between the first and the last (counter resets are reported),
and each must carry its time, as for `itlkit diagnose`. Quantiles of buckets are Prometheus'
`histogram_quantile`. A detailed bench file is binned into vLLM's buckets (what /metrics would
hold) and its exact quantiles are printed beside, from its own samples as vllm bench computes them.
JSON: counts and seconds as numbers, +Inf as the string "+Inf", unknown values (NaN) as null.
"""

from __future__ import annotations

import datetime as dt
import json
import math

from itlkit.cli._args import above_one, step_seconds
from itlkit.metrics.bench import sample_quantiles
from itlkit.metrics.histogram import Summary, series_window, summarize
from itlkit.metrics.vllm_metrics import SECONDS_HISTOGRAMS, metric
from itlkit.units import format_percent, format_seconds

QUANTILES = (0.5, 0.9, 0.99)


SPECULATIVE_KEYS = ("spec_drafts", "spec_accepted", "spec_accepted_per_position",
                    "spec_accept_length")  # fmt: skip


def add_parser(subparsers) -> None:
    """Register the `histogram` subcommand."""
    p = subparsers.add_parser(
        "histogram",
        help="buckets, mean and Prometheus-exact quantiles of a vLLM latency histogram",
        description=__doc__.split("\n", 2)[2],
    )
    p.add_argument(
        "paths", nargs="+", metavar="PATH", help="scrape file, scrape folder or bench JSON"
    )
    p.add_argument("--metric", default="itl", choices=SECONDS_HISTOGRAMS,
                   help="which histogram (default itl: vllm:inter_token_latency_seconds, the "
                        "older vllm:time_per_output_token_seconds, or SGLang's "
                        "sglang:inter_token_latency_seconds)")  # fmt: skip
    p.add_argument("--model-name", default=None, help="only this model_name label")
    p.add_argument("--engine", default=None, help="only this engine label (default: sum of all)")
    p.add_argument("--floor-seconds", type=step_seconds, default=None,
                   help="decode-step floor (seconds): share near it vs in a slow mode")  # fmt: skip
    p.add_argument("--slow-factor", type=above_one, default=3.0,
                   help="the slow mode sits at this multiple of the floor (default 3)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)


def _iso(seconds: float) -> str | None:
    if not math.isfinite(seconds):
        return None
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC).isoformat().replace("+00:00", "Z")


def _num(x: float):
    """A JSON-safe number: +Inf as "+Inf", NaN as null."""
    x = float(x)
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return x


def _bucket_text(lower: float, upper: float) -> str:
    lo = "0" if lower == 0 else ("-∞" if lower == -math.inf else format_seconds(lower))
    hi = "+Inf" if upper == math.inf else format_seconds(upper)
    return f"({lo}, {hi}]"


def _exact(result, metric_key: str) -> dict | None:
    """A detailed bench file's exact quantiles of `metric_key` from its own samples, and the
    percentiles its summary states (None when the file keeps no samples of that metric)."""
    values = result.samples.values_seconds(metric_key) if result is not None else None
    if values is None:
        return None
    stated = {}  # q -> (the file's field, its value)
    name = _BENCH_NAMES.get(metric_key)
    if name in result.summaries:
        s = result.summaries[name]
        stated = {q: (f"{_level(q)}_{name}_ms", v) for q, v in s.percentiles_seconds.items()}
        if math.isfinite(s.median_seconds):
            stated.setdefault(0.5, (f"median_{name}_ms", s.median_seconds))
    levels = sorted({*QUANTILES, *stated})
    return {
        "source": result.source,
        "field": name,
        "count": int(values.size),
        "quantiles": sample_quantiles(values, levels),
        "stated": dict(sorted(stated.items())),
    }


def _level(q: float) -> str:
    return f"p{q * 100:g}"


def to_json(
    summary: Summary, *, metric_key: str, family: str, scrapes: int, window, exact=None
) -> dict:
    """The JSON document for one summary (see the module docstring for Inf/NaN)."""
    h = summary.histogram
    doc = {
        "metric": metric_key,
        "family": family,
        "scrapes": scrapes,
        "count": _num(h.count),
        "sum_seconds": _num(h.sum),
        "mean_seconds": _num(h.mean),
    }
    for est in summary.quantiles:
        name = f"p{round(est.q * 100):d}"
        doc[f"{name}_seconds"] = _num(est.value)
        doc[f"{name}_bucket_seconds"] = [_num(est.bucket_lower), _num(est.bucket_upper)]
    doc["buckets"] = [
        [_num(le), _num(c)] for le, c in zip(h.upper_bounds, h.cumulative_counts, strict=True)
    ]
    if window is not None:
        doc["window"] = {
            "start": _iso(window.start_seconds),
            "end": _iso(window.end_seconds),
            "duration_seconds": _num(window.duration_seconds),
            "counter_resets": [_iso(t) for t in window.reset_times_seconds],
        }
    if exact is not None:
        doc["exact"] = {
            "method": "numpy.percentile (linear) over the file's samples, as vllm bench serve",
            "source": exact["source"],
            "count": exact["count"],
            **{f"{_level(q)}_seconds": _num(v) for q, v in exact["quantiles"].items()},
            "stated_in_file_seconds": {field: _num(v) for field, v in exact["stated"].values()},
        }
    if summary.modes is not None:
        m = summary.modes
        doc["modes"] = {
            "floor_seconds": m.floor_seconds,
            "slow_factor": m.slow_factor,
            "cut_seconds": _num(m.cut_seconds),
            "near_floor_share": _num(m.near_floor_share),
            "slow_share": _num(m.slow_share),
            "peak_bucket_seconds": [_num(x) for x in m.peak_bucket],
            "warning": m.warning,
        }
    return doc


def _exact_lines(exact: dict, metric_key: str) -> list[str]:
    """The exact quantiles, named as such, and the file's own percentiles checked against them."""
    n = f"{exact['count']:,}"
    lines = [
        f"exact quantiles of the file's {n} {metric_key} samples (numpy.percentile, linear, as "
        f"vllm bench serve computes its p<P>_{exact['field']}_ms):"
    ]
    for q, value in exact["quantiles"].items():
        line = f"exact {_level(q)} {format_seconds(value)}"
        if q in exact["stated"]:
            field, stated = exact["stated"][q]
            agrees = math.isclose(stated, value, rel_tol=1e-6, abs_tol=1e-9)
            line += f"  (the file's own {field}: {format_seconds(stated)}" + (
                ", agrees)" if agrees else ": differs: the summary and the samples disagree)"
            )
        lines.append(line)
    return lines


def to_text(
    summary: Summary, *, metric_key: str, family: str, scrapes: int, window, exact=None
) -> str:
    """A table of buckets and the numbers under it (with a bench file's exact quantiles)."""
    h = summary.histogram
    lines = [f"{family} ({metric_key})"]
    if exact is not None:
        lines.append(
            f"{exact['source']}: vllm bench samples binned into vLLM's buckets (what /metrics "
            "would hold); the bucketed quantiles below are interpolated, the exact ones are not"
        )
    elif window is None:
        lines.append(f"{scrapes} scrape: everything since the server started")
    else:
        lines.append(
            f"window of {scrapes} scrapes: {_iso(window.start_seconds)} to "
            f"{_iso(window.end_seconds)} ({format_seconds(window.duration_seconds)})"
        )
        for t in window.reset_times_seconds:
            lines.append(f"warning: counter reset before {_iso(t)}: counts are a lower bound")
    lines.append(f"{'bucket':>24} {'count':>12} {'share':>8} {'cumulative':>11}")
    total = h.count
    for lo, hi, n, c in zip(h.lower_bounds, h.upper_bounds, h.bucket_counts, h.cumulative_counts,
                            strict=True):  # fmt: skip
        share = format_percent(n / total) if total else "n/a"
        cum = format_percent(c / total) if total else "n/a"
        lines.append(f"{_bucket_text(lo, hi):>24} {n:>12,.0f} {share:>8} {cum:>11}")
    lines.append(
        f"count {total:,.0f}   sum {format_seconds(h.sum)}   mean {format_seconds(h.mean)}"
    )
    named = "bucketed " if exact is not None else ""
    for est in summary.quantiles:
        where = _bucket_text(est.bucket_lower, est.bucket_upper)
        lines.append(
            f"{named}p{est.q * 100:g} {format_seconds(est.value)}  (interpolated in bucket {where})"
        )
    if exact is not None:
        lines += _exact_lines(exact, metric_key)
    if summary.modes is not None:
        m = summary.modes
        if m.warning:
            lines.append(f"modes: warning: {m.warning}")
        else:
            lines.append(
                f"modes: {format_percent(m.near_floor_share)} near the floor "
                f"{format_seconds(m.floor_seconds)} (up to {format_seconds(m.cut_seconds)}), "
                f"{format_percent(m.slow_share)} slower (slow mode at {m.slow_factor:g}× floor = "
                f"{format_seconds(m.floor_seconds * m.slow_factor)})"
            )
    return "\n".join(lines)


_BENCH_NAMES = {"itl": "itl", "ttft": "ttft", "tpot": "tpot", "e2e": "e2el"}


def _split_bench_summaries(paths: list[str]) -> tuple[list[str], list, dict]:
    """Paths to read as histograms, the summary-only bench results among `paths`, and the
    detailed ones by path."""
    from itlkit.metrics.bench import read_bench_result

    rest, summaries, detailed = [], [], {}
    for path in paths:
        if path.endswith(".json"):
            result = read_bench_result(path)
            if result.samples is None:
                summaries.append(result)
                continue
            detailed[path] = result
        rest.append(path)
    return rest, summaries, detailed


def _bench_summary(result, metric_key: str):
    name = _BENCH_NAMES.get(metric_key)
    summary = result.summaries.get(name) if name else None
    if summary is None:
        from itlkit.errors import SourceError

        raise SourceError(f"{result.source}: this bench summary has no {metric_key} statistics")
    return summary


def bench_summary_json(result, metric_key: str) -> dict:
    """One summary-only bench result's statistics of `metric_key` (seconds)."""
    s = _bench_summary(result, metric_key)
    return {
        "source": result.source,
        "completed": result.completed,
        "mean_seconds": _num(s.mean_seconds),
        "median_seconds": _num(s.median_seconds),
        "std_seconds": _num(s.std_seconds),
        "percentiles_seconds": {f"p{q * 100:g}": _num(v) for q, v in s.percentiles_seconds.items()},
    }


def bench_summary_text(result, metric_key: str) -> str:
    """One line: what a summary-only bench result measured for `metric_key`."""
    s = _bench_summary(result, metric_key)
    parts = [f"mean {format_seconds(s.mean_seconds)}", f"median {format_seconds(s.median_seconds)}"]
    parts += [f"p{q * 100:g} {format_seconds(v)}" for q, v in s.percentiles_seconds.items()]
    return (
        f"{result.source}: vllm bench summary of {result.completed:,} requests (no buckets, "
        f"measured at the client): {metric_key} " + ", ".join(parts)
    )


def _histogram_doc(args, paths: list[str], detailed: dict) -> tuple[dict, str]:
    from itlkit.diagnosis.evidence import require_scrape_times
    from itlkit.metrics.readers import bench_frame, read_paths  # pandas: only for a table
    from itlkit.metrics.series import histogram_series

    bench = detailed.get(paths[0]) if len(paths) == 1 else None
    if bench is not None:  # read once: its samples are binned here and quantiled exactly below
        frame = bench_frame(bench.samples)
    else:
        # SGLang's TPOT is read beside the ITL only to say why it is not one; the speculative
        # counters to say how many tokens a gap carried
        extra = ("sglang_tpot", "running", *SPECULATIVE_KEYS) if args.metric == "itl" else ()
        frame = read_paths(paths, metrics=(args.metric, *extra))
    series = histogram_series(frame, args.metric, model_name=args.model_name, engine=args.engine)
    require_scrape_times(series)  # the window between untimed scrapes is unknown
    used = frame.loc[frame["metric"] == args.metric, "family"].astype(str).unique()
    family = " + ".join(sorted(used)) or metric(args.metric).names[0]
    window = series_window(series) if len(series) >= 2 else None
    h = window.histogram if window is not None else series.snapshot(0)
    summary = summarize(
        h, quantiles=QUANTILES, floor_seconds=args.floor_seconds, slow_factor=args.slow_factor
    )
    kw = dict(metric_key=args.metric, family=family, scrapes=len(series), window=window,
              exact=_exact(bench, args.metric))  # fmt: skip
    doc, text = to_json(summary, **kw), to_text(summary, **kw)
    if series.notes:
        doc["warnings"] = list(series.notes)
        text = "\n".join(f"warning: {note}" for note in series.notes) + "\n" + text
    return doc, text


def run(args) -> int:
    """Read the paths, summarise the histogram, print it (and any bench summaries beside it)."""
    paths, summaries, detailed = _split_bench_summaries(args.paths)
    doc, text = _histogram_doc(args, paths, detailed) if paths else ({"metric": args.metric}, "")
    if args.json:
        if summaries:
            doc["bench_summaries"] = [bench_summary_json(r, args.metric) for r in summaries]
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        lines = [text] if text else []
        lines += [bench_summary_text(r, args.metric) for r in summaries]
        print("\n".join(lines))
    return 0
