"""pass@k and its aggregation over the tasks of a benchmark.

`pass_at_k` is the unbiased estimator of Chen et al. 2021 ("Evaluating Large Language Models
Trained on Code", eq. 1 and its numerically stable form in Fig. 3): with n samples of which
c are correct, pass@k = 1 - C(n-c, k) / C(n, k), computed as a running product so large n
never overflows.

The benchmark score is the mean of the per-task values. Its 95% confidence interval measures
uncertainty from the finite set of tasks and the finite samples per task, and is deterministic
(no bootstrap seed):

- when every per-task value is 0 or 1 (one sample per task, as greedy decoding gives, or
  k = n), the Wilson score interval of the proportion (Wilson 1927), which stays honest at
  small T and at 0 % or 100 % (0 of 3 solved: [0, 56 %], not the normal approximation's [0, 0]);
- otherwise the normal approximation over tasks: mean +- 1.96 * s / sqrt(T), with s the sample
  standard deviation (ddof=1) of the T per-task values, clipped to [0, 1]; for a single task,
  where s is undefined, the interval is the whole [0, 1].

maj@k (majority voting, "self-consistency", Wang et al. 2022) for tasks whose grades carry an
extracted final answer (the math tasks: arith, gsm8k, math500). Defined here as:

- a sample votes when it finished (ended in EOS: the prediction's `finished`) and an answer
  was extracted from it; its ballot is `answer_key(extracted)`, the answer normalised so that
  `007`, `7` and `7.0` are one answer (a number is its decimal value; any other answer is its
  text without whitespace, so two spellings of one expression, `\\frac12` and `\\frac{1}{2}`,
  are two answers: on math500 they split the vote, where a vote over equivalence classes
  would pool them);
- among k samples, the majority answer is the one with the most votes, a tie going to the
  answer seen first (in sample order); it is correct iff some sample with that answer was
  graded correct (the task's own grader decides, never a string comparison with the gold
  answer); k samples without any vote count as wrong;
- per problem with n samples, maj@k is the mean over the floor(n / k) disjoint blocks of k
  consecutive samples (samples 0..k-1, k..2k-1, ...; a remainder of fewer than k samples is
  left out); the benchmark's maj@k is the mean over problems, with the interval of pass@k
  above (Wilson when every per-problem value is 0 or 1, else the normal approximation);
- k runs over the powers of two up to the smallest per-problem sample count n_min, plus n_min
  itself when it is not a power of two (`maj_ks`), so maj@k_max sits beside pass@k_max.

Unlike pass@k, maj@k with blocks is not an unbiased estimator over all k-subsets; with n = k
it is the plain majority vote of the n samples.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Iterable, Sequence

Z95 = 1.959963984540054  # two-sided 95% quantile of the standard normal
CI_METHOD = ("Wilson score interval over tasks when every per-task value is 0 or 1, else the normal approximation "
             "over tasks: mean +- 1.96*sd/sqrt(n_tasks), sd with ddof=1, clipped to [0, 1]")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 - C(n-c, k) / C(n, k)."""
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError("n, c and k must be integers")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n; got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n; got n={n}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0  # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k/i)
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_ci95(values: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high) with the normal-approximation 95% interval, clipped to [0, 1]."""
    t = len(values)
    if t == 0:
        raise ValueError("no values to aggregate")
    mean = math.fsum(values) / t
    if t == 1:
        return mean, 0.0, 1.0
    var = math.fsum((v - mean) ** 2 for v in values) / (t - 1)
    half = Z95 * math.sqrt(var / t)
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def wilson_ci95(successes: int, n: int) -> tuple[float, float]:
    """The Wilson score 95% interval of a proportion successes / n."""
    if n <= 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n > 0; got {successes} of {n}")
    p, z2 = successes / n, Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # min/max with p: at 0 or n successes the bound is exactly p (rounding left it 1e-17 off)
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def aggregate_pass_at_k(counts: Iterable[tuple[int, int]], ks: Iterable[int]) -> dict[str, dict]:
    """{str(k): {"value", "ci95": [lo, hi], "n_tasks"}} from per-task (n, c) counts.

    Every k must be at most the smallest n.
    """
    counts = list(counts)
    return {str(k): _score([pass_at_k(n, c, k) for n, c in counts]) for k in ks}


def _score(per_task: list[float]) -> dict:
    """{"value", "ci95", "n_tasks"} of per-task values: Wilson when all are 0 or 1, else normal."""
    mean, lo, hi = mean_ci95(per_task)
    if all(v in (0.0, 1.0) for v in per_task):
        lo, hi = wilson_ci95(int(sum(per_task)), len(per_task))
    return {"value": mean, "ci95": [lo, hi], "n_tasks": len(per_task)}


# ---------------------------------------------------------------- maj@k (majority voting)
_PLAIN_NUMBER = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)$")
_FRACTION = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))/(\d+\.?\d*|\.\d+)$")


def _decimal_key(value: Fraction) -> str:
    """A value's ballot: its decimal digits when they end (`18/5` -> `3.6`), else `p/q` reduced."""
    if value == 0:
        return "0"
    q = value.denominator
    for f in (2, 5):
        while q % f == 0:
            q //= f
    if q != 1:
        return f"{value.numerator}/{value.denominator}"
    with localcontext() as ctx:
        ctx.prec = len(str(value.numerator)) + 2 * len(str(value.denominator)) + 2  # exact
        return format((Decimal(value.numerator) / Decimal(value.denominator)).normalize(), "f")


