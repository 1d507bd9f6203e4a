"""Scheduler simulator speed: simulated seconds per wall second, peak memory, notebook redraw.

Run: .venv/bin/python benchmarks/bench_simulate.py
Goals (issue #4): 10 minutes of Llama 3.1 8B / H100 SXM traffic (~64 running, 4K prompts,
256-token outputs, vLLM serve defaults) at >= 1,000x real time on one core; notebook 02's
re-simulate-and-redraw under 300 ms for its 2-minute window.
"""

from __future__ import annotations

import resource
import statistics
import time
import tracemalloc

import numpy as np

from itlkit.physics.roofline import Deployment
from itlkit.sim.scheduler import SchedulerConfig, simulate_deployment
from itlkit.sim.workload import synthetic_workload
from itlkit.widgets.scheduler import SchedulerExplorer

DURATION_SECONDS = 600.0
RATE_PER_SECOND = 5.0  # keeps ~64 requests running at these lengths
REPEATS = 5


def bench_ten_minutes() -> None:
    deployment = Deployment.create(model="llama-3.1-8b", gpu="h100-sxm")
    workload = synthetic_workload(
        duration_seconds=DURATION_SECONDS,
        rate_per_second=RATE_PER_SECOND,
        prompt_tokens=4096,
        output_tokens=256,
        seed=0,
    )
    config = SchedulerConfig()  # vllm serve on an H100: 8192 tokens/step, 1024 sequences
    walls = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = simulate_deployment(
            workload, deployment=deployment, config=config, until_seconds=DURATION_SECONDS
        )
        walls.append(time.perf_counter() - start)
    tracemalloc.start()
    simulate_deployment(
        workload, deployment=deployment, config=config, until_seconds=DURATION_SECONDS
    )
    _, peak_bytes = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    summary = result.summary()
    running = np.average(result.step_running, weights=result.step_duration_seconds)
    best, median = min(walls), statistics.median(walls)
    print("10 minutes of traffic, Llama 3.1 8B BF16 on one H100 SXM, vLLM serve defaults")
    print(
        f"  {workload.num_requests} requests at {RATE_PER_SECOND:g}/s, 4,096-token prompts, "
        f"256-token outputs; {running:.0f} running on average, {summary.steps} steps, "
        f"{summary.itl_observations} ITL observations, {summary.preemptions} preemptions"
    )
    print(
        f"  wall: best {best * 1e3:.0f} ms, median {median * 1e3:.0f} ms of {REPEATS} -> "
        f"{DURATION_SECONDS / median:,.0f}x real time (best {DURATION_SECONDS / best:,.0f}x); "
        "goal >= 1,000x"
    )
    print(
        f"  peak memory: {peak_bytes / 1e6:.1f} MB traced during one run; process max RSS "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3:.0f} MB"
    )


def _time_changes(explorer, control, values) -> tuple[list[float], list[float]]:
    """Per change: seconds until the run's panels were redrawn, and until the update returned."""
    draws: list[float] = []
    draw = explorer._draw

    def timed_draw(view):
        draw(view)
        draws.append(time.perf_counter())

    explorer._draw = timed_draw
    first, total = [], []
    for value in values:
        draws.clear()
        start = time.perf_counter()
        control.value = value
        total.append(time.perf_counter() - start)
        first.append(draws[0] - start)
    explorer._draw = draw
    return first, total


def bench_notebook() -> None:
    explorer = SchedulerExplorer()  # 2-minute window, 3 req/s, 4K prompts, 768-token outputs
    cases = {
        # Only the current budget is re-simulated: the frontier is reused.
        "token budget": (explorer.budget, [512, 1024, 2048, 4096, 8192, 2048] * 3),
        # New traffic: the run is redrawn, then the frontier's four other budgets follow.
        "arrival rate": (explorer.rate, [2.0, 2.5, 3.0, 3.5] * 3),
        "output length": (explorer.output, [256, 512, 768, 1024] * 3),
        "chunked prefill": (explorer.chunked, [False, True] * 4),
        "disaggregation": (explorer.disaggregated, [True, False] * 4),
    }
    print("notebook 02: control change -> re-simulate -> FigureWidget updated (2-minute window)")
    print(f"  {'control':<16} {'changes':>7}  {'run redrawn ms (median/max)':>28}"
          f"  {'frontier too ms (median/max)':>29}")  # fmt: skip
    for name, (control, values) in cases.items():
        first, total = _time_changes(explorer, control, values)
        print(
            f"  {name:<16} {len(values):>7}  {statistics.median(first) * 1e3:>20.0f} / "
            f"{max(first) * 1e3:<5.0f}  {statistics.median(total) * 1e3:>21.0f} / "
            f"{max(total) * 1e3:<5.0f}"
        )
    print("  goal: re-simulate and redraw under 300 ms")


if __name__ == "__main__":
    bench_ten_minutes()
    bench_notebook()
