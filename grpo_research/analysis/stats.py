"""Statistics over seeds: comparisons of two arms paired by seed (`compare_paired`, Student-t),
and the mean of one arm with its 95 % percentile-bootstrap interval (curves and tables).

`compare_paired(a, b)`: the mean of the per-seed differences a_i - b_i and its Student-t
interval with n - 1 degrees of freedom (Student 1908; any statistics text): exact coverage when
the differences are normal, whatever n. The percentile bootstrap of the same differences is
not: on simulated arms drawn from one normal distribution it declares a difference 24.7 % of
the time at n = 3 seeds and 14.3 % at n = 5 against a nominal 5 % (issue 17's measurement;
benchmarks/aa_calibration.py reproduces it), because resampling n values cannot show more
spread than they have. Verdicts about differences use `compare_paired`.

Runs on several base models (seeds nested in bases): `compare_nested(a, b, groups)` and
`nested_summary` reduce each base to its mean paired difference and do Student-t on the G
per-base means (G - 1 dof), so the interval is about the mean effect over bases, not only
over seeds of these bases; `nested_summary` also estimates the spread of the effect between
bases and a prediction interval for a new base (issue 33; benchmarks/aa_calibration.py --nested
measures the false-difference rates). `p_above`/`p_below(..., groups=)` and `bases_for_power`
are the matching one-sided tests and planner.

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


# ---------------------------------------------------------------- runs nested in base models
# When runs come from several base models (seeds nested in bases), the pairs of one base share
# that base's method x base interaction: treating all pairs as independent (compare_paired) then
# understates the uncertainty of "the mean effect over bases" (issue 33). The nested summary
# reduces each base to the mean of its paired differences and does Student-t on those G means.
def _nested_parts(a, b, groups, who: str):
    """(d, labels, per-base means, per-base seed counts, pooled within-base SD or nan)."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    g = list(groups)
    if x.shape != y.shape or x.ndim != 1 or len(g) != x.size:
        raise ValueError(f"{who} needs a, b and groups of one length (1-d), got shapes {x.shape}, {y.shape} "
                         f"and {len(g)} groups")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError(f"{who} got a non-finite value: pass only the runs both arms have")
    d = x - y  # (n,) per-run differences
    index: dict = {}
    for label in g:
        index.setdefault(label, len(index))
    labels = list(index)
    code = np.array([index[label] for label in g], dtype=int)  # (n,) base of each run
    n_g = np.bincount(code, minlength=len(labels)).astype(float)  # (G,) seeds per base
    m_g = np.bincount(code, weights=d, minlength=len(labels)) / np.maximum(n_g, 1.0)  # (G,) per-base means
    dof = float((n_g - 1).sum())  # only bases with >= 2 seeds contribute
    ss = float(((d - m_g[code]) ** 2).sum())
    within = math.sqrt(ss / dof) if dof > 0 else math.nan
    return d, labels, m_g, n_g, within


def nested_summary(a: Sequence[float], b: Sequence[float], groups: Sequence, level: float = LEVEL,
                   within_sd: float | None = None) -> dict:
    """The mean effect of arm `a` over arm `b` across base models, with runs nested in bases.

    a[i], b[i]: the two arms of run i (paired by run: same base, same seed); groups[i]: the base
    model of run i (any hashable label). d = a - b. Each base g with S_g seeds gives the mean m_g
    of its differences; over the G bases:

    - `mean`: the mean of the m_g (every base weighted equally, whatever its seed count);
    - `se` = sd(m_g) / sqrt(G); `low`, `high` = mean -/+ t_{G-1} se (`df` = G - 1): the interval of
      the mean effect over the population of bases the G were drawn from. Exact coverage when the
      m_g are iid normal (balanced seeds, normal noise and interaction); approximate with unequal
      S_g. Nothing is assumed about the split of the variance between bases and seeds.
    - `within_sd`: the SD of d within a base (seed noise), pooled over bases with >= 2 seeds
      (sum of squared deviations from each m_g over sum of (S_g - 1)); nan when no base has 2
      seeds, unless `within_sd=` gives it (a pilot's value): the given value is then used even
      when the runs could estimate one (`within_source` 'given', else 'pooled' or 'none';
      `within_sd_pooled` is the runs' own estimate or nan).
    - `between_sd` tau, the SD of the true per-base effects (method x base interaction): the
      method-of-moments tau^2 = max(0, var(m_g) - within_sd^2 / S_h), S_h the harmonic mean of
      the S_g (E var(m_g) = tau^2 + within^2 mean(1 / S_g)); nan when within_sd is nan.
    - `pred_low`, `pred_high`: the prediction interval of a new base's true effect,
      mean -/+ t_{G-2} sqrt(tau^2 + se^2) (`pred_df` = G - 2; the random-effects prediction
      interval of Higgins, Thompson & Spiegelhalter 2009, J. R. Stat. Soc. A 172:137-159, eq. 12,
      with the unweighted mean of the m_g); nan when G < 3 or tau is nan.
    - `base_dependent`: True when the interval of the mean excludes 0 while the prediction interval
      includes 0 (an average effect that a new base model need not show); False otherwise,
      including when either is nan.

    Also: `level`, `n_groups` (G), `n_runs`, `groups` (labels in order of first appearance),
    `group_means`, `seeds_per_group`, `seeds_harmonic`. Fewer than 2 bases, unequal lengths or a
    non-finite value: ValueError."""
    return _nested_summary(a, b, groups, level, within_sd, "nested_summary")


