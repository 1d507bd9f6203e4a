"""The drill's follow-up questions, answered with the scenario's own numbers and fitted to its
facts: the reference's "now it is a 70B model on TP=4" is asked of a smaller model only, at the
TP that holds the scenario's load; a scenario that already serves a 70B-class model is asked
about twice its TP (or, at TP=8, about an 8B model) instead."""

from __future__ import annotations

from dataclasses import dataclass

from itlkit.drill.scenarios import MFU, TP_CHOICES, Scenario, Worked, worked_numbers
from itlkit.errors import ConfigError
from itlkit.physics.model import check_tensor_parallel
from itlkit.physics.model_catalog import get_model
from itlkit.physics.roofline import (
    Deployment,
    capacity,
    decode_step,
    mixed_step,
)
from itlkit.physics.speculative import speculative_step
from itlkit.units import (
    format_bytes,
    format_seconds,
)

BIG_MODEL = "llama-3.1-70b"  # the reference's follow-up: "Now it is a 70B model on TP=4."
SMALL_MODEL = "llama-3.1-8b"  # asked about when the scenario is 70B-class at TP=8 already
# A scenario whose model has at least this share of BIG_MODEL's parameters is 70B-class: asking
# "what if it were 70B?" about it would be no change (Qwen2.5 72B) or a small one.
BIG_CLASS_SHARE = 0.5


@dataclass(frozen=True)
class FollowUp:
    """A probe an interviewer asks next, and an answer with this scenario's numbers."""

    key: str
    question: str
    answer: str


def follow_ups(scenario: Scenario) -> tuple[FollowUp, ...]:
    """The three classic follow-ups, answered for this scenario."""
    s, w = scenario, worked_numbers(scenario)
    if s.speculation is not None:
        return (_follow_up_speculation(s, w), _follow_up_scale(scenario, w),
                _follow_up_chunked_off(scenario, w))  # fmt: skip
    return (
        FollowUp(
            "ttft_first",
            "Product now ranks TTFT above smooth streaming. What would you change?",
            f"Leave the budget at {s.budget_tokens:,} tokens (or raise it): beside the "
            f"{s.batch_size} decodes each step carries {s.chunk_tokens:,} prompt tokens, so a "
            f"prompt of {s.prompt_tokens:,} tokens finishes prefill in {w.prefill_steps} steps. "
            "The cost is that every running stream sits through a "
            f"{format_seconds(w.mixed_step_seconds)} step ({w.over_floor:.1f}x the floor) "
            "whenever a chunk is on board. Make that a decision you can see: agree an ITL p99 "
            "target and alert on it, rather than letting it drift.",
        ),
        _follow_up_scale(scenario, w),
        _follow_up_chunked_off(scenario, w),
    )


def _follow_up_speculation(s: Scenario, w) -> FollowUp:
    """Keep speculation for the quiet hours: below the batch where it stops paying."""
    alone = speculative_step(s.deployment, batch_size=1, context_tokens=s.context_tokens,
                             spec=s.speculation)  # fmt: skip
    where = (f"below batch {w.crossover_batch:,}" if w.crossover_batch is not None
             else "at every batch")  # fmt: skip
    return FollowUp(
        "speculation_by_load",
        "Product likes how fast streams were at night with speculation. Can you keep that?",
        f"Yes, by load: at batch 1 a verification step is still memory-bound, so a token takes "
        f"{format_seconds(float(alone.per_token_seconds))} instead of "
        f"{format_seconds(float(alone.plain_step_seconds))} ({float(alone.speedup):.2f}x faster); "
        f"it pays {where} at this context, and at the peak's {s.batch_size} it costs "
        f"{format_seconds(w.per_token_seconds)} a token against "
        f"{format_seconds(w.plain_step_seconds)}. vLLM 0.34 takes k per batch size "
        "(num_speculative_tokens_per_batch_size, 0 above the crossover); older releases need a "
        "second pool the router fills at low load.",
    )


def _deployment(scenario: Scenario, *, model: str, tp: int) -> Deployment:
    """The scenario's GPU and precisions with another model or TP (all-reduce counted)."""
    dep = scenario.deployment
    return Deployment.create(
        model=model,
        gpu=dep.gpu,
        weight_precision=dep.weights,
        kv_precision=dep.kv,
        tp=tp,
        mfu=MFU,
    )


def _smallest_tp_that_fits(scenario: Scenario, model: str) -> int:
    """The smallest TP that is valid for `model` and holds the scenario's load (else the
    largest valid one, whose answer then says it does not fit)."""
    valid = []
    for tp in TP_CHOICES:
        try:
            check_tensor_parallel(get_model(model), tp=tp)
        except ConfigError:
            continue
        valid.append(tp)
        cap = capacity(
            _deployment(scenario, model=model, tp=tp), context_tokens=scenario.context_tokens
        )
        if cap.fits(batch_size=scenario.batch_size):
            return tp
    return valid[-1]


