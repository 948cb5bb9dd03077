"""Synthetic arithmetic: `007+348=` -> `#### 355` (GSM8K-like answer after `####`).

Operands are zero-padded to three digits at every level, so every prompt has the same length
(no padding in a batch). Level d draws operands below 10^d: level 1 is one-digit addition,
level 3 full three-digit addition. The held-out split is a fixed set of level-`eval_level`
pairs; training never draws a held-out pair, at any level.

With `withhold_solutions` (task option) training problems carry no reference solution: only
the reward is available, the setting where RL with verifiable rewards must earn its keep
(the supervised control cannot run there). With `question` (task option) a problem reads
`What is 7 + 48?`, unpadded, which suits a chat model (task.prompt_format=chat).

With `ood_level` (task option, above every training level) the task also has an
out-of-distribution held-out split (`ood_problems`): sums of two operands of exactly
`ood_level` digits, e.g. `4821+1093=` at 4, longer than anything trained on; the trainer
evaluates it beside the in-distribution split (`eval/accuracy_ood`).

With `train_pool: N` (task option) training draws from a fixed pool of N training problems
(drawn once from the training distribution with a seed of its own, the same for every run),
uniformly with replacement: `train_pool: 1` is one-shot RLVR (arXiv 2504.20571), one problem
repeated to fill every batch.

Sizes: the held-out split of level d is every held-out pair below 10^d, in a fixed order:
5 problems at level 1, 503 at level 2, 49,998 at level 3 (`heldout_size`); `heldout_problems()`
gives the first 2,000 (all 5 or 503 at levels 1 and 2), and a request for more than the split
holds raises `TooFewProblems` at once, with the number it holds. The `ood_level` split holds
every pair of `ood_level`-digit operands ((9 x 10^(d-1))^2, 8,100 at 2).

Grading: an answer is correct only if generation ended with EOS (a completion cut off is
not) and the number that ends the completion (after `####`, or alone) equals the sum; text
or special tokens after the number make it wrong. Formatted means exactly `#### <integer>`.
"""
from __future__ import annotations

import dataclasses
import functools
import random
import re

from grpo_research.tasks.base import Grade, Problem, TooFewProblems, register_task

_FORMAT = re.compile(r"^#### (-?\d+)$")
_TRAILING = re.compile(r"(?:^|[^\d-])(-?\d+)\.?$")
HELDOUT_SEED = 20240917
TRAIN_POOL_SEED = 20250429  # the pool of `train_pool` problems (fixed across runs and seeds)
DEFAULT_HELDOUT = 2000  # problems of `heldout_problems()` (fewer where the split is smaller)


def _is_heldout(a: int, b: int) -> bool:
    """About 5 % of all operand pairs are reserved for evaluation (a fixed hash)."""
    return ((a * 1000 + b) * 2654435761) % (1 << 32) % 20 == 0


@functools.lru_cache(maxsize=None)
def heldout_size(level: int) -> int:
    """How many operand pairs below 10^level are held out (5, 503 and 49,998 at levels 1-3)."""
    import numpy as np

    hi = 10**level
    a = np.arange(hi, dtype=np.int64)[:, None]
    b = np.arange(hi, dtype=np.int64)[None, :]
    return int(((((a * 1000 + b) * 2654435761) % (1 << 32)) % 20 == 0).sum())  # _is_heldout, vectorised


def make_problem(a: int, b: int, split: str, index: int, question: bool = False) -> Problem:
    return Problem(
        id=f"arith/{split}/{index}",
        prompt=f"What is {a} + {b}?" if question else f"{a:03d}+{b:03d}=",
        answer=str(a + b),
        solution=f"#### {a + b}",
        meta={"a": a, "b": b},
    )


def extract_answer(completion: str) -> tuple[str | None, bool]:
    """(answer, formatted): the number that ends the completion, preferably after `####`.

    The number must be the last thing in the text, so `123<bos>` (a special token after the
    answer) reads as no answer.
    """
    text = completion.strip()
    m = _FORMAT.match(text)
    if m:
        return m.group(1), True
    m = _TRAILING.search(text)
    return (m.group(1) if m else None), False