def _nested_summary(a, b, groups, level, within_sd, who) -> dict:
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    d, labels, m_g, n_g, pooled = _nested_parts(a, b, groups, who)
    G = len(labels)
    if G < 2:
        raise ValueError(f"{who} needs at least 2 base models, got {G}")
    if within_sd is not None and not (math.isfinite(within_sd) and within_sd >= 0):
        raise ValueError(f"within_sd must be a finite value >= 0, got {within_sd}")
    from scipy.stats import t as student_t

    q = 0.5 + level / 2
    mean = float(m_g.mean())
    var_m = float(m_g.var(ddof=1))
    se = math.sqrt(var_m / G)
    half = float(student_t.ppf(q, G - 1)) * se
    low, high = mean - half, mean + half
    if within_sd is not None:
        within, source = float(within_sd), "given"
    else:
        within, source = pooled, ("pooled" if math.isfinite(pooled) else "none")
    s_h = G / float((1.0 / n_g).sum())
    tau = math.sqrt(max(0.0, var_m - within ** 2 / s_h)) if math.isfinite(within) else math.nan
    if G >= 3 and math.isfinite(tau):
        p_half = float(student_t.ppf(q, G - 2)) * math.sqrt(tau ** 2 + se ** 2)
        pred_low, pred_high = mean - p_half, mean + p_half
    else:
        pred_low = pred_high = math.nan
    excludes = low > 0 or high < 0
    includes = pred_low <= 0 <= pred_high  # False when nan
    return {"mean": mean, "low": low, "high": high, "se": se, "df": G - 1, "level": level,
            "n_groups": G, "n_runs": int(d.size), "between_sd": tau, "within_sd": within,
            "within_source": source, "within_sd_pooled": pooled, "pred_low": pred_low, "pred_high": pred_high,
            "pred_df": G - 2, "base_dependent": bool(excludes and includes), "groups": labels,
            "group_means": m_g.tolist(), "seeds_per_group": [int(s) for s in n_g], "seeds_harmonic": s_h}


def compare_nested(a: Sequence[float], b: Sequence[float], groups: Sequence,
                   level: float = LEVEL) -> tuple[float, float, float]:
    """(mean difference, low, high) over base models with runs nested in bases: the mean of the
    per-base mean differences and its Student-t interval on G - 1 degrees of freedom
    (`nested_summary`, which also gives the spread between bases and a prediction interval)."""
    s = _nested_summary(a, b, groups, level, None, "compare_nested")
    return s["mean"], s["low"], s["high"]


# ---------------------------------------------------------------- one-sided tests, multiplicity, power
# The atlas (grpo_research/analysis/atlas.py) turns each claim into one-sided tests of the mean
# per-seed difference against a bound. At alpha = (1 - level) / 2 = 0.025 a test rejects exactly
# when compare_paired's 95 % interval lies entirely on the claim's side of the bound, so a
# claim's verdict and the interval printed beside it never disagree before multiplicity.
ALPHA = (1.0 - LEVEL) / 2.0


