"""The replication atlas (issues 17 and 34): every claim of `experiments/claims.yaml` tested on the runs of
its arms, with a verdict whose error rate is known.

For each claim (`claim_row`):
- **values**: one number per arm and seed (`metric_value`): `heldout` / `heldout_ood` the
  trainer's last held-out evaluation; a benchmark entry (`arith`, `arith_pass64`) its pass@1 from
  the run's eval file, `entry:pass@K` / `entry:maj@K` that k; `train:KEY` the mean of KEY over
  the run's training steps; `heldout_per_update` the held-out accuracy gained from step 0 to the
  end, divided by the policy updates taken. The arm `base model` is each run's own step-0 evaluation for
  `heldout`/`heldout_ood` (paired with the other arm's run of the same seed), and the study's
  one base-model evaluation (`<runs>/<study>/_base_model/eval/`) for a benchmark entry: a
  constant, so its own evaluation noise is not in the interval (said in the row's note).
- **effect**: the mean over common (base, seed) units of d = a - ratio x b (ratio 1 unless the
  claim sets it), with `stats.compare_paired`'s 95 % Student-t interval on one base and
  `stats.compare_nested`'s (per-base means) on two or more; an ordering reports its weakest step.
- **tests**: two one-sided p-values at alpha = 0.025 (`stats.p_above`/`p_below`), which reject
  exactly when that 95 % interval lies beyond the bound: `p_claim` (the claim as registered)
  and `p_contra` (its negation at the smallest effect that matters, delta):

  | kind / predicted | reproduced when | contradicted when |
  |---|---|---|
  | greater | d > 0 | d < delta (no effect as large as delta; a reversed sign included) |
  | less | d < 0 | d > -delta |
  | not_greater | d < delta | d > delta |
  | not_less | d > -delta | d < -delta |
  | equivalence (margin M) | -M < d < M (two one-sided tests) | d > M or d < -M |
  | ordering a1 < a2 < ... | every step a(i+1) - a(i) > 0 (intersection-union: the largest p) | some step < delta (Bonferroni over steps) |

- **validity** (grpo_research.analysis.validity), before any test: runs that lack the claim's
  metric or a check's metric give "rerun needed"; a failed check (an accuracy arm at its floor or
  ceiling, e.g. the 4-digit OOD split where every model scores 0 %; a mechanism that cannot act,
  e.g. a clip fraction of 0) gives "not testable here", naming the check and its measured value.
  A `measurement: true` claim (no sampling variance: memory accounting) is "reproduced" when it
  holds on every run; a `positive_control` is tested alone, unadjusted. All of these stay
  outside the multiplicity family.
- **multiplicity** over the family (`verdicts`): in the exploratory phase Benjamini-Hochberg,
  separately for the `p_claim` and the `p_contra` family (`stats.benjamini_hochberg`): the
  expected share of false "reproduced" (and of false "contradicted") verdicts is at most 2.5 %;
  in the confirmatory phase Holm over the 2k p-values of both directions of the k frozen claims
  (`stats.holm`): the chance of any false verdict is at most 2.5 % under any dependence
  (benchmarks/holm_fwer.py). A verdict needs an adjusted p <= 0.025; the unadjusted one (the
  interval alone) is kept beside it (`verdict_unadjusted`).
- **what a decision needs** (`_decision_plan`): new bases x 1 seed for 80 % power at the
  planning point, and their core-hours; the freeze (grpo_research.analysis.freeze) chooses the
  confirmatory family from these figures.
- **seeds needed** (`seeds_needed`, for an inconclusive claim): from the spread of the per-seed
  differences seen so far, the seeds at which its test has 80 % power when the truth sits at the
  planning point (greater/less: delta; not_greater/not_less and equivalence: 0). Those seeds are
  for a new, fixed set of runs in which the present ones are pilots, not for adding seeds to
  these runs and testing again (optional stopping); a spread from 3 seeds is itself uncertain.
- **evaluation noise**: for accuracies, the binomial variance of each arm's evaluation over its
  problems, p(1 - p) / N, summed over the arms, as a share of the variance of the differences.
  An upper bound: arms evaluated on the same problems share that noise in part.
- **probability of improvement** (rliable's, Agarwal et al. 2021, arXiv 2108.13264): P(a > b) over
  run pairs with a bootstrap interval, descriptive only (a bootstrap over 3 seeds is too narrow;
  the verdict is the paired t above).

Pre-registration: the commit that last changed the claims file and its date
(`claims_commit`), and per claim the creation time of the first run of its arms: the report says
whether every run is younger than the committed claims.

Departure: claims with `needs` (their arms are not run by any study) are listed as deferred.
"""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_research.analysis import validity
from grpo_research.analysis.arm_values import ACCURACY, BASE_ARM, ArmValues, arm_values, metric_unit
from grpo_research.analysis.load import Run
from grpo_research.analysis.stats import (ALPHA, bases_for_power, benjamini_hochberg, compare_nested,
                                          compare_paired, holm, nested_summary, p_above, p_below, seeds_for_power)
