"""`itlkit diagnose`: from vLLM metrics to a ranked cause, its evidence, and priced fixes."""

from __future__ import annotations

import argparse
import json
import math

from itlkit.diagnosis import HEALTHY_BELOW, Diagnosis, diagnose
from itlkit.evidence import DEFAULT_WINDOW_SECONDS, timeline_from_frame
from itlkit.roofline import Deployment
from itlkit.sources import read_paths
from itlkit.units import format_seconds


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
        if not value > 0 or not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"must be positive, got {text}")
        return value

    return parse


def add_parser(subparsers) -> None:
    """Register `itlkit diagnose`."""
    p = subparsers.add_parser(
        "diagnose",
        help="rank the causes of bad ITL from vLLM metrics (scrapes or a Prometheus server)",
        description=(
            "Read vLLM metrics (saved /metrics pages, a folder of timestamped scrapes, or a "
            "Prometheus server), compare them with the deployment's bandwidth floor, and rank "
            "prefill interference, batch/context growth, host overhead and preemption."
        ),
    )
    p.add_argument("paths", nargs="*", metavar="PATH", help="scrape files or folders")
    p.add_argument("--prometheus", metavar="URL", help="a Prometheus server's base URL")
    p.add_argument("--start", help="with --prometheus: start time (RFC 3339 or unix seconds)")
    p.add_argument("--end", help="with --prometheus: end time (RFC 3339 or unix seconds)")
    p.add_argument("--model", default="llama-3.1-8b", help="catalog name or config.json path")
    p.add_argument("--gpu", default="h100-sxm")
    p.add_argument("--weights-precision", default="bf16")
    p.add_argument("--kv-precision", default="bf16")
    p.add_argument("--tp", type=_positive(int), default=1)
    p.add_argument("--mfu", type=_positive(float), default=0.5)
    p.add_argument("--batch", type=_positive(float), help="running sequences (default: metrics)")
    p.add_argument(
        "--context", type=_positive(float), help="mean context tokens (default: metrics)"
    )
    p.add_argument(
        "--max-num-batched-tokens", type=_positive(int), help="token budget (default: vLLM's)"
    )
    p.add_argument(
        "--window",
        type=_positive(float),
        default=DEFAULT_WINDOW_SECONDS,
        metavar="SECONDS",
        help="evidence window length",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Diagnose and print a short postmortem (or JSON)."""
    if bool(args.paths) == bool(args.prometheus):
        raise ValueError("give scrape PATHs or --prometheus URL (with --start and --end), not both")
    deployment = Deployment.create(
        model=args.model,
        gpu=args.gpu,
        weight_precision=args.weights_precision,
        kv_precision=args.kv_precision,
        tp=args.tp,
        mfu=args.mfu,
    )
    if args.prometheus:
        from itlkit.evidence import timeline_from_prometheus

        if not (args.start and args.end):
            raise ValueError("--prometheus needs --start and --end")
        timeline = timeline_from_prometheus(
            args.prometheus, start=args.start, end=args.end, window_seconds=args.window
        )
    else:
        timeline = timeline_from_frame(read_paths(args.paths), window_seconds=args.window)
    result = diagnose(
        timeline,
        deployment,
        batch_size=args.batch,
        context_tokens=args.context,
        max_num_batched_tokens=args.max_num_batched_tokens,
    )
    if args.json:
        print(json.dumps(result.to_json(), indent=2, default=_json_default))
    else:
        print(postmortem_text(result))
    return 0


def _json_default(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def postmortem_text(d: Diagnosis) -> str:
    """The diagnosis as a short postmortem a team can read."""
    t, dep = d.timeline, d.deployment
    q = d.itl_quantiles_seconds
    low, high = d.itl_quantile_buckets[0.99]
    period = (
        f"{t.snapshots} scrapes, {len(t)} windows over {t.duration_seconds / 60:.1f} min"
        if t.has_time_axis
        else "one scrape (cumulative since the server started)"
    )
    mbu_low, mbu_high = d.mbu_range
    lines = [
        f"ITL postmortem: {period}",
        f"deployment   {dep.label}, batch ~{d.batch_size:.0f}, context ~{d.context_tokens:,.0f} "
        "tokens",
        f"floor        {format_seconds(d.floor_seconds)} (weights + KV at HBM bandwidth)",
        f"fast mode    {format_seconds(d.fast_mode_seconds)}: MBU fit {100 * d.mbu_fit:.0f}% "
        f"(the bucket allows {100 * mbu_low:.0f}-"
        + ("inf" if math.isinf(mbu_high) else f"{100 * mbu_high:.0f}")
        + "%)",
        f"ITL          p50 {format_seconds(q[0.5])}, p90 {format_seconds(q[0.9])}, p99 "
        f"{format_seconds(q[0.99])} (interpolated in the ({format_seconds(low)}, "
        f"{'+Inf' if math.isinf(high) else format_seconds(high)}] bucket), mean "
        f"{format_seconds(t.itl_total.mean)} over {t.itl_total.count:,.0f} observations",
        "",
        f"verdict      {d.verdict}",
        "",
    ]
    for rank, finding in enumerate(d.findings, 1):
        flag = "" if finding.score >= HEALTHY_BELOW else "  (below threshold)"
        lines.append(f"{rank}. {finding.title}: score {finding.score:.2f}{flag}")
        lines += [f"   - {e}" for e in finding.evidence]
        if finding.score >= HEALTHY_BELOW:
            lines.append("   check next:")
            lines += [f"   - {c}" for c in finding.confirm]
            lines.append("   fixes and their price:")
            lines += [f"   - {f.action}: {f.effect}. Price: {f.price}." for f in finding.fixes]
        lines.append("")
    if d.notes:
        lines.append("notes")
        lines += [f"- {n}" for n in d.notes]
    return "\n".join(lines).rstrip()
