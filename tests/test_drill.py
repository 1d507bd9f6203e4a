"""The interview drill graded against the reference answer (shared/spec/worked-example.txt):
Llama 3.1 8B BF16 on one H100 SXM, 64 sequences at 4K, a 2,048-token chunk -> floor 15.05 ms
(weights 4.79 ms + KV 10.26 ms), a chunked step of ~79 ms, 8 steps for a 4,096-token prompt in
512-token chunks (2 in 2,048-token ones), a 70B TP=4 weight floor of 10.5 ms (35.3 GB per GPU).
In vLLM's terms the chunks ride beside 64 decodes, so the budgets are 2,112 and 576 tokens."""

import dataclasses

import numpy as np
import pytest
from _reference import CHUNK_512_MS, CHUNK_2048_MS, WHOLE_PROMPT_MS, ms_text
from hypothesis import given
from hypothesis import strategies as st

from itlkit.diagnosis.scoring import CAUSES
from itlkit.drill.content import SYMPTOMS
from itlkit.drill.followups import follow_ups
from itlkit.drill.grading import (
    CLOSE,
    CORRECT,
    HIRE,
    MISSING,
    STRONG_HIRE,
    WEAK,
    WRONG,
    Answer,
    grade,
    verdict_for,
)
from itlkit.drill.scenarios import (
    DRILL_GPUS,
    DRILL_MODELS,
    TP_CHOICES,
    draw_scenario,
    drill_deployment,
    make_scenario,
    question_text,
    worked_example,
    worked_numbers,
)
from itlkit.errors import ConfigError
from itlkit.physics.model import check_tensor_parallel
from itlkit.physics.roofline import capacity, mixed_step
from itlkit.physics.speculative import Speculation

MS = 1e-3
REFERENCE = Answer(
    floor_seconds=15.05 * MS,
    kv_read_seconds=10.26 * MS,
    mixed_step_seconds=79 * MS,
    ranking=CAUSES,
    p99_meaning="slow_steps",
    signal="itl_buckets_vs_arrivals",
    fix="lower_budget",
    checked_ttft=True,
    prefill_steps=8,
)


@pytest.fixture(scope="module")
def example():
    return worked_example()


def test_worked_numbers_are_the_reference_answers(example):
    w = worked_numbers(example)
    assert w.weight_bytes == pytest.approx(16.06e9, abs=0.005e9)
    assert w.kv_bytes == pytest.approx(34.36e9, abs=0.005e9)
    assert w.weight_read_seconds == pytest.approx(4.79 * MS, abs=0.005 * MS)
    assert w.kv_read_seconds == pytest.approx(10.26 * MS, abs=0.005 * MS)
    assert w.floor_seconds == pytest.approx(15.05 * MS, abs=0.005 * MS)
    assert w.mixed_matmul_seconds == pytest.approx(68.6 * MS, abs=0.05 * MS)
    assert round(w.mixed_step_seconds / MS) == 79
    assert round(w.over_floor, 1) == 5.2
    assert round(w.smaller_mixed_step_seconds / MS) == 29
    assert (w.prefill_steps, w.smaller_prefill_steps) == (2, 8)
    assert round(w.ridge_flops_per_byte) == 295
    assert example.observed_p50_seconds == pytest.approx(24.0 * MS)
    assert round(w.observed_mbu, 2) == 0.63  # "a measured 24 ms p50 is 63% MBU"


def test_reference_answer_is_correct_everywhere(example):
    result = grade(example, REFERENCE)
    for key in ("floor", "kv_term", "mixed_step"):
        assert result.item(key).verdict == CORRECT, result.item(key).feedback
    assert [i.verdict for i in result.items] == [CORRECT] * len(result.items)
    assert result.mistakes == ()
    assert result.rubric.level == STRONG_HIRE
    assert result.rubric.missing == ()
    floor = result.item("floor").feedback
    assert "16.06 GB" in floor and "34.36 GB" in floor and "15.05 ms" in floor
    assert ms_text(CHUNK_2048_MS) in result.item("mixed_step").feedback
    assert "5.2x the floor" in result.item("mixed_step").feedback
    assert ms_text(CHUNK_512_MS) in result.item("fix").feedback
    assert "8 steps instead of 2" in result.item("fix").feedback
    assert "24.00 ms" in result.sanity and "63%" in result.sanity


