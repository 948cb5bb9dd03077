"""Statistics over seeds: the mean and its 95 % percentile-bootstrap confidence interval.

A bootstrap resample draws n seeds with replacement from the n seeds of a variant; the
interval is the 2.5th and 97.5th percentiles (numpy's default linear interpolation) of the
resampled means. Curves resample whole seeds (the same draw for every point of a curve), so a
band is the uncertainty of the mean curve, not of each point separately. With few seeds (3)
the percentile bootstrap is narrow: it cannot see more spread than the seeds show.
"""
from __future__ import annotations

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