def answer_key(answer: str | None) -> str | None:
    """The ballot of an extracted answer: a number as its canonical decimal value (`007`, `7`,
    `7.0` and `+7` -> `7`; a fraction as its value, `18/5` and `3.6` -> `3.6`, `2/6` -> `1/3`),
    anything else its text with whitespace removed; None stays None."""
    if answer is None:
        return None
    text = "".join(answer.split())
    fraction = _FRACTION.match(text)  # no exponents here either
    if fraction:
        den = Decimal(fraction.group(2))
        return text if den == 0 else _decimal_key(Fraction(Decimal(fraction.group(1))) / Fraction(den))
    if not _PLAIN_NUMBER.match(text):  # no exponents: "9e99999" would expand to 100,000 digits
        return text
    value = Decimal(text)
    return "0" if value == 0 else format(value.normalize(), "f")


def majority_correct(votes: Sequence[tuple[str | None, bool]]) -> bool:
    """Whether the majority answer of `votes` is correct. `votes`: one (ballot, graded correct)
    per sample, in sample order; ballot None = the sample does not vote (unfinished, or no
    answer). Ties go to the answer seen first; no vote at all counts as wrong."""
    count: dict[str, int] = {}  # insertion order = order first seen
    correct: dict[str, bool] = {}
    for key, ok in votes:
        if key is None:
            continue
        count[key] = count.get(key, 0) + 1
        correct[key] = correct.get(key, False) or bool(ok)
    if not count:
        return False
    winner = max(count, key=count.__getitem__)  # max keeps the first of equal counts: the first seen
    return correct[winner]


def maj_at_k(votes: Sequence[tuple[str | None, bool]], k: int) -> float:
    """maj@k of one problem: the share of its floor(n / k) disjoint blocks of k consecutive
    samples whose majority answer is correct (`majority_correct`)."""
    n = len(votes)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n; got n={n}, k={k}")
    blocks = n // k
    return sum(majority_correct(votes[b * k:(b + 1) * k]) for b in range(blocks)) / blocks


def maj_ks(n_min: int) -> list[int]:
    """The k of maj@k: 1, 2, 4, ... up to n_min, and n_min itself ([] when n_min is 0)."""
    ks = [2**i for i in range(n_min.bit_length()) if 2**i <= n_min]
    return ks + ([n_min] if n_min and n_min not in ks else [])


def aggregate_maj_at_k(per_task: Iterable[Sequence[tuple[str | None, bool]]], ks: Iterable[int]) -> dict[str, dict]:
    """{str(k): {"value", "ci95": [lo, hi], "n_tasks"}} from each task's votes (see `maj_at_k`),
    with the interval of `aggregate_pass_at_k`. Every k must be at most the smallest n."""
    per_task = [list(v) for v in per_task]
    return {str(k): _score([maj_at_k(v, k) for v in per_task]) for k in ks}
