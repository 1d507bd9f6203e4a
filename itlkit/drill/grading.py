"""Grading a drill answer: each number against the worked one, the ranked causes, the chosen
signal and fix, the classic mistakes read off what the user entered, and a Weak / Hire / Strong
Hire rubric."""

from __future__ import annotations

import math
from dataclasses import dataclass

from itlkit.diagnosis.scoring import CAUSES, TITLES
from itlkit.drill.content import (
    CAUSE_NAMES,
    FIXES,
    MISTAKES,
    P99_CHOICES,
    P99_RIGHT,
    SIGNAL_FOR_CAUSE,
    SIGNALS,
    fixes_for,
)
from itlkit.drill.scenarios import MFU, OBSERVED_MBU, Scenario, Worked, worked_numbers
from itlkit.errors import ConfigError
from itlkit.physics.roofline import (
    decode_step,
    mixed_step,
    step_seconds,
)
from itlkit.units import (
    format_bandwidth,
    format_bytes,
    format_percent,
    format_rate,
    format_seconds,
)

CORRECT_WITHIN = 0.05  # relative error of a number graded correct
CLOSE_WITHIN = 0.20  # ... and graded close

CORRECT, CLOSE, WRONG, MISSING = "correct", "close", "wrong", "not answered"
WEAK, HIRE, STRONG_HIRE = "Weak", "Hire", "Strong Hire"


@dataclass(frozen=True)
class Answer:
    """What the user entered; None (or an empty ranking) means not answered. Seconds, SI."""

    floor_seconds: float | None = None
    kv_read_seconds: float | None = None
    mixed_step_seconds: float | None = None
    ranking: tuple[str | None, ...] = ()
    p99_meaning: str | None = None
    signal: str | None = None
    fix: str | None = None
    checked_ttft: bool = False
    prefill_steps: int | None = None


@dataclass(frozen=True)
class ItemGrade:
    """One graded item: the verdict, the numbers behind it, and a sentence of feedback."""

    key: str
    verdict: str
    answer: float | str | tuple | None
    worked: float | str | tuple | None
    relative_error: float | None
    feedback: str

    @property
    def ok(self) -> bool:
        """Correct or close: good enough to count towards the rubric."""
        return self.verdict in (CORRECT, CLOSE)


@dataclass(frozen=True)
class Mistake:
    """A classic mistake found in the user's own inputs."""

    key: str
    title: str
    detail: str


@dataclass(frozen=True)
class Rubric:
    """The level reached, why, and what the next level needs."""

    level: str
    met: tuple[str, ...]
    missing: tuple[str, ...]


@dataclass(frozen=True)
class Grade:
    """The whole verdict on one answer."""

    scenario: Scenario
    worked: Worked
    items: tuple[ItemGrade, ...]
    mistakes: tuple[Mistake, ...]
    rubric: Rubric
    sanity: str

    def item(self, key: str) -> ItemGrade:
        return next(i for i in self.items if i.key == key)


def relative_error(*, answer: float, worked: float) -> float:
    """|answer - worked| / worked."""
    return abs(answer - worked) / abs(worked)


def verdict_for(*, answer: float | None, worked: float) -> tuple[str, float | None]:
    """correct within CORRECT_WITHIN, close within CLOSE_WITHIN, else wrong."""
    if answer is None or not math.isfinite(answer) or answer <= 0:
        return MISSING, None
    error = relative_error(answer=answer, worked=worked)
    if error <= CORRECT_WITHIN:
        return CORRECT, error
    if error <= CLOSE_WITHIN:
        return CLOSE, error
    return WRONG, error


def _number_item(key: str, answer: float | None, worked: float, how: str) -> ItemGrade:
    verdict, error = verdict_for(answer=answer, worked=worked)
    if verdict == MISSING:
        said = "You left this blank"
    else:
        off = f"{error:.0%} off" if error >= 0.005 else "spot on"
        said = f"You said {format_seconds(answer)} ({verdict}, {off})"
    return ItemGrade(key, verdict, answer, worked, error, f"{said}; worked: {how}.")


