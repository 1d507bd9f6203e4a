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

import numpy as np

from itlkit.diagnosis.fingerprint import Fingerprint
from itlkit.physics.roofline import Deployment
from itlkit.physics.speculative import crossover_batch, speculative_step
from itlkit.units import format_seconds

LOW_TOKENS_PER_STEP = 1.5  # below this a step's drafts add half a token or less
# Tokens a step falling by this share from the first third of the period to the last is a
# change in the traffic or the draft (a deploy), not noise: over a window's thousands of drafts
# the mean moves by well under 1%.
ACCEPTANCE_DROP = 0.15


def acceptance_thirds(drafts, accepted) -> tuple[float, float] | None:
    """Tokens a step (1 + accepted / drafts) over the first and the last third of the windows
    that drafted; None with fewer than three such windows."""
    if drafts is None or accepted is None:
        return None
    d, a = np.nan_to_num(np.asarray(drafts, float)), np.nan_to_num(np.asarray(accepted, float))
    used = np.flatnonzero(d > 0)
    if used.size < 3:
        return None
    third = max(used.size // 3, 1)
    first, last = used[:third], used[-third:]
    return 1 + a[first].sum() / d[first].sum(), 1 + a[last].sum() / d[last].sum()


def acceptance_drop_note(t) -> str | None:
    """A line when the tokens a step fell over the period: the same steps now carry fewer
    tokens, so TPOT rises while vLLM's ITL (one gap per step) does not move."""
    thirds = acceptance_thirds(t.spec_drafts, t.spec_accepted)
    if thirds is None or not thirds[1] < (1 - ACCEPTANCE_DROP) * thirds[0]:
        return None
    before, after = thirds
    return (
        f"speculative acceptance fell from {before:.2f} to {after:.2f} tokens a step between the "
        f"first and the last third of the period: at the same step time a token now takes "
        f"{before / after:.2f}x as long (TPOT up, while vLLM's ITL, one gap a step, need not "
        "move): a change in the traffic or the draft (a deploy, a new prompt mix, a higher "
        "temperature), not the scheduler"
    )


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
    spec, s = _priced(reading, fp, dep)
    batch = max(round(fp.batch_size), 1)
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


def _priced(reading, fp: Fingerprint, dep: Deployment, k: int | None = None):
    """The speculation read off the page (its first k positions) and its step at this batch."""
    spec = reading.speculation(k)
    batch = max(round(fp.batch_size), 1)
    step = speculative_step(dep, batch_size=batch, context_tokens=fp.context_tokens, spec=spec)
    return spec, step


def cost_evidence(reading, fp: Fingerprint, dep: Deployment) -> tuple[str, ...]:
    """What the counters say a step emits, and what the step model prices it at here."""
    if reading is None or not math.isfinite(reading.tokens_per_step):
        return ("no speculative decoding counters on the page",)
    lines = [f"{reading.tokens_per_step:.2f} tokens per step ({reading.source})"]
    if reading.per_position is None:
        return (*lines, "the acceptance per position is not on the page: the step is not priced")
    spec, s = _priced(reading, fp, dep)
    rates = ", ".join(f"{p:.2f}" for p in spec.per_position)
    batch = max(round(fp.batch_size), 1)
    cross = crossover_batch(dep, context_tokens=fp.context_tokens, spec=spec)
    lines += [
        f"k = {spec.k} drafts a step, accepted per position {rates}",
        f"at batch ~{batch} and {fp.context_tokens:,.0f} tokens of context a verification step "
        f"runs {batch * (spec.k + 1):,} tokens of GEMM "
        + ("(compute-bound: past the ridge)" if bool(s.verify_compute_bound) else
           "(memory-bound)")
        + f" and lasts {format_seconds(float(s.verify_seconds))}: "
        f"{format_seconds(float(s.per_token_seconds))} a token against "
        f"{format_seconds(float(s.plain_step_seconds))} for a plain step",
        "speculation pays up to batch 4,096 here" if cross is None
        else f"speculation stops paying at batch {cross:,} at this context",
    ]  # fmt: skip
    return tuple(lines)


def cost_fixes(reading, fp: Fingerprint, dep: Deployment) -> tuple[tuple[str, str, str], ...]:
    """Fewer drafts (the best k here), speculation off above its crossover, a better draft:
    each priced at this batch and context with the page's acceptance."""
    if reading is None or reading.per_position is None:
        return (("turn speculation off for a canary", "shows what the drafts cost",
                 "the canary's tokens lose the drafts' gain at low load"),)  # fmt: skip
    spec, s = _priced(reading, fp, dep)
    plain = float(s.plain_step_seconds)
    per_k = {k: _priced(reading, fp, dep, k) for k in range(1, spec.k + 1)}
    best = min(per_k, key=lambda k: float(per_k[k][1].per_token_seconds))
    best_token = float(per_k[best][1].per_token_seconds)
    alone = speculative_step(dep, batch_size=1, context_tokens=fp.context_tokens, spec=spec)
    needed = float(s.step_seconds) / plain  # tokens per step at which it breaks even here
    cross = crossover_batch(dep, context_tokens=fp.context_tokens, spec=spec)
    fixes = []
    if best < spec.k and best_token < plain:
        fixes.append((
            f"fewer drafts: --num-speculative-tokens {best}",
            f"a token {format_seconds(best_token)} here (now "
            f"{format_seconds(float(s.per_token_seconds))}, {format_seconds(plain)} without)",
            f"{per_k[best][0].tokens_per_step:.2f} tokens a step instead of "
            f"{spec.tokens_per_step:.2f}: less gain when the load is light",
        ))  # fmt: skip
    fixes.append((
        "speculation off at this load" + ("" if cross is None else f" (above batch ~{cross:,})"),
        f"a token at the plain step, {format_seconds(plain)} "
        f"({float(s.per_token_seconds) / plain:.2f}x faster than now)",
        f"at batch 1 speculation makes a token {float(alone.speedup):.2f}x faster: light-load "
        "streams lose that; vLLM 0.34 sets k per batch size (speculative config "
        "num_speculative_tokens_per_batch_size, vllm/config/speculative.py @ 62d4bc3c7), "
        "older releases per deployment: a second pool or a restart",
    ))  # fmt: skip
    fixes.append(
        (
            "a draft that agrees more (an EAGLE-3 head trained on this traffic, lower temperature)",
            f"breaks even here at {needed:.2f} tokens a step (now {spec.tokens_per_step:.2f})",
            "training or choosing a draft, and re-measuring acceptance on real traffic",
        )
    )
    return tuple(fixes)