@pytest.mark.parametrize(
    ("factor", "verdict"),
    [(1.0, CORRECT), (1.049, CORRECT), (0.951, CORRECT), (1.1, CLOSE), (0.85, CLOSE),
     (1.25, WRONG), (0.5, WRONG)],
)  # fmt: skip
def test_tolerances(example, factor, verdict):
    floor = worked_numbers(example).floor_seconds
    item = grade(example, Answer(floor_seconds=floor * factor)).item("floor")
    assert item.verdict == verdict
    assert item.relative_error == pytest.approx(abs(factor - 1))


@given(
    worked=st.floats(1e-4, 10.0),
    error=st.floats(-0.2, 0.2),
)
def test_verdict_follows_relative_error(worked, error):
    verdict, measured = verdict_for(answer=worked * (1 + error), worked=worked)
    assert measured == pytest.approx(abs(error), abs=1e-9)
    if abs(error) < 0.0499:
        assert verdict == CORRECT
    elif abs(error) > 0.0501:
        assert verdict in (CLOSE, WRONG)
        assert verdict == CLOSE or abs(error) > 0.1999


def test_blank_numbers_are_not_answered(example):
    result = grade(example, Answer())
    assert {i.verdict for i in result.items} == {MISSING}
    assert result.rubric.level == WEAK
    assert "15.05 ms" in result.item("floor").feedback  # the worked number is still shown


def test_floor_from_weights_alone(example):
    result = grade(example, dataclasses.replace(REFERENCE, floor_seconds=4.79 * MS))
    keys = [m.key for m in result.mistakes]
    assert keys == ["floor_from_weights_alone"]
    assert result.item("floor").verdict == WRONG
    detail = result.mistakes[0].detail
    assert "4.79 ms" in detail and "34.36 GB" in detail and "2.1x" in detail
    assert result.rubric.level == WEAK


def test_a_right_floor_is_not_the_weights_alone_mistake(example):
    result = grade(example, dataclasses.replace(REFERENCE, floor_seconds=15.0 * MS))
    assert "floor_from_weights_alone" not in [m.key for m in result.mistakes]


def test_weights_alone_is_no_mistake_when_kv_is_negligible():
    # 70B at batch 8 x 1K: the KV term is 2% of the floor, so a weight-only floor is right.
    scenario = make_scenario(
        drill_deployment(model="llama-3.1-70b", gpu="h200-sxm", tp=4),
        batch_size=8,
        context_tokens=1024,
        budget_tokens=2048,
        prompt_tokens=4096,
    )
    w = worked_numbers(scenario)
    assert w.kv_read_seconds / w.floor_seconds < 0.05
    result = grade(scenario, Answer(floor_seconds=w.weight_read_seconds))
    assert result.item("floor").verdict == CORRECT
    assert result.mistakes == ()


def test_wrong_ranking_is_flagged(example):
    wrong = ("host_overhead", "prefill_interference", "batch_or_context_growth", "preemption")
    item = grade(example, dataclasses.replace(REFERENCE, ranking=wrong)).item("ranking")
    assert item.verdict == WRONG
    assert "points at prefill interference first, not host overhead" in item.feedback
    result = grade(example, dataclasses.replace(REFERENCE, ranking=wrong))
    assert result.rubric.level == WEAK
    assert "right first cause" in result.rubric.missing


