"""Slider change -> figure updated, in-process, for notebook 01's explorer.

Run: .venv/bin/python benchmarks/bench_decode_explorer.py
Goal (issue #2): median under 20 ms and p95 under 50 ms over 200 changes on the 2-core machine.
Each change is timed from `slider.value = v` until the observer returned, i.e. the
FigureWidget holds the new data and title (what the kernel then sends to the browser).
"""

from __future__ import annotations

import statistics
import time

import numpy as np

from itlkit.widgets.decode import DecodeExplorer


def _time_changes(slider, values) -> list[float]:
    seconds = []
    for value in values:
        start = time.perf_counter()
        slider.value = value
        seconds.append(time.perf_counter() - start)
    return seconds


def main() -> None:
    explorer = DecodeExplorer()
    _time_changes(explorer.batch, range(1, 11))  # warm-up
    cases = {
        "batch slider": (explorer.batch, [int(v) for v in np.linspace(1, 1024, 200)]),
        "context slider": (explorer.context, [128 * (1 + i % 256) for i in range(200)]),
        "chunk slider": (explorer.chunk, [64 * (i % 128) for i in range(200)]),
        "model dropdown": (
            explorer.model,
            [
                ["llama-3.1-8b", "mixtral-8x7b-v0.1", "qwen3-8b", "gemma-2-9b"][i % 4]
                for i in range(200)
            ],
        ),
    }
    print(f"{'control':<16} {'changes':>7} {'median ms':>10} {'p95 ms':>8} {'max ms':>8}")
    for name, (control, values) in cases.items():
        seconds = _time_changes(control, values)
        median = statistics.median(seconds) * 1e3
        p95 = float(np.percentile(seconds, 95)) * 1e3
        print(
            f"{name:<16} {len(seconds):>7} {median:>10.2f} {p95:>8.2f} {max(seconds) * 1e3:>8.2f}"
        )
    print("goal: median < 20 ms, p95 < 50 ms")


if __name__ == "__main__":
    main()
