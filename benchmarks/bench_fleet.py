"""Benchmark: `itlkit diagnose --prometheus URL --all` over a fleet-day in a local Prometheus.

    nice -n 10 .venv/bin/python benchmarks/bench_fleet.py [--instances 100] [--hours 24]

Writes OpenMetrics for `--instances` vLLM instances with 15 s scrapes over `--hours` (numpy,
not the simulator: a fast mode near 12 ms, for a third of the instances a slow mode at ~120 ms
whose share follows a daily arrival curve), backfills it with `promtool` into a cache folder
(`--cache`, reused when it exists; a fleet-day took 4.5 min to build on 2 cores), serves it with
`prometheus`, then runs the fleet scan as its own process and prints its wall time (goal <= 60 s)
and peak resident memory (`ru_maxrss` of that process, from `os.wait4`). The families written are
the ones the scan reads: the ITL histogram (vLLM's 20 buckets, _sum, _count), the _count of TTFT
and e2e, the running/waiting/KV gauges and the preemption and token counters.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from _prometheus_server import served_openmetrics_file

from itlkit.metrics.vllm_metrics import ITL_BUCKETS_SECONDS

INTERVAL_SECONDS = 15
START_UNIX_SECONDS = 1_796_169_600  # 2026-12-02T00:00:00Z


def _lines(name: str, labels: str, values: np.ndarray, stamps: list[str], fmt: str) -> str:
    prefix = f"{name}{{{labels}}} "
    return "".join(f"{prefix}{v:{fmt}} {t}\n" for v, t in zip(values.tolist(), stamps, strict=True))


def _instance(rng, k: int, times: np.ndarray) -> dict[str, np.ndarray]:
    """Cumulative values of one instance at each scrape."""
    day = 0.5 + 0.5 * np.sin(2 * np.pi * (times - times[0]) / 86400.0) ** 2
    arrivals = rng.poisson(INTERVAL_SECONDS * 2.0 * day)  # first tokens per scrape interval
    tokens = rng.poisson(INTERVAL_SECONDS * 600.0 * day)  # ITL observations per interval
    bounds = np.asarray(ITL_BUCKETS_SECONDS)
    centre = np.log(0.012 * (1 + 0.1 * (k % 7)))
    fast = np.diff(_lognormal_cdf(bounds, centre, 0.25), prepend=0.0)
    slow = np.diff(_lognormal_cdf(bounds, np.log(0.12), 0.2), prepend=0.0)
    share = (0.15 if k % 3 == 0 else 0.0) * day[:, None]
    p = (1 - share) * fast + share * slow
    cells = rng.poisson(tokens[:, None] * p)
    mids = np.concatenate([[0.005], (bounds[1:-1] + bounds[:-2]) / 2, [100.0]])
    running = 20 * day + rng.normal(0, 1, times.size)
    return {
        "itl_buckets": np.cumsum(np.cumsum(cells, axis=1), axis=0),
        "itl_sum": np.cumsum(cells @ mids),
        "itl_count": np.cumsum(cells.sum(axis=1)),
        "first_tokens": np.cumsum(arrivals),
        "finished": np.cumsum(rng.poisson(arrivals)),
        "running": np.maximum(running, 0),
        "waiting": np.zeros(times.size),
        "kv_usage": np.clip(running / 200, 0, 1),
        "preemptions": np.cumsum(rng.poisson(0.01 if k % 10 == 0 else 0.0, times.size)),
        "prompt_tokens": np.cumsum(arrivals * 1024),
        "generation_tokens": np.cumsum(cells.sum(axis=1) + arrivals),
    }


def _lognormal_cdf(x, mu: float, sigma: float) -> np.ndarray:
    from math import erf

    x = np.asarray(x, dtype=float)
    z = (np.log(np.maximum(x, 1e-12)) - mu) / (sigma * np.sqrt(2))
    return np.where(np.isinf(x), 1.0, 0.5 * (1 + np.vectorize(erf)(z)))


def write_openmetrics(path: Path, *, instances: int, hours: float, dry: bool = False) -> int:
    """The fleet as OpenMetrics text (each family once, its series in time order); returns the
    number of samples (`dry`: only counts them)."""
    rng = np.random.default_rng(0)
    times = START_UNIX_SECONDS + INTERVAL_SECONDS * np.arange(int(hours * 3600 / 15) + 1)
    stamps = [str(int(t)) for t in times]
    if dry:
        return instances * times.size * (len(ITL_BUCKETS_SECONDS) + 2 + 2 * 2 + 6)
    fleet = [_instance(rng, k, times) for k in range(instances)]
    labels = [f'instance="vllm-{k:03d}:8000",model_name="meta-llama/Llama-3.1-8B-Instruct",'
              'engine="0"' for k in range(instances)]  # fmt: skip
    les = [("+Inf" if np.isinf(b) else f"{b:g}") for b in ITL_BUCKETS_SECONDS]
    families = [
        ("vllm:inter_token_latency_seconds", "histogram", None),
        ("vllm:time_to_first_token_seconds", "histogram", "first_tokens"),
        ("vllm:e2e_request_latency_seconds", "histogram", "finished"),
        ("vllm:num_requests_running", "gauge", "running"),
        ("vllm:num_requests_waiting", "gauge", "waiting"),
        ("vllm:kv_cache_usage_perc", "gauge", "kv_usage"),
        ("vllm:num_preemptions", "counter", "preemptions"),
        ("vllm:prompt_tokens", "counter", "prompt_tokens"),
        ("vllm:generation_tokens", "counter", "generation_tokens"),
    ]
    samples = 0
    with open(path, "w") as out:
        for family, kind, key in families:
            out.write(f"# TYPE {family} {kind}\n")
            for values, lab in zip(fleet, labels, strict=True):
                if key is None:  # the ITL histogram: series by series, each in time order
                    for j, le in enumerate(les):
                        out.write(_lines(f"{family}_bucket", f'{lab},le="{le}"',
                                         values["itl_buckets"][:, j], stamps, "d"))  # fmt: skip
                    out.write(_lines(f"{family}_count", lab, values["itl_count"], stamps, "d"))
                    out.write(_lines(f"{family}_sum", lab, values["itl_sum"], stamps, ".3f"))
                    samples += (len(les) + 2) * times.size
                elif kind == "histogram":  # only what the scan reads: _count (= the +Inf bucket)
                    for name, label in ((f"{family}_bucket", f'{lab},le="+Inf"'),
                                        (f"{family}_count", lab)):  # fmt: skip
                        out.write(_lines(name, label, values[key], stamps, "d"))
                    samples += 2 * times.size
                else:
                    name = f"{family}_total" if kind == "counter" else family
                    out.write(_lines(name, lab, values[key], stamps, ".3f"))
                    samples += times.size
        out.write("# EOF\n")
    return samples


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--instances", type=int, default=100)
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--cache", type=Path, default=Path("/tmp/itlkit-bench-fleet"))
    args = p.parse_args()
    root = args.cache / f"{args.instances}x{args.hours:g}h"
    root.mkdir(parents=True, exist_ok=True)
    om = root / "fleet.om"
    t0 = time.perf_counter()
    cached = (root / "data").is_dir() and any((root / "data").iterdir())
    samples = write_openmetrics(om, instances=args.instances, hours=args.hours, dry=cached)
    size = "" if cached else f" ({om.stat().st_size / 1e9:.2f} GB of OpenMetrics)"
    print(f"{'cached' if cached else 'wrote'} {samples:,} samples{size} in "
          f"{time.perf_counter() - t0:.1f} s")  # fmt: skip
    end = START_UNIX_SECONDS + args.hours * 3600
    t0 = time.perf_counter()
    binaries = dict(prometheus=Path("/usr/bin/prometheus"), promtool=Path("/usr/bin/promtool"))
    with served_openmetrics_file(root, om, **binaries) as url:
        print(f"backfilled and served in {time.perf_counter() - t0:.1f} s at {url}")
        om.unlink(missing_ok=True)  # the blocks in the cache hold it now
        cmd = [sys.executable, "-m", "itlkit", "diagnose", "--prometheus", url, "--start",
               str(START_UNIX_SECONDS), "--end", str(end), "--all"]  # fmt: skip
        with open(root / "scan.txt", "w") as out:
            t0 = time.perf_counter()
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
    table = (root / "scan.txt").read_text().splitlines()
    print("\n".join([*table[:8], "...", *table[-3:]]))
    peak_bytes = usage.ru_maxrss * 1024  # Linux reports KiB
    print(f"fleet scan: {wall:.1f} s wall (goal <= 60 s), peak RSS {peak_bytes / 1e6:.0f} MB, "
          f"{args.instances} instances, {samples:,} samples, "
          f"exit {os.waitstatus_to_exitcode(status)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
