"""Fidelity of the calibrated simulator against real vLLM runs (issue 10), and its speed.

Run: .venv/bin/python benchmarks/bench_fidelity.py [RUNS.json]

Default runs: data/real-runs/real_runs_trainval.json (13 real vLLM 0.15.1 runs; the 6 with
known arrival rates can be simulated). Prints, for the uncalibrated roofline and for the
calibration fitted on the runs, each run's relative error (predicted / measured - 1) of mean ITL
(as the file defines it), mean TTFT, mean E2E, TTFT p99 and E2E p99, then the leave-one-out
median absolute errors (each run predicted by constants fitted without it), and the wall time
of `itlkit calibrate` (goal <= 120 s on a 2-core machine) and of `itlkit simulate --runs` over
the file (goal <= 30 s), both as whole processes.

Comparison (issue 10): the best published simulator reaches 6.5% / 18.4% / 6.8% median error of
mean ITL / TTFT / E2E on these runs, and 29% of TTFT p99.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from itlkit.calibration.fit import median_abs, residuals, simulable
from itlkit.calibration.predict import predict_run
from itlkit.physics.calibration import UNCALIBRATED, read_calibration
from itlkit.sim.runs import read_runs

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUNS = ROOT / "tests" / "data" / "real_runs" / "real_runs_trainval.json"
ITLKIT = [sys.executable, "-m", "itlkit"]
SHOWN = ("itl_mean_seconds", "ttft_mean_seconds", "e2e_mean_seconds", "ttft_p99_seconds",
         "e2e_p99_seconds")  # fmt: skip


def timed(args) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return time.perf_counter() - start, done


def table(title: str, rows: dict[str, dict[str, float]]) -> None:
    print(title)
    print("  " + "run".ljust(30) + "".join(k.split("_")[0].upper().rjust(7) +
          k.split("_")[1][:4].rjust(5) for k in SHOWN))  # fmt: skip
    for run_id, row in rows.items():
        print(f"  {run_id[:30]:<30}" + "".join(f"{row[k]:+12.1%}" for k in SHOWN))
    medians = median_abs(rows)
    print("  median |error|".ljust(32) + "".join(f"{medians[k]:12.1%}" for k in SHOWN))


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_RUNS
    runs, skipped = simulable(read_runs(path))
    print(f"{path.name}: {len(runs)} runs simulated, {len(skipped)} cannot be (unknown rates)")
    raw = {run.id: residuals(run, predict_run(run, UNCALIBRATED)) for run in runs}
    table("uncalibrated roofline (efficiency 1, no host, all-reduce or pipeline terms):", raw)
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "CALIBRATION.json"
        calibrate_seconds, _ = timed([*ITLKIT, "calibrate", str(path), "-o", str(out)])
        calibration = read_calibration(out)
        simulate_seconds, done = timed([*ITLKIT, "simulate", "--runs", str(path), "--json",
                                        "--calibration", str(out)])  # fmt: skip
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    table("calibrated, in sample:", calibration.residuals)
    loo = calibration.leave_one_out
    print("leave-one-out median |error|: " + ", ".join(f"{k} {v:.1%}" for k, v in loo.items()))
    tails = [v for k, v in loo.items() if k.startswith("itl_token")]
    print(f"  per-token ITL quantiles (the one run that has them): {np.round(tails, 3).tolist()}")
    print(f"itlkit calibrate: {calibrate_seconds:.1f} s (goal <= 120 s)")
    errors = sum("error" in line for line in lines)
    print(f"itlkit simulate --runs: {simulate_seconds:.1f} s for {len(lines)} runs "
          f"({errors} refused: unknown rates) (goal <= 30 s)")  # fmt: skip


if __name__ == "__main__":
    main()
