"""Every candidate of a space: pruned by the roofline, else simulated (over a process pool),
each simulation cached on disk so that an interrupted sweep resumes where it stopped.

The cache is a JSON-lines file: one line per simulated candidate, keyed by a hash of the
candidate, the model, the traffic, the calibration and itlkit's version, so a changed input
never reads a stale line. Results do not depend on the number of workers: every simulation is
deterministic (its seed is the traffic's).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

from itlkit import __version__
from itlkit.physics.calibration import Calibration
from itlkit.plan.evaluate import Outcome, evaluate, replica_workload
from itlkit.plan.executors import local_map, ray_map
from itlkit.plan.prices import PriceTable
from itlkit.plan.prune import prune_reason
from itlkit.plan.space import SLO_KEYS, Candidate, Slo, Space, Traffic


@dataclass(frozen=True)
class Result:
    """A candidate's verdict: pruned (why), or simulated (its outcome), and what it costs."""

    candidate: Candidate
    cost_per_hour: float
    pruned: str | None = None
    outcome: Outcome | None = None

    def misses(self, slo: Slo) -> dict[str, float]:
        """Each target missed and by how much (measured / target; inf when pruned or broken,
        or for TTFT when the run stopped once it certainly missed)."""
        if self.outcome is None or self.outcome.problem:
            return {"pruned": math.inf}
        missed = {}
        for key in SLO_KEYS:
            target = getattr(slo, f"{key}_seconds")
            measured = getattr(self.outcome, f"{key}_seconds")
            if target is not None and not measured <= target:  # NaN (none finished) misses
                missed[key] = measured / target
        return missed

    def meets(self, slo: Slo) -> bool:
        return not self.misses(slo)

    def margins(self, slo: Slo) -> dict[str, float]:
        """Each target's headroom: 1 - measured / target (0.2: 20% under it; negative: over)."""
        if self.outcome is None or self.outcome.problem:
            return {}
        o, found = self.outcome, {}
        for key in SLO_KEYS:
            target = getattr(slo, f"{key}_seconds")
            if target is not None:
                found[key] = 1 - getattr(o, f"{key}_seconds") / target
        return found


@dataclass(frozen=True)
class Sweep:
    """Every candidate's result, and how many were pruned, simulated and read from cache."""

    results: tuple[Result, ...]
    pruned: int
    simulated: int
    cached: int


def _still_valid(outcome: Outcome, slo: Slo) -> bool:
    """A cached run that stopped early at a TTFT target answers only targets as tight."""
    stopped = outcome.stopped_at_ttft_seconds
    return stopped is None or (slo.ttft_p99_seconds is not None
                               and slo.ttft_p99_seconds <= stopped)  # fmt: skip


def cache_key(candidate: Candidate, model: str, traffic: Traffic, calibration: str) -> str:
    text = json.dumps([candidate.as_dict(), model, traffic.key(), calibration, __version__],
                      sort_keys=True)  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _read_cache(path: Path | None) -> dict[str, Outcome]:
    if path is None or not path.exists():
        return {}
    found = {}
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            found[row["key"]] = Outcome(**row["outcome"])
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by an interruption: simulated again
    return found


def _append(path: Path | None, key: str, outcome: Outcome) -> None:
    if path is None:
        return
    cut = False
    if path.exists() and path.stat().st_size:
        with path.open("rb") as tail:
            tail.seek(-1, 2)
            cut = tail.read(1) != b"\n"
    with path.open("a") as out:  # after a line an interruption cut short, on a line of its own
        out.write(("\n" if cut else "") + json.dumps({"key": key, "outcome": asdict(outcome)})
                  + "\n")  # fmt: skip


def run_sweep(space: Space, *, model: str, traffic: Traffic, slo: Slo, prices: PriceTable,
              calibration: Calibration, calibration_name: str, workers: int | None = None,
              cache: Path | None = None, ray_address: str | None = None,
              early_stop: bool = True,
              progress: Callable[[Result], None] | None = None) -> Sweep:  # fmt: skip
    """Prune, then simulate what is left: `workers` processes (None: one per core, 1: here),
    or the Ray cluster at `ray_address`."""
    candidates = space.candidates()
    costs = {c: prices.price(c.gpu) * c.gpus for c in candidates}  # every GPU priced first
    known = _read_cache(cache)
    results, todo = {}, []
    workloads = {r: replica_workload(traffic, r) for r in {c.replicas for c in candidates}}
    for c in candidates:
        workload = workloads[c.replicas]
        reason = prune_reason(c, model, slo, workload)
        key = cache_key(c, model, traffic, calibration_name)
        if reason is not None:
            results[c] = Result(c, costs[c], pruned=reason)
        elif key in known and _still_valid(known[key], slo):
            results[c] = Result(c, costs[c], outcome=known[key])
        else:
            todo.append((c, key))
        if c in results and progress:
            progress(results[c])
    cached = sum(1 for r in results.values() if r.outcome is not None)
    stop = slo.ttft_p99_seconds if early_stop else None
    run = partial(evaluate, model=model, traffic=traffic, calibration=calibration,
                  stop_at_ttft_seconds=stop)  # fmt: skip
    items = [c for c, _ in todo]
    outcomes = (ray_map(run, items, ray_address) if ray_address and items
                else local_map(run, items, workers))  # fmt: skip
    for (c, key), outcome in zip(todo, outcomes, strict=True):
        _append(cache, key, outcome)
        results[c] = Result(c, costs[c], outcome=outcome)
        if progress:
            progress(results[c])
    pruned = sum(1 for r in results.values() if r.pruned)
    return Sweep(tuple(results[c] for c in candidates), pruned, len(todo), cached)
