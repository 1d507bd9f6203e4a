"""Leave-one-source-out with a full refit per source (issue 20): how far a new publisher's runs are.

Run: .venv/bin/python benchmarks/bench_loso.py [RUNS.json ...]

Default runs: the six files the bundled calibration is fitted on (data/real-runs,
data/real-runs-more, data/real-runs-inferencex, data/real-runs-llmk8s, data/real-runs-lambda,
data/real-runs-dstack).
For each publisher
(`source.repo`), the whole
calibration (global constants, cells, jitter) is fitted again on the other publishers' runs, and
that publisher's runs are simulated with it. Prints, per source x GPU x model class, the number
of runs, the median and the worst |error| (predicted / measured - 1) of mean ITL and mean TTFT,
and the constants each prediction took (its cell, a lent one, or the global constants).
`itlkit calibrate`'s own leave-one-source-out re-solves from the full fit's simulations (one
linear solve per source, no new schedule); this one refits from scratch, the honest figure for a
user's own runs. About 9 minutes on 2 cores with five files, more with six (one fit per publisher).
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from functools import partial
from pathlib import Path

from itlkit.calibration.fit import calibrate, residuals, simulable
from itlkit.calibration.parallel import run_all, workers
from itlkit.calibration.predict import predict_run
from itlkit.sim.runs import read_runs

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = (ROOT / "data" / "real-runs" / "real_runs_trainval.json",
           ROOT / "data" / "real-runs-more" / "real_world_more.json",
           ROOT / "data" / "real-runs-inferencex" / "inferencex.json",
           ROOT / "data" / "real-runs-llmk8s" / "llmk8s.json",
           ROOT / "data" / "real-runs-lambda" / "lambda.json",
           ROOT / "data" / "real-runs-dstack" / "dstack.json")  # fmt: skip


def held_out_rows(runs) -> list[dict]:
    """One row per run: its errors when its publisher's runs were left out of the fit."""
    rows = []
    for source in sorted({run.source for run in runs}):
        train = [run for run in runs if run.source != source]
        held = [run for run in runs if run.source == source]
        cal = calibrate(train, leave_one_out=False).calibration
        predicted = run_all(partial(predict_run, seed=0), held, [cal] * len(held))
        for run, prediction in zip(held, predicted, strict=True):
            error = residuals(run, prediction)
            rows.append({"source": source.split("/")[0], "gpu": run.gpu,
                         "class": "MoE" if run.model.is_moe else "dense",
                         "itl": error["itl_mean_seconds"], "ttft": error["ttft_mean_seconds"],
                         "constants": cal.for_run(run).group or "global"})  # fmt: skip
        print(f"  {source}: {len(held)} runs held out", file=sys.stderr, flush=True)
    return rows


def main(paths) -> None:
    runs, skipped = simulable([run for path in paths for run in read_runs(path)])
    for line in skipped:
        print(f"  {line}", file=sys.stderr)
    with workers(None):
        rows = held_out_rows(runs)
    cells = defaultdict(list)
    for row in rows:
        cells[row["source"], row["gpu"], row["class"]].append(row)
    print(f"{'source':<22}{'gpu':<16}{'class':<7}{'runs':>5}{'ITL med':>9}{'worst':>8}"
          f"{'TTFT med':>10}{'worst':>8}  constants")  # fmt: skip
    for (source, gpu, kind), members in sorted(cells.items()):
        itl = [abs(row["itl"]) for row in members]
        ttft = [abs(row["ttft"]) for row in members]
        lent = ", ".join(sorted({row["constants"] for row in members}))
        itl_median, ttft_median = statistics.median(itl), statistics.median(ttft)
        print(f"{source:<22}{gpu:<16}{kind:<7}{len(members):>5}{itl_median:>9.1%}"
              f"{max(itl):>8.1%}{ttft_median:>10.1%}{max(ttft):>8.1%}  {lent}")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:] or DEFAULT)
