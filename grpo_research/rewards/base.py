"""The reward contract and the weighted composition of reward terms.

A reward term maps a batch of (problem, completion, finished) to one float per completion,
or None for a completion that must be masked (an infrastructure failure such as a sandbox
error: never a wrong answer). `WeightedReward` sums named terms with config weights and keeps
every component for logging. Rewards are never called advantages: those belong to the
algorithms (grpo_research/algorithms/advantages.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from grpo_research.errors import ConfigError
from grpo_research.registry import Registry
from grpo_research.tasks.base import Problem, Task


class RewardTerm(Protocol):
    def __call__(
        self, problems: list[Problem], completions: list[str], finished: list[bool]
    ) -> list[float | None]: ...


# A factory gets the task (for its grader) and the term's options from config.
REWARDS: Registry[Callable[..., RewardTerm]] = Registry("reward term")


def register_reward(name: str):
    """Register a reward-term factory under `name` (a key of config `reward.weights`)."""
    return REWARDS.register(name)


@dataclass
class RewardBatch:
    total: list[float]  # weighted sum per completion (0.0 where masked)
    components: dict[str, list[float | None]]  # unweighted value of each term per completion
    mask: list[bool]  # False where any term returned None: exclude from the loss


class WeightedReward:
    """sum_k w_k * term_k(completion); a None from any term masks the completion."""

    def __init__(self, terms: dict[str, tuple[float, RewardTerm]]):
        self.terms = terms

    def __call__(self, problems: list[Problem], completions: list[str], finished: list[bool]) -> RewardBatch:
        n = len(completions)
        components: dict[str, list[float | None]] = {}
        total = [0.0] * n
        mask = [True] * n
        for name, (weight, term) in self.terms.items():
            values = term(problems, completions, finished)
            if len(values) != n:
                raise ValueError(f"reward term {name!r} returned {len(values)} values for {n} completions")
            components[name] = values
            for i, v in enumerate(values):
                if v is None:
                    mask[i] = False
                else:
                    total[i] += weight * v
        total = [t if m else 0.0 for t, m in zip(total, mask)]
        return RewardBatch(total=total, components=components, mask=mask)


def build_reward(task: Task, weights: dict[str, float], options: dict[str, dict] | None = None) -> WeightedReward:
    """Build the weighted reward named in config: {term name: weight}."""
    options = options or {}
    terms = {}
    for name, weight in weights.items():
        if name not in REWARDS:
            raise KeyError(f"unknown reward term {name!r}; known: {', '.join(sorted(REWARDS))}")
        try:
            terms[name] = (float(weight), REWARDS[name](task=task, **options.get(name, {})))
        except ValueError as e:  # a bad option value: one line naming the config section
            msg = str(e).removeprefix(f"{name}: ")
            raise ConfigError(f"reward.options.{name}: {msg}") from None
    return WeightedReward(terms)
