"""Notebook 05's interview drill: a scenario is posed, the user types numbers and picks causes,
a signal and a fix, then "check my answer" grades it (feedback HTML and a FigureWidget updated in
place) and unlocks the follow-up questions."""

from __future__ import annotations

import html

import ipywidgets as widgets
import numpy as np

from itlkit.diagnosis.scoring import CAUSES, TITLES
from itlkit.drill.content import FIXES, P99_CHOICES, SIGNALS
from itlkit.drill.followups import follow_ups
from itlkit.drill.grading import CLOSE, CORRECT, MISSING, STRONG_HIRE, WEAK, Answer, Grade, grade
from itlkit.drill.scenarios import Scenario, draw_scenario, question_text, worked_example
from itlkit.plots.drill import answer_figure, figure_title, trace_data, y_range
from itlkit.units import MILLISECOND
from itlkit.widgets._figure import FitFiguresToWidth, figure_widget, update_traces
from itlkit.widgets._style import checkbox, columns

_WIDE = {"description_width": "190px"}
_LAYOUT = widgets.Layout(width="560px")
_ITEM_TITLES = {
    "floor": "bandwidth floor",
    "kv_term": "KV term",
    "mixed_step": "step with a chunk",
    "ranking": "ranked causes",
    "p99": "what p99 describes",
    "signal": "signal to read",
    "fix": "fix",
    "prefill_steps": "TTFT price (prefill steps)",
}
_VERDICT_COLOURS = {CORRECT: "#2a7a2a", CLOSE: "#b07d00", MISSING: "#777777"}
_LEVEL_COLOURS = {WEAK: "#c00", STRONG_HIRE: "#2a7a2a"}


def _number(description: str) -> widgets.BoundedFloatText:
    return widgets.BoundedFloatText(
        value=0.0, min=0.0, max=1e6, step=0.01, description=description, style=_WIDE
    )


def _choice(kind, description: str, menu: dict):
    return kind(
        options=[(label, key) for key, label in menu.items()],
        value=None,
        description=description,
        style=_WIDE,
        layout=_LAYOUT,
    )


