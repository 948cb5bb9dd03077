"""The task interface: where prompts come from and how a completion is graded.

A task owns its grader (one grading path for training and evaluation): training rewards and benchmark evaluation
call the same `grade` function, so a model is never trained on one notion of "correct" and
evaluated on another.
"""
from __future__ import annotations

import dataclasses
import inspect
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from grpo_research.errors import ConfigError, DataError
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
        """The first `n` problems of the fixed held-out split (all, or the task's documented
        default number, when `n` is None). More than the split holds raises `TooFewProblems`
        (one line with the number it holds), never a shorter list or an endless search."""
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


class TooFewProblems(ConfigError):
    """A request for more held-out problems than a task's split holds: a usage error (one line,
    exit 2) that says how many there are. `request` names what asked (`train.eval_size=50000`,
    `--n 60000`) when the caller knows it (`heldout_or_refuse`); `note` says why, where the
    number is a limit rather than a count."""

    def __init__(self, split: str, available: int, asked: int, request: str | None = None, note: str = "",
                 noun: str = "held-out problems"):
        self.split, self.available, self.asked, self.request, self.note, self.noun = \
            split, available, asked, request, note, noun
        tail = f" ({note})" if note else ""
        if request:
            super().__init__(f"{request}: {split} has only {available} {noun}{tail}")
        else:
            super().__init__(f"{split} has only {available} {noun}{tail}, asked for {asked}")

    def asked_by(self, request: str) -> "TooFewProblems":
        return TooFewProblems(self.split, self.available, self.asked, request, self.note, self.noun)


def heldout_or_refuse(task: Task, n: int, request: str) -> list[Problem]:
    """`task.heldout_problems(n)`, or `TooFewProblems` naming `request` (e.g.
    `train.eval_size=50000`) when the split holds fewer than `n`: call it before any expensive
    work (loading a model), so that a request beyond the split stops at once in one line."""
    try:
        return task.heldout_problems(n)
    except TooFewProblems as e:
        raise e.asked_by(request) from None


def ood_or_refuse(task: Task, n: int, request: str) -> list[Problem]:
    """As `heldout_or_refuse` for the task's out-of-distribution split (`ood_problems`; [] when
    the task has none)."""
    ood = getattr(task, "ood_problems", None)
    if ood is None:
        return []
    try:
        return ood(n)
    except TooFewProblems as e:
        raise e.asked_by(request) from None


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
    try:
        return get_task(t.name, **{k: v for k, v in offered.items() if takes_all or k in params})
    except DataError as e:  # a benchmark file's own error, named by its loader: one line from the CLI too
        raise TaskDataError(str(e)) from None
    except OSError as e:  # a missing data file (its loader names it) or one that cannot be read
        raise TaskDataError(str(e) if isinstance(e, FileNotFoundError) else f"task.data_path: {e}") from None
    except ValueError as e:  # a bad option value: one line naming the config section
        raise ConfigError(f"task ({t.name}): {e}") from None


class TaskDataError(DataError, ConfigError):
    """A task's data file is missing or malformed (`build_task`): a DataError for the code that
    tells data errors apart (the pipeline's plan), and a ConfigError, so that `train`, `sft`
    and `eval` report it as one line with exit status 2 instead of a traceback."""
