"""The drill graded by the engine's rules, its follow-ups fitted to the scenario, its feedback in
English, its chart readable, and its answers the ones `itlkit explain` gives on the same inputs.

The budget rule is vLLM V1's: `Scheduler.schedule` (vllm/v1/core/sched/scheduler.py, commit
00024d31) starts from token_budget = max_num_batched_tokens, schedules the running requests
first (one token per decode) and gives a waiting prompt min(its tokens, what is left). So a
step carries `budget - decodes` prompt tokens, and never more than `budget` in all.

The scenario of the issue, drawn by seed 2026 (notebook 05's default): Llama 3.1 70B in BF16 over
two H200 SXM (TP=2), 8 sequences at 4,096 tokens, max_num_batched_tokens 4,096, prompts of 8,192.
Its numbers are derived here from the catalog's sources (shared/spec): 70,553,706,496 parameters
(safetensors index), 2 x 80 layers x 8 KV heads x 128 x 2 B = 327,680 KV bytes per token, H200 SXM
4.8 TB/s and 989.4 TFLOP/s dense BF16, at the drill's 50% MFU.
"""

import json
import math
import re
from dataclasses import replace

import numpy as np
import pytest
from _reference import ms_text

from itlkit.cli import main
from itlkit.diagnosis.findings import TITLES
from itlkit.drill.content import FIXES, P99_CHOICES, SIGNALS, SYMPTOMS
from itlkit.drill.followups import follow_ups
from itlkit.drill.grading import CLOSE, CORRECT, Answer, grade
from itlkit.drill.scenarios import (
    DRILL_MODELS,
    draw_scenario,
    drill_deployment,
    make_scenario,
    question_text,
    worked_example,
    worked_numbers,
)
from itlkit.physics.explain import explain
from itlkit.physics.speculative import Speculation
from itlkit.plots.drill import answer_figure

MS = 1e-3
PARAMS_70B = 70_553_706_496
KV_BYTES_PER_TOKEN_70B = 2 * 80 * 8 * 128 * 2  # 327,680 B
H200_BYTES_PER_SECOND = 4.8e12
H200_FLOPS_AT_HALF_MFU = 0.5 * 989.4e12

BATCH, CONTEXT, BUDGET, PROMPT, TP = 8, 4096, 4096, 8192, 2
SMALLER_BUDGET = BUDGET // 4  # the drill's "lower the budget" fix: a quarter

# vLLM's rule: the decodes take their tokens first, the chunk gets what is left.
CHUNK = BUDGET - BATCH  # 4,088
SMALLER_CHUNK = SMALLER_BUDGET - BATCH  # 1,016
PREFILL_STEPS = math.ceil(PROMPT / CHUNK)  # 3 (8,192 / 4,088 = 2.004)
SMALLER_PREFILL_STEPS = math.ceil(PROMPT / SMALLER_CHUNK)  # 9 (8,192 / 1,016 = 8.06)

WEIGHT_SECONDS = PARAMS_70B * 2 / TP / H200_BYTES_PER_SECOND  # 14.70 ms
KV_SECONDS = BATCH * CONTEXT * KV_BYTES_PER_TOKEN_70B / TP / H200_BYTES_PER_SECOND  # 1.12 ms
FLOOR_SECONDS = WEIGHT_SECONDS + KV_SECONDS  # 15.82 ms
# The step that fills the budget is compute-bound: GEMMs over all 4,096 tokens, plus the KV read.
MIXED_SECONDS = 2 * PARAMS_70B * BUDGET / TP / H200_FLOPS_AT_HALF_MFU + KV_SECONDS  # 585.29 ms

IMPERATIVES = {"shrink", "disaggregate", "cap", "add", "turn"}  # what "You chose to ..." takes
DETERMINERS = {"the", "a", "an", "how"}  # what "You chose ..." takes before a noun phrase


@pytest.fixture(scope="module")
def issue_scenario():
    return make_scenario(
        drill_deployment(model="llama-3.1-70b", gpu="h200-sxm", tp=TP),
        batch_size=BATCH,
        context_tokens=CONTEXT,
        budget_tokens=BUDGET,
        prompt_tokens=PROMPT,
    )


