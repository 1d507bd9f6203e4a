"""Load a day of 15-second vLLM scrapes into itlkit's tidy form; print seconds and peak memory.

    .venv/bin/python benchmarks/bench_load_scrapes.py [--files 5760] [--keep DIR] [--workers 1]

Writes 5,760 realistic /metrics pages (vLLM 0.11 layout, every vLLM family, one engine, counts
growing scrape by scrape) into a temporary folder, then loads them in a fresh process with
`itlkit.metrics.readers.read_scrape_folder` and builds the ITL and TTFT histogram series and the
running-requests gauge. Goal (issue #3): under 30 s and under 1 GB on a 2-core machine.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def write_pages(folder: Path, files: int) -> int:
    """A day of scrapes of one steadily loaded server; returns the bytes written."""
    from itlkit.metrics.exposition import EngineState, render_vllm_metrics
    from itlkit.metrics.histogram import Histogram
    from itlkit.metrics.scrape_names import timestamp_to_name
    from itlkit.metrics.vllm_metrics import ITL_BUCKETS_SECONDS, TTFT_BUCKETS_SECONDS

    itl_step = np.array([0, 9000, 9400, 9500, 9600, 9990, 10000, *[10000] * 13], dtype=float)
    ttft_step = np.array([0, 0, 0, 1, 5, 20, 40, 50, 55, 58, 59, *[60] * 12], dtype=float)
    start, total = 1796169600.0, 0
    for i in range(files):
        state = EngineState(
            histograms={
                "vllm:inter_token_latency_seconds": Histogram.create(
                    upper_bounds=ITL_BUCKETS_SECONDS, cumulative_counts=i * itl_step, sum=i * 180.0
                ),
                "vllm:time_to_first_token_seconds": Histogram.create(
                    upper_bounds=TTFT_BUCKETS_SECONDS, cumulative_counts=i * ttft_step, sum=i * 6.0
                ),
            },
            values={
                "vllm:num_requests_running": 40 + i % 17,
                "vllm:num_requests_waiting": i % 3,
                "vllm:kv_cache_usage_perc": 0.4 + 0.001 * (i % 100),
                "vllm:num_preemptions_total": i // 50,
                "vllm:prompt_tokens_total": i * 120000.0,
                "vllm:generation_tokens_total": i * 10000.0,
            },
            success_by_reason={"stop": i * 55.0, "length": i * 5.0},
        )
        text = render_vllm_metrics(
            {"0": state},
            model_name="meta-llama/Llama-3.1-8B-Instruct",
            version="0.11",
            info_families=True,
        )
        (folder / f"metrics-{timestamp_to_name(start + 15 * i)}.prom").write_text(text)
        total += len(text)
    return total


def load(folder: Path, workers: int) -> None:
    """Runs in a fresh process: time the load, report peak resident memory."""
    import pandas  # noqa: F401 - count the libraries in the baseline, not in the load

    from itlkit.metrics.readers import read_scrape_folder
    from itlkit.metrics.series import histogram_series, scalar_series

    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    frame = read_scrape_folder(folder, workers=workers)
    t1 = time.perf_counter()
    itl = histogram_series(frame, "itl")
    ttft = histogram_series(frame, "ttft")
    running = scalar_series(frame, "running")
    t2 = time.perf_counter()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"tidy frame: {len(frame):,} rows, {frame.memory_usage(deep=True).sum() / 1e6:.1f} MB")
    print(f"read_scrape_folder (workers={workers}): {t1 - t0:.1f} s")
    print(f"ITL/TTFT series + running gauge: {t2 - t1:.1f} s ({len(itl)} and {len(ttft)} "
          f"snapshots, {len(running)} gauge points)")  # fmt: skip
    print(f"total load: {t2 - t0:.1f} s")
    print(f"peak resident memory: {peak_kb / 1e3:.0f} MB (after imports: {base_kb / 1e3:.0f} MB)")
    if workers > 1:
        child_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        print(f"largest worker process: {child_kb / 1e3:.0f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=5760)
    parser.add_argument(
        "--keep", type=Path, default=None, help="write the pages here and keep them"
    )
    parser.add_argument("--workers", type=int, default=1, help="parse in this many processes")
    parser.add_argument("--load", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        load(args.load, args.workers)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if len(list(folder.glob("metrics-*.prom"))) != args.files:
            t0 = time.perf_counter()
            size = write_pages(folder, args.files)
            seconds = time.perf_counter() - t0
            print(f"wrote {args.files} pages, {size / 1e6:.0f} MB, in {seconds:.0f} s")
        command = [sys.executable, __file__, "--load", str(folder), "--workers", str(args.workers)]
        done = subprocess.run(command, check=False)
        return done.returncode


if __name__ == "__main__":
    sys.exit(main())
