"""Diagnose every vLLM or SGLang instance a Prometheus server holds, the aggregation done by
PromQL.

A fleet scan asks the server one range query per metric, each grouped by
`(instance, model_name, engine)`: `sum by (instance, model_name, engine, le)
(rate(vllm:inter_token_latency_seconds_bucket[w]))` for the ITL buckets, `avg_over_time` for the
gauges, `rate` for the counters. The number of queries is fixed (`FLEET_QUERIES`), however many
instances there are, so a long-term store (Thanos, Mimir, VictoriaMetrics) does the heavy
lifting and itlkit never pulls a raw series. Each answer is cut per member into the same
`Timeline` the single-instance path builds (`rate x w` is Prometheus' own `increase` per
window), then the fingerprint and scoring layers judge each member on its own.

Members whose ITL histogram counted nothing in the period are listed as "no traffic".

SGLang's families are joined to vLLM's by `or` (a target exports one engine's); its scheduler
gauges come once per TP / PP rank, so only rank 0's are read (`tp_rank=~"|0"`), and one more
query tags the members whose ITL is SGLang's, judged with SGLang's schedule.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from itlkit.diagnosis.deployment import InferredDeployment
from itlkit.diagnosis.evidence import SGLANG_READ, Timeline, period_seconds
from itlkit.diagnosis.gpu_range import diagnose_deployment
from itlkit.diagnosis.scoring import HEALTHY_BELOW, Diagnosis
from itlkit.errors import EvidenceError, PrometheusError
from itlkit.metrics.histogram import Histogram, sum_histograms
from itlkit.metrics.http_get import one_line, shown_url
from itlkit.metrics.prometheus_api import (
    SGLANG_RANK,
    check_bucket_rates,
    check_rates,
    range_result,
    series_points,
)
from itlkit.metrics.sglang_metrics import DIAGNOSIS_NOTE, SGLANG_PREFIX, reading_notes
from itlkit.metrics.vllm_metrics import metric
from itlkit.units import format_percent, format_seconds

GROUP_LABELS = ("instance", "model_name", "engine")
MAX_WINDOWS = 360  # a day at 4-min windows: 100 instances' ITL buckets are ~0.7 M points, ~20 MB
FLEET_TIMEOUT_SECONDS = 120.0  # one aggregated query over a fleet-day took ~1 s on a laptop
NO_TRAFFIC = "no traffic"
ROW_NUMBERS = ("score", "slow_share", "itl_p50_seconds", "itl_p99_seconds", "floor_seconds")
CANNOT_DIAGNOSE = "cannot diagnose"

# key -> (metric key, how the range query reads it, scale by the window: an increase)
FLEET_QUERIES: dict[str, tuple[str, str, bool]] = {
    "itl_buckets": ("itl", "bucket", True),
    "itl_sum": ("itl", "sum", True),
    "first_tokens": ("ttft", "count", True),
    "finished_requests": ("e2e", "count", True),
    "preemptions": ("preemptions", "counter", True),
    "prompt_tokens": ("prompt_tokens", "counter", True),
    "generation_tokens": ("generation_tokens", "counter", True),
    "running": ("running", "gauge", False),
    "waiting": ("waiting", "gauge", False),
    "kv_usage": ("kv_usage", "gauge_max", False),
}


@dataclass(frozen=True, order=True)
class Member:
    """One diagnosed unit: an engine of a served model on one scrape target."""

    instance: str
    model_name: str
    engine: str

    def describe(self) -> str:
        """The member as messages name it: `instance 'h:8000', model_name 'm', engine '0'`."""
        instance, model = one_line(self.instance, 80), one_line(self.model_name, 80)
        return f"instance {instance!r}, model_name {model!r}, engine {one_line(self.engine, 20)!r}"


@dataclass(frozen=True, eq=False)
class FleetRow:
    """One member's verdict; `diagnosis` is None for no traffic or when the evidence failed."""

    member: Member
    assumptions: tuple[str, ...]
    diagnosis: Diagnosis | None = None
    problem: str | None = None  # NO_TRAFFIC, or why no diagnosis could be made

    @property
    def verdict(self) -> str:
        """The top cause, "healthy", "no traffic" or "cannot diagnose"."""
        if self.diagnosis is None:
            return NO_TRAFFIC if self.problem == NO_TRAFFIC else CANNOT_DIAGNOSE
        return self.diagnosis.verdict_key

    @property
    def score(self) -> float:
        return self.diagnosis.lead.score if self.diagnosis is not None else math.nan

    @property
    def check_next(self) -> str:
        """The first check of the top named cause (or what to look at when there is none)."""
        d = self.diagnosis
        if d is None:
            return (
                "is it serving requests? (scrape target up, traffic routed to it)"
                if self.problem == NO_TRAFFIC
                else str(self.problem)
            )
        if d.impossible:
            return "state its model, precision, TP and GPU: its steps beat the floor assumed"
        if d.healthy and d.depends_on_gpu:
            return "pass --gpu: " + "; ".join(
                f"{f.cause} is named on {', '.join(d.gpus_naming(f.cause))} only"
                for f in d.depends_on_gpu
            )
        if d.healthy or not d.lead.confirm:
            return "-"
        return d.lead.confirm[0]

    @property
    def severity(self) -> tuple[int, float, float]:
        """Sort key, worst first: named causes by score, then failures, healthy, no traffic;
        ties by how far p99 sits above the floor."""
        d = self.diagnosis
        if d is None:
            return (0 if self.problem == NO_TRAFFIC else 2, 0.0, 0.0)
        p99_over_floor = d.itl_quantiles_seconds[0.99] / d.floor_seconds
        return (3 if not d.healthy else 1, d.lead.score, p99_over_floor)

    def to_json(self) -> dict:
        """One machine-readable row (SI units), the member's full diagnosis inside."""
        d = self.diagnosis
        numbers = dict.fromkeys(ROW_NUMBERS)
        if d is not None:
            q = d.itl_quantiles_seconds
            numbers = dict(zip(ROW_NUMBERS, (d.lead.score, d.fingerprint.slow_share, q[0.5],
                                             q[0.99], d.floor_seconds), strict=True))  # fmt: skip
        row = {
            **vars(self.member),
            "verdict": self.verdict,
            **{k: v if v is not None and math.isfinite(v) else None for k, v in numbers.items()},
            "check_next": self.check_next,
            "assumptions": list(self.assumptions),
            "problem": self.problem,
        }
        return {**row, "diagnosis": None if d is None else d.to_json()}


