"""A/A calibration of the verdicts: how often does a procedure declare a difference between two
arms that have none?

    python benchmarks/aa_calibration.py --reps 20000                 # simulated arms
    python benchmarks/aa_calibration.py --runs runs/aa --reps 20000  # finished runs of one configuration
    python benchmarks/aa_calibration.py --nested                     # simulated runs nested in base models
    python benchmarks/aa_calibration.py --nested --runs runs/aa      # real runs on several bases (>= 2 seeds each)

Simulated (the default): both arms draw n per-seed accuracies from one distribution (normal with
the spread of the main study's GRPO seeds, and a skewed Beta), the two arms paired at random.
With `--runs DIR`: the final held-out accuracies of every finished run under DIR (one
configuration on many seeds, e.g. 30 or more); each repetition draws 2n distinct runs at random
and splits them into two paired arms of n. For n = 3, 5 and 10 per arm it prints, for each
procedure, the fraction of repetitions whose 95 % interval of the paired difference excludes 0,
with its Monte-Carlo standard error sqrt(p (1 - p) / reps). A calibrated procedure gives 5 %;
issue 17 asks for at most 6.5 %.

With `--atlas K`: the atlas's verdict procedure (grpo_research/analysis/atlas.py) on K claims
with no true difference (each a `greater` claim on simulated A/A differences): the share of
claims declared "reproduced" (a one-sided t-test at 2.5 %, exactly where compare_paired's 95 %
interval ends) before and after the Benjamini-Hochberg adjustment across the K claims, and the
share of atlases with at least one false "reproduced" (with every claim null, the false-discovery
rate equals that family-wise rate). Nominal: 2.5 % per claim unadjusted, at most 2.5 % per atlas
adjusted.

With `--nested` (issue 33): runs nested in base models. Each repetition draws G bases (5 or 8),
a base effect (mean 34, SD 5 points; it cancels in the pairing), a method x base interaction per
base from N(0, SD^2) with SD 0, 2 or 9 points (random with mean 0: the null hypothesis of
`compare_nested` is "the mean effect over the population of bases is 0"), and 1, 2 or 1-3 (drawn
per base from {1, 2, 3}: unbalanced) seeds per base, each arm of a run with seed noise of SD 3.5
points, normal or t(3) scaled to that SD (heavy tails). Per cell it prints the false-difference rate
of `compare_nested`'s 95 % interval and of `compare_paired` on the same pairs taken as independent,
the coverage of `nested_summary`'s 95 % prediction interval of a new base's true effect (one new
interaction drawn per repetition), and the rate of `base_dependent` verdicts (false at interaction
0). With one seed per base the within-base SD cannot be estimated: the true one (3.5 sqrt 2
points for a difference) is passed as a pilot's value (`within_sd=`); likewise in an unbalanced
repetition where no base drew 2 seeds (counted). `--reps` defaults to 4,000 there. Issue 33's
target: compare_nested at most 6.5 % in every cell. With `--nested --runs DIR` (one configuration
on several bases, e.g. `snakemake --cores all results/aa/report.html --config base_seeds='[0, 1,
2, 3, 4, 5, 6, 7]' seeds='[1, 2, 3, 4]'`): each repetition splits every base's seeds at random
into two arms paired within the base, the same four rates on real runs.

Procedures: `bootstrap` (the percentile bootstrap of the paired differences, what the gains
table used before `compare_paired`) and `compare_paired` (Student-t on the paired differences,
grpo_research.analysis.stats). With runs, the draws are not independent across repetitions
(they reuse the same runs), so the Monte-Carlo error understates the uncertainty of a rate
measured on few runs.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grpo_research.analysis.stats import compare_paired, nested_summary, resample_counts  # noqa: E402


def bootstrap_rejects(d: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(R,) bool: the 95 % percentile-bootstrap interval of each row's mean excludes 0. d: (R, n)."""
    n = d.shape[1]
    counts = resample_counts(n, n_boot, seed)  # (B, n), the same resamples for every row
    out = np.empty(len(d), dtype=bool)
    for i in range(0, len(d), 1000):
        means = counts @ d[i : i + 1000].T / n  # (B, r)
        low, high = np.percentile(means, [2.5, 97.5], axis=0)  # (r,), (r,)
        out[i : i + 1000] = (low > 0) | (high < 0)
    return out


def t_rejects(d: np.ndarray) -> np.ndarray:
    """(R,) bool: compare_paired's interval excludes 0 (the rows are the paired differences)."""
    zeros = np.zeros(d.shape[1])
    res = [compare_paired(row, zeros) for row in d]
    return np.array([lo > 0 or hi < 0 for _, lo, hi in res])


