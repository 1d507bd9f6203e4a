"""Speculative decoding in the simulator: steps that emit several tokens per request.

A request decodes in verification steps: each runs the target model on its k drafts plus one
token and emits the accepted prefix of the drafts plus the target's own token, 1 to k + 1
tokens (`physics.speculative`). How many is drawn per request per step from the per-position
acceptance: draft i is accepted given draft i - 1 was with probability p_i / p_(i-1), so the
drafts a step accepts are the leading run of those draws (geometric acceptance a: each with a).
The last step of a request stops at its output length (the engine drops tokens past max_tokens).

The engine (`sim.engine`) keeps its one-output-per-step bookkeeping: here a request's output is
counted in *events*, one per step that emitted tokens for it (its prefill's token first), and
`draw_events` says how many tokens each event carried. The speculative step function prices a
step of d decoding requests as the target on d (k + 1) tokens (weights once, each sequence's
KV once, logits at every verified position) plus k draft passes over the d sequences. Around
the engine, the results map events back to tokens: vLLM's ITL is one observation per event
(the whole step), SGLang's k-split and TPOT per token (`SimulationResult.itl_views`).

Assumptions, stated where they are made: the KV a request holds grows by its tokens, which the
engine, counting one per event, undercounts; `kv_scale` puts back the mean-field factor (the
workload's decode-time-weighted context in tokens over that in events) in the KV each step
reads and in the capacity the engine fills. The draft's KV and the k lookahead slots vLLM
reserves per request are not counted; a newly prefilled request drafts in its first step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from itlkit.errors import ConfigError
from itlkit.physics.roofline import Deployment
from itlkit.physics.speculative import Speculation, draft_seconds
from itlkit.sim.lengths import make_rng

DRAW_MARGIN = 1.25  # steps drawn per request: its tokens / E x this, plus a few; then more


@dataclass(frozen=True, eq=False)
class TokenEvents:
    """How many tokens each output event of each request carried: request i's events are
    `tokens[offsets[i]:offsets[i + 1]]`, its prefill's one token first."""

    tokens: np.ndarray
    offsets: np.ndarray

    @property
    def events(self) -> np.ndarray:
        """Events per request (the engine's output count)."""
        return np.diff(self.offsets)

    def tokens_of(self, request: np.ndarray, ordinal: np.ndarray) -> np.ndarray:
        """The tokens event `ordinal[j]` (0: the prefill's) of request `request[j]` carried."""
        return self.tokens[self.offsets[np.asarray(request)] + np.asarray(ordinal)]

    def tokens_after(self, request: np.ndarray, events: np.ndarray) -> np.ndarray:
        """Tokens request[j] had received after its first events[j] events."""
        cumulative = np.concatenate(([0], np.cumsum(self.tokens)))
        request, events = np.asarray(request), np.asarray(events)
        return cumulative[self.offsets[request] + events] - cumulative[self.offsets[request]]


def accepted_drafts(spec: Speculation, rng: np.random.Generator, steps: int) -> np.ndarray:
    """Drafts accepted in each of `steps` verification steps: the leading run of per-position
    draws, draft i accepted given i - 1 was with probability p_i / p_(i-1)."""
    p = spec.per_position
    before = np.concatenate(([1.0], p[:-1]))
    given = np.divide(p, before, out=np.zeros_like(p), where=before > 0)
    accepted = rng.random((steps, spec.k)) < given
    return np.cumprod(accepted, axis=1).sum(axis=1)


def draw_events(output_tokens, spec: Speculation, *, seed=0) -> TokenEvents:
    """Each request's output as events: its prefill's token, then verification steps of 1 + the
    drafts accepted, the last cut at its output length (vLLM stops at max_tokens)."""
    output = np.asarray(output_tokens, dtype=np.int64)
    if output.size and output.min() < 1:
        raise ConfigError("every request must ask for at least one output token")
    rng = make_rng(seed)
    rest = output - 1  # tokens left after the prefill's
    steps = np.zeros(output.size, dtype=np.int64)
    per_request: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * output.size
    todo = np.flatnonzero(rest > 0)
    margin = DRAW_MARGIN
    while todo.size:
        drawn = np.ceil(rest[todo] / spec.tokens_per_step * margin).astype(np.int64) + 4
        tokens = 1 + accepted_drafts(spec, rng, int(drawn.sum()))
        starts = np.concatenate(([0], np.cumsum(drawn)[:-1]))
        short = []
        for j, i in enumerate(todo.tolist()):
            run = tokens[starts[j] : starts[j] + drawn[j]]
            total = np.cumsum(run)
            n = int(np.searchsorted(total, rest[i], side="left"))
            if n == run.size:
                short.append(i)
                continue
            run = run[: n + 1].copy()
            run[-1] -= total[n] - rest[i]
            per_request[i], steps[i] = run, n + 1
        todo, margin = np.asarray(short, dtype=np.int64), margin * 2
    offsets = np.concatenate(([0], np.cumsum(steps + 1)))
    flat = np.ones(int(offsets[-1]), dtype=np.int64)
    for i in np.flatnonzero(steps).tolist():
        flat[offsets[i] + 1 : offsets[i + 1]] = per_request[i]
    return TokenEvents(flat, offsets)


def kv_scale(workload, events: TokenEvents) -> float:
    """Tokens of KV per unit the engine counts: a request's context averaged over its decode
    (prompt + half its output) in tokens over the same in events, weighted by its events."""
    prompt = workload.prompt_tokens.astype(float)
    n = events.events.astype(float)
    tokens = np.dot(prompt + workload.output_tokens / 2.0, n)
    counted = np.dot(prompt + n / 2.0, n)
    return float(tokens / counted) if counted > 0 else 1.0


def speculative_step_function(step_function, deployment: Deployment, spec: Speculation, *,
                              kv_per_unit: float = 1.0):  # fmt: skip
    """A step of d decoding requests as verification: the target on d (k + 1) tokens (every
    verified position through the LM head), `kv_per_unit` x the engine's KV count read once,
    plus the k draft passes over the d sequences (`physics.speculative.draft_seconds`)."""
    width = spec.k + 1

    def step(*, decode_tokens, prefill_tokens, kv_tokens):
        seconds = step_function(
            decode_tokens=decode_tokens * width,
            prefill_tokens=prefill_tokens,
            kv_tokens=kv_tokens * kv_per_unit,
        )
        if isinstance(decode_tokens, int) and decode_tokens == 0:
            return seconds
        return seconds + draft_seconds(deployment, spec, decode_tokens)

    return step


def event_workload(workload, events: TokenEvents):
    """The workload as the engine sees it: each request's output counted in events."""
    return replace(workload, output_tokens=events.events.astype(workload.output_tokens.dtype))


def capacity_in_units(kv_capacity_tokens: int, workload, scale: float) -> int:
    """The KV capacity in the engine's units, never below what the longest request needs in them
    (a request that fits in tokens must fit in units: the mean field is no reason to refuse it)."""
    need = int((workload.prompt_tokens + workload.output_tokens).max(initial=1))
    return max(math.floor(kv_capacity_tokens / scale), min(need, int(kv_capacity_tokens)))
