"""The task interface: where prompts come from and how a completion is graded.

A task owns its grader (DESIGN principle 7): training rewards and benchmark evaluation
call the same `grade` function, so a model is never trained on one notion of "correct" and
evaluated on another.
"""
from __future__ import annotations

import dataclasses
import inspect
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from grpo_research.registry import Registry


@dataclass(frozen=True)
class Problem:
    """One prompt with everything needed to grade a completion of it."""

    id: str  # stable id: benchmark task_id, or "<task>/<split>/<index>" for synthetic tasks
    prompt: str  # exactly the text given to the model
    answer: str | None = None  # gold final answer (math tasks)
    solution: str | None = None  # reference completion for supervised training, without EOS
    tests: str | None = None  # code tasks: test code run after the completion
    entry_point: str | None = None  # code tasks: the function the tests call
    meta: dict[str, Any] = field(default_factory=dict, compare=False)  # task-specific extras

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Grade:
    """The verdict on one completion."""

    correct: bool  # the answer is right (math) or every test passed (code)
    outcome: str  # short machine-readable reason: "passed", "wrong_answer", "no_answer", "failed", "timeout", ...
    score: float | None = None  # partial credit in [0, 1] (e.g. share of unit tests passed); None = float(correct)
    formatted: bool = False  # the completion follows the task's answer format
    extracted: str | None = None  # the answer read from the completion, for logging
    masked: bool = False  # infrastructure failure (sandbox_error): never counted as wrong; masked in training


class Task(Protocol):
    """What the trainer, the evaluator and the reward library need from a task."""

    name: str
    kind: str  # "math" or "code"

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        """`n` training problems drawn with `rng` (the trainer owns and checkpoints `rng`)."""
        ...

    def heldout_problems(self, n: int | None = None) -> list[Problem]:
        """The first `n` problems of the fixed held-out split (all when `n` is None)."""
        ...

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        """Grade one completion. `finished` is False when generation stopped without EOS."""
        ...

    def check_format(self, problem: Problem, completion: str) -> bool:
        """Cheap check that the completion follows the task's answer format (no code is run)."""
        ...

    def grade_many(self, problems: list[Problem], completions: list[str], finished: list[bool]) -> list[Grade]:
        """Grade a batch (code tasks run their programs in parallel here)."""
        ...


TASKS: Registry[Callable[..., Task]] = Registry("task")


def register_task(name: str):
    """Register a task factory under `name` (the value of config key `task.name`)."""
    return TASKS.register(name)


def get_task(name: str, **kwargs: Any) -> Task:
    return TASKS.lookup(name)(**kwargs)


def task_parameters(name: str) -> tuple[set[str], bool]:
    """(keyword parameters of task `name`'s factory, whether it takes any keyword (**kwargs))."""
    params = inspect.signature(TASKS.lookup(name)).parameters
    takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return {k for k, p in params.items() if p.kind is not p.VAR_KEYWORD}, takes_all


def build_task(t) -> Task:
    """The task of a `task` config section: each of its fields (`levels`, `level_weights`,
    `eval_level`, `data_path` when set) and `task.options` that the factory accepts (config
    validation has refused the others when they were set)."""
    offered = {"levels": t.levels, "level_weights": t.level_weights, "eval_level": t.eval_level, **t.options}
    if t.data_path:
        offered["data_path"] = t.data_path
    params, takes_all = task_parameters(t.name)
    from grpo_research.errors import ConfigError, DataError

    try:
        return get_task(t.name, **{k: v for k, v in offered.items() if takes_all or k in params})
    except DataError:  # a benchmark file's own error, named by its loader
        raise
    except ValueError as e:  # a bad option value: one line naming the config section
        raise ConfigError(f"task ({t.name}): {e}") from None