def rates(d: np.ndarray, n_boot: int, seed: int) -> dict[str, tuple[float, float]]:
    reps = len(d)
    out = {}
    for name, rej in (("bootstrap", bootstrap_rejects(d, n_boot, seed)), ("compare_paired", t_rejects(d))):
        p = float(rej.mean())
        out[name] = (p, math.sqrt(p * (1 - p) / reps))
    return out


def simulated_differences(dist: str, n: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, n) differences of two arms of n draws from one distribution, paired at random."""
    if dist == "normal":  # the main study's GRPO seeds: mean 34 %, sd about 3.5 points
        a, b = rng.normal(0.34, 0.035, (reps, n)), rng.normal(0.34, 0.035, (reps, n))
    elif dist == "beta":  # skewed accuracies near a floor: mean 0.1
        a, b = rng.beta(2, 18, (reps, n)), rng.beta(2, 18, (reps, n))
    else:
        raise ValueError(dist)
    return a - b


def run_differences(values: np.ndarray, n: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """(reps, n): each repetition splits 2n distinct runs at random into two paired arms."""
    if len(values) < 2 * n:
        raise SystemExit(f"error: {len(values)} runs cannot make two arms of {n}: need at least {2 * n}")
    idx = np.argsort(rng.random((reps, len(values))), axis=1)[:, : 2 * n]  # (reps, 2n) distinct runs
    v = values[idx]  # (reps, 2n)
    return v[:, :n] - v[:, n:]


def final_accuracies(runs: Path) -> np.ndarray:
    vals = []
    for s in sorted(runs.glob("*/summary.json")):
        acc = json.loads(s.read_text()).get("final_accuracy")
        if acc is None:
            raise SystemExit(f"error: {s}: no final_accuracy")
        vals.append(float(acc))
    if not vals:
        raise SystemExit(f"error: no finished runs (*/summary.json) under {runs}")
    return np.array(vals)


def atlas_rates(d: np.ndarray) -> dict[str, tuple[float, float]]:
    """d: (reps, K, n) A/A differences of K claims per atlas. Rates of false "reproduced" verdicts
    of `greater` claims: per claim unadjusted and Benjamini-Hochberg adjusted (the atlas's
    verdict), and per atlas (at least one)."""
    from scipy.stats import t as student_t

    from grpo_research.analysis.stats import ALPHA, benjamini_hochberg

    reps, k, n = d.shape
    t = d.mean(axis=2) / (d.std(axis=2, ddof=1) / math.sqrt(n))  # (reps, K)
    p = student_t.sf(t, n - 1)  # (reps, K): stats.p_above(d, 0) of every claim
    raw = p <= ALPHA
    adj = np.array([benjamini_hochberg(row) for row in p]) <= ALPHA  # (reps, K)
    out = {}
    for name, x in (("per claim, unadjusted", raw.mean()), ("per claim, BH", adj.mean()),
                    ("per atlas, unadjusted", raw.any(axis=1).mean()), ("per atlas, BH", adj.any(axis=1).mean())):
        x = float(x)
        m = reps * k if name.startswith("per claim") else reps
        out[name] = (x, math.sqrt(x * (1 - x) / m))
    return out


# ---------------------------------------------------------------- runs nested in base models (issue 33)
SEED_SD = 3.5  # points, per arm of a run: the main study's GRPO seeds
WITHIN_SD = SEED_SD * math.sqrt(2)  # SD of a run's paired difference within a base


def seed_noise(noise: str, size, rng: np.random.Generator) -> np.ndarray:
    """Seed noise of SD SEED_SD points: normal, or t(3) (variance 3) scaled to that SD."""
    if noise == "normal":
        return rng.normal(0.0, SEED_SD, size)
    if noise == "t3":
        return rng.standard_t(3, size) * SEED_SD / math.sqrt(3.0)
    raise ValueError(noise)


def nested_cell(noise: str, interaction_sd: float, n_bases: int, seeds: str, reps: int,
                rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """One cell of A/A repetitions with runs nested in bases; rates with their Monte-Carlo SE.
    seeds: "1", "2" (every base) or "1-3" (each base draws 1, 2 or 3)."""
    hits = {"compare_nested": 0, "compare_paired": 0, "prediction coverage": 0, "base_dependent": 0}
    pilot_used = 0
    for _ in range(reps):
        s_g = rng.integers(1, 4, n_bases) if seeds == "1-3" else np.full(n_bases, int(seeds))  # (G,)
        groups = np.repeat(np.arange(n_bases), s_g)  # (n,) base of each run
        base = rng.normal(34.0, 5.0, n_bases)  # (G,) base accuracy, points; cancels in a - b
        gamma = rng.normal(0.0, interaction_sd, n_bases) if interaction_sd > 0 else np.zeros(n_bases)
        a = (base + gamma / 2)[groups] + seed_noise(noise, groups.size, rng)  # (n,)
        b = (base - gamma / 2)[groups] + seed_noise(noise, groups.size, rng)  # (n,)
        pilot = None if (s_g >= 2).any() else WITHIN_SD
        pilot_used += pilot is not None
        s = nested_summary(a, b, groups, within_sd=pilot)
        _, lo_p, hi_p = compare_paired(a, b)
        new = rng.normal(0.0, interaction_sd) if interaction_sd > 0 else 0.0  # a new base's true effect
        hits["compare_nested"] += s["low"] > 0 or s["high"] < 0
        hits["compare_paired"] += lo_p > 0 or hi_p < 0
        hits["prediction coverage"] += s["pred_low"] <= new <= s["pred_high"]
        hits["base_dependent"] += s["base_dependent"]
    out = {}
    for k, h in hits.items():
        p = h / reps
        out[k] = (p, math.sqrt(p * (1 - p) / reps))
    out["pilot_used"] = (pilot_used, 0.0)
    return out


def nested_table(reps: int, seed: int, limit: float = 0.065) -> list[str]:
    lines = [f"# A/A with runs nested in base models, {reps} repetitions per cell; rates of a 95 % interval "
             f"excluding 0 (nominal 5 %, target <= {100 * limit:.1f} % for compare_nested),",
             "# coverage of the 95 % prediction interval of a new base's true effect (nominal 95 %), "
             "base_dependent verdicts (false at interaction 0);",
             f"# seed noise SD {SEED_SD} points per arm; seeds=1: within-base SD not estimable, the true "
             f"{WITHIN_SD:.2f} passed as a pilot (within_sd=)"]
    cell = 0
    for noise in ("normal", "t3"):
        for interaction_sd in (0.0, 2.0, 9.0):
            for n_bases in (5, 8):
                for seeds in ("1", "2", "1-3"):
                    r = nested_cell(noise, interaction_sd, n_bases, seeds, reps, np.random.default_rng([seed, cell]))
                    cell += 1
                    pilot = int(r.pop("pilot_used")[0])
                    tag = {"1": "1 (pilot)", "2": "2", "1-3": "1-3"}[seeds]
                    cells = "  ".join(f"{k} {100 * p:5.2f} % +- {100 * se:.2f}" for k, (p, se) in r.items())
                    flag = f"  OVER {100 * limit:.1f} %" if r["compare_nested"][0] > limit else ""
                    note = f"  (pilot in {pilot} reps: no base drew 2 seeds)" if seeds == "1-3" and pilot else ""
                    lines.append(f"{noise:>6s}  interaction {interaction_sd:3.0f}  G={n_bases}  seeds={tag:<9s} "
                                 f"{cells}{flag}{note}")
    return lines


def runs_by_base(runs: Path) -> dict[int, np.ndarray]:
    """Final held-out accuracies (points) of the finished runs under `runs`, by base model (the
    base seed of each run id: `grpo-base3-seed2` is base 3)."""
    from grpo_research.run_ids import base_of

    out: dict[int, list[float]] = {}
    for s in sorted(runs.glob("*/summary.json")):
        acc = json.loads(s.read_text()).get("final_accuracy")
        if acc is None:
            raise SystemExit(f"error: {s}: no final_accuracy")
        out.setdefault(base_of(s.parent.name), []).append(100 * float(acc))
    if len(out) < 2:
        raise SystemExit(f"error: runs under {runs} are on {len(out)} base model(s); --nested needs at least 2")
    return {b: np.array(v) for b, v in sorted(out.items())}


def split_within_bases(by_base: dict[int, np.ndarray], rng: np.random.Generator):
    """Arms a and b (values) and the base of each pair: every base's runs in a random order, the
    first floor(S/2) to a, the next floor(S/2) to b, paired in that order."""
    a, b, groups = [], [], []
    for g, v in by_base.items():
        k = len(v) // 2
        perm = rng.permutation(len(v))
        a += list(v[perm[:k]])
        b += list(v[perm[k:2 * k]])
        groups += [g] * k
    return a, b, groups


def nested_runs_cell(by_base: dict[int, np.ndarray], reps: int, rng: np.random.Generator) -> dict:
    """A/A on real runs nested in bases: each repetition splits every base's seeds at random into
    two arms of floor(S/2) runs, pairs them within the base, and tests arm a - arm b with
    `compare_nested` (groups: the bases) and `compare_paired` (the pairs as independent). The
    arms share every base, so the true effect is 0 on every base: the prediction interval should
    cover 0 and nothing is base-dependent."""
    hits = {"compare_nested": 0, "compare_paired": 0, "prediction coverage": 0, "base_dependent": 0}
    for _ in range(reps):
        a, b, groups = split_within_bases(by_base, rng)
        s = nested_summary(a, b, groups)
        _, lo_p, hi_p = compare_paired(a, b)
        hits["compare_nested"] += s["low"] > 0 or s["high"] < 0
        hits["compare_paired"] += lo_p > 0 or hi_p < 0
        hits["prediction coverage"] += s["pred_low"] <= 0 <= s["pred_high"]
        hits["base_dependent"] += s["base_dependent"]
    return {k: (h / reps, math.sqrt((h / reps) * (1 - h / reps) / reps)) for k, h in hits.items()}


def nested_runs_table(runs: Path, reps: int, seed: int) -> list[str]:
    by_base = runs_by_base(runs)
    counts = sorted({len(v) for v in by_base.values()})
    if counts[0] < 2:
        raise SystemExit(f"error: every base needs at least 2 runs to split into two arms; one has {counts[0]}")
    arm = np.array([v.mean() for v in by_base.values()])
    within = np.sqrt(np.mean([v.var(ddof=1) for v in by_base.values()]))
    r = nested_runs_cell(by_base, reps, np.random.default_rng(seed))
    cells = "  ".join(f"{k} {100 * p:5.2f} % +- {100 * se:.2f}" for k, (p, se) in r.items())
    return [f"# A/A on real runs nested in base models: {runs}, {len(by_base)} bases x "
            f"{'-'.join(map(str, counts))} seeds; per-base means {arm.min():.1f}-{arm.max():.1f} % (SD "
            f"{arm.std(ddof=1):.1f} points), pooled within-base SD of a run {within:.1f} points",
            f"# {reps} repetitions, each a random split of every base's seeds into two arms paired within the "
            "base (the repetitions reuse the same runs: the Monte-Carlo error understates the uncertainty)",
            f"  real  G={len(by_base)}  {cells}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, help="a folder of finished runs of one configuration (else: simulated)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions (default 20000; 4000 with --nested)")
    ap.add_argument("--n", default="3,5,10", help="seeds per arm, comma-separated")
    ap.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples per interval")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--atlas", type=int, default=0, metavar="K",
                    help="also the atlas's verdicts over K null claims (simulated normal differences)")
    ap.add_argument("--nested", action="store_true",
                    help="simulated runs nested in base models: compare_nested against compare_paired (issue 33)")
    a = ap.parse_args(argv)
    if a.nested:
        lines = (nested_runs_table(a.runs, a.reps or 4000, a.seed) if a.runs is not None
                 else nested_table(a.reps or 4000, a.seed))
        for line in lines:
            print(line, flush=True)
        return 0
    if a.reps is None:
        a.reps = 20000
    rng = np.random.default_rng(a.seed)
    ns = [int(x) for x in a.n.split(",")]
    if a.runs is not None:
        values = final_accuracies(a.runs)
        sources = {f"runs ({len(values)} under {a.runs}, sd {100 * values.std(ddof=1):.1f} points)":
                   lambda n: run_differences(values, n, a.reps, rng)}
    else:
        sources = {d: (lambda n, d=d: simulated_differences(d, n, a.reps, rng)) for d in ("normal", "beta")}
    print(f"# false-difference rate of a 95 % interval of the paired difference (nominal 5 %), {a.reps} repetitions")
    for label, draw in sources.items():
        for n in ns:
            r = rates(draw(n), a.n_boot, a.seed)
            cells = "  ".join(f"{k} {100 * p:5.2f} % +- {100 * se:.2f}" for k, (p, se) in r.items())
            print(f"{label:>10s}  n={n:<3d} {cells}")
    if a.atlas:
        print(f"# the atlas's false 'reproduced' verdicts over {a.atlas} null claims (nominal: 2.5 % per claim "
              f"unadjusted, <= 2.5 % per atlas with BH), {a.reps} atlases")
        for n in ns:
            d = simulated_differences("normal", n, a.reps * a.atlas, rng).reshape(a.reps, a.atlas, n)
            cells = "  ".join(f"{k} {100 * p:5.2f} % +- {100 * se:.2f}" for k, (p, se) in atlas_rates(d).items())
            print(f"    normal  n={n:<3d} {cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