@dataclass(frozen=True)
class FleetEvidence:
    """What the aggregated queries returned, per member (None: no ITL observations, or an
    answer that cannot be right, said in `problems`)."""

    timelines: dict[Member, Timeline | None]
    window_seconds: float
    queries: tuple[str, ...]
    problems: dict[Member, str] = field(default_factory=dict)  # impossible answers, in words


# The members whose ITL is SGLang's (its family names the engine; the sums above do not).
SGLANG_MEMBERS = "count {by} (rate(sglang:inter_token_latency_seconds_count[{w}]))"


# ---- PromQL -----------------------------------------------------------------------------------
def _by(*extra: str) -> str:
    return f"by ({', '.join((*GROUP_LABELS, *extra))})"


def fleet_promql(how: str, metric_key: str, rate_window: str) -> str:
    """One aggregated query; a renamed metric's old name is joined by `or` (the new one wins)."""
    w = rate_window

    def sel(n: str) -> str:  # SGLang's rank-0 copy (its tokenizer-side series have no rank)
        return f"{{{SGLANG_RANK}}}" if n.startswith(SGLANG_PREFIX) else ""

    forms = {
        "bucket": lambda n: f"sum {_by('le')} (rate({n}_bucket{sel(n)}[{w}]))",
        "sum": lambda n: f"sum {_by()} (rate({n}_sum{sel(n)}[{w}]))",
        "count": lambda n: f"sum {_by()} (rate({n}_count{sel(n)}[{w}]))",
        "counter": lambda n: f"sum {_by()} (rate({n}{sel(n)}[{w}]))",
        "gauge": lambda n: f"sum {_by()} (avg_over_time({n}{sel(n)}[{w}]))",
        "gauge_max": lambda n: f"max {_by()} (avg_over_time({n}{sel(n)}[{w}]))",
    }
    parts = [forms[how](n) for n in metric(metric_key).names]
    return parts[0] if len(parts) == 1 else " or ".join(f"({p})" for p in parts)


def fleet_window_seconds(period_seconds: float, window_seconds: float) -> float:
    """The asked window, widened to whole minutes so the period holds at most MAX_WINDOWS."""
    needed = math.ceil(period_seconds / MAX_WINDOWS / 60.0) * 60.0
    return max(float(window_seconds), needed)


# ---- answers to arrays ------------------------------------------------------------------------
def _range_query(base_url: str, promql: str, span: dict) -> list:
    return range_result(
        base_url, promql, start_seconds=span["start"], end_seconds=span["end"],
        step_seconds=span["step"], timeout_seconds=span["timeout"],
    )  # fmt: skip