def _grade_floor(scenario: Scenario, w: Worked, answer: Answer) -> ItemGrade:
    bw = format_bandwidth(scenario.deployment.gpu.hbm_bytes_per_second)
    how = (
        f"({format_bytes(w.weight_bytes)} of weights + {format_bytes(w.kv_bytes)} of KV) / {bw} = "
        f"{format_seconds(w.floor_seconds)}"
    )
    return _number_item("floor", answer.floor_seconds, w.floor_seconds, how)


def _grade_kv(scenario: Scenario, w: Worked, answer: Answer) -> ItemGrade:
    s = scenario
    how = (
        f"{s.batch_size} sequences x {s.context_tokens:,} tokens x {w.kv_bytes_per_token:,.0f} B = "
        f"{format_bytes(w.kv_bytes)}, read in {format_seconds(w.kv_read_seconds)}"
    )
    return _number_item("kv_term", answer.kv_read_seconds, w.kv_read_seconds, how)


def _grade_mixed(scenario: Scenario, w: Worked, answer: Answer) -> ItemGrade:
    dep = scenario.deployment
    bound = (
        "compute-bound: past the ridge"
        if w.mixed_compute_bound
        else "still memory-bound: short of the ridge"
    )
    gemms = (
        f"({bound}, which {w.ridge_flops_per_byte:.0f} FLOP/B puts at about "
        f"{w.ridge_tokens_per_step:.0f} tokens per step); they take "
        f"{w.mixed_matmul_flops / 1e12:.1f} TFLOP at "
        f"{format_rate(MFU * dep.peak_flops_per_second)} = {format_seconds(w.mixed_matmul_seconds)}"
    )
    if scenario.engine == "sglang":
        alone = w.mixed_step_seconds - _decode_seconds(scenario)
        how = (
            f"SGLang runs the prefill batch of {scenario.chunk_tokens:,} tokens alone: they go "
            f"through the GEMMs {gemms}, so the batch takes {format_seconds(alone)}; then the "
            f"{scenario.batch_size} streams take their decode step "
            f"({format_seconds(_decode_seconds(scenario))}): each waits "
            f"{format_seconds(w.mixed_step_seconds)}, {w.over_floor:.1f}x the floor"
        )
        return _number_item("mixed_step", answer.mixed_step_seconds, w.mixed_step_seconds, how)
    if scenario.speculation is not None:
        spec = scenario.speculation
        how = (
            f"each of the {scenario.batch_size} sequences verifies its {spec.k} drafts and its "
            f"own token: {w.mixed_tokens:,} tokens go through the GEMMs {gemms}, plus the "
            f"{format_seconds(w.kv_read_seconds)} KV read (once a sequence): "
            f"{format_seconds(w.mixed_step_seconds)}, {w.over_floor:.1f}x the floor. It emits "
            f"{w.tokens_per_step:.2f} tokens a sequence, so a token costs "
            f"{format_seconds(w.per_token_seconds)} against the plain step's "
            f"{format_seconds(w.plain_step_seconds)}: "
            + (f"speculation stops paying at batch {w.crossover_batch:,}"
               if w.crossover_batch is not None else "it pays at every batch")
        )  # fmt: skip
        return _number_item("mixed_step", answer.mixed_step_seconds, w.mixed_step_seconds, how)
    how = (
        f"the budget of {scenario.budget_tokens:,} tokens counts the {scenario.batch_size} "
        f"decodes, so the chunk is {scenario.chunk_tokens:,} tokens and {w.mixed_tokens:,} "
        f"tokens go through the GEMMs {gemms}, plus the {format_seconds(w.kv_read_seconds)} "
        f"KV read: {format_seconds(w.mixed_step_seconds)}, {w.over_floor:.1f}x the floor"
    )
    return _number_item("mixed_step", answer.mixed_step_seconds, w.mixed_step_seconds, how)


