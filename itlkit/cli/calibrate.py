"""`itlkit calibrate`: fit the constants real servers add to the roofline, from real runs."""

from __future__ import annotations

import json
import sys
from pathlib import Path


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
    p.add_argument("runs", metavar="RUNS.json", help="real runs in the itlkit-runs/1 format")
    p.add_argument("-o", "--output", default="CALIBRATION.json", metavar="FILE",
                   help="where to write the calibration (default: CALIBRATION.json)")  # fmt: skip
    p.add_argument("--no-leave-one-out", action="store_true",
                   help="skip the leave-one-out error (faster)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="random seed of the simulations")
    p.add_argument("--json", action="store_true", help="print the calibration as JSON")
    p.set_defaults(func=run)


def run(args) -> int:
    from itlkit.calibration.fit import calibrate
    from itlkit.physics.calibration import write_calibration
    from itlkit.sim.runs import read_runs

    runs = read_runs(args.runs)
    progress = None if args.json else (lambda line: print(f"  {line}", file=sys.stderr))
    fit = calibrate(runs, seed=args.seed, leave_one_out=not args.no_leave_one_out,
                    log=progress, name=Path(args.runs).name)  # fmt: skip
    write_calibration(fit.calibration, args.output)
    if args.json:
        print(json.dumps(fit.calibration.to_json(), indent=2))
        return 0
    _print_fit(fit, args.output)
    return 0


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
    print(f"  all-reduce per call {links['nvlink'] * 1e6:.1f} us (NVLink)")
    print(f"  TTFT pipeline {c.ttft_pipeline_steps:.2f} steps + "
          f"{c.ttft_pipeline_seconds * 1e3:.2f} ms; step jitter {c.step_jitter:.3f}")  # fmt: skip
    for key, why in c.undetermined.items():
        print(f"  not determined: {key}: {why}")
    print("residuals (predicted / measured - 1):")
    print("  " + "run".ljust(34) + "".join(label.rjust(11) for _, label in _SHOWN))
    for run_id, row in c.residuals.items():
        cells = "".join(f"{row[key]:+11.1%}" for key, _ in _SHOWN)
        print(f"  {run_id[:34]:<34}{cells}")
    if c.leave_one_out:
        loo = c.leave_one_out
        cells = ", ".join(f"{label} {loo[key]:.1%}" for key, label in _SHOWN if key in loo)
        print(f"leave-one-out median |error|: {cells}")