def _grid(
    result: list, span: dict, steps: int, base_url: str
) -> dict[tuple[Member, str | None], np.ndarray]:
    """Each series' values on the step grid (NaN where absent), keyed by member and `le`; a
    series of the wrong shape is refused (`series_points`)."""
    out: dict[tuple[Member, str | None], np.ndarray] = {}
    for series in result:
        labels, points = series_points(series, base_url)
        member = Member(*(labels.get(k, "") for k in GROUP_LABELS))
        row = out.setdefault((member, labels.get("le")), np.full(steps, math.nan))
        at = np.rint((points[:, 0] - span["start"]) / span["step"])
        keep = (at >= 0) & (at < steps)
        index = at[keep].astype(int)
        row[index] = np.nan_to_num(row[index]) + points[keep, 1]
    return out


def _bucket_tables(grid: dict, base_url: str) -> dict[Member, tuple[np.ndarray, np.ndarray]]:
    """Per member: the sorted upper bounds and a (steps x buckets) table of bucket rates."""
    by_member: dict[Member, dict[float, np.ndarray]] = {}
    for (member, le), values in grid.items():
        try:
            by_member.setdefault(member, {})[float(le)] = values
        except (TypeError, ValueError):
            has = "no le label" if le is None else f"le={one_line(le, 40)!r}, not a number"
            raise PrometheusError(
                f"{shown_url(base_url)}: an ITL bucket series of {member.describe()} has {has}"
            ) from None
    tables = {}
    for member, columns in by_member.items():
        bounds = np.array(sorted(columns))
        tables[member] = (bounds, np.column_stack([columns[b] for b in bounds]))
    return tables


def _member_timeline(
    bounds: np.ndarray,
    rates: np.ndarray,
    scalars: dict[str, np.ndarray],
    times,
    window_seconds,
    engine: str = "vllm",
) -> Timeline | None:
    """The windows where every bucket answered; None when they hold no observation.

    Rates no server can have (below 0 or beyond any server, buckets that fall as le grows, no
    +Inf bucket) raise PrometheusError, which `fetch_fleet_evidence` keeps as the member's
    problem.
    """
    ok = np.isfinite(rates).all(axis=1)
    if not ok.any():
        return None
    check_bucket_rates(bounds, rates[ok], times[ok], where="its ITL bucket rates")
    increases = rates[ok] * window_seconds
    sums = np.nan_to_num(scalars["itl_sum"][ok])
    histograms = tuple(
        Histogram.create(  # falls beyond float noise were refused above; noise is evened out
            upper_bounds=bounds, cumulative_counts=np.maximum.accumulate(row), sum=float(s)
        )
        for row, s in zip(increases, sums, strict=True)
    )
    total = sum_histograms(histograms)
    if total.count == 0:
        return None
    notes = [f"no {key} data for this member in the period" for key, values in scalars.items()
             if key != "itl_sum" and np.isnan(values[ok]).all()]  # fmt: skip
    if engine == "sglang":
        notes += [*reading_notes(SGLANG_READ), DIAGNOSIS_NOTE]
    end = times[ok]
    return Timeline(
        start_seconds=end - window_seconds,
        end_seconds=end,
        itl=histograms,
        itl_total=total,
        ttft_total=None,  # the fingerprint does not read it; the what-if pages do
        first_tokens=scalars["first_tokens"][ok],
        running=scalars["running"][ok],
        waiting=scalars["waiting"][ok],
        kv_usage=scalars["kv_usage"][ok],
        preemptions=scalars["preemptions"][ok],
        prompt_tokens=scalars["prompt_tokens"][ok],
        generation_tokens=scalars["generation_tokens"][ok],
        finished_requests=scalars["finished_requests"][ok],
        counter_resets_seconds=(),
        snapshots=int(ok.sum()) + 1,
        notes=tuple(notes),
        engine=engine,
    )