def _decode_seconds(s: Scenario) -> float:
    """The running batch's own decode step (the reference step model: the floor here)."""
    return float(
        decode_step(s.deployment, batch_size=s.batch_size, context_tokens=s.context_tokens)
        .step_seconds
    )  # fmt: skip


def _grade_prefill_steps(scenario: Scenario, w: Worked, answer: Answer) -> ItemGrade:
    s = scenario
    shares = (
        f"SGLang's prefill batch does not share its {s.smaller_budget_tokens:,} tokens with the "
        "decodes, so the chunks are "
        if s.engine == "sglang"
        else f"the {s.batch_size} decodes take their {s.decode_tokens:,} tokens (drafts "
        f"included) first, so a budget of {s.smaller_budget_tokens:,} leaves chunks of "
        if s.speculation is not None
        else f"the {s.batch_size} decodes take their tokens first, so a budget of "
        f"{s.smaller_budget_tokens:,} leaves chunks of "
    )
    how = (
        f"{shares}{s.smaller_chunk_tokens:,}: "
        f"ceil({s.prompt_tokens:,} / {s.smaller_chunk_tokens:,}) = {w.smaller_prefill_steps} steps "
        f"instead of ceil({s.prompt_tokens:,} / {s.chunk_tokens:,}) = {w.prefill_steps} at "
        f"{s.budget_tokens:,}: the TTFT price of the smaller budget, whose slow step drops from "
        f"{format_seconds(w.mixed_step_seconds)} to {format_seconds(w.smaller_mixed_step_seconds)}"
    )
    steps = answer.prefill_steps
    if steps is None or steps <= 0:
        return ItemGrade(
            "prefill_steps",
            MISSING,
            None,
            w.smaller_prefill_steps,
            None,
            f"You left this blank; worked: {how}.",
        )
    gap = abs(int(steps) - w.smaller_prefill_steps)
    verdict = CORRECT if gap == 0 else CLOSE if gap == 1 else WRONG
    return ItemGrade(
        "prefill_steps",
        verdict,
        int(steps),
        w.smaller_prefill_steps,
        gap / w.smaller_prefill_steps,
        f"You said {int(steps)} ({verdict}); worked: {how}.",
    )


def grade_ranking(scenario: Scenario, ranking: tuple[str | None, ...]) -> ItemGrade:
    """Correct when the top two causes match the symptom's ranking, close when the top one does."""
    expected = scenario.expected_ranking
    shown = " > ".join(TITLES[c] for c in expected)
    picked = tuple(ranking) + (None,) * (len(CAUSES) - len(ranking))
    filled = [c for c in picked if c is not None]
    if not filled:
        return ItemGrade(
            "ranking",
            MISSING,
            (),
            expected,
            None,
            f"You left the ranking blank; for this symptom: {shown}.",
        )
    unknown = sorted(set(filled) - set(CAUSES))
    if unknown:
        raise ConfigError(f"unknown causes {unknown}; valid causes: {', '.join(CAUSES)}")
    problem = ""
    if len(set(filled)) != len(filled):
        problem = "each cause belongs in exactly one place (you used one twice)"
    elif picked[0] is None:
        problem = "rank 1 is blank: the first cause is the one that matters most"
    if problem:
        return ItemGrade(
            "ranking",
            WRONG,
            picked,
            expected,
            None,
            f"Ranking wrong: {problem}. For this symptom: {shown}.",
        )
    if picked[:2] == expected[:2]:
        verdict, why = CORRECT, "the two causes that matter are in the right order"
    elif picked[0] == expected[0]:
        verdict, why = CLOSE, f"right first cause, but second is {CAUSE_NAMES[expected[1]]}"
    else:
        verdict = WRONG
        why = (
            f"the symptom points at {CAUSE_NAMES[expected[0]]} first, not {CAUSE_NAMES[picked[0]]}"
        )
    return ItemGrade(
        "ranking",
        verdict,
        picked,
        expected,
        None,
        f"Ranking {verdict}: {why}. For this symptom: {shown}.",
    )