def _drawn(count: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [draw_scenario(rng) for _ in range(count)]


# 1. vLLM's budget semantics


def test_the_issue_scenario_is_what_seed_2026_draws_first(issue_scenario):
    drawn = draw_scenario(np.random.default_rng(2026))
    assert drawn.deployment == issue_scenario.deployment
    assert (drawn.batch_size, drawn.context_tokens, drawn.budget_tokens, drawn.prompt_tokens) == (
        BATCH,
        CONTEXT,
        BUDGET,
        PROMPT,
    )


def test_the_step_that_fills_the_budget_holds_the_decodes(issue_scenario):
    w = worked_numbers(issue_scenario)
    assert issue_scenario.chunk_tokens == CHUNK
    assert w.mixed_tokens == BUDGET  # not 4,096 + 8 = 4,104
    assert w.floor_seconds == pytest.approx(FLOOR_SECONDS, rel=1e-9)
    assert w.mixed_step_seconds == pytest.approx(MIXED_SECONDS, rel=1e-9)
    assert (w.prefill_steps, w.smaller_prefill_steps) == (PREFILL_STEPS, SMALLER_PREFILL_STEPS)
    feedback = grade(issue_scenario, Answer()).item("mixed_step").feedback
    assert f"chunk is {CHUNK:,} tokens and {BUDGET:,} tokens go through the GEMMs" in feedback
    assert "4,104" not in feedback
    assert ms_text(MIXED_SECONDS / MS) in feedback


@pytest.mark.parametrize("scenario", [*_drawn(60, seed=7), worked_example()])
def test_no_worked_step_exceeds_its_budget(scenario):
    s, w = scenario, worked_numbers(scenario)
    # vLLM's budget holds the decodes (with speculation each takes k + 1: the step asked about
    # is then the verification step, every sequence's drafts and own token); SGLang's prefill
    # batch runs alone with all of it
    if s.speculation is None:
        assert w.mixed_tokens == s.budget_tokens
    else:
        assert w.mixed_tokens == s.decode_tokens <= s.smaller_budget_tokens
    decodes = s.decode_tokens if s.engine == "vllm" else 0
    assert w.prefill_steps == math.ceil(s.prompt_tokens / (s.budget_tokens - decodes))
    assert w.smaller_prefill_steps == math.ceil(
        s.prompt_tokens / (s.smaller_budget_tokens - decodes)
    )


def test_a_quarter_of_drawn_scenarios_ask_about_sglang():
    engines = [s.engine for s in _drawn(200, seed=11)]
    assert 30 <= engines.count("sglang") <= 70 and set(engines) == {"vllm", "sglang"}


def test_sglangs_wait_is_the_batch_alone_then_the_decode_step():
    # The worked example served by SGLang: its 2,048-token prefill batch runs alone. In the
    # reference model the GEMM time is linear in tokens (MFU 0.5), so the batch alone takes the
    # reference's 2,112-token GEMM time x 2,048 / 2,112; a running stream then waits its own
    # decode step, the 15.05 ms floor (shared/spec/worked-example.txt: 79 ms step, 10.26 ms KV).
    vllm = worked_example()
    sglang = replace(vllm, engine="sglang", budget_tokens=2048, smaller_budget_tokens=512)
    v, s = worked_numbers(vllm), worked_numbers(sglang)
    alone = (79e-3 - 10.26e-3) * 2048 / 2112
    assert s.mixed_step_seconds == pytest.approx(alone + 15.05e-3, rel=0.005)
    assert s.mixed_step_seconds == pytest.approx(
        v.mixed_matmul_seconds * 2048 / 2112 + v.floor_seconds, rel=1e-12
    )
    assert (s.prefill_steps, s.smaller_prefill_steps) == (2, 8)  # 4,096 tokens in 2,048s, 512s
    text = " ".join(question_text(sglang))
    assert "SGLang with its defaults" in text and "runs alone" in text
    feedback = grade(sglang, Answer(fix="mixed_chunk")).item("fix")
    assert feedback.verdict == CORRECT and "--enable-mixed-chunk" in FIXES["mixed_chunk"]
    assert grade(vllm, Answer(fix="mixed_chunk")).item("fix").verdict != CORRECT


def test_the_worked_example_keeps_the_reference_chunks():
    # The reference's 2,048- and 512-token chunks beside 64 decodes: budgets of 2,112 and 576.
    s = worked_example()
    assert (s.budget_tokens, s.smaller_budget_tokens) == (2048 + 64, 512 + 64)
    w = worked_numbers(s)
    assert (w.mixed_tokens, w.prefill_steps, w.smaller_prefill_steps) == (2112, 2, 8)


# 2. The correct answer graded correct


def test_the_correct_prefill_step_count_is_correct(issue_scenario):
    def verdict(steps):
        return grade(issue_scenario, Answer(prefill_steps=steps)).item("prefill_steps").verdict

    assert verdict(SMALLER_PREFILL_STEPS) == CORRECT  # 9: 1,016 prompt tokens beside 8 decodes
    assert verdict(math.ceil(PROMPT / SMALLER_BUDGET)) == CLOSE  # 8: the decodes forgotten
    feedback = grade(issue_scenario, Answer(prefill_steps=9)).item("prefill_steps").feedback
    assert f"ceil({PROMPT:,} / {SMALLER_CHUNK:,}) = {SMALLER_PREFILL_STEPS} steps" in feedback


def test_the_derived_answer_is_a_strong_hire(issue_scenario):
    answer = Answer(
        floor_seconds=FLOOR_SECONDS,
        kv_read_seconds=KV_SECONDS,
        mixed_step_seconds=MIXED_SECONDS,
        ranking=SYMPTOMS[issue_scenario.symptom].ranking,
        p99_meaning="slow_steps",
        signal="itl_buckets_vs_arrivals",
        fix="lower_budget",
        checked_ttft=True,
        prefill_steps=SMALLER_PREFILL_STEPS,
    )
    result = grade(issue_scenario, answer)
    assert [i.verdict for i in result.items] == [CORRECT] * len(result.items)


# 3. Follow-ups that fit the scenario


def test_a_70b_scenario_is_not_asked_about_70b(issue_scenario):
    question = follow_ups(issue_scenario)[1].question
    assert "the model is" not in question  # it already is 70B
    assert "TP=4" in question and "instead of 2" in question


def test_a_70b_scenario_at_tp4_is_asked_about_tp8():
    scenario = make_scenario(
        drill_deployment(model="llama-3.1-70b", gpu="h100-sxm", tp=4),
        batch_size=64,
        context_tokens=4096,
        budget_tokens=2048,
        prompt_tokens=4096,
    )
    question = follow_ups(scenario)[1].question
    assert "TP=4" not in question and "TP=8" in question


def test_a_70b_scenario_at_tp8_is_asked_about_an_8b():
    # 8B BF16 on one L40S: 48 GB x 0.9 - 16.06 GB = 27.14 GB of KV room, and a 4K sequence needs
    # 4,096 x 131,072 B = 0.537 GB: 50 sequences, enough for 48 on one GPU.
    scenario = make_scenario(
        drill_deployment(model="llama-3.1-70b", gpu="l40s", tp=8),
        batch_size=48,
        context_tokens=4096,
        budget_tokens=2048,
        prompt_tokens=4096,
    )
    question = follow_ups(scenario)[1].question
    assert "llama-3.1-8b" in question and "TP=1" in question


def test_the_70b_question_asks_for_the_tp_that_holds_the_load():
    # 70B BF16 on L40S: at TP=4 48 GB x 0.9 - 35.28 GB leaves 7.92 GB, and a 4K sequence needs
    # 4,096 x 327,680 B / 4 = 0.336 GB per GPU: 23 sequences, short of 48. At TP=8: 25.56 GB
    # left, 0.168 GB each: 152 sequences.
    scenario = make_scenario(
        drill_deployment(model="llama-3.1-8b", gpu="l40s"),
        batch_size=48,
        context_tokens=4096,
        budget_tokens=2048,
        prompt_tokens=4096,
    )
    seventy = follow_ups(scenario)[1]
    assert "llama-3.1-70b" in seventy.question and "TP=8" in seventy.question
    assert "does not fit" not in seventy.answer


@pytest.mark.parametrize("scenario", _drawn(60, seed=11))
def test_the_scale_question_never_poses_the_scenario_itself(scenario):
    dep = scenario.deployment
    question = follow_ups(scenario)[1].question
    asked_model = next(slug for slug in DRILL_MODELS if slug in question)
    asked_tp = int(re.search(r"TP=(\d+)", question).group(1))
    assert (asked_model, asked_tp) != (dep.model.slug, dep.tp), question
    # "What if it were 70B?" only of a model with under half the 70B's parameters.
    if dep.model.total_params >= PARAMS_70B / 2:
        assert "the model is llama-3.1-70b" not in question, question


# 4. Choices that read as English


def test_fix_labels_are_imperatives_and_choice_labels_noun_phrases():
    for key, label in FIXES.items():
        assert label.split()[0] in IMPERATIVES, (key, label)
    for key, label in {**P99_CHOICES, **SIGNALS}.items():
        assert label.split()[0] in DETERMINERS, (key, label)


def test_feedback_never_puts_a_clause_where_a_noun_belongs():
    # TITLES are clauses ("the batch or the context grew"): after "address", "points at",
    # "fingerprint of" or "second is" they do not read as English.
    texts = []
    for symptom in SYMPTOMS:
        scenario = make_scenario(
            drill_deployment(model="llama-3.1-8b", gpu="h100-sxm"),
            batch_size=64,
            context_tokens=4096,
            budget_tokens=2112,
            prompt_tokens=4096,
            symptom=symptom,
            speculation=Speculation(3, 0.3) if symptom == "speculation" else None,
        )
        ranking = SYMPTOMS[symptom].ranking
        swapped = (ranking[0], ranking[2], ranking[1], ranking[3])
        wrong = (ranking[1], ranking[0], ranking[2], ranking[3])
        for fix in FIXES:
            for order in (swapped, wrong):
                result = grade(scenario, Answer(fix=fix, ranking=order, signal="mean_itl"))
                texts += [item.feedback for item in result.items]
    text = "\n".join(texts)
    assert "You chose to turn CUDA graphs on" in text
    for title in TITLES.values():
        for before in ("address ", "points at ", "fingerprint of ", "second is ", "try "):
            assert before + title not in text, before + title


# 5. A chart where the floor is visible beside the chunked step


def test_the_answer_chart_shows_a_small_floor_beside_a_large_step(issue_scenario):
    fig = answer_figure(grade(issue_scenario, Answer(floor_seconds=FLOOR_SECONDS)))
    assert fig.layout.yaxis.type == "log"
    low, high = fig.layout.yaxis.range
    # The floor bar's height as a share of the axis: on a linear axis from 0 it would be
    # 15.82 / 585.29 = 2.7%, a sliver.
    share = (math.log10(FLOOR_SECONDS / MS) - low) / (high - low)
    assert share >= 0.15
    assert high >= math.log10(MIXED_SECONDS / MS)
    worked = fig.data[1]
    assert ms_text(FLOOR_SECONDS / MS) in worked.text
    assert ms_text(MIXED_SECONDS / MS) in worked.text
    assert fig.data[0].text[0] == ms_text(FLOOR_SECONDS / MS)


# 6. The same answers as `itlkit explain` on the same inputs


@pytest.mark.parametrize("scenario", [*_drawn(60, seed=3), worked_example()])
def test_worked_numbers_agree_with_explain(scenario):
    if scenario.speculation is not None:  # explain prices the verification step its own way
        values = explain(scenario.deployment, batch_size=scenario.batch_size,
                         context_tokens=scenario.context_tokens,
                         speculation=scenario.speculation).values  # fmt: skip
        w = worked_numbers(scenario)
        assert values["spec_per_token_seconds"] == pytest.approx(w.per_token_seconds, rel=1e-12)
        return
    s = replace(scenario, engine="vllm")  # explain prices vLLM's mixed step
    w = worked_numbers(s)
    for budget, mixed_seconds, steps in (
        (s.budget_tokens, w.mixed_step_seconds, w.prefill_steps),
        (s.smaller_budget_tokens, w.smaller_mixed_step_seconds, w.smaller_prefill_steps),
    ):
        values = explain(
            s.deployment,
            batch_size=s.batch_size,
            context_tokens=s.context_tokens,
            chunk_tokens=budget - s.batch_size,  # explain's --chunk: the prompt tokens in a step
            prompt_tokens=s.prompt_tokens,
        ).values
        assert values["mixed_step_tokens"] == budget
        assert values["mixed_step_seconds"] == pytest.approx(mixed_seconds, rel=1e-12)
        assert values["prefill_steps"] == steps
    assert values["floor_seconds"] == pytest.approx(w.floor_seconds, rel=1e-12)
    assert values["kv_read_seconds"] == pytest.approx(w.kv_read_seconds, rel=1e-12)
    assert values["weight_read_seconds"] == pytest.approx(w.weight_read_seconds, rel=1e-12)
    assert values["ridge_flops_per_byte"] == pytest.approx(w.ridge_flops_per_byte, rel=1e-12)


@pytest.mark.parametrize("which", ["worked example", "issue"])
def test_worked_numbers_agree_with_the_cli(which, issue_scenario, capsys):
    s = worked_example() if which == "worked example" else issue_scenario
    w, dep = worked_numbers(s), s.deployment
    code = main(
        ["explain", "--json", "--model", dep.model.slug, "--gpu", dep.gpu.slug,
         "--weights-precision", dep.weights.name, "--kv-precision", dep.kv.name,
         "--tp", str(dep.tp), "--batch", str(s.batch_size), "--context", str(s.context_tokens),
         "--chunk", str(s.budget_tokens - s.batch_size), "--prompt", str(s.prompt_tokens)]
    )  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["mixed_step_tokens"] == s.budget_tokens
    assert out["prefill_steps"] == w.prefill_steps
    assert out["floor_seconds"] == pytest.approx(w.floor_seconds, rel=1e-12)
    assert out["kv_read_seconds"] == pytest.approx(w.kv_read_seconds, rel=1e-12)
    assert out["mixed_step_flops"] == pytest.approx(w.mixed_matmul_flops, rel=1e-12)
    if dep.tp == 1:  # the CLI counts TP's all-reduce, which the drill's question leaves out
        assert out["mixed_step_seconds"] == pytest.approx(w.mixed_step_seconds, rel=1e-12)