def p_above(d: Sequence[float], bound: float, groups: Sequence | None = None) -> float:
    """One-sided p-value of H0: mean(d) <= bound against mean(d) > bound (Student-t, n - 1 dof).
    Differences without spread (a deterministic metric such as model-state memory) give 0 when
    their mean is above the bound and 1 otherwise; fewer than two values give nan.

    With `groups` (the base model of each difference, runs nested in bases): the same test on the
    G per-base means of d (G - 1 dof), so that at alpha it rejects exactly where
    `compare_nested`'s interval at level 1 - 2 alpha ends; fewer than two bases give nan."""
    x = np.asarray(d, dtype=float)
    if x.ndim != 1 or not np.isfinite(x).all():
        raise ValueError("p_above needs a 1-d sequence of finite values")
    if groups is not None:
        _, _, m_g, _, _ = _nested_parts(x, np.zeros_like(x), groups, "p_above")
        x = m_g  # (G,) per-base means
    if x.size < 2:
        return math.nan
    m, s = float(x.mean()), float(x.std(ddof=1))
    if s == 0.0:
        return 0.0 if m > bound else 1.0
    from scipy.stats import t as student_t

    return float(student_t.sf((m - bound) / (s / math.sqrt(x.size)), x.size - 1))


def p_below(d: Sequence[float], bound: float, groups: Sequence | None = None) -> float:
    """One-sided p-value of H0: mean(d) >= bound against mean(d) < bound (see `p_above`)."""
    return p_above([-v for v in d], -bound, groups)


def benjamini_hochberg(p: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (step-up; Benjamini & Hochberg 1995): rejecting the
    hypotheses whose adjusted value is <= q controls the false-discovery rate at q for
    independent or positively dependent tests. nan stays nan and does not count in m."""
    def step_up(sorted_p: np.ndarray, m: int) -> np.ndarray:
        ranked = sorted_p * m / np.arange(1, m + 1)  # p_(i) * m / i
        return np.minimum.accumulate(ranked[::-1])[::-1]  # monotone from the largest down

    return _adjusted(p, step_up)


def _adjusted(p: Sequence[float], adjust) -> list[float]:
    """`adjust(finite p ascending, m)` applied to the finite p-values, capped at 1, back in their
    places; nan stays nan and does not count in m."""
    vals = np.asarray(p, dtype=float)
    out = np.full(vals.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(vals))
    if ok.size == 0:
        return out.tolist()
    order = ok[np.argsort(vals[ok], kind="stable")]  # indices of finite p, ascending
    out[order] = np.minimum(adjust(vals[order], ok.size), 1.0)
    return out.tolist()


def holm(p: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979): rejecting the hypotheses whose adjusted
    value is <= alpha controls the family-wise error rate at alpha under any dependence between
    the tests. Adjusted p_(i) = max over j <= i of min(1, (m - j + 1) p_(j)), ranks from 1 in
    ascending order. nan stays nan and does not count in m."""
    return _adjusted(p, lambda sorted_p, m: np.maximum.accumulate(sorted_p * (m - np.arange(m))))  # (m-i+1) p_(i)


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


def bases_for_power(distance: float, between_sd: float, within_sd: float, seeds_per_base: int,
                    power: float = 0.8, alpha: float = ALPHA, sides: int = 1, n_max: int = 1000) -> int | None:
    """The smallest number of base models (>= 2) at which the one-sided test on per-base means
    (`p_above(d, bound, groups)`, G - 1 dof) at `alpha` has at least `power` when the mean effect
    over bases lies `distance` beyond the bound, the true per-base effects have SD `between_sd`
    (method x base interaction) and per-run differences within a base have SD `within_sd`, with
    `seeds_per_base` seeds on each base. A per-base mean then has SD
    sqrt(between_sd^2 + within_sd^2 / seeds_per_base), and the power is the noncentral t of
    `power_one_sided` over G of them; `sides` as in `seeds_for_power`. None when even `n_max`
    bases do not reach it: more seeds cannot stand in for bases when between_sd dominates."""
    if seeds_per_base < 1:
        raise ValueError(f"seeds_per_base must be >= 1, got {seeds_per_base}")
    if between_sd < 0 or within_sd < 0:
        raise ValueError(f"between_sd and within_sd must be >= 0, got {between_sd} and {within_sd}")
    sd = math.sqrt(between_sd ** 2 + within_sd ** 2 / seeds_per_base)
    return seeds_for_power(distance, sd, power, alpha, sides, n_max)
