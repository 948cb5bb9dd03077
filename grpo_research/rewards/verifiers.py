"""Built-in reward terms that only need the task's grader."""
from __future__ import annotations

from grpo_research.rewards.base import register_reward
from grpo_research.tasks.base import Problem, Task


@register_reward("correct")
def correct_reward(task: Task):
    """1.0 for a right answer (math) or a full pass (code), else 0.0; None when the grader masked it."""

    def term(problems: list[Problem], completions: list[str], finished: list[bool]) -> list[float | None]:
        grades = task.grade_many(problems, completions, finished)
        return [None if g.masked else (g.score if g.score is not None else float(g.correct)) for g in grades]

    return term


@register_reward("format")
def format_reward(task: Task):
    """1.0 when the completion follows the task's answer format and ended with EOS."""

    def term(problems: list[Problem], completions: list[str], finished: list[bool]) -> list[float | None]:
        return [float(task.check_format(p, c) and f) for p, c, f in zip(problems, completions, finished)]

    return term
