"""`itlkit calibrate`: fit the constants real servers add to the roofline, from real runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from itlkit.cli._args import (
    add_deployment_arguments,
    count_at_most,
    deployment_from_args,
    seed,
    sequences,
    tokens,
)


def add_parser(subparsers) -> None:
    """Register `itlkit calibrate`."""
    p = subparsers.add_parser(
        "calibrate",
        help="fit efficiency, host costs, all-reduce latency, TTFT pipeline and jitter to runs",
        description=(
            "Fit the calibration's constants to real runs (an itlkit-runs/1 file), print the "
            "residual of every run and the leave-one-out error, and write CALIBRATION.json."
        ),
    )
    p.add_argument("runs", metavar="RUNS.json", nargs="*",
                   help="real runs in the itlkit-runs/1 format (one file or several)")  # fmt: skip
    bench = p.add_argument_group(
        "vllm bench serve results",
        "detailed result files (--save-detailed) of your own server; a bench file does not "
        "name its deployment, so give it here",
    )
    bench.add_argument("--bench", action="append", default=[], metavar="FILE",
                       help="a detailed `vllm bench serve` result (repeatable)")  # fmt: skip
    add_deployment_arguments(bench, memory=True, inferred=True)
    bench.add_argument("--max-num-batched-tokens", type=tokens, default=8192)
    bench.add_argument("--max-num-seqs", type=sequences,
                       help="default: min(1024, max_num_batched_tokens), as vLLM")  # fmt: skip
    incident = p.add_argument_group(
        "one incident's metrics",
        "scrapes or a Prometheus range of your own server: the engine speed that replays its "
        "mean ITL (efficiency, or host time per step), the rest from --base",
    )
    incident.add_argument("--scrapes", nargs="+", metavar="PATH",
                          help="/metrics pages or folders of scrapes")  # fmt: skip
    incident.add_argument("--prometheus", metavar="URL", help="a Prometheus server")
    incident.add_argument("--start", help="the period's start (with --prometheus)")
    incident.add_argument("--end", help="the period's end (with --prometheus)")
    p.add_argument("--base", default="bundled", metavar="FILE",
                   help="with fewer than 3 runs only the efficiency (and host time) and the "
                        "TTFT pipeline are refitted, the rest taken from this calibration "
                        "(default: the bundled one)")  # fmt: skip
    p.add_argument("-o", "--output", default="CALIBRATION.json", metavar="FILE",
                   help="where to write the calibration (default: CALIBRATION.json)")  # fmt: skip
    p.add_argument("--no-leave-one-out", action="store_true",
                   help="skip the leave-one-out error (faster)")  # fmt: skip
    p.add_argument("--seed", type=seed, default=0, help="random seed of the simulations")
    p.add_argument("--workers", type=count_at_most(1024, "a number of processes"), default=None,
                   metavar="N",
                   help="processes that simulate the runs (default: one per core; the answer "
                        "is the same with any number)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the calibration as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from itlkit.calibration.fit import calibrate
    from itlkit.calibration.parallel import workers
    from itlkit.cli._runs import load_calibration
    from itlkit.physics.calibration import write_calibration

    _check_output(args.output)
    if args.scrapes or args.prometheus:
        return _run_incident(args)
    runs = _runs(args)
    progress = None if args.json else (lambda line: print(f"  {line}", file=sys.stderr))
    base = None if args.base == "none" else load_calibration(args.base)
    names = [Path(r).name for r in args.runs] if args.runs else [Path(b).name for b in args.bench]
    with workers(args.workers):
        fit = calibrate(runs, seed=args.seed, leave_one_out=not args.no_leave_one_out,
                        log=progress, name=" + ".join(names), base=base)  # fmt: skip
    write_calibration(fit.calibration, args.output)
    if args.json:
        print(json.dumps(fit.calibration.to_json(), indent=2))
        return 0
    _print_fit(fit, args.output)
    return 0


def _check_output(path: str) -> None:
    """Refuse an -o that cannot be written before the fit, not after it."""
    from itlkit.errors import ConfigError
    from itlkit.sim.export import output_problem

    problem = output_problem(path, folder=False)
    if problem:
        raise ConfigError(f"-o/--output {path}: {problem}")


def _run_incident(args) -> int:
    """Calibrate on one incident's metrics through the what-if replay."""
    from itlkit.calibration.incident import calibration_from_incident
    from itlkit.cli._runs import load_calibration
    from itlkit.cli.diagnose import infer_from_args
    from itlkit.diagnosis.deployment import served_model_names
    from itlkit.diagnosis.evidence import timeline_from_frame, timeline_from_prometheus
    from itlkit.diagnosis.scoring import diagnose
    from itlkit.errors import ConfigError
    from itlkit.metrics.readers import read_paths
    from itlkit.physics.calibration import write_calibration

    if args.runs or args.bench:
        raise ConfigError("calibrate on runs/bench files or on one incident's metrics, not both")
    if args.prometheus:
        if not (args.start and args.end):
            raise ConfigError("--prometheus needs --start and --end")
        timeline, names = timeline_from_prometheus(args.prometheus, start=args.start,
                                                   end=args.end), []  # fmt: skip
        source = f"{args.prometheus} {args.start}..{args.end}"
    else:
        frame = read_paths(args.scrapes)
        timeline, names = timeline_from_frame(frame), served_model_names(frame)
        source = " + ".join(Path(p).name for p in args.scrapes)
    inferred = infer_from_args(args, names, paths=() if args.prometheus else args.scrapes)
    assumptions = list(inferred.assumptions)
    diagnosis = diagnose(timeline, inferred.deployment)
    base = None if args.base == "none" else load_calibration(args.base)
    calibration = calibration_from_incident(diagnosis, source=source, base=base, seed=args.seed)
    write_calibration(calibration, args.output)
    if args.json:
        print(json.dumps({**calibration.to_json(), "assumptions": assumptions}, indent=2))
        return 0
    for line in assumptions:
        print(f"assumed: {line}")
    error = calibration.residuals[source]["itl_mean_seconds"]
    print(f"calibrated on {source}: efficiency {calibration.efficiency:.3f}, host per step "
          f"{calibration.host_seconds_per_step * 1e3:.3f} ms (the replay's mean ITL is "
          f"{error:+.1%} off the observed); written to {args.output}")  # fmt: skip
    for key, why in calibration.undetermined.items():
        print(f"  not determined: {key}: {why}")
    return 0