from grpo_research.errors import UsageError

POWER = 0.8
# Planning value of the method x base interaction SD of an accuracy difference, for a claim whose
# runs share one base: the variance pilot's GRPO - PPO lambda 0.95 between-base SD, 1.7 points
# (experiments/variance_pilot.yaml; benchmarks/RESULTS.md, issue 33). Pairs of unlike methods
# vary more between bases (GRPO - the supervised control: 13.7 points there): a floor, not a bound.
PILOT_BETWEEN_SD = 0.017
VERDICTS = ("reproduced", "contradicted", "inconclusive", "not testable here", "rerun needed", "deferred")


# ---------------------------------------------------------------- one claim
def _paired(a: ArmValues, b: ArmValues, ratio: float = 1.0) -> tuple[list[tuple[int, int]], np.ndarray]:
    """The (base, seed) units both arms have, and a - ratio x b on each."""
    seeds = sorted(set(a.values) & set(b.values))
    return seeds, np.array([a.values[s] - ratio * b.values[s] for s in seeds], dtype=float)


def _groups(units: list[tuple[int, int]]) -> list[int] | None:
    """The base of each unit when the units span two or more base models (the tests and the
    interval are then on per-base means: stats.compare_nested), else None (one base: by seed)."""
    bases = [u[0] for u in units]
    return bases if len(set(bases)) >= 2 else None


def _interval(d: np.ndarray, groups: list[int] | None) -> tuple[float, float, float]:
    zero = np.zeros_like(d)
    return compare_nested(d, zero, groups) if groups else compare_paired(d, zero)


def _tests(kind: str, predicted: str | None, d: np.ndarray, delta: float, margin: float | None,
           groups: list[int] | None = None) -> tuple[float, float]:
    """(p_claim, p_contra) of a two-arm claim on differences `d` (table of the module docstring);
    `groups`: the base of each difference (tests on per-base means), None on one base."""
    def above(bound):
        return p_above(d, bound, groups=groups)

    def below(bound):
        return p_below(d, bound, groups=groups)

    if kind == "equivalence":
        return (max(above(-margin), below(margin)), min(above(margin), below(-margin)))
    return {
        "greater": lambda: (above(0.0), below(delta)),
        "less": lambda: (below(0.0), above(-delta)),
        "not_greater": lambda: (below(delta), above(delta)),
        "not_less": lambda: (above(-delta), below(-delta)),
    }[predicted]()


def _plan(kind: str, predicted: str | None, d: np.ndarray, delta: float, margin: float | None) -> int | None:
    """Seeds for 80 % power at the claim's planning point, from the spread of `d` (None: < 2 seeds)."""
    if d.size < 2:
        return None
    sd = float(d.std(ddof=1))
    if kind == "equivalence":
        return seeds_for_power(margin, sd, POWER, sides=2)
    return seeds_for_power(delta, sd, POWER)


