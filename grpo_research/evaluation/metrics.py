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
"""
from __future__ import annotations

import math
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
    return max(0.0, centre - half), min(1.0, centre + half)


def aggregate_pass_at_k(counts: Iterable[tuple[int, int]], ks: Iterable[int]) -> dict[str, dict]:
    """{str(k): {"value", "ci95": [lo, hi], "n_tasks"}} from per-task (n, c) counts.

    Every k must be at most the smallest n.
    """
    counts = list(counts)
    out = {}
    for k in ks:
        per_task = [pass_at_k(n, c, k) for n, c in counts]
        mean, lo, hi = mean_ci95(per_task)
        if per_task and all(v in (0.0, 1.0) for v in per_task):
            lo, hi = wilson_ci95(int(sum(per_task)), len(per_task))
        out[str(k)] = {"value": mean, "ci95": [lo, hi], "n_tasks": len(per_task)}
    return out
