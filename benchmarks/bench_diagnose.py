"""`itlkit diagnose` on a day of 15-second scrapes: seconds and peak memory.

    .venv/bin/python benchmarks/bench_diagnose.py [--hours 24] [--keep DIR]

Simulates a day of traffic on Llama 3.1 8B / H100 SXM (4,096-token prompts, arrivals following a
daily curve between 0.5 and 2.5 requests/s, a 2,048-token budget), exports it as 5,760 vLLM
/metrics pages, then runs the whole diagnosis (read, window, score) in a fresh process, as a user
would. Goal (issue #5): under 30 s on the 2-core machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_day(folder: Path, hours: float) -> int:
    """Simulate and export; returns the number of scrape files."""
    from itlkit.physics.roofline import Deployment
    from itlkit.sim.export import export_prometheus_scrapes
    from itlkit.sim.scheduler import SchedulerConfig, simulate_deployment
    from itlkit.sim.workload import RateProfile, synthetic_workload

    duration = hours * 3600
    starts = np.arange(0, duration, 3600.0)
    rates = 1.5 + np.sin(2 * np.pi * starts / 86400.0)  # 0.5 .. 2.5 requests/s over a day
    workload = synthetic_workload(
        duration_seconds=duration,
        profile=RateProfile(tuple(starts), tuple(rates)),
        prompt_tokens=4096,
        output_tokens=256,
        seed=11,
    )
    result = simulate_deployment(
        workload,
        deployment=Deployment.create(model="llama-3.1-8b", gpu="h100-sxm"),
        config=SchedulerConfig(max_num_batched_tokens=2048),
        efficiency=0.6,
        until_seconds=duration,
    )
    return len(export_prometheus_scrapes(result, folder, interval_seconds=15.0))


def diagnose_in_fresh_process(folder: Path) -> None:
    code = f"""
import resource, time, json, io, contextlib
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
from itlkit.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = main(["diagnose", {str(folder)!r}, "--max-num-batched-tokens", "2048", "--json"])
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
doc = json.loads(out.getvalue())
print(f"itlkit diagnose: {{seconds:.1f}} s (imports included), peak memory {{peak / 1024:.0f}} MB")
print(f"verdict: {{doc['verdict']}} ({{doc['windows']}} windows, exit {{rc}})")
"""
    subprocess.run([sys.executable, "-c", code], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=24.0)
    parser.add_argument("--keep", type=Path, help="write the scrapes here and keep them")
    parser.add_argument("--generate-only", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate_only:
        write_day(args.generate_only, args.hours)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        # Simulate in a child process: a peak RSS high-water mark survives fork + exec on Linux,
        # and the diagnosis below must be measured from a small parent.
        subprocess.run(
            [sys.executable, __file__, "--generate-only", str(folder), "--hours", str(args.hours)],
            check=True,
        )
        files = len(list(folder.glob("*.prom")))
        size = sum(p.stat().st_size for p in folder.glob("*.prom"))
        print(f"simulated and exported {files:,} scrapes ({size / 1e6:.0f} MB) in "
              f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
        diagnose_in_fresh_process(folder)
        print("goal: under 30 s")


if __name__ == "__main__":
    main()