def test_ranking_partial_credit_and_bad_rankings(example):
    swapped = ("prefill_interference", "host_overhead", "batch_or_context_growth", "preemption")
    item = grade(example, Answer(ranking=swapped)).item("ranking")
    assert item.verdict == CLOSE
    assert "second is batch or context growth" in item.feedback
    twice = ("prefill_interference", "prefill_interference", "host_overhead", "preemption")
    assert grade(example, Answer(ranking=twice)).item("ranking").verdict == WRONG
    no_first = (None, "prefill_interference", "host_overhead", "preemption")
    item = grade(example, Answer(ranking=no_first)).item("ranking")
    assert item.verdict == WRONG and "rank 1 is blank" in item.feedback
    only_top_two = ("prefill_interference", "batch_or_context_growth")
    assert grade(example, Answer(ranking=only_top_two)).item("ranking").verdict == CORRECT
    assert grade(example, Answer(ranking=(None,) * 4)).item("ranking").verdict == MISSING
    with pytest.raises(ConfigError, match="unknown causes"):
        grade(example, Answer(ranking=("gpu_contention",)))


def test_p99_as_slowest_request(example):
    result = grade(example, dataclasses.replace(REFERENCE, p99_meaning="slowest_request"))
    assert [m.key for m in result.mistakes] == ["p99_as_slowest_request"]
    assert result.item("p99").verdict == WRONG
    assert ms_text(CHUNK_2048_MS) in result.mistakes[0].detail
    assert result.rubric.level == HIRE


def test_budget_lowered_without_ttft_check(example):
    result = grade(example, dataclasses.replace(REFERENCE, checked_ttft=False))
    assert [m.key for m in result.mistakes] == ["budget_without_ttft_check"]
    assert "into 8 steps (from 2)" in result.mistakes[0].detail
    assert result.rubric.level == HIRE
    # Disaggregating does not change the budget, so there is nothing to check there.
    other = grade(example, dataclasses.replace(REFERENCE, fix="disaggregate", checked_ttft=False))
    assert other.mistakes == ()
    assert other.item("fix").verdict == CORRECT


def test_gpu_utilisation_signal(example):
    result = grade(example, dataclasses.replace(REFERENCE, signal="gpu_utilisation"))
    assert [m.key for m in result.mistakes] == ["gpu_utilisation"]
    assert result.item("signal").verdict == WRONG
    assert result.rubric.level == HIRE


def test_turning_chunked_prefill_off_is_priced(example):
    item = grade(example, dataclasses.replace(REFERENCE, fix="chunked_off")).item("fix")
    assert item.verdict == WRONG
    whole = mixed_step(example.deployment, batch_size=64, context_tokens=4096, chunk_tokens=4096)
    assert f"{whole.step_seconds / MS:.2f} ms" in item.feedback
    assert whole.step_seconds > worked_numbers(example).mixed_step_seconds


def test_rubric_levels(example):
    weak = Answer(floor_seconds=4.79 * MS, signal="mean_itl", fix="add_replicas")
    assert grade(example, weak).rubric.level == WEAK
    hire = Answer(
        floor_seconds=15.05 * MS,
        kv_read_seconds=10.26 * MS,
        ranking=CAUSES,
        fix="lower_budget",
        checked_ttft=True,
    )
    result = grade(example, hire)
    assert result.rubric.level == HIRE
    assert "the chunked step quantified" in result.rubric.missing
    assert "the TTFT price of a smaller budget" in result.rubric.missing
    # Close numbers (within 20%) still earn Hire; the right cause with the wrong fix does not.
    close = dataclasses.replace(hire, floor_seconds=17 * MS, kv_read_seconds=11.5 * MS)
    assert grade(example, close).rubric.level == HIRE
    assert grade(example, dataclasses.replace(hire, fix="add_replicas")).rubric.level == WEAK
    assert grade(example, REFERENCE).rubric.level == STRONG_HIRE


def test_prefill_steps_off_by_one_is_close(example):
    assert grade(example, Answer(prefill_steps=7)).item("prefill_steps").verdict == CLOSE
    assert grade(example, Answer(prefill_steps=2)).item("prefill_steps").verdict == WRONG


