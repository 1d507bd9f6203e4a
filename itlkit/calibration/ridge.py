"""Which side of the roofline ridge each step of a simulated run sits on, at any constants.

In the engine step model a step's GEMM part is max(weight read x e, GEMM time x u) (e = 1 /
efficiency, u = 1 / MFU): a step reads its weights or computes, whichever takes longer. The
fit's equation is linear in (e, u) only once each step's side is known, and the side moves with
e / u. A step whose GEMMs take G at MFU 1 and whose weight read takes W at efficiency 1 is
memory-bound where W x e >= G x u, that is where its ratio G / W is at most e / u. With the
steps sorted by that ratio, the weighted sums of W below any e / u and of G above it are two
cumulative sums and one binary search: the fit can move the ridge without simulating again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class Ridge:
    """A run's steps sorted by G / W, with the token-weighted means of W and of G on either
    side of every cut: `memory_seconds[i]` is the mean of W over the i steps of lowest ratio
    (at efficiency 1), `compute_seconds[i]` the mean of G over the others (at MFU 1)."""

    ratios: np.ndarray  # G / W of each step that ran, ascending
    memory_seconds: np.ndarray  # len(ratios) + 1 cumulative means, from 0
    compute_seconds: np.ndarray  # len(ratios) + 1 tail means, down to 0

    def split(self, ratio: float) -> tuple[float, float]:
        """(mean weight-read seconds of the memory-bound steps, mean GEMM seconds of the
        compute-bound ones) where e / u = `ratio`: a step with G / W <= ratio reads."""
        cut = int(np.searchsorted(self.ratios, ratio, side="right"))
        return float(self.memory_seconds[cut]), float(self.compute_seconds[cut])


def ridge_of(weight_seconds, gemm_seconds, weights, ran) -> Ridge:
    """The `Ridge` of a run's steps: weight read W (efficiency 1) and GEMM time G (MFU 1) per
    step, the token weights of the run's ITL mean, and which steps ran (others count as 0)."""
    total = float(np.sum(weights))
    w, g, k = (np.asarray(a, dtype=float)[ran] for a in (weight_seconds, gemm_seconds, weights))
    order = np.argsort(g / w, kind="stable")
    w, g, k = w[order], g[order], k[order]
    memory = np.concatenate([[0.0], np.cumsum(k * w)]) / total
    compute = np.concatenate([np.cumsum((k * g)[::-1])[::-1], [0.0]]) / total
    return Ridge(ratios=(g / w), memory_seconds=memory, compute_seconds=compute)
