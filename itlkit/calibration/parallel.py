"""Simulating many runs at once: a process pool over the machine's cores.

A fit simulates every run once per round, four to eight times more in the jitter search and
once more per held-out error; the simulations are independent, so `calibrate` spreads them over
processes (`workers`). Each simulation is deterministic, so the answer is the same with any
number of workers; one worker runs them in this process.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager

_pool: ProcessPoolExecutor | None = None


@contextmanager
def workers(count: int | None = None):
    """Within the block, `run_all` uses `count` processes (None: one per core)."""
    global _pool
    count = os.cpu_count() or 1 if count is None else count
    if count <= 1 or _pool is not None:
        yield
        return
    context = multiprocessing.get_context("fork")  # the children inherit the loaded modules
    with ProcessPoolExecutor(max_workers=count, mp_context=context) as pool:
        _pool = pool
        try:
            yield
        finally:
            _pool = None


def run_all(function, *arguments) -> list:
    """`[function(*args) for args in zip(*arguments)]`, over the pool when one is open
    (`function` must be picklable: a module-level function or a partial of one)."""
    if _pool is None:
        return list(map(function, *arguments))
    return list(_pool.map(function, *arguments))