class InterviewDrill:
    """Scenario, answer inputs, check button, feedback, figure and follow-ups (notebook 05)."""

    def __init__(self, *, seed: int = 0, worked_example_first: bool = False):
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.number = 1
        self.scenario: Scenario = worked_example() if worked_example_first else self._draw()
        self.grade: Grade | None = None

        self.new_button = widgets.Button(description="new scenario", icon="refresh")
        self.question = widgets.HTML()
        self._build_answer_controls()
        self.check_button = widgets.Button(description="check my answer", button_style="primary")
        self.feedback = widgets.HTML()
        self.figure = figure_widget(answer_figure(None))
        self._build_follow_ups()
        self._wire()
        self.view = self._layout()
        self._show_scenario()

    def _build_answer_controls(self) -> None:
        """The inputs: numbers (ms, count), ranked causes, what p99 means, signal, fix, TTFT."""
        self.floor = _number("floor (ms)")
        self.kv_term = _number("KV term (ms)")
        self.mixed_step = _number("step with a chunk (ms)")
        self.prefill_steps = widgets.BoundedIntText(
            value=0, min=0, max=1_000_000, description="prefill steps (count)", style=_WIDE
        )
        cause_menu = {cause: TITLES[cause] for cause in CAUSES}
        self.ranks = tuple(
            _choice(widgets.Dropdown, f"cause ranked {i}", cause_menu)
            for i in range(1, len(CAUSES) + 1)
        )
        self.p99 = _choice(widgets.RadioButtons, "ITL p99 describes", P99_CHOICES)
        self.signal = _choice(widgets.Dropdown, "signal you would read", SIGNALS)
        self.fix = _choice(widgets.Dropdown, "fix", FIXES)
        self.ttft_check = checkbox("check TTFT p99 against its SLO before shipping")

    def _build_follow_ups(self) -> None:
        """Three follow-up questions, each with a reveal button (locked until a check)."""
        self.reveal_buttons = tuple(
            widgets.Button(description="show the answer", disabled=True) for _ in range(3)
        )
        self.follow_up_questions = tuple(widgets.HTML() for _ in range(3))
        self.follow_up_answers = tuple(widgets.HTML() for _ in range(3))
        self.follow_ups = widgets.Accordion(
            children=[
                widgets.VBox([q, b, a])
                for q, b, a in zip(
                    self.follow_up_questions,
                    self.reveal_buttons,
                    self.follow_up_answers,
                    strict=True,
                )
            ]
        )

    def _wire(self) -> None:
        self.new_button.on_click(self.new_scenario)
        self.check_button.on_click(self.check)
        for index, button in enumerate(self.reveal_buttons):
            button.on_click(lambda _button, index=index: self.reveal(index))

    def _layout(self) -> widgets.VBox:
        """Question, numbers beside reasoning, the rest of the answer, feedback and follow-ups."""
        numbers = widgets.VBox(
            [
                widgets.HTML("<b>Numbers</b> (per GPU; leave 0 to skip)"),
                self.floor,
                self.kv_term,
                self.mixed_step,
                self.prefill_steps,
            ]
        )
        reasoning = widgets.VBox(
            [widgets.HTML("<b>Causes, most likely first</b>"), *self.ranks, self.signal]
        )
        return widgets.VBox(
            [
                self.new_button,
                self.question,
                columns(numbers, reasoning),
                self.p99,
                self.fix,
                self.ttft_check,
                self.check_button,
                self.feedback,
                self.figure,
                widgets.HTML("<b>What the interviewer asks next</b> (unlocked after a check)"),
                self.follow_ups,
                FitFiguresToWidth(),
            ]
        )

    def _draw(self) -> Scenario:
        return draw_scenario(self.rng)

    def answer(self) -> Answer:
        """The user's inputs as an Answer in SI units (0 means not answered)."""

        def seconds(control) -> float | None:
            return control.value * MILLISECOND if control.value > 0 else None

        return Answer(
            floor_seconds=seconds(self.floor),
            kv_read_seconds=seconds(self.kv_term),
            mixed_step_seconds=seconds(self.mixed_step),
            ranking=tuple(rank.value for rank in self.ranks),
            p99_meaning=self.p99.value,
            signal=self.signal.value,
            fix=self.fix.value,
            checked_ttft=self.ttft_check.value,
            prefill_steps=self.prefill_steps.value or None,
        )

    def check(self, _button=None) -> Grade:
        """Grade what is entered, show the feedback, redraw the bars and unlock the follow-ups."""
        self.grade = grade(self.scenario, self.answer())
        self.feedback.value = feedback_html(self.grade)
        self._redraw()
        for button in self.reveal_buttons:
            button.disabled = False
        return self.grade

    def reveal(self, index: int) -> None:
        """Show the answer to follow-up `index` (only after a check)."""
        if self.grade is None:
            return
        answer = follow_ups(self.scenario)[index].answer
        self.follow_up_answers[index].value = f"<p>{html.escape(answer)}</p>"

    def new_scenario(self, _button=None) -> None:
        """Draw the next scenario from the seeded generator and clear the answer."""
        self.number += 1
        self.scenario = self._draw()
        self.grade = None
        for control in (self.floor, self.kv_term, self.mixed_step, self.prefill_steps):
            control.value = 0
        for control in (*self.ranks, self.p99, self.signal, self.fix):
            control.value = None
        self.ttft_check.value = False
        self.feedback.value = ""
        self._redraw()
        self._show_scenario()

    def _show_scenario(self) -> None:
        self.question.value = question_html(self.scenario, number=self.number, seed=self.seed)
        self.mixed_step.description = (
            "verification step (ms)" if self.scenario.speculation is not None
            else "step with a chunk (ms)"
        )  # fmt: skip
        for index, follow_up in enumerate(follow_ups(self.scenario)):
            self.follow_up_questions[index].value = f"<i>{html.escape(follow_up.question)}</i>"
            self.follow_up_answers[index].value = ""
            self.reveal_buttons[index].disabled = self.grade is None
            self.follow_ups.set_title(index, follow_up.question)

    def _redraw(self) -> None:
        with self.figure.batch_update():
            update_traces(self.figure, trace_data(self.grade))
            self.figure.layout.title.text = figure_title(self.grade)
            limits = y_range(self.grade)
            if limits is None:
                self.figure.layout.yaxis.autorange = True
            else:
                self.figure.layout.yaxis.range = limits


def question_html(scenario: Scenario, *, number: int, seed: int) -> str:
    """The posed question as HTML paragraphs."""
    dep = scenario.deployment
    head = f"<h4>Scenario {number} (seed {seed}): {html.escape(dep.label)}</h4>"
    return head + "".join(f"<p>{html.escape(p)}</p>" for p in question_text(scenario))


def feedback_html(result: Grade) -> str:
    """Rubric banner, one row per item with its verdict, the mistakes found, the sanity check."""
    level = result.rubric.level
    colour = _LEVEL_COLOURS.get(level, "#b07d00")
    banner = (
        f'<div style="border-left:6px solid {colour};padding:6px;margin:4px 0">'
        f"<b>Rubric: {html.escape(level)}</b>"
    )
    if result.rubric.met:
        banner += "<br>You showed: " + html.escape("; ".join(result.rubric.met)) + "."
    if result.rubric.missing:
        banner += "<br>For the next level: " + html.escape("; ".join(result.rubric.missing)) + "."
    banner += "</div>"
    rows = "".join(
        f"<tr><td><b>{html.escape(_ITEM_TITLES[item.key])}</b></td>"
        f'<td style="color:{_VERDICT_COLOURS.get(item.verdict, "#c00")}">'
        f"<b>{html.escape(item.verdict)}</b></td>"
        f"<td>{html.escape(item.feedback)}</td></tr>"
        for item in result.items
    )
    table = f'<table style="font-size:13px">{rows}</table>'
    if result.mistakes:
        mistakes = "".join(
            f"<li><b>{html.escape(m.title)}</b>: {html.escape(m.detail)}</li>"
            for m in result.mistakes
        )
        mistakes = (
            '<div style="background:#fde2e1;border-left:4px solid #c00;padding:6px">'
            f"<b>Classic mistakes in your answer</b><ul>{mistakes}</ul></div>"
        )
    else:
        mistakes = '<div style="color:#2a7a2a">None of the classic mistakes.</div>'
    return banner + table + mistakes + f"<p>{html.escape(result.sanity)}</p>"
