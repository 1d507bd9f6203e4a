"""Per-step records of an engine run, kept in growing numpy arrays.

Scheduled steps and stretches of decode steps are gathered as tuples and written as one numpy
block every `PENDING_STEPS` steps (a tuple is far cheaper to make than a numpy write).
"""

from __future__ import annotations

import numpy as np

PENDING_STEPS = 4096  # steps' records gathered before one numpy write

# StepLog.counts rows, in this order.
COUNT_FIELDS = ("decode", "prefill", "running", "waiting", "preemptions", "itl", "kv", "first",
                "prompt", "generation")  # fmt: skip
_KV, _WAITING = COUNT_FIELDS.index("kv"), COUNT_FIELDS.index("waiting")


class StepLog:
    """Per-step records in growing numpy arrays (int32 counts: half the memory of int64).

    Records wait as tuples (far cheaper to make than numpy writes) until `PENDING_STEPS` steps
    have gathered, then are written as one block: a tuple per scheduled step or per stretch of
    decode steps, whose counts differ only in KV (one more token per decode each step) and in
    the queue, which grows with arrivals: a record's `waiting` is the queue length less the
    arrivals so far, and the write adds the arrivals by each step's start."""

    __slots__ = ("capacity", "counts", "pending", "ready", "records", "seconds", "size", "written")

    def __init__(self, ready_seconds: np.ndarray, capacity: int = 65536):
        self.size = 0  # steps recorded
        self.written = 0  # steps whose counts are in the buffers
        self.capacity = capacity  # steps the buffers hold
        self.seconds = np.empty((2, capacity))  # start, duration
        self.counts = np.empty((len(COUNT_FIELDS), capacity), dtype=np.int32)
        self.ready = ready_seconds  # sorted arrival (or KV arrival) times
        self.pending: list[float] = []  # step, start, duration of each scheduled step
        self.records: list[int] = []  # steps, KV step, KV after the last, *counts of each

    def add(self, start: float, duration: float, head: tuple, tail: tuple) -> None:
        """A scheduled step; `head + tail` its counts in `COUNT_FIELDS` order, `tail[0]` KV."""
        self.pending += (self.size, start, duration)
        self.records += (1, 0, tail[0], *head, *tail)
        self.size += 1
        if self.size - self.written >= PENDING_STEPS:
            self.flush()

    def add_stretch(self, starts, durations, counts: tuple, kv_last: int) -> None:
        """Decode steps, the first's counts `counts`; each holds `decodes` more KV than the one
        before, but the last, which holds `kv_last` (it may retire requests)."""
        s, k = self.size, len(starts)
        self.size = s + k
        if self.size > self.capacity:
            self._fit()
        self.seconds[0, s : s + k] = starts
        self.seconds[1, s : s + k] = durations
        self.records += (k, counts[0], kv_last, *counts)
        if self.size - self.written >= PENDING_STEPS:
            self.flush()

    def flush(self) -> None:
        """Write the pending records (exact: every count and index is far below 2**53)."""
        a, b = self.written, self.size
        self._fit()
        if self.pending:
            block = np.fromiter(self.pending, float, len(self.pending)).reshape(-1, 3).T
            self.seconds[:, block[0].astype(np.intp)] = block[1:]
        records = np.fromiter(self.records, np.int64, len(self.records))
        block = records.reshape(-1, 3 + len(COUNT_FIELDS))
        steps = block[:, 0]
        ends = np.cumsum(steps)
        counts = np.repeat(block[:, 3:].T, steps, axis=1)
        local = np.arange(b - a) - np.repeat(ends - steps, steps)  # step within its record
        counts[_KV] += np.repeat(block[:, 1], steps) * local
        counts[_KV, ends - 1] = block[:, 2]
        counts[_WAITING] += np.searchsorted(self.ready, self.seconds[0, a:b], side="right")
        self.counts[:, a:b] = counts
        self.written = b
        self.pending.clear()
        self.records.clear()

    def _fit(self) -> None:
        """Grow the buffers (by half) until they hold every step counted so far."""
        have = self.capacity
        if self.size > have:
            self.capacity = capacity = max(have * 3 // 2, self.size)
            for name in ("seconds", "counts"):
                old = getattr(self, name)
                new = np.empty((old.shape[0], capacity), dtype=old.dtype)
                new[:, :have] = old  # with the slots of pending steps, written at the flush
                setattr(self, name, new)

    def arrays(self) -> dict[str, np.ndarray]:
        """Each record as a 1-D array (views of the buffers: no copy)."""
        self.flush()
        n = self.size
        out = {"start": self.seconds[0, :n], "duration": self.seconds[1, :n]}
        out.update({name: self.counts[i, :n] for i, name in enumerate(COUNT_FIELDS)})
        return out
