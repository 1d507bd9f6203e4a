"""What a diagnosis says of speculative decoding seen on the page: does it pay at this batch?

With the drafts per step (k) and each position's acceptance read off vLLM's counters
(`metrics.speculative_metrics`), the step model prices the verification step at the incident's
batch and context (`physics.speculative`) and finds where speculation stops paying. Past that
batch every step runs k + 1 tokens of GEMMs for fewer accepted tokens than they cost: a cause of
slow tokens that no scheduler setting shows. Low acceptance is said too: a step that emits few
more than its own token pays the draft and the wider GEMMs for little.
"""

from __future__ import annotations

import math

from itlkit.diagnosis.fingerprint import Fingerprint
from itlkit.physics.roofline import Deployment
from itlkit.physics.speculative import Speculation, crossover_batch, speculative_step
from itlkit.units import format_seconds

LOW_TOKENS_PER_STEP = 1.5  # below this a step's drafts add half a token or less


def speculation_notes(reading, fp: Fingerprint, dep: Deployment) -> list[str]:
    """One or two lines: whether speculation pays at this batch, and low acceptance."""
    if reading is None or not math.isfinite(reading.tokens_per_step):
        return []
    e = reading.tokens_per_step
    notes = []
    if e < LOW_TOKENS_PER_STEP:
        notes.append(
            f"speculative acceptance is low: {e:.2f} tokens per step, so each step pays its "
            "drafts and their verification for under half a token more (a workload unlike the "
            "draft's training data, a high temperature): fewer drafts, or speculation off"
        )
    if reading.per_position is None:
        notes.append(
            "the drafts per step are not on the page (vLLM's per-position counter): where "
            "speculation stops paying cannot be priced"
        )
        return notes
    spec = Speculation(reading.positions, reading.per_position)
    batch = max(round(fp.batch_size), 1)
    s = speculative_step(dep, batch_size=batch, context_tokens=fp.context_tokens, spec=spec)
    cross = crossover_batch(dep, context_tokens=fp.context_tokens, spec=spec)
    pays = s.speedup > 1
    where = ("it pays up to batch 4,096 at this context" if cross is None
             else f"it stops paying at batch {cross:,} at this context")  # fmt: skip
    notes.append(
        f"speculative decoding, k = {spec.k}, {e:.2f} tokens per step at batch ~{batch}: the "
        f"step model prices a token at {format_seconds(float(s.per_token_seconds))} against "
        f"{format_seconds(float(s.plain_step_seconds))} without ("
        + (f"{float(s.speedup):.2f}x faster" if pays else
           f"{1 / float(s.speedup):.2f}x slower: past the ridge, the k + 1 tokens cost more "
           "than the accepted ones save; fewer drafts, or speculation off above that batch")
        + f"); {where} (n-gram drafts: the draft's own cost not included)"
    )  # fmt: skip
    return notes
