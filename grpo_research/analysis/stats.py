"""Statistics over seeds: comparisons of two arms paired by seed (`compare_paired`, Student-t),
and the mean of one arm with its 95 % percentile-bootstrap interval (curves and tables).

`compare_paired(a, b)`: the mean of the per-seed differences a_i - b_i and its Student-t
interval with n - 1 degrees of freedom (Student 1908; any statistics text): exact coverage when
the differences are normal, whatever n. The percentile bootstrap of the same differences is
not: on simulated arms drawn from one normal distribution it declares a difference 24.7 % of
the time at n = 3 seeds and 14.3 % at n = 5 against a nominal 5 % (issue 17's measurement;
benchmarks/aa_calibration.py reproduces it), because resampling n values cannot show more
spread than they have. Verdicts about differences use `compare_paired`.

A bootstrap resample draws n seeds with replacement from the n seeds of a variant; the
interval is the 2.5th and 97.5th percentiles (numpy's default linear interpolation) of the
resampled means. Curves resample whole seeds (the same draw for every point of a curve), so a
band is the uncertainty of the mean curve, not of each point separately. With few seeds (3)
the percentile bootstrap is narrow: it cannot see more spread than the seeds show.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

LEVEL = 0.95
N_BOOT = 10_000


def resample_counts(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n): how often each of n items is drawn in each resample (rows sum to n)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n))  # (B, n) drawn item indices
    counts = np.zeros((n_boot, n))
    np.add.at(counts, (np.arange(n_boot)[:, None], idx), 1.0)  # (B, n)
    return counts


def bootstrap_columns(matrix, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0):
    """(mean, low, high), each (P,), for a (n_seeds, P) matrix: the mean over seeds of every
    column and its percentile-bootstrap interval, resampling seeds (rows)."""
    m = np.asarray(matrix, dtype=float)  # (n, P)
    if m.ndim != 2 or m.shape[0] == 0:
        raise ValueError("need a (n_seeds, n_points) matrix with at least one seed")
    n = m.shape[0]
    mean = m.mean(axis=0)  # (P,)
    if n == 1:
        return mean, mean.copy(), mean.copy()
    counts = resample_counts(n, n_boot, seed)  # (B, n)
    means = counts @ m / n  # (B, P) mean of each resample
    alpha = (1.0 - level) / 2.0
    low, high = np.percentile(means, [100 * alpha, 100 * (1 - alpha)], axis=0)  # (P,), (P,)
    return mean, low, high


def bootstrap_mean_ci(values: Sequence[float], n_boot: int = N_BOOT, level: float = LEVEL,
                      seed: int = 0) -> tuple[float, float, float]:
    """(mean, low, high) of a list of per-seed values."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size == 0:
        return float("nan"), float("nan"), float("nan")
    mean, low, high = bootstrap_columns(v[:, None], n_boot, level, seed)
    return float(mean[0]), float(low[0]), float(high[0])


def intervals_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether the closed intervals [a0, a1] and [b0, b1] share a point."""
    return not (a[1] < b[0] or b[1] < a[0])


def compare_paired(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """(mean difference, low, high) of arms `a` and `b` paired by seed: a[i] and b[i] come from
    the same seed. The interval is Student-t on the n differences (n - 1 degrees of freedom);
    with one pair it is (nan, nan); with none everything is nan. Non-finite values are an error,
    not silently dropped: the caller decides which seeds are paired."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"compare_paired needs two equal-length 1-d sequences, got shapes {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("compare_paired got a non-finite value: pass only the seeds both arms have")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    n = x.size
    if n == 0:
        return math.nan, math.nan, math.nan
    d = x - y  # (n,) per-seed differences
    mean = float(d.mean())
    if n == 1:
        return mean, math.nan, math.nan
    from scipy.stats import t as student_t

    half = float(student_t.ppf(0.5 + level / 2, n - 1)) * float(d.std(ddof=1)) / math.sqrt(n)
    return mean, mean - half, mean + half


# ---------------------------------------------------------------- one-sided tests, multiplicity, power
# The atlas (grpo_research/analysis/atlas.py) turns each claim into one-sided tests of the mean
# per-seed difference against a bound. At alpha = (1 - level) / 2 = 0.025 a test rejects exactly
# when compare_paired's 95 % interval lies entirely on the claim's side of the bound, so a
# claim's verdict and the interval printed beside it never disagree before multiplicity.
ALPHA = (1.0 - LEVEL) / 2.0


def p_above(d: Sequence[float], bound: float) -> float:
    """One-sided p-value of H0: mean(d) <= bound against mean(d) > bound (Student-t, n - 1 dof).
    Differences without spread (a deterministic metric such as model-state memory) give 0 when
    their mean is above the bound and 1 otherwise; fewer than two values give nan."""
    x = np.asarray(d, dtype=float)
    if x.ndim != 1 or not np.isfinite(x).all():
        raise ValueError("p_above needs a 1-d sequence of finite values")
    if x.size < 2:
        return math.nan
    m, s = float(x.mean()), float(x.std(ddof=1))
    if s == 0.0:
        return 0.0 if m > bound else 1.0
    from scipy.stats import t as student_t

    return float(student_t.sf((m - bound) / (s / math.sqrt(x.size)), x.size - 1))


def p_below(d: Sequence[float], bound: float) -> float:
    """One-sided p-value of H0: mean(d) >= bound against mean(d) < bound (see `p_above`)."""
    return p_above([-v for v in d], -bound)


def benjamini_hochberg(p: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (step-up; Benjamini & Hochberg 1995): rejecting the
    hypotheses whose adjusted value is <= q controls the false-discovery rate at q for
    independent or positively dependent tests. nan stays nan and does not count in m."""
    vals = np.asarray(p, dtype=float)
    out = np.full(vals.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(vals))
    m = ok.size
    if m == 0:
        return out.tolist()
    order = ok[np.argsort(vals[ok], kind="stable")]  # indices of finite p, ascending
    ranked = vals[order] * m / np.arange(1, m + 1)  # p_(i) * m / i
    adjusted = np.minimum.accumulate(ranked[::-1])[::-1]  # monotone from the largest down
    out[order] = np.minimum(adjusted, 1.0)
    return out.tolist()


def power_one_sided(n: int, distance: float, sd: float, alpha: float = ALPHA) -> float:
    """Power of the one-sided paired t-test at level `alpha` over n seeds when the true mean
    difference lies `distance` beyond the bound on the tested side and per-seed differences have
    standard deviation `sd` (noncentral t with n - 1 dof, noncentrality distance sqrt(n) / sd)."""
    if n < 2:
        return 0.0
    if sd <= 0:
        return 1.0 if distance > 0 else 0.0
    from scipy.stats import nct, t as student_t

    crit = float(student_t.ppf(1 - alpha, n - 1))
    return float(nct.sf(crit, n - 1, distance * math.sqrt(n) / sd))


def seeds_for_power(distance: float, sd: float, power: float = 0.8, alpha: float = ALPHA, sides: int = 1,
                    n_max: int = 1000) -> int | None:
    """The smallest number of seeds (>= 2) at which a one-sided paired t-test at `alpha` has at
    least `power` when the truth lies `distance` beyond the bound (`power_one_sided`). `sides`=2:
    two such tests must both reject (an equivalence's TOST with the truth at the centre; bounded
    by 1 - 2 (1 - power of one)). None when even `n_max` seeds do not reach it."""
    if distance <= 0:
        return None
    for n in range(2, n_max + 1):
        one = power_one_sided(n, distance, sd, alpha)
        if (one if sides == 1 else 1.0 - 2.0 * (1.0 - one)) >= power:
            return n
    return None