def _runs(args) -> list:
    """The runs file's runs and one run per bench file."""
    from itlkit.calibration.bench_runs import run_from_bench
    from itlkit.errors import ConfigError
    from itlkit.sim.runs import read_runs

    if not args.runs and not args.bench:
        raise ConfigError("give a runs file (RUNS.json) or --bench FILE (or both)")
    runs = [run for path in args.runs for run in read_runs(path)]
    if args.bench:
        from itlkit.cli.diagnose import fill_deployment_from_metrics
        from itlkit.metrics.bench import read_bench_result

        served = read_bench_result(args.bench[0]).model_id
        for line in fill_deployment_from_metrics(args, [served] if served else []):
            print(f"assumed: {line}")
        deployment = deployment_from_args(args)
        seqs = args.max_num_seqs or min(1024, args.max_num_batched_tokens)
        runs += [run_from_bench(path, deployment=deployment, seed=args.seed,
                                max_num_batched_tokens=args.max_num_batched_tokens,
                                max_num_seqs=seqs) for path in args.bench]  # fmt: skip
    return runs


_SHOWN = (("itl_mean_seconds", "ITL mean"), ("ttft_mean_seconds", "TTFT mean"),
          ("e2e_mean_seconds", "E2E mean"), ("ttft_p99_seconds", "TTFT p99"),
          ("e2e_p99_seconds", "E2E p99"))  # fmt: skip


def _print_fit(fit, output: str) -> None:
    c = fit.calibration
    print(f"calibrated on {len(fit.runs)} runs ({len(fit.skipped)} left out), "
          f"{fit.rounds} rounds; written to {output}")  # fmt: skip
    for line in fit.skipped:
        print(f"  left out: {line}")
    links = c.allreduce_seconds_per_call
    se = c.uncertainty
    print(f"  efficiency {c.efficiency:.3f} (+-{se.get('efficiency', float('nan')):.3f})")
    print(f"  host per step {c.host_seconds_per_step * 1e3:.3f} ms, per sequence "
          f"{c.host_seconds_per_sequence * 1e6:.1f} us")  # fmt: skip
    print(f"  all-reduce per call {links['nvlink'] * 1e6:.1f} us (NVLink), "
          f"{links.get('network', 0.0) * 1e6:.1f} us (network); MFU {c.mfu:.3f} "
          f"({c.step_model} step model)")  # fmt: skip
    print(f"  TTFT pipeline {c.ttft_pipeline_steps:.2f} steps + "
          f"{c.ttft_pipeline_seconds * 1e3:.2f} ms; step jitter {c.step_jitter:.3f}")  # fmt: skip
    for key, why in c.undetermined.items():
        print(f"  not determined: {key}: {why}")
    print("residuals (predicted / measured - 1):")
    print("  " + "run".ljust(34) + "".join(label.rjust(11) for _, label in _SHOWN))
    for run_id, row in c.residuals.items():
        cells = "".join(f"{row[key]:+11.1%}" for key, _ in _SHOWN)
        print(f"  {run_id[:34]:<34}{cells}")
    for key, values in c.groups.items():
        print(f"  group {key}: efficiency {values['efficiency']:.3f}, MFU {values['mfu']:.3f}, "
              f"host {values['host_seconds_per_step'] * 1e3:.3f} ms + "
              f"{values['host_seconds_per_sequence'] * 1e6:.1f} us/sequence")  # fmt: skip
    for source, errors in c.leave_one_source_out.items():
        cells = ", ".join(f"{label} {errors[key]:.1%}" for key, label in _SHOWN if key in errors)
        print(f"leave-one-source-out, {source}: {cells}")
    if c.leave_one_out:
        loo = c.leave_one_out
        cells = ", ".join(f"{label} {loo[key]:.1%}" for key, label in _SHOWN if key in loo)
        print(f"leave-one-out median |error|: {cells}")
