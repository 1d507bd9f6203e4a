"""`itlkit diagnose`: from vLLM metrics to a ranked cause, its evidence, and priced fixes."""

from __future__ import annotations

import json
import math
from dataclasses import replace

from itlkit.cli._args import (
    add_deployment_arguments,
    deployment_from_args,
    mean_sequences,
    mean_tokens,
    model_assumptions,
    tokens,
    window_seconds,
)
from itlkit.diagnosis.deployment import (
    InferredDeployment,
    Stated,
    infer_deployment,
    page_facts,
    served_model_names,
)
from itlkit.diagnosis.evidence import DEFAULT_WINDOW_SECONDS, timeline_from_frame
from itlkit.diagnosis.gpu_range import diagnose_deployment
from itlkit.diagnosis.report import build_report, to_text
from itlkit.metrics.readers import read_paths


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
    p.add_argument("--model-name", help="only this model_name label (pages serving several)")
    p.add_argument("--calibration", metavar="FILE",
                   help="the healthy host cost to judge steps against: CALIBRATION.json "
                        "from `itlkit calibrate` (default: the bundled one, vLLM 0.15.1 on "
                        "H100)")  # fmt: skip
    p.add_argument("--start", help="with --prometheus: start time (RFC 3339 or unix seconds)")
    p.add_argument("--end", help="with --prometheus: end time (RFC 3339 or unix seconds)")
    add_deployment_arguments(p, inferred=True)
    p.set_defaults(tp=None)  # taken from the served name (`...-tp2`) when given there
    p.add_argument("--batch", type=mean_sequences, help="running sequences (default: metrics)")
    p.add_argument("--context", type=mean_tokens, help="mean context tokens (default: metrics)")
    p.add_argument("--max-num-batched-tokens", type=tokens, help="token budget (default: vLLM's)")
    p.add_argument(
        "--window",
        type=window_seconds,
        default=DEFAULT_WINDOW_SECONDS,
        metavar="SECONDS",
        help="evidence window length",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object (SI units)")
    p.add_argument(
        "--all",
        action="store_true",
        help="with --prometheus: every instance/model/engine, one table ranked by severity",
    )
    p.set_defaults(func=run)


def run(args) -> int:
    """Diagnose and print a short postmortem (or JSON)."""
    if not args.paths and not args.prometheus:
        raise ValueError("give scrape PATHs or --prometheus URL with --start and --end")
    if args.paths and args.prometheus:
        raise ValueError("give scrape PATHs or --prometheus URL, not both")
    if args.all:
        return _run_fleet(args)
    if not args.prometheus and len(args.paths) == 1 and args.paths[0].endswith(".json"):
        from itlkit.metrics.bench import read_bench_result

        result = read_bench_result(args.paths[0])
        if result.samples is None:
            return _run_bench_summary(args, result)
        _batch_from_bench(args, result)
    if args.prometheus:
        frame, period = None, _prometheus_period(args, count_points=True)
        served = _prometheus_model(args, period)
    else:
        frame = _chosen_model(read_paths(args.paths), args.model_name)
        served = served_model_names(frame)
    inferred = infer_from_args(args, served, paths=args.paths)
    assumptions = [*inferred.assumptions, *getattr(args, "from_bench", [])]
    if args.prometheus:
        from itlkit.diagnosis.evidence import timeline_from_prometheus

        timeline = timeline_from_prometheus(
            args.prometheus, start=period[0], end=period[1], window_seconds=args.window,
            model_name=args.model_name,
        )  # fmt: skip
    else:
        timeline = timeline_from_frame(frame, window_seconds=args.window)
    settings = dict(batch_size=args.batch, context_tokens=args.context,
                    max_num_batched_tokens=args.max_num_batched_tokens)  # fmt: skip
    if args.calibration:
        from itlkit.cli._runs import load_calibration

        settings["calibration"] = load_calibration(args.calibration)
        assumptions.append(f"healthy host: {settings['calibration'].describe()}")
    result = diagnose_deployment(timeline, inferred, **settings)
    if args.json:
        doc = {**result.to_json(), "assumptions": assumptions}
        print(json.dumps(doc, indent=2, default=_json_default))
    else:
        print("\n".join(f"assumed: {a}" for a in assumptions) + ("\n" if assumptions else ""))
        print(to_text(build_report(result)))
    return 0


def _batch_from_bench(args, result) -> None:
    """A bench file has no running-requests gauge or token counters: the client's concurrency
    stands in for the batch and its request lengths for the context (said so), or the user
    gives them."""
    from itlkit.diagnosis.bench_summary import mean_context_tokens

    args.from_bench = []
    if args.batch is None:
        concurrency = result.requests.max_concurrency if result.requests else None
        if concurrency is None:
            raise ValueError(
                f"{result.source}: a bench result does not record how many requests ran at "
                "once (no max_concurrency: an open-loop run): give the batch with --batch"
            )
        args.batch = float(concurrency)
        args.from_bench.append(f"batch {concurrency} (the bench client's max_concurrency; --batch)")
    if args.context is None:
        context = mean_context_tokens(result)
        if context is None:
            raise ValueError(
                f"{result.source}: a bench result without request lengths (input_lens, "
                "total_input_tokens) does not give the context: give it with --context"
            )
        args.context = context
        args.from_bench.append(
            f"context {context:,.0f} tokens (the bench's mean prompt + half its output)"
        )


def _run_bench_summary(args, result) -> int:
    """A summary-only bench file: host overhead is all a summary can show (said so)."""
    from itlkit.diagnosis.bench_summary import diagnose_summary

    gpu_stated = args.gpu is not None
    assumptions = fill_deployment_from_metrics(args, [result.model_id] if result.model_id else [])
    if any(a.startswith("model ") and "pass --model" in a for a in assumptions):
        raise ValueError(
            f"{result.source}: a bench summary can only be judged against its model's floor, "
            f"and model_id {result.model_id!r} is not in the catalog: pass --model NAME or a "
            "config.json"
        )
    summary = diagnose_summary(result, deployment_from_args(args), gpu_stated=gpu_stated)
    if args.json:
        print(json.dumps({**summary.to_json(), "assumptions": assumptions}, indent=2,
                         default=_json_default))  # fmt: skip
        return 0
    print("\n".join(f"assumed: {a}" for a in assumptions) + ("\n" if assumptions else ""))
    print(f"bench summary  {summary.source}: {summary.deployment}, concurrency "
          f"{summary.batch_size}, context ~{summary.context_tokens:.0f} tokens")  # fmt: skip
    for r in summary.readings:
        print(f"  on {r.gpu}: floor {r.floor_seconds * 1e3:.2f} ms, host excess "
              f"{r.host_excess_ratio:.1f}x a healthy host, host overhead {r.host_score:.2f}",
              )  # fmt: skip
    for line in summary.speculation:
        print(f"  {line}")
    print(f"verdict        {summary.verdict()}")
    return 0


def _run_fleet(args) -> int:
    """`--all`: diagnose every member the server holds; one ranked table (or JSON rows)."""
    import copy

    from itlkit.diagnosis.fleet import diagnose_fleet, fetch_fleet_evidence, to_table
    from itlkit.metrics.http_get import shown_url

    if not args.prometheus:
        raise ValueError("--all needs --prometheus URL with --start and --end")
    if args.model_name or args.batch or args.context:
        raise ValueError("--all diagnoses every model: drop --model-name, --batch and --context")
    start, end = _prometheus_period(args)
    deployments: dict[str, InferredDeployment] = {}

    def deployment_for(model_name: str) -> InferredDeployment:
        if model_name not in deployments:
            served = [model_name] if model_name else []
            deployments[model_name] = infer_from_args(copy.copy(args), served)
        return deployments[model_name]

    evidence = fetch_fleet_evidence(
        args.prometheus, start=start, end=end, window_seconds=args.window
    )
    rows = diagnose_fleet(
        evidence, deployment_for, max_num_batched_tokens=args.max_num_batched_tokens
    )
    if not rows:
        raise ValueError(f"{shown_url(args.prometheus)}: no vLLM metrics in that period")
    if all(r.member in evidence.problems for r in rows):  # nothing to rank: say why
        raise ValueError(f"{shown_url(args.prometheus)}: {rows[0].member.describe()}: "
                         f"{rows[0].problem}")  # fmt: skip
    if args.json:
        doc = {"window_seconds": evidence.window_seconds, "queries": list(evidence.queries),
               "rows": [r.to_json() for r in rows]}  # fmt: skip
        print(json.dumps(doc, indent=2, default=_json_default))
    else:
        said = sorted({a for r in rows for a in r.assumptions})
        print("\n".join(f"assumed: {a}" for a in said) + ("\n" if said else ""))
        print(to_table(rows, window_seconds=evidence.window_seconds))
    return 0


def _prometheus_period(args, *, count_points: bool = False) -> tuple[float, float]:
    """--start and --end in Unix seconds, each refusal naming the flag; with `count_points`,
    refused when the period holds more windows than Prometheus returns points (a fleet scan
    widens its window instead)."""
    from itlkit.diagnosis.evidence import MAX_QUERY_POINTS, period_seconds

    if args.start is None or args.end is None:
        flags = (("--start", args.start), ("--end", args.end))
        missing = " and ".join(flag for flag, value in flags if value is None)
        raise ValueError(f"--prometheus needs {missing} (RFC 3339 or unix seconds)")
    return period_seconds(
        args.start, args.end, args.window, names=("--start", "--end", "--window"),
        max_windows=MAX_QUERY_POINTS if count_points else None,
    )  # fmt: skip


def _prometheus_model(args, period: tuple[float, float]) -> list[str]:
    """The served model to diagnose, as `[name]` (or [] when the server names none): the
    --model-name asked for, or the only one the server holds; several is an error."""
    from itlkit.metrics.http_get import shown_url
    from itlkit.metrics.prometheus_api import model_names

    names = model_names(args.prometheus, start_seconds=period[0], end_seconds=period[1],
                        step_seconds=max(args.window, (period[1] - period[0]) / 1000))  # fmt: skip
    if args.model_name is not None:
        if names and args.model_name not in names:
            raise ValueError(
                f"no model_name {args.model_name!r} at {shown_url(args.prometheus)} in that "
                f"period (it holds: {', '.join(repr(n) for n in names[:8])})"
            )
        return [args.model_name]
    if len(names) > 1:
        raise ValueError(
            f"{shown_url(args.prometheus)} holds {len(names)} models in that period "
            f"({', '.join(repr(n) for n in names[:8])}); choose one with --model-name, or "
            "rank them all with --all"
        )
    return names


def _chosen_model(frame, model_name: str | None):
    """The rows of one served model: the one asked for, or the only one; several is an error."""
    names = served_model_names(frame) or sorted(
        {str(n) for n in frame["model_name"].unique()} - {""}
    )
    if model_name is not None:
        if model_name not in names:
            raise ValueError(f"no model_name {model_name!r} in the metrics (they hold: "
                             f"{', '.join(repr(n) for n in names) or 'none'})")  # fmt: skip
        return frame[frame["model_name"].isin([model_name, ""])]
    if len(names) > 1:
        raise ValueError(
            f"the metrics hold {len(names)} models ({', '.join(repr(n) for n in names[:8])}); "
            "choose one with --model-name"
        )
    return frame[frame["model_name"].isin([*names, ""])]


def infer_from_args(args, served_names: list[str], *, paths=()):
    """The deployment the flags state and the metrics (served names; the pages' cache config,
    when `paths` are pages) imply, by `infer_deployment`; the flags not given are set to it."""
    stated = Stated(model=args.model, gpu=args.gpu, weight_precision=args.weights_precision,
                    kv_precision=args.kv_precision, tp=getattr(args, "tp", 1),
                    mfu=args.mfu)  # fmt: skip
    inferred = infer_deployment(stated, page_facts(served_names, paths))
    said = model_assumptions(args)  # a served name given as --model, and how it was read
    if said:
        inferred = replace(inferred, assumptions=(*said, *inferred.assumptions))
    d = inferred.deployment
    args.model = args.model or d.model.slug
    args.gpu, args.weights_precision, args.kv_precision = d.gpu.slug, d.weights.name, d.kv.name
    if hasattr(args, "tp"):
        args.tp = d.tp
    return inferred


def fill_deployment_from_metrics(args, served_names: list[str]) -> list[str]:
    """`infer_from_args` without pages: the sentences saying what was not given."""
    return list(infer_from_args(args, served_names).assumptions)


def _json_default(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)