def _decision_plan(kind: str, predicted: str | None, d: np.ndarray, groups: list[int] | None, delta: float,
                   margin: float | None, accuracy: bool, arms: list[ArmValues]) -> dict[str, Any]:
    """What a decision would need on new base models with one seed each: `bases_needed` for 80 %
    power at the claim's planning point (stats.bases_for_power) from the within-base SD of the
    differences and the between-base SD (measured when the runs span >= 2 bases, else the
    pilot's PILOT_BETWEEN_SD for an accuracy and 0 otherwise: `between_source`), and
    `core_hours_needed`: those bases times the arms' mean training seconds per run (1 thread),
    base-model builds and evaluations not counted."""
    out = {"sd_diff": float(d.std(ddof=1)) if d.size >= 2 else math.nan, "between_sd": math.nan,
           "between_source": "", "bases_needed": None, "core_hours_needed": math.nan}
    if d.size < 2:
        return out
    if groups:
        s = nested_summary(d, np.zeros_like(d), groups)
        within, between, source = s["within_sd"], s["between_sd"], "measured"
        if not math.isfinite(within):  # one seed per base: the spread of the per-base differences holds both
            within, between, source = float(np.std(s["group_means"], ddof=1)), 0.0, "in the per-base spread"
    else:
        within, between = out["sd_diff"], (PILOT_BETWEEN_SD if accuracy else 0.0)
        source = "pilot (issue 33)" if accuracy else "unknown (taken as 0)"
    distance, sides = (margin, 2) if kind == "equivalence" else (delta, 1)
    n = bases_for_power(distance, between, within, 1, POWER, sides=sides) if distance else None
    seconds = [np.mean([sum(r.get("step_s") or 0.0 for r in run.train) for run in a.runs.values()])
               for a in arms if a.runs]
    out.update(between_sd=between, between_source=source, bases_needed=n,
               core_hours_needed=(n * float(sum(seconds)) / 3600.0) if n and seconds else math.nan)
    return out


def _eval_noise_share(arms: list[ArmValues], seeds: list[int], d: np.ndarray) -> float | None:
    """Binomial evaluation variance of the arms over the variance of the differences (upper bound)."""
    if d.size < 2 or any(not a.n_problems for a in arms):
        return None
    var_d = float(d.var(ddof=1))
    noise = 0.0
    for a in arms:
        for s in seeds:
            p, n = a.values[s], a.n_problems.get(s)
            if not n:
                return None
            noise += p * (1 - p) / n / len(seeds)
    return math.inf if var_d == 0 else noise / var_d


def _untestable(row: dict[str, Any], claim: dict[str, Any], arms: list[ArmValues], units: list,
                notes: list[str]) -> dict[str, Any] | None:
    """The finished row, outside the family, when an arm's runs lack the metric ("rerun needed")
    or a validity check fails ("not testable here": analysis.validity); None when testable. The
    checks read the arms' values on the units they share."""
    metric = claim["metric"]
    lacking = [f"{a.missing} of {a.label}'s runs" for a in arms if a.missing]
    if lacking:
        row.update(verdict="rerun needed", failed_precondition=f"{' and '.join(lacking)} do not record {metric}",
                   note="; ".join(notes + ["run dirs older than the metric: rerun them (nothing is guessed)"]))
        return row
    shared = [replace(a, values={u: a.values[u] for u in units}) for a in arms]
    status, lines = validity.evaluate(claim.get("validity") or [], shared, metric, metric_unit(metric) == ACCURACY)
    if status is None:
        row["validity"] = "; ".join(lines)
        return None
    row.update(verdict=status, failed_precondition=lines[0], note="; ".join(notes + lines[1:]))
    return row


def _measured(row: dict[str, Any], kind: str, predicted: str | None, d: np.ndarray, delta: float,
              margin: float | None) -> dict[str, Any]:
    """A measurement without sampling variance (`measurement: true`, e.g. memory accounting):
    the claim holds when it holds on every unit; outside the multiplicity family."""
    holds = {
        "greater": d > 0, "less": d < 0, "not_greater": d < delta, "not_less": d > -delta,
    }.get(predicted) if kind == "difference" else np.abs(d) < margin
    row.update(effect=float(d.mean()), low=float(d.min()), high=float(d.max()),
               verdict="reproduced" if bool(np.all(holds)) else "contradicted",
               note="; ".join(x for x in [row.get("note", ""), "a measurement without sampling variance, outside the "
                                          "family: reproduced when it holds on every run (range shown)"] if x))
    return row