@pytest.mark.parametrize(
    ("symptom", "top", "signal", "fix"),
    [
        ("shift", "batch_or_context_growth", "p50_vs_running", "cap_or_fp8_kv"),
        ("host", "host_overhead", "nsight_gaps", "cuda_graphs"),
        ("gaps", "preemption", "preemptions", "add_replicas"),
    ],
)
def test_other_symptoms_change_the_right_answer(symptom, top, signal, fix):
    scenario = dataclasses.replace(worked_example(), symptom=symptom)
    assert scenario.top_cause == top
    answer = dataclasses.replace(
        REFERENCE, ranking=SYMPTOMS[symptom].ranking, signal=signal, fix=fix
    )
    result = grade(scenario, answer)
    assert result.item("ranking").verdict == CORRECT
    assert result.item("signal").verdict == CORRECT
    assert result.item("fix").verdict == CORRECT
    assert result.rubric.level == STRONG_HIRE
    # The interference answer is now the wrong one.
    assert grade(scenario, REFERENCE).item("ranking").verdict == WRONG
    assert grade(scenario, REFERENCE).item("fix").verdict == WRONG


def test_host_symptom_p50_is_far_above_the_floor():
    scenario = make_scenario(
        drill_deployment(model="llama-3.1-8b", gpu="h100-sxm"),
        batch_size=64,
        context_tokens=4096,
        budget_tokens=2048,
        prompt_tokens=4096,
        symptom="host",
    )
    result = grade(scenario, Answer())
    assert result.worked.observed_mbu < 0.3
    assert "too low for bandwidth alone" in result.sanity


def test_follow_ups_carry_this_scenarios_numbers(example):
    ttft, seventy, chunked_off = follow_ups(example)
    assert (
        "TTFT" in ttft.question
        and "2 steps" in ttft.answer
        and ms_text(CHUNK_2048_MS) in ttft.answer
    )
    assert "llama-3.1-70b" in seventy.question and "TP=4" in seventy.question
    assert "35.28 GB" in seventy.answer and "10.53 ms" in seventy.answer  # 35.3 GB, 10.5 ms
    assert "all-reduce" in seventy.answer and "does not fit" not in seventy.answer
    assert "chunked prefill off" in chunked_off.question
    assert ms_text(WHOLE_PROMPT_MS) in chunked_off.answer and "worse" in chunked_off.answer


def test_seventy_b_follow_up_warns_when_no_tp_holds_the_load():
    # 70B BF16 at TP=8 on L40S: 48 GB x 0.9 - 141.1 GB / 8 = 25.56 GB for KV, and a 32K sequence
    # needs 32,768 x 327,680 B / 8 = 1.34 GB per GPU: 19 sequences, short of the 32 running.
    scenario = make_scenario(
        drill_deployment(model="llama-3.1-8b", gpu="l40s", tp=4),
        batch_size=32,
        context_tokens=32768,
        budget_tokens=2048,
        prompt_tokens=4096,
    )
    seventy = follow_ups(scenario)[1]
    assert "TP=8" in seventy.question
    assert "does not fit" in seventy.answer


def test_question_poses_the_scenario_without_the_answers(example):
    text = " ".join(question_text(example))
    for fact in ("llama-3.1-8b", "32 layers", "8 KV heads", "3.35 TB/s", "64 running", "4,096",
                 "max_num_batched_tokens) of 2,112", "budget of 576 tokens",
                 "24.00 ms"):  # fmt: skip
        assert fact in text, fact
    for answer in ("15.05", "10.26", "78.8", "79 ms"):
        assert answer not in text


def test_scenarios_reproduce_by_seed():
    first = [draw_scenario(np.random.default_rng(2026)) for _ in range(2)]
    assert first[0] == first[1]
    rng_a, rng_b = np.random.default_rng(11), np.random.default_rng(11)
    assert [draw_scenario(rng_a) for _ in range(5)] == [draw_scenario(rng_b) for _ in range(5)]
    assert draw_scenario(np.random.default_rng(1)) != draw_scenario(np.random.default_rng(2))


