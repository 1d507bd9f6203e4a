"""The drill's follow-up questions, answered with the scenario's own numbers."""

from __future__ import annotations

from dataclasses import dataclass

from itlkit.drill.scenarios import MFU, Scenario, Worked, worked_numbers
from itlkit.physics.roofline import (
    Deployment,
    capacity,
    decode_step,
    mixed_step,
)
from itlkit.units import (
    format_bytes,
    format_seconds,
)


@dataclass(frozen=True)
class FollowUp:
    """A probe an interviewer asks next, and an answer with this scenario's numbers."""

    key: str
    question: str
    answer: str


def follow_ups(scenario: Scenario) -> tuple[FollowUp, ...]:
    """The three classic follow-ups, answered for this scenario."""
    s, w = scenario, worked_numbers(scenario)
    return (
        FollowUp(
            "ttft_first",
            "Product now ranks TTFT above smooth streaming. What would you change?",
            f"Leave the budget at {s.chunk_tokens:,} tokens (or raise it): a prompt of "
            f"{s.prompt_tokens:,} tokens finishes prefill in {w.prefill_steps} steps. The cost is "
            f"that every running stream sits through a {format_seconds(w.mixed_step_seconds)} "
            f"step ({w.over_floor:.1f}x the floor) whenever a chunk is on board. Make that a "
            "decision you can see: agree an ITL p99 target and alert on it, rather than letting "
            "it drift.",
        ),
        _follow_up_70b(scenario),
        _follow_up_chunked_off(scenario, w),
    )


def _follow_up_70b(scenario: Scenario) -> FollowUp:
    s, dep, own = scenario, scenario.deployment, worked_numbers(scenario)
    question = "Same traffic, but the model is Llama 3.1 70B split over 4 GPUs (TP=4). What moves?"
    big = Deployment.create(
        model="llama-3.1-70b",
        gpu=dep.gpu,
        weight_precision=dep.weights,
        kv_precision=dep.kv,
        tp=4,
        mfu=MFU,
    )
    load = dict(batch_size=s.batch_size, context_tokens=s.context_tokens)
    decode = decode_step(big, **load)
    mixed = mixed_step(big, chunk_tokens=s.chunk_tokens, **load)
    cap = capacity(big, context_tokens=s.context_tokens)
    fits = (
        ""
        if cap.fits(batch_size=s.batch_size)
        else (f" Careful: at this load it does not fit ({cap.explain(batch_size=s.batch_size)}).")
    )
    answer = (
        f"Same decomposition, per GPU. Llama 3.1 70B in {dep.weights.name.upper()} puts "
        f"{format_bytes(decode.weight_bytes)} of weights on each of the 4 {dep.gpu.slug} GPUs: a "
        f"weight read of {format_seconds(decode.weight_read_seconds)}; the KV term at "
        f"{s.batch_size} x {s.context_tokens:,} is {format_seconds(decode.kv_read_seconds)} per "
        f"GPU, so the floor is {format_seconds(decode.floor_seconds)}. New is the all-reduce after "
        f"attention and after the MLP in each layer: {format_seconds(decode.allreduce_seconds)} "
        f"per decode step over {dep.gpu.interconnect}. Each GPU does a quarter of the chunk's "
        f"GEMMs, {float(mixed.matmul_flops) / 1e12:.1f} TFLOP per GPU against "
        f"{own.mixed_matmul_flops / 1e12:.1f} TFLOP in your scenario, so a chunk of "
        f"{s.chunk_tokens:,} tokens makes the step {format_seconds(mixed.step_seconds)} with the "
        f"all-reduce, {float(mixed.step_seconds) / float(decode.floor_seconds):.1f}x the floor."
        + fits
    )
    return FollowUp("seventy_b_tp4", question, answer)


def _follow_up_chunked_off(scenario: Scenario, w: Worked) -> FollowUp:
    s, dep = scenario, scenario.deployment
    whole = mixed_step(
        dep, batch_size=s.batch_size, context_tokens=s.context_tokens, chunk_tokens=s.prompt_tokens
    )
    return FollowUp(
        "chunked_off",
        "Chunked prefill causes the stalls, so why not run with chunked prefill off?",
        f"The prompt does not go away, it arrives in one piece: a {s.prompt_tokens:,}-token "
        f"prefill becomes one step of about {format_seconds(whole.step_seconds)} instead of "
        f"{w.prefill_steps} steps of {format_seconds(w.mixed_step_seconds)}, and every running "
        "stream waits for all of it. The worst gaps grow, so ITL p99 gets worse, not better.",
    )