def probability_of_improvement(a: list[float], b: list[float], reps: int = 2000, seed: int = 0):
    """(P(a > b), low, high): the probability of improvement of rliable (Agarwal et al. 2021,
    arXiv 2108.13264), P(X > Y) + P(X = Y) / 2 over all pairs of one run of each arm, i.e. the
    Mann-Whitney U statistic over n x m (`scipy.stats.mannwhitneyu`), with the 95 % percentile
    interval of an independent-samples bootstrap of the two arms' runs (arch's
    `IndependentSamplesBootstrap`, which rliable's stratified bootstrap reduces to for one task);
    descriptive. rliable itself is not used: its 1.2 release requires arch < 8, and arch 7 does
    not import under pandas 3."""
    from arch.bootstrap import IndependentSamplesBootstrap
    from scipy.stats import mannwhitneyu

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)

    def poi(xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
        return np.array([mannwhitneyu(xs, ys, method="asymptotic").statistic / (len(xs) * len(ys))])

    low, high = IndependentSamplesBootstrap(x, y, seed=seed).conf_int(poi, reps=reps, method="percentile")[:, 0]
    return float(poi(x, y)[0]), float(low), float(high)


def _tuned_text(claim: dict[str, Any]) -> str:
    """Which claims compare arms at their own tuned lr (the freeze's `tuned_lr`), or will."""
    if claim.get("tuned_lr"):
        return "lr tuned per arm: " + ", ".join(f"{k} {v:.3g}" for k, v in claim["tuned_lr"].items())
    if claim.get("tuned"):
        return "lr tuned per arm in the confirmatory phase; these runs use the study's lr"
    return ""


def claim_row(claim: dict[str, Any], runs: dict[str, list[Run]], bases: dict[str, dict[int, Run]],
              improvement: bool = True) -> dict[str, Any]:
    """Everything the atlas says about one claim before multiplicity (see the module docstring)."""
    metric, kind, predicted = claim["metric"], claim["kind"], claim.get("predicted")
    delta, margin, ratio = float(claim["smallest_effect"]), claim.get("margin"), float(claim.get("ratio", 1.0))
    arms = claim["arms"]
    row: dict[str, Any] = {
        "id": claim["id"], "claim": claim["claim"], "arxiv": (claim.get("source") or {}).get("arxiv"),
        "kind": kind if kind != "difference" else f"difference ({predicted})", "metric": metric,
        "unit": metric_unit(metric), "budget": claim["budget"], "setting": claim["setting"],
        "arms": ", ".join(f"{a['study']}/{a['variant']}" for a in arms), "smallest_effect": delta,
        "margin": margin, "ratio": claim.get("ratio"), "n_seeds": 0, "effect": math.nan, "low": math.nan,
        "high": math.nan, "p_claim": math.nan, "p_contra": math.nan, "seeds_needed": None,
        "eval_noise_share": None, "p_improvement": math.nan, "p_improvement_low": math.nan,
        "p_improvement_high": math.nan, "first_run_created": None, "note": "", "n_bases": 0,
        "failed_precondition": "", "validity": "", "sd_diff": math.nan, "between_sd": math.nan,
        "between_source": "", "bases_needed": None, "core_hours_needed": math.nan, "tuned": _tuned_text(claim),
        "positive_control": bool(claim.get("positive_control")),
    }
    if "needs" in claim:
        row.update(verdict="deferred", note=f"needs {claim['needs']}")
        return row
    notes = []
    if kind == "ordering":
        values = [arm_values(a, metric, runs, bases) for a in arms]
        steps = []
        for lo, hi in zip(values, values[1:]):
            seeds, d = _paired(hi, lo)
            steps.append((seeds, d, hi, lo))
        n = min(d.size for _, d, _, _ in steps)
        row["n_seeds"] = n
        row["n_bases"] = min(len({u[0] for u in s_}) for s_, _, _, _ in steps)
        row["first_run_created"] = min((t for v in values for t in v.created), default=None)
        if any(v.missing for v in values):
            return _untestable(row, claim, values, [], notes)
        if n < 2:
            row.update(verdict="inconclusive", note="fewer than 2 seeds common to the arms")
            return row
        untestable = _untestable(row, claim, values, sorted(set.intersection(*(set(v.values) for v in values))), notes)
        if untestable:
            return untestable
        p_claims = [p_above(d, 0.0, groups=_groups(s)) for s, d, _, _ in steps]
        p_contras = [p_below(d, delta, groups=_groups(s)) for s, d, _, _ in steps]
        worst = int(np.argmax(p_claims))
        seeds, d, hi, lo = steps[worst]
        mean, low, high = _interval(d, _groups(seeds))
        plans = [_plan("difference", "greater", d_, delta, None) for _, d_, _, _ in steps]
        row.update(effect=mean, low=low, high=high, p_claim=max(p_claims),
                   p_contra=min(1.0, (len(steps)) * min(p_contras)),
                   seeds_needed=None if any(p is None for p in plans) else max(plans),
                   eval_noise_share=_eval_noise_share([hi, lo], seeds, d),
                   **_decision_plan("difference", "greater", d, _groups(seeds), delta, None, row["unit"] == ACCURACY,
                                    values))
        notes.append(f"effect: the weakest step, {hi.label} - {lo.label}")
        return {**row, "note": "; ".join(notes)}
    base_first = arms[0]["variant"] == BASE_ARM  # at most one arm is the base model (load_claims)
    plain = arm_values(arms[1] if base_first else arms[0], metric, runs, bases)
    other = arm_values(arms[0] if base_first else arms[1], metric, runs, bases, partner=plain)
    a, b = (other, plain) if base_first else (plain, other)
    seeds, d = _paired(a, b, ratio)
    row["n_seeds"] = len(seeds)
    row["n_bases"] = len({u[0] for u in seeds})
    row["first_run_created"] = min(a.created + b.created, default=None)
    if any(v.one_model for v in (a, b)):
        notes.append("base model: one evaluation, its noise not in the interval")
    if ratio != 1.0:
        notes.append(f"per seed a - {ratio:g} x b")
    if a.missing or b.missing:
        return _untestable(row, claim, [a, b], [], notes)
    if len(seeds) < 2:
        row.update(verdict="inconclusive", note="; ".join(notes + ["fewer than 2 seeds common to the arms"]))
        return row
    untestable = _untestable(row, claim, [a, b], seeds, notes)
    if untestable:
        return untestable
    if claim.get("measurement"):
        row["note"] = "; ".join(notes)
        return _measured(row, kind, predicted, d, delta, margin)
    groups = _groups(seeds)
    if groups:
        notes.append(f"{len(set(groups))} base models: interval and tests on per-base means")
    mean, low, high = _interval(d, groups)
    p_claim, p_contra = _tests(kind, predicted, d, delta, margin, groups)
    row.update(effect=mean, low=low, high=high, p_claim=p_claim, p_contra=p_contra,
               seeds_needed=_plan(kind, predicted, d, delta, margin), eval_noise_share=_eval_noise_share([a, b], seeds, d),
               **_decision_plan(kind, predicted, d, groups, delta, margin, row["unit"] == ACCURACY, [a, b]))
    if improvement and not any(v.one_model for v in (a, b)):
        row["p_improvement"], row["p_improvement_low"], row["p_improvement_high"] = probability_of_improvement(
            [a.values[s] for s in seeds], [ratio * b.values[s] for s in seeds])
    row["note"] = "; ".join(notes)
    return row


# ---------------------------------------------------------------- the atlas
PROCEDURES = {"bh": "Benjamini-Hochberg within each direction (false-discovery rate)",
              "holm": "Holm over both directions of every claim (family-wise error rate)"}


def verdicts(rows: list[dict[str, Any]], alpha: float = ALPHA, procedure: str = "bh",
             phase: str = "exploratory") -> pd.DataFrame:
    """The rows with adjusted p-values and verdicts. The family: every row without a preset
    verdict (not "not testable here", "rerun needed", a measurement, too few seeds, deferred).
    `procedure` "bh": Benjamini-Hochberg within the `p_claim` and within the `p_contra` family
    (the exploratory phase); "holm": Holm over the 2k p-values of both directions of the k
    claims at once (the confirmatory phase: P(any false verdict) <= alpha under any dependence).
    Columns added: `*_adjusted`, `verdict`, `verdict_unadjusted`, `phase`, `family`, `p_adjusted`
    (the adjusted p behind the verdict, or "outside the family")."""
    if procedure not in PROCEDURES:
        raise UsageError(f"multiplicity procedure {procedure!r}: use one of {', '.join(PROCEDURES)}")
    table = pd.DataFrame(rows)
    if "verdict" not in table:
        table["verdict"] = None
    control = table["positive_control"].fillna(False).astype(bool) if "positive_control" in table else False
    tested = table["verdict"].isna() & ~control
    pc = [p if t else math.nan for p, t in zip(table["p_claim"], tested)]
    pn = [p if t else math.nan for p, t in zip(table["p_contra"], tested)]
    if procedure == "bh":
        table["p_claim_adjusted"], table["p_contra_adjusted"] = benjamini_hochberg(pc), benjamini_hochberg(pn)
    else:
        both = holm(pc + pn)
        table["p_claim_adjusted"], table["p_contra_adjusted"] = both[:len(pc)], both[len(pc):]
    out_v, out_u, fam, padj = [], [], [], []
    for t, (_, r) in zip(tested, table.iterrows()):
        if not t and r.get("positive_control") and pd.isna(r["verdict"]):  # tested alone: a check of the setting
            v = _verdict(r["p_claim"], r["p_contra"], alpha)
            out_v.append(v)
            out_u.append(v)
            fam.append("outside the family (positive control)")
            padj.append("outside the family")
            continue
        if not t:
            out_v.append(r["verdict"])
            out_u.append(r["verdict"])
            why = "a measurement" if "measurement without sampling variance" in str(r.get("note") or "") else r["verdict"]
            fam.append(f"outside the family ({why})")
            padj.append("outside the family")
            continue
        v = _verdict(r["p_claim_adjusted"], r["p_contra_adjusted"], alpha)
        out_v.append(v)
        out_u.append(_verdict(r["p_claim"], r["p_contra"], alpha))
        fam.append(procedure)
        p = {"reproduced": r["p_claim_adjusted"], "contradicted": r["p_contra_adjusted"]}.get(
            v, min(r["p_claim_adjusted"], r["p_contra_adjusted"]))
        padj.append(f"{p:.3g}")
    table["verdict"], table["verdict_unadjusted"], table["family"], table["p_adjusted"] = out_v, out_u, fam, padj
    table["phase"] = phase
    table.loc[table["verdict"] != "inconclusive", "seeds_needed"] = None
    both = (table["p_claim_adjusted"] <= alpha) & (table["p_contra_adjusted"] <= alpha)
    table.loc[both, "note"] = [("; ".join([n, "shown, but smaller than the smallest effect that matters"])).lstrip("; ")
                               for n in table.loc[both, "note"]]
    return table


def _verdict(p_claim: float, p_contra: float, alpha: float) -> str:
    if isinstance(p_claim, float) and math.isnan(p_claim):
        return "inconclusive"
    if p_claim <= alpha:
        return "reproduced"
    if p_contra <= alpha:
        return "contradicted"
    return "inconclusive"


def claims_commit(path: str | Path) -> dict[str, Any]:
    """The commit that last changed the claims file: {commit, date, dirty} (None where unknown)."""
    from grpo_research.provenance import git

    path = Path(path).resolve()
    line = git(path.parent, "log", "-1", "--format=%H %cI %ct", "--", path.name)
    if not line:
        return {"commit": None, "date": None, "time": None, "dirty": None}
    commit, date, ts = line.split()
    dirty = git(path.parent, "status", "--porcelain", "--", path.name)
    return {"commit": commit, "date": date, "time": float(ts), "dirty": bool(dirty)}


def build_atlas(claims: list[dict[str, Any]], runs: dict[str, list[Run]], bases: dict[str, dict[int, Run]],
                improvement: bool = True, procedure: str = "bh", phase: str = "exploratory") -> pd.DataFrame:
    """One row per claim: effect, interval, tests, adjusted verdict, seeds needed, notes."""
    return verdicts([claim_row(c, runs, bases, improvement) for c in claims], procedure=procedure, phase=phase)
