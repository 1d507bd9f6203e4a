"""Benchmark: `itlkit plan` over 1,000 candidates against 10 minutes of traffic.

    nice -n 10 .venv/bin/python benchmarks/bench_plan.py [--workers 2] [--ray-workers 1,2,4]

The space: 5 GPUs x TP 1/2/4/8 x 1-5 replicas x BF16/FP8 weights x 5 token budgets = 1,000
candidates, for Llama 3.1 8B under 20 requests/s of 1,000-token prompts and 250-token outputs
for 600 s, with an ITL p99 of 40 ms and a TTFT p99 of 1.5 s. Prints the sweep's wall time
(goal: <= 60 s on 2 cores) with how many candidates were pruned and simulated, then the same
sweep's simulations on a local Ray cluster (`ray start --head --num-cpus N`) for each N, and
the speed-up against N = 1. No cache: every candidate is pruned or simulated each time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from itlkit.cli._runs import load_calibration
from itlkit.plan.prices import PriceTable
from itlkit.plan.space import Slo, Space, Traffic
from itlkit.plan.sweep import run_sweep

SPACE = Space(gpus=("h100-sxm", "h200-sxm", "a100-80gb-sxm", "l40s", "b200"), tps=(1, 2, 4, 8),
              replicas=(1, 2, 3, 4, 5), weight_precisions=("bf16", "fp8"),
              max_num_batched_tokens=(512, 1024, 2048, 4096, 8192))  # fmt: skip
TRAFFIC = Traffic(20.0, 1000, 250, duration_seconds=600.0)
SLO = Slo(itl_p99_seconds=0.04, ttft_p99_seconds=1.5)
# Relative prices: the benchmark times the sweep, whatever a GPU-hour costs.
PRICES = PriceTable({g: 1.0 for g in SPACE.gpus}, {}, "benchmark", "benchmark")


def _sweep(**kw):
    calibration = load_calibration("bundled")
    start = time.perf_counter()
    sweep = run_sweep(SPACE, model="llama-3.1-8b", traffic=TRAFFIC, slo=SLO, prices=PRICES,
                      calibration=calibration, calibration_name=calibration.name, **kw)  # fmt: skip
    return sweep, time.perf_counter() - start


def _ray(cpus: int):
    ray = str(Path(sys.executable).with_name("ray"))
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    subprocess.run([ray, "stop", "--force"], capture_output=True, env=env)
    subprocess.run([ray, "start", "--head", "--port=6391", f"--num-cpus={cpus}",
                    "--include-dashboard=false", "--disable-usage-stats"],
                   check=True, capture_output=True, env=env)  # fmt: skip
    try:
        return _sweep(ray_address="127.0.0.1:6391")[1]
    finally:
        subprocess.run([ray, "stop", "--force"], capture_output=True, env=env)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ray-workers", default="1,2,4")
    args = p.parse_args()
    sweep, seconds = _sweep(workers=args.workers)
    outcomes = [r.outcome for r in sweep.results if r.outcome is not None]
    stopped = sum(1 for o in outcomes if o.stopped_at_ttft_seconds is not None)
    print(f"{len(sweep.results):,} candidates, {TRAFFIC.duration_seconds:.0f} s of traffic, "
          f"{args.workers} workers: {seconds:.1f} s ({sweep.pruned} pruned, {sweep.simulated} "
          f"simulated, {stopped} of them stopped early; goal <= 60 s on 2 cores)")  # fmt: skip
    base = None
    for n in (int(x) for x in args.ray_workers.split(",")):
        seconds = _ray(n)
        base = base or seconds
        print(f"ray, {n} worker CPUs: {seconds:.1f} s, speed-up {base / seconds:.2f}x")


if __name__ == "__main__":
    main()