def scale_target(scenario: Scenario) -> tuple[str, int]:
    """The (model, TP) the scale follow-up asks about: one that differs from the scenario's."""
    dep = scenario.deployment
    big = get_model(BIG_MODEL)
    if dep.model.total_params < BIG_CLASS_SHARE * big.total_params:
        return BIG_MODEL, _smallest_tp_that_fits(scenario, BIG_MODEL)
    doubled = 2 * dep.tp
    if doubled <= max(TP_CHOICES):
        try:
            check_tensor_parallel(dep.model, tp=doubled)
            return dep.model.slug, doubled
        except ConfigError:
            pass
    return SMALL_MODEL, _smallest_tp_that_fits(scenario, SMALL_MODEL)


def _scale_question(scenario: Scenario, model: str, tp: int) -> str:
    dep = scenario.deployment
    gpus = f"{tp} GPUs (TP={tp})" if tp > 1 else f"one {dep.gpu.slug} (TP=1)"
    if model == dep.model.slug:
        return (
            f"Same traffic and the same {model}, but split over {gpus} instead of {dep.tp}. "
            "What moves?"
        )
    return f"Same traffic, but the model is {model} on {gpus}. What moves?"


def _follow_up_scale(scenario: Scenario, own: Worked) -> FollowUp:
    s, dep = scenario, scenario.deployment
    model, tp = scale_target(scenario)
    other = _deployment(scenario, model=model, tp=tp)
    load = dict(batch_size=s.batch_size, context_tokens=s.context_tokens)
    decode = decode_step(other, **load)
    mixed = mixed_step(other, chunk_tokens=s.chunk_tokens, **load)
    cap = capacity(other, context_tokens=s.context_tokens)
    fits = (
        ""
        if cap.fits(batch_size=s.batch_size)
        else f" Careful: at this load it does not fit ({cap.explain(batch_size=s.batch_size)})."
    )
    where = f"each of the {tp} {dep.gpu.slug} GPUs" if tp > 1 else f"the one {dep.gpu.slug}"
    allreduce = (
        f" New is the all-reduce after attention and after the MLP in each layer: "
        f"{format_seconds(decode.allreduce_seconds)} per decode step over "
        f"{dep.gpu.interconnect}."
        if tp > 1
        else " With one GPU there is no all-reduce."
    )
    share = f"1/{tp} of the step's GEMMs" if tp > 1 else "all of the step's GEMMs"
    answer = (
        f"Same decomposition, per GPU. {model} in {other.weights.name.upper()} puts "
        f"{format_bytes(decode.weight_bytes)} of weights on {where}: a weight read of "
        f"{format_seconds(decode.weight_read_seconds)}; the KV term at {s.batch_size} x "
        f"{s.context_tokens:,} is {format_seconds(decode.kv_read_seconds)} per GPU, so the floor "
        f"is {format_seconds(decode.floor_seconds)} (yours: {format_seconds(own.floor_seconds)})."
        + allreduce
        + f" Each GPU does {share}, {float(mixed.matmul_flops) / 1e12:.1f} TFLOP against "
        f"{own.mixed_matmul_flops / 1e12:.1f} TFLOP per GPU in your scenario, so a step that "
        f"fills the {s.budget_tokens:,}-token budget takes {format_seconds(mixed.step_seconds)}"
        + (" with the all-reduce" if tp > 1 else "")
        + f", {float(mixed.step_seconds) / float(decode.floor_seconds):.1f}x the floor."
        + fits
    )
    return FollowUp("scale", _scale_question(scenario, model, tp), answer)


def _follow_up_chunked_off(scenario: Scenario, w: Worked) -> FollowUp:
    s, dep = scenario, scenario.deployment
    whole = mixed_step(
        dep, batch_size=s.batch_size, context_tokens=s.context_tokens, chunk_tokens=s.prompt_tokens
    )
    return FollowUp(
        "chunked_off",
        "Someone proposes turning chunked prefill off to get rid of the slow steps. Good idea?",
        "No: the prompt does not go away, it arrives in one piece. A prefill of "
        f"{s.prompt_tokens:,} tokens becomes one step of about "
        f"{format_seconds(whole.step_seconds)} instead of {w.prefill_steps} steps of "
        f"{format_seconds(w.mixed_step_seconds)}, and every running "
        "stream waits for all of it. The worst gaps grow, so ITL p99 gets worse, not better "
        "(and vLLM then needs max_num_batched_tokens to hold max_model_len).",
    )
