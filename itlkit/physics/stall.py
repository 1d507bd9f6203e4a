"""The gap a running stream sees when its engine serves a prompt chunk, by scheduling policy.

vLLM puts the chunk into the decodes' own step: every running stream waits one mixed step
(`mixed_step`: decodes + chunk, the worked example's 79 ms). SGLang by default runs a prefill
batch alone and the running requests decode after it (`Scheduler.get_next_batch_to_run` builds
and runs the prefill batch first: cited in `itlkit/sim/sglang.py`), so a stream waits for the
prefill step and then its own decode step. With `--enable-mixed-chunk` SGLang mixes them as vLLM
does. Notebook 03 draws this gap as the slow mode it expects; the drill asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from itlkit.physics.roofline import Deployment, decode_step, mixed_step, step_seconds

# policy -> how it serves a chunk, in words (the notebook's choices)
POLICIES = {
    "vllm": "vLLM: the chunk rides in the decodes' step",
    "sglang": "SGLang: the prefill batch runs alone, then the decodes",
    "sglang-mixed": "SGLang --enable-mixed-chunk: the chunk rides in the decodes' step",
}


@dataclass(frozen=True)
class Stall:
    """What one running stream waits while `chunk_tokens` prompt tokens are served."""

    policy: str
    chunk_tokens: int
    gap_seconds: float  # from its previous token to its next
    prefill_alone_seconds: float  # the prefill step alone (0 where the chunk is mixed in)
    decode_seconds: float  # the decode step it waits for after (SGLang) or within (mixed)

    @property
    def how(self) -> str:
        """The gap in words, e.g. "prefill batch of 2,048 tokens alone (70.2 ms) + decode
        step (11.5 ms)"."""
        if self.prefill_alone_seconds:
            return (f"prefill batch of {self.chunk_tokens:,} tokens alone "
                    f"({1e3 * self.prefill_alone_seconds:.1f} ms) + decode step "
                    f"({1e3 * self.decode_seconds:.1f} ms)")  # fmt: skip
        return f"one step of the decodes with a {self.chunk_tokens:,}-token chunk"


def prefill_alone_seconds(deployment: Deployment, *, chunk_tokens: int) -> float:
    """A prefill step of `chunk_tokens` tokens with no decode beside it."""
    return step_seconds(deployment, decode_tokens=0, prefill_tokens=chunk_tokens, kv_tokens=0)


def stall(deployment: Deployment, *, policy: str, batch_size: int, context_tokens: int,
          chunk_tokens: int) -> Stall:  # fmt: skip
    """The gap a stream sees under `policy` (a `POLICIES` key) while `batch_size` streams of
    `context_tokens` decode and a `chunk_tokens` chunk is served."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    load = dict(batch_size=batch_size, context_tokens=context_tokens)
    if policy == "sglang":
        alone = prefill_alone_seconds(deployment, chunk_tokens=chunk_tokens)
        decode = float(decode_step(deployment, **load).step_seconds)
        return Stall(policy, chunk_tokens, alone + decode, alone, decode)
    step = float(mixed_step(deployment, chunk_tokens=chunk_tokens, **load).step_seconds)
    return Stall(policy, chunk_tokens, step, 0.0, step)