def _grade_choice(key: str, picked: str | None, right: str, menu: dict, why: str) -> ItemGrade:
    if picked is None:
        return ItemGrade(
            key,
            MISSING,
            None,
            right,
            None,
            f"You left this blank; the answer: {menu[right]}. {why}",
        )
    verdict = CORRECT if picked == right else WRONG
    return ItemGrade(
        key,
        verdict,
        picked,
        right,
        None,
        f"You chose {menu[picked]} ({verdict}); the answer: {menu[right]}. {why}",
    )


def _grade_fix(scenario: Scenario, w: Worked, answer: Answer) -> ItemGrade:
    fits = fixes_for(scenario.top_cause, scenario.engine)
    if answer.fix is None:
        return ItemGrade(
            "fix",
            MISSING,
            None,
            fits,
            None,
            f"You left this blank; for this symptom, {FIXES[fits[0]]}.",
        )
    verdict = CORRECT if answer.fix in fits else WRONG
    effect = fix_effect(scenario, w, answer.fix)
    if verdict == WRONG:
        effect += (
            f" It does not address {CAUSE_NAMES[scenario.top_cause]}; instead, {FIXES[fits[0]]}."
        )
    return ItemGrade(
        "fix",
        verdict,
        answer.fix,
        fits,
        None,
        f"You chose to {FIXES[answer.fix]} ({verdict}). {effect}",
    )