@register_task("arith")
class ArithTask:
    name = "arith"
    kind = "math"

    def __init__(self, levels=(1, 2, 3), level_weights=(0.15, 0.25, 0.6), eval_level: int = 3,
                 withhold_solutions: bool = False, question: bool = False, ood_level: int | None = None,
                 train_pool: int | None = None):
        if train_pool is not None and (isinstance(train_pool, bool) or not isinstance(train_pool, int) or train_pool < 1):
            raise ValueError(f"arith option train_pool must be a positive integer (problems in the pool), got {train_pool!r}")
        if len(levels) != len(level_weights):
            raise ValueError("levels and level_weights must have the same length")
        if ood_level is not None and (isinstance(ood_level, bool) or not isinstance(ood_level, int)
                                      or not max(levels) < ood_level <= 6):
            raise ValueError(f"arith option ood_level must be an integer above every training level ({max(levels)}) "
                             f"and at most 6, got {ood_level!r}")
        if isinstance(eval_level, bool) or eval_level not in (1, 2, 3):
            raise ValueError(f"arith eval_level must be 1, 2 or 3, got {eval_level!r}")
        self.ood_level = ood_level
        self.levels = list(levels)
        self.level_weights = list(level_weights)
        self.eval_level = eval_level
        self.withhold_solutions = withhold_solutions  # reward only: training problems carry no solution
        self.question = question  # "What is 7 + 48?" (for chat models) instead of "007+048="
        self._heldout: list[Problem] | None = None
        self.train_pool = train_pool
        self._pool = self._draw(random.Random(TRAIN_POOL_SEED), train_pool) if train_pool else None

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        if self._pool is not None:
            return [rng.choice(self._pool) for _ in range(n)]
        return self._draw(rng, n)

    def _draw(self, rng: random.Random, n: int) -> list[Problem]:
        out = []
        while len(out) < n:
            level = rng.choices(self.levels, weights=self.level_weights)[0]
            hi = 10**level
            a, b = rng.randrange(hi), rng.randrange(hi)
            if _is_heldout(a, b):
                continue
            p = make_problem(a, b, "train", len(out), self.question)
            out.append(dataclasses.replace(p, solution=None) if self.withhold_solutions else p)
        return out

    def heldout_size(self) -> int:
        """The number of problems in the held-out split (every held-out pair of `eval_level`)."""
        return heldout_size(self.eval_level)

    def heldout_problems(self, n: int | None = None) -> list[Problem]:
        """The first `n` problems of the held-out split (`DEFAULT_HELDOUT`, or all of a smaller
        split, when None); more than `heldout_size()` raises TooFewProblems."""
        size = self.heldout_size()
        n = min(DEFAULT_HELDOUT, size) if n is None else n
        if n > size:  # checked first: the search below would never end
            raise TooFewProblems(f"arith (eval_level {self.eval_level})", size, n)
        if self._heldout is None or len(self._heldout) < n:
            rng = random.Random(HELDOUT_SEED + self.eval_level)
            hi = 10**self.eval_level
            pool = [(a, b) for a in range(hi) for b in range(hi) if _is_heldout(a, b)] if hi <= 100 else None
            if pool is not None:
                rng.shuffle(pool)
            seen: set[tuple[int, int]] = set()
            problems = []
            while len(problems) < n:
                a, b = pool[len(problems)] if pool is not None else (rng.randrange(hi), rng.randrange(hi))
                if not _is_heldout(a, b) or (a, b) in seen:
                    continue
                seen.add((a, b))
                problems.append(make_problem(a, b, "heldout", len(problems), self.question))
            self._heldout = problems
        return self._heldout[:n]

    def ood_problems(self, n: int | None = None) -> list[Problem]:
        """The out-of-distribution split: `n` (default 2000) fixed sums of two `ood_level`-digit
        operands ([] without the option); more than there are such pairs raises TooFewProblems."""
        if self.ood_level is None:
            return []
        n = DEFAULT_HELDOUT if n is None else n
        lo, hi = 10 ** (self.ood_level - 1), 10**self.ood_level
        if n > (hi - lo) ** 2:
            raise TooFewProblems(f"arith's out-of-distribution split (ood_level {self.ood_level})", (hi - lo) ** 2, n)
        rng = random.Random(HELDOUT_SEED + 100 + self.ood_level)
        seen: set[tuple[int, int]] = set()
        problems = []
        while len(problems) < n:
            a, b = rng.randrange(lo, hi), rng.randrange(lo, hi)
            if (a, b) not in seen:
                seen.add((a, b))
                problems.append(make_problem(a, b, "ood", len(problems), self.question))
        return problems

    def check_format(self, problem: Problem, completion: str) -> bool:
        return extract_answer(completion)[1]

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        answer, formatted = extract_answer(completion)
        if not finished:
            return Grade(False, "unfinished", formatted=formatted, extracted=answer)
        if answer is None:
            return Grade(False, "no_answer", formatted=formatted)
        correct = int(answer) == int(problem.answer)
        return Grade(correct, "passed" if correct else "wrong_answer", formatted=formatted, extracted=answer)

    def grade_many(self, problems, completions, finished) -> list[Grade]:
        return [self.grade(p, c, f) for p, c, f in zip(problems, completions, finished)]
