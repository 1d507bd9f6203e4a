"""Notebook 05's drill driven from Python: type an answer, click "check my answer", read the
feedback and the figure. Reference numbers: shared/spec/worked-example.txt."""

import numpy as np
import pytest
from _reference import CHUNK_512_MS, CHUNK_2048_MS, ms_text

from itlkit.diagnosis.scoring import CAUSES
from itlkit.drill.followups import follow_ups
from itlkit.drill.scenarios import draw_scenario, worked_numbers
from itlkit.plots.drill import answer_figure, trace_data
from itlkit.widgets.drill import InterviewDrill


def _answer_reference(drill, *, floor_ms=15.05, ranking=CAUSES, checked_ttft=True):
    drill.floor.value = floor_ms
    drill.kv_term.value = 10.26
    drill.mixed_step.value = 79
    drill.prefill_steps.value = 8
    padded = tuple(ranking) + (None,) * (len(drill.ranks) - len(ranking))
    for control, cause in zip(drill.ranks, padded, strict=True):
        control.value = cause
    drill.p99.value = "slow_steps"
    drill.signal.value = "itl_buckets_vs_arrivals"
    drill.fix.value = "lower_budget"
    drill.ttft_check.value = checked_ttft


@pytest.fixture
def drill():
    return InterviewDrill(seed=3, worked_example_first=True)


def test_poses_the_worked_example_without_answers(drill):
    question = drill.question.value
    assert "Scenario 1 (seed 3)" in question
    assert "llama-3.1-8b" in question and "64 running sequences" in question
    assert "15.05" not in question and drill.feedback.value == ""
    assert all(y is None for trace in drill.figure.data for y in trace.y)
    assert all(button.disabled for button in drill.reveal_buttons)


def test_reference_answer_is_graded_correct(drill):
    _answer_reference(drill)
    drill.check_button.click()
    feedback = drill.feedback.value
    assert "Rubric: Strong Hire" in feedback
    assert feedback.count(">correct</b>") == 8
    for number in (
        "15.05 ms",
        "10.26 ms",
        ms_text(CHUNK_2048_MS),
        ms_text(CHUNK_512_MS),
        "34.36 GB",
    ):
        assert number in feedback, number
    assert "None of the classic mistakes" in feedback
    yours, worked = drill.figure.data
    assert list(yours.y) == pytest.approx([15.05, 10.26, 79.0])
    assert list(worked.y) == pytest.approx([15.0508, 10.2566, CHUNK_2048_MS], abs=1e-3)
    assert "rubric: Strong Hire" in drill.figure.layout.title.text


def test_weights_only_floor_and_wrong_ranking_are_flagged(drill):
    wrong = ("host_overhead", "preemption", "prefill_interference", "batch_or_context_growth")
    _answer_reference(drill, floor_ms=4.79, ranking=wrong, checked_ttft=False)
    drill.signal.value = "gpu_utilisation"
    drill.p99.value = "slowest_request"
    drill.check_button.click()
    feedback = drill.feedback.value
    assert "Rubric: Weak" in feedback
    assert "Ranking wrong" in feedback
    assert "Classic mistakes in your answer" in feedback
    for title in (
        "floor from the weights alone",
        "p99 read as the slowest request",
        "token budget lowered without checking TTFT p99",
        "GPU utilisation as the signal",
    ):
        assert title in feedback, title
    assert drill.figure.data[0].y[0] == pytest.approx(4.79)


def test_blank_answer_is_weak_and_shows_the_worked_numbers(drill):
    result = drill.check()
    assert result.rubric.level == "Weak"
    assert "not answered" in drill.feedback.value
    assert "15.05 ms" in drill.feedback.value
    assert list(drill.figure.data[0].y) == [None, None, None]


def test_follow_ups_unlock_after_a_check(drill):
    drill.reveal(1)
    assert drill.follow_up_answers[1].value == ""
    drill.check_button.click()
    assert not any(button.disabled for button in drill.reveal_buttons)
    drill.reveal_buttons[1].click()
    assert "35.28 GB" in drill.follow_up_answers[1].value
    assert "10.53 ms" in drill.follow_up_answers[1].value
    assert drill.follow_up_answers[0].value == ""  # only the one clicked
    assert drill.follow_ups.titles[2] == (
        "Someone proposes turning chunked prefill off to get rid of the slow steps. Good idea?"
    )


def test_new_scenario_draws_from_the_seed_and_clears(drill):
    _answer_reference(drill)
    drill.check_button.click()
    drill.new_button.click()
    expected = draw_scenario(np.random.default_rng(3))
    assert drill.scenario == expected
    assert "Scenario 2 (seed 3)" in drill.question.value
    assert drill.floor.value == 0 and drill.ranks[0].value is None and drill.fix.value is None
    assert drill.feedback.value == "" and drill.grade is None
    assert all(button.disabled for button in drill.reveal_buttons)
    assert all(a.value == "" for a in drill.follow_up_answers)
    assert follow_ups(expected)[0].question in drill.follow_up_questions[0].value
    # The worked numbers of the new scenario come back after a check.
    drill.floor.value = worked_numbers(expected).floor_seconds * 1e3
    result = drill.check()
    assert result.item("floor").verdict == "correct"


def test_same_seed_same_scenarios():
    a, b = InterviewDrill(seed=42), InterviewDrill(seed=42)
    assert a.scenario == b.scenario
    a.new_button.click()
    b.new_button.click()
    assert a.scenario == b.scenario


def test_figure_builder_without_widgets():
    fig = answer_figure(None)
    assert [t.name for t in fig.data] == ["your answer", "worked"]
    assert fig.layout.yaxis.title.text == "time (ms, log scale)"
    assert trace_data(None)[1]["y"] == [None, None, None]


def test_checking_survives_the_browsers_echo(drill):
    from _frontend import echo_trace_deltas

    _answer_reference(drill)
    drill.check_button.click()
    echo_trace_deltas(drill.figure)