def fix_effect(scenario: Scenario, w: Worked, fix: str) -> str:
    """What a fix does to this scenario's numbers, and what it costs."""
    s, dep = scenario, scenario.deployment
    if fix == "lower_budget":
        return (
            f"At a budget of {s.smaller_budget_tokens:,} tokens per step the slow step shrinks "
            f"from {format_seconds(w.mixed_step_seconds)} to "
            f"{format_seconds(w.smaller_mixed_step_seconds)}, but a prompt of {s.prompt_tokens:,} "
            f"tokens needs {w.smaller_prefill_steps} steps instead of {w.prefill_steps}, so TTFT "
            "rises."
        )
    if fix == "disaggregate":
        return (
            "Decode steps never carry a chunk, so ITL stays near the "
            f"{format_seconds(w.floor_seconds)} floor; the price is a separate prefill pool and a "
            "KV transfer per request."
        )
    if fix == "cap_or_fp8_kv":
        half = decode_step(
            dep, batch_size=max(s.batch_size // 2, 1), context_tokens=s.context_tokens
        )
        fp8 = (
            f"FP8 KV halves the {format_seconds(w.kv_read_seconds)} KV term"
            if dep.kv.bytes_per_element > 1
            else "The KV cache is already FP8"
        )
        return (
            f"{fp8}; capping max_num_seqs at {max(s.batch_size // 2, 1)} brings the floor from "
            f"{format_seconds(w.floor_seconds)} to {format_seconds(half.floor_seconds)} at the "
            "cost of throughput."
        )
    if fix == "add_replicas":
        half = decode_step(
            dep, batch_size=max(s.batch_size // 2, 1), context_tokens=s.context_tokens
        )
        return (
            f"Twice the replicas halve each one's batch: floor {format_seconds(w.floor_seconds)} "
            f"-> {format_seconds(half.floor_seconds)}, for twice the GPUs."
        )
    if fix == "cuda_graphs":
        return (
            "Removes launch and sampling gaps between kernels; the "
            f"{format_seconds(w.floor_seconds)} floor itself does not move."
        )
    if fix == "mixed_chunk":
        if s.engine != "sglang":
            return ("vLLM already runs the decodes in the chunk's step; this is SGLang's flag, "
                    "and the step with the chunk stays as it is.")  # fmt: skip
        kv = s.batch_size * s.context_tokens
        chunk = max(s.chunk_tokens - s.batch_size, 1)
        mixed = step_seconds(dep, decode_tokens=s.batch_size, prefill_tokens=chunk, kv_tokens=kv)
        return (
            f"Each stream's wait becomes one step of {s.chunk_tokens - s.batch_size:,} prompt "
            f"tokens beside the {s.batch_size} decodes (~{format_seconds(mixed)}) instead of the "
            f"batch alone and a decode step ({format_seconds(w.mixed_step_seconds)}), and "
            "back-to-back prefill batches no longer add up; the chunk gives the decodes their "
            "tokens, so first tokens come a little later."
        )
    if fix == "fewer_drafts":
        return _fewer_drafts_effect(s, w)
    if fix == "chunked_off":
        whole = mixed_step(
            dep,
            batch_size=s.batch_size,
            context_tokens=s.context_tokens,
            chunk_tokens=s.prompt_tokens,
        )
        return (
            f"A prompt of {s.prompt_tokens:,} tokens would then go in one step of about "
            f"{format_seconds(whole.step_seconds)} that every running stream waits for: ITL p99 "
            "gets worse."
        )
    raise ConfigError(f"unknown fix {fix!r}; valid fixes: {', '.join(FIXES)}")


def _fewer_drafts_effect(s: Scenario, w: Worked) -> str:
    """Speculation off at this batch (or fewer drafts): a token at the plain step."""
    if s.speculation is None:
        return "There is no speculative decoding here: nothing to take away."
    where = (f"above batch {w.crossover_batch:,}" if w.crossover_batch is not None
             else "at this load")  # fmt: skip
    return (
        f"With speculation off {where} a token takes the plain step, "
        f"{format_seconds(w.plain_step_seconds)}, instead of {format_seconds(w.per_token_seconds)}"
        f" ({w.per_token_seconds / w.plain_step_seconds:.2f}x faster); light-load streams lose "
        "the drafts' gain (vLLM 0.34 sets k per batch size; older releases need a second pool)."
    )


def find_mistakes(scenario: Scenario, w: Worked, answer: Answer) -> tuple[Mistake, ...]:
    """The classic mistakes, each read off the user's own inputs."""
    found = []
    floor = answer.floor_seconds
    if floor is not None and floor > 0:
        to_weights = relative_error(answer=floor, worked=w.weight_read_seconds)
        to_floor = relative_error(answer=floor, worked=w.floor_seconds)
        if to_weights <= CLOSE_WITHIN and to_weights < to_floor and to_floor > CORRECT_WITHIN:
            found.append(
                Mistake(
                    "floor_from_weights_alone",
                    MISTAKES["floor_from_weights_alone"],
                    f"Your {format_seconds(floor)} is the weight read "
                    f"({format_seconds(w.weight_read_seconds)}) on its own. Every step also reads "
                    f"each live sequence's KV: {format_bytes(w.kv_bytes)}, "
                    f"{w.kv_bytes / w.weight_bytes:.1f}x the weight bytes here, which adds "
                    f"{format_seconds(w.kv_read_seconds)}.",
                )
            )
    if answer.p99_meaning == "slowest_request":
        found.append(
            Mistake(
                "p99_as_slowest_request",
                MISTAKES["p99_as_slowest_request"],
                "ITL is observed per token gap, not per request, so p99 is set by the slowest 1% "
                "of steps. Here those are the steps that carry a prefill chunk "
                f"({format_seconds(w.mixed_step_seconds)}), and every running stream sits through "
                "them.",
            )
        )
    if answer.fix == "lower_budget" and not answer.checked_ttft:
        found.append(
            Mistake(
                "budget_without_ttft_check",
                MISTAKES["budget_without_ttft_check"],
                f"A budget of {scenario.smaller_budget_tokens:,} tokens turns the prefill of a "
                f"prompt of {scenario.prompt_tokens:,} tokens into {w.smaller_prefill_steps} "
                f"steps (from {w.prefill_steps}); confirm TTFT p99 still meets its SLO before "
                "shipping.",
            )
        )
    if answer.signal == "gpu_utilisation":
        found.append(
            Mistake(
                "gpu_utilisation",
                MISTAKES["gpu_utilisation"],
                "Utilisation only says a kernel was running; it reads near 100% in the fast "
                "steps and in the slow ones alike, so it cannot tell the causes apart.",
            )
        )
    return tuple(found)


def rubric(items: dict[str, ItemGrade], mistakes: tuple[Mistake, ...]) -> Rubric:
    """Weak / Hire / Strong Hire from what was entered (after the reference's scoring section).

    Hire: a weights + KV floor, the right first cause, and a fix that treats it.
    Strong Hire: also the chunked step quantified, the ranking, the signal that separates the
    causes, what p99 means, the TTFT price of the fix, and none of the classic mistakes.
    """
    hire = {
        "floor computed from weights and KV": items["floor"].ok and items["kv_term"].ok,
        "right first cause": items["ranking"].ok,
        "a fix that treats that cause": items["fix"].verdict == CORRECT,
    }
    strong = {
        "the chunked step quantified": items["mixed_step"].ok,
        "top two causes in order": items["ranking"].verdict == CORRECT,
        "a signal that separates the causes": items["signal"].verdict == CORRECT,
        "p99 read as slow steps, not slow requests": items["p99"].verdict == CORRECT,
        "the TTFT price of a smaller budget": items["prefill_steps"].ok,
        "none of the classic mistakes": not mistakes,
    }
    met = tuple(k for k, ok in {**hire, **strong}.items() if ok)
    if not all(hire.values()):
        return Rubric(WEAK, met, tuple(k for k, ok in hire.items() if not ok))
    if not all(strong.values()):
        return Rubric(HIRE, met, tuple(k for k, ok in strong.items() if not ok))
    return Rubric(STRONG_HIRE, met, ())


def grade(scenario: Scenario, answer: Answer) -> Grade:
    """Grade every item of an answer against the scenario's worked numbers."""
    for name, value, menu in (
        ("p99 meaning", answer.p99_meaning, P99_CHOICES),
        ("signal", answer.signal, SIGNALS),
        ("fix", answer.fix, FIXES),
    ):
        if value is not None and value not in menu:
            raise ConfigError(f"unknown {name} {value!r}; valid: {', '.join(menu)}")
    w = worked_numbers(scenario)
    top = scenario.top_cause
    items = (
        _grade_floor(scenario, w, answer),
        _grade_kv(scenario, w, answer),
        _grade_mixed(scenario, w, answer),
        grade_ranking(scenario, tuple(answer.ranking)),
        _grade_choice(
            "p99",
            answer.p99_meaning,
            P99_RIGHT,
            P99_CHOICES,
            "Each token gap is one observation, so the tail is made of slow steps that every "
            "running stream shares.",
        ),
        _grade_choice(
            "signal",
            answer.signal,
            SIGNAL_FOR_CAUSE[top],
            SIGNALS,
            f"It is the fingerprint of {CAUSE_NAMES[top]}.",
        ),
        _grade_fix(scenario, w, answer),
        _grade_prefill_steps(scenario, w, answer),
    )
    mistakes = find_mistakes(scenario, w, answer)
    level = rubric({i.key: i for i in items}, mistakes)
    sanity = (
        f"Sanity check: the observed p50 of {format_seconds(scenario.observed_p50_seconds)} "
        f"against the {format_seconds(w.floor_seconds)} floor is {format_percent(w.observed_mbu)} "
        "of HBM bandwidth"
        + (
            ", ordinary for a real server."
            if w.observed_mbu >= OBSERVED_MBU[0] - 0.05
            else ", too low for bandwidth alone: something other than the GPU sets the pace."
        )
    )
    return Grade(scenario, w, items, mistakes, level, sanity)