def test_drawn_scenarios_are_always_valid_and_varied():
    rng = np.random.default_rng(0)
    scenarios = [draw_scenario(rng) for _ in range(300)]
    for s in scenarios:
        dep = s.deployment
        assert dep.model.slug in DRILL_MODELS and dep.gpu.slug in DRILL_GPUS
        check_tensor_parallel(dep.model, tp=dep.tp)
        dep.validate()
        assert capacity(dep, context_tokens=s.context_tokens).fits(batch_size=s.batch_size)
        # The smallest TP that works: every smaller choice is invalid or does not fit.
        for smaller in (tp for tp in TP_CHOICES if tp < dep.tp):
            try:
                candidate = drill_deployment(
                    model=dep.model.slug,
                    gpu=dep.gpu.slug,
                    weight_precision=dep.weights.name,
                    kv_precision=dep.kv.name,
                    tp=smaller,
                )
            except ConfigError:
                continue
            cap = capacity(candidate, context_tokens=s.context_tokens)
            assert not cap.fits(batch_size=s.batch_size)
        w = worked_numbers(s)
        assert w.floor_seconds == pytest.approx(w.weight_read_seconds + w.kv_read_seconds)
        assert w.mixed_step_seconds > w.floor_seconds
        assert w.smaller_prefill_steps > w.prefill_steps >= 2
        assert s.prompt_tokens > s.chunk_tokens > s.smaller_chunk_tokens
        if s.speculation is None:
            assert w.mixed_tokens == s.budget_tokens
        else:  # the verification step: every sequence's k drafts and its own token
            assert w.mixed_tokens == s.batch_size * (s.speculation.k + 1)
            assert w.per_token_seconds > w.plain_step_seconds  # posed only where it costs
        assert grade(s, Answer()).rubric.level == WEAK
    assert len({s.deployment.model.slug for s in scenarios}) >= 6
    assert len({s.deployment.gpu.slug for s in scenarios}) == len(DRILL_GPUS)
    assert {s.symptom for s in scenarios} == set(SYMPTOMS)
    assert len({s.deployment.tp for s in scenarios}) >= 3


def test_every_drawn_scenario_grades_its_own_worked_numbers_as_correct():
    rng = np.random.default_rng(5)
    for _ in range(50):
        s = draw_scenario(rng)
        w = worked_numbers(s)
        answer = Answer(
            floor_seconds=w.floor_seconds,
            kv_read_seconds=w.kv_read_seconds,
            mixed_step_seconds=w.mixed_step_seconds,
            ranking=s.expected_ranking,
            p99_meaning="slow_steps",
            signal={
                "bimodal": "itl_buckets_vs_arrivals",
                "shift": "p50_vs_running",
                "host": "nsight_gaps",
                "gaps": "preemptions",
                "speculation": "spec_counters",
            }[s.symptom],
            fix={
                "bimodal": "lower_budget",
                "shift": "cap_or_fp8_kv",
                "host": "cuda_graphs",
                "gaps": "cap_or_fp8_kv",
                "speculation": "fewer_drafts",
            }[s.symptom],
            checked_ttft=True,
            prefill_steps=w.smaller_prefill_steps,
        )
        assert grade(s, answer).rubric.level == STRONG_HIRE


