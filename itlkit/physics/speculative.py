"""Speculative decoding on the roofline: the step that verifies k drafted tokens per sequence.

A verification step runs the target model on k + 1 tokens of each of the b running sequences:
the weights are read once and each sequence's KV once, as in a decode step, but the GEMMs see
b (k + 1) rows, so the step crosses the ridge k + 1 times sooner. It emits the accepted prefix of
the drafts plus one token of its own: with per-position acceptance p_i (the chance that draft
position i is accepted, prefix included, as vLLM counts accepted tokens per position) a step
emits E = 1 + sum(p_i) tokens on average; geometric acceptance a gives p_i = a^i. The draft adds
its own cost: k passes of a small model (an EAGLE head, an MTP layer, a draft model) over the b
sequences, or nothing for n-gram lookup.

Per-token latency = (verification + draft) / E. At small batch the verification step is the
decode step (memory-bound) and speculation divides the per-token time by about E; past the batch
where b (k + 1) tokens cross the ridge the step grows with k + 1 and speculation pays only while
E outweighs that growth: `crossover_batch` finds where it stops paying.

The verification step is the reference step model's step with b decodes and a chunk of b k
tokens (`roofline.step_time`): the same weight read, KV read and GEMM pricing (the extra
attention of k query tokens per sequence, small beside the KV read, is left out as the reference
analysis leaves prefill attention out).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from itlkit.errors import ConfigError
from itlkit.physics.roofline import Deployment, decode_step, step_time

METHODS = ("ngram", "eagle", "mtp", "draft")

# A method's time beyond the roofline when nothing else is known: (verify_extra_seconds,
# draft_pass_seconds, where it was measured), fitted with `fit_draft_overheads` on published
# TPOT and acceptance lengths at batch 1 (tests/test_speculative_published.py holds the data).
MEASURED_OVERHEADS = {
    "eagle": (1.277e-3, 1.016e-3, "vLLM V1 EAGLE-3 heads on Llama-3.1-8B-Instruct at batch 1, "
              "K = 2..7 (vllm-project/vllm issue #20780)"),
    "mtp": (0.0, 0.735e-3, "TensorRT-LLM MTP on DeepSeek-R1 FP4, 8 x B200, batch 1, MTP 1..5 "
            "(NVIDIA/TensorRT-LLM tech blog 1 @ 01c4ece9)"),
}  # fmt: skip


def measured_overheads(method: str) -> dict[str, float]:
    """The method's measured overheads as `Speculation` keywords (zeros where none was
    measured: n-gram drafts, or a draft model the roofline prices from its parameters)."""
    extra, per_pass, _ = MEASURED_OVERHEADS.get(method, (0.0, 0.0, ""))
    return dict(verify_extra_seconds=extra, draft_pass_seconds=per_pass)


@dataclass(frozen=True)
class Speculation:
    """How the drafts are made and accepted.

    `acceptance`: per-position acceptance p_1..p_k (non-increasing, each in [0, 1]), or one rate
    a for geometric acceptance (p_i = a^i). `draft_params`: parameters one draft pass streams
    and multiplies per token (0 for n-gram; an EAGLE head or MTP layer is about one decoder
    layer; a draft model its own size), at the target's weight precision."""

    k: int
    acceptance: float | tuple[float, ...]
    method: str = "ngram"
    draft_params: float = 0.0
    # Time the roofline leaves out, fitted on measured steps (`fit_draft_overheads`): each draft
    # pass's own (kernel launches and small GEMMs far from peak, a draft's sampling) and each
    # verification step's (proposer set-up, rejection sampling).
    draft_pass_seconds: float = 0.0
    verify_extra_seconds: float = 0.0

    def __post_init__(self):
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"speculative tokens k must be a whole number >= 1, got {self.k!r}")
        if self.method not in METHODS:
            raise ConfigError(f"unknown speculative method {self.method!r}; known: {METHODS}")
        for name in ("draft_params", "draft_pass_seconds", "verify_extra_seconds"):
            value = getattr(self, name)
            if not (value >= 0 and np.isfinite(value)):
                raise ConfigError(f"speculation {name} must be a finite number >= 0, got {value!r}")
        if self.method != "ngram" and self.draft_params == 0 and self.draft_pass_seconds == 0:
            raise ConfigError(
                f"an {self.method} draft runs a model on every pass: give its parameters "
                "(--spec-draft-params; an EAGLE head ~ one layer) or its measured time a pass"
            )
        p = self.per_position
        if np.any(~np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
            raise ConfigError(f"acceptance must lie in [0, 1] at every position, got {tuple(p)}")
        if np.any(np.diff(p) > 1e-12):
            raise ConfigError(
                f"acceptance per position must not rise ({tuple(p)}): a draft token is accepted "
                "only if every one before it was"
            )

    @property
    def per_position(self) -> np.ndarray:
        """p_1..p_k: the chance each draft position is accepted."""
        a = self.acceptance
        if isinstance(a, tuple | list):
            if len(a) != self.k:
                raise ConfigError(f"{len(a)} acceptance rates given for k = {self.k} positions")
            return np.asarray(a, dtype=float)
        return float(a) ** np.arange(1, self.k + 1)

    @property
    def tokens_per_step(self) -> float:
        """E = 1 + sum(p_i): the accepted drafts plus the verification's own token."""
        return 1.0 + float(self.per_position.sum())


def speculation_from_mean_length(k: int, mean_tokens: float, **kw) -> Speculation:
    """A speculation whose steps emit `mean_tokens` on average (SGLang's accept length, vLLM's
    mean acceptance length), as geometric acceptance; ConfigError past k + 1 or below 1."""
    if not 1.0 <= mean_tokens <= k + 1:
        raise ConfigError(
            f"a mean of {mean_tokens:g} tokens per step is impossible with k = {k}: a step emits "
            f"1 to {k + 1}"
        )
    if mean_tokens >= k + 1:
        return Speculation(k, 1.0, **kw)
    lo, hi = 0.0, 1.0  # E(a) = sum(a^i, i = 0..k) rises with a: bisect
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if Speculation(k, mid).tokens_per_step < mean_tokens else (lo, mid)
    return Speculation(k, (lo + hi) / 2, **kw)


@dataclass(frozen=True)
class SpeculativeStep:
    """One verification step and what it buys (seconds, per GPU; arrays over batch sizes)."""

    batch_size: np.ndarray | float
    plain_step_seconds: np.ndarray | float  # the decode step without speculation
    verify_seconds: np.ndarray | float
    draft_seconds: np.ndarray | float
    tokens_per_step: float
    verify_compute_bound: np.ndarray | bool

    @property
    def step_seconds(self):
        return self.verify_seconds + self.draft_seconds

    @property
    def per_token_seconds(self):
        """Seconds per emitted token with speculation."""
        return self.step_seconds / self.tokens_per_step

    @property
    def speedup(self):
        """Plain per-token time over speculative (above 1: speculation pays)."""
        return self.plain_step_seconds / self.per_token_seconds


def draft_seconds(dep: Deployment, spec: Speculation, batch) -> np.ndarray:
    """k draft passes over the batch (the draft's weights streamed or its GEMMs, the slower,
    plus each pass's measured overhead) and the verification step's own overhead."""
    batch = np.asarray(batch, dtype=float)
    read = spec.draft_params * dep.weights.bytes_per_element / dep.tp / dep.gpu.hbm_bytes_per_second
    compute = 2 * spec.draft_params * batch / dep.tp / (dep.mfu * dep.peak_flops_per_second)
    one_pass = np.maximum(read, compute) + spec.draft_pass_seconds
    return spec.k * one_pass + spec.verify_extra_seconds + 0.0 * batch


def fit_draft_overheads(*, plain_step_seconds: float, drafts, tokens_per_step, tpot_seconds):
    """(verify_extra_seconds, draft_pass_seconds) from measured TPOT at batch 1 for several k:
    a verification step lasts TPOT x E (tokens per step), the plain step plus a fixed part plus
    k passes (least squares; the verification's wider GEMMs are free at batch 1)."""
    k = np.asarray(drafts, dtype=float)
    step = np.asarray(tpot_seconds, dtype=float) * np.asarray(tokens_per_step, dtype=float)
    if k.size < 2 or np.unique(k).size < 2:
        raise ConfigError("fitting draft overheads needs measurements at two or more k")
    extra = step - float(plain_step_seconds)
    slope, intercept = np.polyfit(k, extra, 1)
    if intercept < 0:  # no negative fixed time: the best line through the origin
        intercept, slope = 0.0, float(np.dot(k, extra) / np.dot(k, k))
    return float(intercept), float(slope)


def speculative_step(
    deployment: Deployment, *, batch_size, context_tokens, spec: Speculation
) -> SpeculativeStep:
    """The verification step of `batch_size` sequences at `context_tokens`, its draft, and the
    plain decode step beside it (numpy arrays over batch sizes work too)."""
    batch = np.asarray(batch_size, dtype=float)
    plain = decode_step(deployment, batch_size=batch, context_tokens=context_tokens)
    verify = step_time(deployment, batch_size=batch, context_tokens=context_tokens,
                       chunk_tokens=batch * spec.k)  # fmt: skip
    return SpeculativeStep(
        batch_size=batch_size,
        plain_step_seconds=plain.step_seconds,
        verify_seconds=verify.step_seconds,
        draft_seconds=draft_seconds(deployment, spec, batch),
        tokens_per_step=spec.tokens_per_step,
        verify_compute_bound=verify.compute_bound,
    )


def crossover_batch(
    deployment: Deployment, *, context_tokens, spec: Speculation, max_batch: int = 4096
) -> int | None:
    """The smallest batch at which speculation no longer pays (per-token time at least the
    plain step's); None when it pays up to `max_batch`."""
    batches = np.arange(1, int(max_batch) + 1)
    s = speculative_step(deployment, batch_size=batches, context_tokens=context_tokens, spec=spec)
    worse = np.flatnonzero(np.asarray(s.per_token_seconds) >= np.asarray(s.plain_step_seconds))
    return int(batches[worse[0]]) if worse.size else None
