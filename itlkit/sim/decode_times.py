"""Step times of pure decode steps, from the step function or from tables per decode count."""

from __future__ import annotations

import math

import numpy as np

# A decode count met in this many stretches gets its step times tabulated over KV totals.
TABLE_AFTER_STRETCHES = 16
TABLE_PAD_TOKENS = 4096  # a table grows by this many KV totals beyond the range asked for
TABLE_MAX_TOKENS = 1 << 20  # KV totals in all tables together (8 bytes each)


class DecodeTimes:
    """Step times of pure decode steps: from the step function, or a table per decode count.

    Short stretches pay one step-function call each, so a decode count met in many of them
    gets its times for every KV total over a range (one call, elementwise as every stretch
    array assumes); later stretches slice the table at a stride of the decode count."""

    __slots__ = ("misses", "step_function", "tables", "tokens")

    def __init__(self, step_function):
        self.step_function = step_function
        self.tables: dict[int, tuple[int, np.ndarray]] = {}  # decodes -> (first KV, times)
        self.misses: dict[int, int] = {}  # decodes -> stretches the tables did not serve
        self.tokens = 0  # KV totals tabulated

    def times(self, decodes: int, kv_tokens: np.ndarray) -> np.ndarray:
        """Seconds of decode steps over `kv_tokens` (a scalar result broadcasts)."""
        seconds = self.step_function(decode_tokens=decodes, prefill_tokens=0, kv_tokens=kv_tokens)
        if not (isinstance(seconds, np.ndarray) and seconds.shape == kv_tokens.shape):
            seconds = np.broadcast_to(np.asarray(seconds, dtype=float), kv_tokens.shape)
        return seconds

    def lookup(self, decodes: int, kv_tokens: int, steps: int) -> np.ndarray | None:
        """Times of `steps` steps from `kv_tokens` on, from the table; None where it has none."""
        last = kv_tokens + decodes * (steps - 1)
        base, table = self.tables.get(decodes, (kv_tokens, None))
        if table is None or kv_tokens < base or last >= base + table.size:
            if not self._grow(decodes, kv_tokens, last):
                return None
            base, table = self.tables[decodes]
        return table[kv_tokens - base : last - base + 1 : decodes]

    def _grow(self, decodes: int, first: int, last: int) -> bool:
        """Tabulate (or widen the table) to hold first..last, once the count is met enough."""
        self.misses[decodes] = misses = self.misses.get(decodes, 0) + 1
        base, table = self.tables.get(decodes, (first, np.empty(0)))
        end = base + table.size
        low = base if first >= base else max(first - TABLE_PAD_TOKENS, 0)
        high = end if last < end else last + 1 + TABLE_PAD_TOKENS
        added = high - low - table.size
        if misses < TABLE_AFTER_STRETCHES or self.tokens + added > TABLE_MAX_TOKENS:
            return False
        parts = [self.times(decodes, np.arange(a, b)) for a, b in ((low, base), (end, high))]
        if not all(part.min(initial=math.inf) > 0 for part in parts):
            self.misses[decodes] = -math.inf  # a time not > 0: stretches check their own
            return False
        self.tables[decodes] = (low, np.concatenate((parts[0], table, parts[1])))
        self.tokens += added
        return True
