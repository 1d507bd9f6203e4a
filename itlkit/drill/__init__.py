"""The interview drill: a "TTFT is fine, ITL is bad" question, its worked answer and its grading.

- `content`: symptoms and the menus of answers (`SYMPTOMS`, `SIGNALS`, `FIXES`).
- `scenarios`: drawing a scenario and its worked numbers (`draw_scenario`, `worked_numbers`).
- `grading`: an answer graded item by item, with a rubric (`Answer`, `grade`).
- `followups`: the follow-up questions, answered for the scenario (`follow_ups`).
"""

__all__ = ["content", "followups", "grading", "scenarios"]