# ---- the public functions ---------------------------------------------------------------------
def fetch_fleet_evidence(
    base_url: str,
    *,
    start,
    end,
    window_seconds: float = 60.0,
    timeout_seconds: float = FLEET_TIMEOUT_SECONDS,
) -> FleetEvidence:
    """Run the `FLEET_QUERIES` over [start, end] and cut the answers into one Timeline per member.

    One step per window, ending at each window (as `timeline_from_prometheus`); the window is
    widened (`fleet_window_seconds`) when the period would hold more than MAX_WINDOWS.
    """
    start_seconds, end_seconds = period_seconds(start, end, window_seconds)
    period = end_seconds - start_seconds
    window = fleet_window_seconds(period, window_seconds)
    rate_window = f"{round(window)}s"
    span = dict(start=start_seconds + window, end=end_seconds, step=window,
                timeout=timeout_seconds)  # fmt: skip
    steps = math.floor((end_seconds - span["start"]) / window + 1e-9) + 1
    times = span["start"] + window * np.arange(steps)
    promql = {key: fleet_promql(how, m, rate_window) for key, (m, how, _) in FLEET_QUERIES.items()}
    grids = {key: _grid(_range_query(base_url, q, span), span, steps, base_url)
             for key, q in promql.items()}  # fmt: skip
    scale = {key: window if increase else 1.0 for key, (_, _, increase) in FLEET_QUERIES.items()}
    tables = _bucket_tables(grids.pop("itl_buckets"), base_url)
    sglang_query = SGLANG_MEMBERS.format(by=_by(), w=rate_window)
    sglang = {
        m for m, _ in _grid(_range_query(base_url, sglang_query, span), span, steps, base_url)
    }
    members = set(tables) | {member for grid in grids.values() for member, _ in grid}
    nothing = np.full(steps, math.nan)
    timelines: dict[Member, Timeline | None] = {}
    problems: dict[Member, str] = {}
    for member in sorted(members):
        timelines[member] = None
        if member not in tables:
            continue
        try:
            scalars = {}
            for key, grid in grids.items():
                rates = grid.get((member, None), nothing)
                name = metric(FLEET_QUERIES[key][0]).names[0]
                check_rates(rates, times, where=f"its {key.replace('_', ' ')} ({name})")
                scalars[key] = rates * scale[key]
            engine = "sglang" if member in sglang else "vllm"
            timelines[member] = _member_timeline(*tables[member], scalars, times, window, engine)
        except PrometheusError as exc:  # this member's numbers are impossible; the rest stand
            problems[member] = f"the server's answer cannot be right: {exc}"
    return FleetEvidence(timelines, window, (*promql.values(), sglang_query), problems)


def diagnose_fleet(
    evidence: FleetEvidence,
    deployment_for: Callable[[str], InferredDeployment],
    *,
    max_num_batched_tokens: int | None = None,
) -> tuple[FleetRow, ...]:
    """Diagnose each member on the deployment `deployment_for(model_name)` infers (by
    `infer_deployment`, as `itlkit diagnose` does for one page; its GPU range too); rows
    ranked by `FleetRow.severity`, worst first."""
    rows = []
    for member, timeline in evidence.timelines.items():
        inferred = deployment_for(member.model_name)
        assumptions = inferred.assumptions
        if member in evidence.problems:
            rows.append(FleetRow(member, assumptions, problem=evidence.problems[member]))
            continue
        if timeline is None:
            rows.append(FleetRow(member, assumptions, problem=NO_TRAFFIC))
            continue
        try:
            d = diagnose_deployment(timeline, inferred,
                                    max_num_batched_tokens=max_num_batched_tokens)  # fmt: skip
        except EvidenceError as exc:
            rows.append(FleetRow(member, assumptions, problem=str(exc)))
            continue
        rows.append(FleetRow(member, assumptions, diagnosis=d))
    return rank(rows)


def rank(rows) -> tuple[FleetRow, ...]:
    """Worst first (`FleetRow.severity`), then by instance, model and engine."""
    by_name = sorted(rows, key=lambda r: r.member)
    return tuple(sorted(by_name, key=lambda r: r.severity, reverse=True))


TABLE_COLUMNS = ("instance", "model", "engine", "verdict", "score", "slow", "ITL p50", "ITL p99",
                 "floor", "check next")  # fmt: skip


def _cells(row: FleetRow) -> tuple[str, ...]:
    m, d = row.member, row.diagnosis
    head = (m.instance, m.model_name or "-", m.engine or "-", row.verdict)
    if d is None:
        return (*head, "-", "-", "-", "-", "-", row.check_next)
    q, share = d.itl_quantiles_seconds, d.fingerprint.slow_share
    return (
        *head,
        f"{d.lead.score:.2f}",
        format_percent(share) if math.isfinite(share) else "-",
        format_seconds(q[0.5]),
        format_seconds(q[0.99]),
        format_seconds(d.floor_seconds),
        row.check_next,
    )


def to_table(rows, *, window_seconds: float) -> str:
    """The ranked rows as a fixed-width text table (the last column is not padded)."""
    cells = [TABLE_COLUMNS, *(_cells(r) for r in rows)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(TABLE_COLUMNS) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[-1]
             for row in cells]  # fmt: skip
    named = sum(1 for r in rows if r.diagnosis is not None and not r.diagnosis.healthy)
    lines.append(
        f"{len(rows)} members, {named} with a cause at score >= {HEALTHY_BELOW}; "
        f"{format_seconds(window_seconds)} windows"
    )
    return "\n".join(line.rstrip() for line in lines)