def test_bad_input():
    with pytest.raises(ConfigError, match="does not fit|weights need"):
        make_scenario(
            drill_deployment(model="llama-3.1-70b", gpu="h100-sxm"),
            batch_size=64,
            context_tokens=4096,
            budget_tokens=2048,
            prompt_tokens=4096,
        )
    with pytest.raises(ConfigError, match="unknown symptom"):
        make_scenario(
            drill_deployment(model="llama-3.1-8b", gpu="h100-sxm"),
            batch_size=8,
            context_tokens=1024,
            budget_tokens=2048,
            prompt_tokens=4096,
            symptom="gpu contention",
        )
    with pytest.raises(ConfigError, match="used up by 64 decodes"):
        make_scenario(
            drill_deployment(model="llama-3.1-8b", gpu="h100-sxm"),
            batch_size=64,
            context_tokens=1024,
            budget_tokens=2048,
            prompt_tokens=4096,
            smaller_budget_tokens=64,
        )
    with pytest.raises(ConfigError, match="unknown fix"):
        grade(worked_example(), Answer(fix="more_gpus"))
    with pytest.raises(ConfigError, match="unknown signal"):
        grade(worked_example(), Answer(signal="vibes"))


def test_a_speculative_scenario_asks_for_the_verification_step_derived_by_hand():
    # Llama 3.1 8B on an H100 SXM (the reference's terms), 128 sequences at 2K, n-gram drafts
    # k = 3 accepted at 0.3 a draft. A verification step multiplies 128 x 4 = 512 tokens, past
    # the ~295-token ridge: 512 x 2 x 8.03e9 FLOP at 50% of 989 TFLOP/s = 16.63 ms, plus the
    # 128 x 2,048 x 131,072 B KV read at 3.35 TB/s = 10.26 ms: 26.89 ms. A step emits
    # 1 + .3 + .09 + .027 = 1.417 tokens, so a token costs 18.98 ms against the plain step's
    # 4.79 + 10.26 = 15.06 ms: speculation costs here.
    params = 8_030_261_248
    gemm = 512 * 2 * params / (0.5 * 989e12)
    kv = 128 * 2048 * 131_072 / 3.35e12
    s = make_scenario(
        drill_deployment(model="llama-3.1-8b", gpu="h100-sxm"), batch_size=128,
        context_tokens=2048, budget_tokens=4096, prompt_tokens=8192, symptom="speculation",
        speculation=Speculation(3, 0.3),
    )  # fmt: skip
    w = worked_numbers(s)
    assert w.mixed_tokens == 512 and w.mixed_compute_bound
    assert w.mixed_step_seconds == pytest.approx(gemm + kv, rel=1e-3)
    assert w.per_token_seconds == pytest.approx((gemm + kv) / 1.417, rel=1e-3)
    assert w.plain_step_seconds == pytest.approx(params * 2 / 3.35e12 + kv, rel=1e-3)
    # the drafts take the budget: 4,096 - 512 leaves chunks of 3,584; at 1,024, of 512
    assert (s.chunk_tokens, s.smaller_chunk_tokens, w.smaller_prefill_steps) == (3584, 512, 16)
    text = " ".join(question_text(s))
    assert "128 sequences x 4 tokens" in text and "each decode takes 4 of it" in text
    right = Answer(mixed_step_seconds=gemm + kv, ranking=s.expected_ranking, fix="fewer_drafts",
                   signal="spec_counters")  # fmt: skip
    result = grade(s, right)
    assert result.item("mixed_step").verdict == CORRECT
    assert result.item("fix").verdict == CORRECT and result.item("signal").verdict == CORRECT
    assert result.item("ranking").verdict == CORRECT
    assert grade(s, Answer(fix="lower_budget")).item("fix").verdict == WRONG
    with pytest.raises(ConfigError, match="speculation symptom"):
        make_scenario(s.deployment, batch_size=128, context_tokens=2048, budget_tokens=4096,
                      prompt_tokens=8192, symptom="bimodal",
                      speculation=Speculation(3, 0.3))  # fmt: skip
    ups = {f.key: f for f in follow_ups(s)}
    # at batch 1 the step is the weights + 2K of KV (4.87 ms) whatever its 4 tokens: / 1.417
    alone = (params * 2 + 2048 * 131_072) / 3.35e12
    assert ms_text(alone / 1.417 * 1e3) in ups["speculation_by_load"].answer
