"""Paired comparisons of a study's variants, from the final table (analysis.aggregate):
every pair per benchmark paired by seed, or by (base, seed) on two or more base models
(`paired_difference`), or, where it cannot be paired (the base model is one model), by whether
their intervals overlap, saying so (`comparisons`, in words `comparison_sentence`); the
comparisons against each benchmark's best variant (`against_best`); the variance components of
the study's compared pairs (`variance_table`: between- and within-base SDs, a new base's
prediction interval) and the study's question that opens its report (`question_markdown`).
"""
from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from grpo_research.analysis.load import label_base, label_kernels
from grpo_research.analysis.stats import compare_paired, intervals_overlap, nested_summary
from grpo_research.provenance import KERNEL_FAMILIES, NATIVE


def comparisons(final: pd.DataFrame) -> list[dict[str, Any]]:
    """Every pair of variants per benchmark. Two variants with at least two seeds in common are
    compared paired by seed (`compare_paired` on their common seeds: `low`/`high` bound the
    difference higher - lower, `shown` when that interval excludes 0). A pair that cannot be
    paired (one model, such as the base model, or fewer than two common seeds) says so and only
    reports whether the two intervals of the table overlap (`shown` when they do not)."""
    out = []
    for bench, g in final.groupby("benchmark", sort=False):
        recs = g.to_dict("records")
        for a, b in combinations(recs, 2):
            hi, lo = (a, b) if a["mean"] >= b["mean"] else (b, a)
            o = {"benchmark": bench, "a": a["variant"], "b": b["variant"], "higher": hi["variant"],
                 "lower": lo["variant"], "difference": hi["mean"] - lo["mean"]}
            per_seed = [_per_seed(r) for r in (hi, lo)]
            common = sorted(set(per_seed[0]) & set(per_seed[1])) if all(r["interval"] == "seeds" for r in (a, b)) else []
            if len(common) >= 2:
                p = paired_difference([per_seed[0][s] for s in common], [per_seed[1][s] for s in common],
                                      [label_base(s) for s in common])
                o.update({k: v for k, v in p.items() if k != "mean"}, paired=True, n=len(common),
                         paired_difference=p["mean"])
            else:
                why = "one model" if any(r["interval"] != "seeds" for r in (a, b)) else "fewer than 2 common seeds"
                o.update(paired=False, why=why, n=len(common),
                         shown=not intervals_overlap((a["low"], a["high"]), (b["low"], b["high"])))
            out.append(o)
    return out


def paired_difference(a: list[float], b: list[float], bases: list[int],
                      within_sd: float | None = None) -> dict[str, Any]:
    """a - b paired by (base, seed): on two or more bases `stats.nested_summary` (the interval
    over per-base means, G - 1 df, the between- and within-base SDs, the prediction interval for
    a new base and `base_dependent`), else `stats.compare_paired` over the seeds of the one base
    (`nested` False: the interval covers RL seeds only). `shown`: the interval excludes 0.
    `within_sd` (a pilot's, same units as a and b): used only where the runs cannot estimate
    a within-base SD (one seed per base); `within_source` says which was used."""
    n_bases = len(set(bases))
    nan = float("nan")
    if n_bases >= 2:
        ns = nested_summary(a, b, bases)
        if within_sd is not None and ns["within_source"] == "none":
            ns = nested_summary(a, b, bases, within_sd=within_sd)
        out = {"mean": ns["mean"], "low": ns["low"], "high": ns["high"], "nested": True, "n_bases": n_bases,
               "between_sd": ns["between_sd"], "within_sd": ns["within_sd"], "pred_low": ns["pred_low"],
               "pred_high": ns["pred_high"], "base_dependent": bool(ns["base_dependent"]),
               "within_source": ns["within_source"]}
    else:
        mean, low, high = compare_paired(a, b)
        out = {"mean": mean, "low": low, "high": high, "nested": False, "n_bases": n_bases,
               "between_sd": nan, "within_sd": float(np.std(np.subtract(a, b), ddof=1)) if len(a) >= 2 else nan,
               "pred_low": nan, "pred_high": nan, "base_dependent": False,
               "within_source": "pooled" if len(a) >= 2 else "none"}
    out["shown"] = bool(out["low"] > 0 or out["high"] < 0)
    return out


def difference_verdict(p: dict[str, Any]) -> str:
    """difference shown / no difference shown / base-dependent (the mean's interval excludes 0
    while the prediction interval for a new base includes it)."""
    if p.get("base_dependent"):
        return "base-dependent"
    return "difference shown" if p["shown"] else "no difference shown"


def _per_seed(row: dict) -> dict[str, float]:
    """A final-table row's values by seed."""
    seeds, values = str(row.get("seeds") or "").split(), str(row.get("values") or "").split()
    return {s: float(v) for s, v in zip(seeds, values)}


def comparison_sentence(o: dict[str, Any]) -> str:
    """One comparison of `comparisons` in words."""
    if o["paired"] and o.get("nested"):
        what = ("the interval excludes 0" if o["shown"] else "the interval includes 0: no difference shown")
        if o.get("base_dependent"):
            what += ", but a new base's prediction interval includes 0: base-dependent"
        return (f"{o['higher']} above {o['lower']} by {100 * o['paired_difference']:.1f} points "
                f"[{100 * o['low']:+.1f}, {100 * o['high']:+.1f}] (paired by base and seed, {o['n_bases']} bases, "
                f"n={o['n']}" + (f"; a new base: [{_pp(o['pred_low'])}, {_pp(o['pred_high'])}], between-base SD "
                                 f"{_p1(o['between_sd'])}" if not math.isnan(o["pred_low"]) else
                                 "; one seed per base: no between-base SD or prediction interval")
                + f"): {what}")
    if o["paired"]:
        what = ("the interval excludes 0" if o["shown"] else "the interval includes 0: no difference shown")
        return (f"{o['higher']} above {o['lower']} by {100 * o['paired_difference']:.1f} points "
                f"[{100 * o['low']:+.1f}, {100 * o['high']:+.1f}] (paired by seed, n={o['n']}): {what}")
    what = ("their intervals do not overlap" if o["shown"] else
            "their intervals overlap, which alone tests no difference")
    return (f"{o['a']} and {o['b']}: not paired by seed ({o['why']}); {what} "
            f"(means differ by {100 * o['difference']:.1f} points)")


def _count(n, noun: str) -> str:
    """`1 seed`, `2 seeds` (n a number, or text such as "1" or "1-2")."""
    return f"{n} {noun}{'' if str(n) == '1' else 's'}"


def _pp(v: float) -> str:
    return "nan" if v is None or math.isnan(v) else f"{100 * v:+.1f}"


def _p1(v: float) -> str:
    return "nan" if v is None or math.isnan(v) else f"{100 * v:.1f}"


def same_numbers(final: pd.DataFrame) -> dict[str, str]:
    """benchmark -> an earlier benchmark of `final` whose rows hold the same numbers (e.g. the
    trainer's held-out set evaluated again as the benchmark `arith`): its comparisons repeat."""
    seen: dict[tuple, str] = {}
    out = {}
    for bench, g in final.groupby("benchmark", sort=False):
        key = tuple((r["variant"], round(float(r["mean"]), 9), str(r.get("values", ""))) for _, r in g.iterrows())
        if key in seen:
            out[bench] = seen[key]
        else:
            seen[key] = bench
    return out


def best_variant(g: pd.DataFrame, exclude: set[str] = frozenset()) -> str:
    """The highest-mean variant of one benchmark's rows of `final`, among those not in `exclude`."""
    kept = g[~g["variant"].isin(exclude)]
    return str((kept if not kept.empty else g).loc[lambda d: d["mean"].idxmax(), "variant"])


def against_best(final: pd.DataFrame, exclude: set[str] = frozenset()) -> list[dict[str, Any]]:
    """The comparisons of `comparisons` that involve each benchmark's highest-mean variant (one
    per other variant), benchmarks holding the same numbers as an earlier one left out.
    `exclude`: variants left out of these comparisons (the equal-wall-time control, trained on
    more samples than the budget: it is compared in the gains table)."""
    repeats = same_numbers(final)
    out = []
    for bench, g in final.groupby("benchmark", sort=False):
        if bench in repeats:
            continue
        g = g[~g["variant"].isin(exclude)]
        if g.empty:
            continue
        best = best_variant(g)
        out += [o for o in comparisons(g) if best in (o["a"], o["b"])]
    return out


def pairing_note(nested: bool, one_base: bool) -> str:
    """How the paired differences of a table were computed, and what their interval covers."""
    parts = []
    if nested:
        parts.append("Differences between variants on two or more base models: the mean over bases of the per-base "
                     "mean difference, paired by (base, seed), with its 95 % Student-t interval over the per-base "
                     "means (bases - 1 degrees of freedom: grpo_research.analysis.stats.compare_nested); \"a new "
                     "base\": the 95 % prediction interval for a new base model's true difference (bases - 2 df); "
                     "base-dependent: the mean's interval excludes 0 while a new base's includes it.")
    if one_base:
        parts.append("Differences between variants on one base model: mean of the per-seed differences with its "
                     "95 % Student-t interval (grpo_research.analysis.stats.compare_paired) over the seeds both have. "
                     "One base model: the interval covers RL seeds only.")
    return " ".join(parts)


def overlap_sentences(final: pd.DataFrame) -> list[str]:
    lines = []
    pairs = comparisons(final)
    for bench, g in final.groupby("benchmark", sort=False):
        mine = [o for o in pairs if o["benchmark"] == bench]
        if not mine:
            continue
        lines.append(f"**{bench}**:")
        lines += [f"- {comparison_sentence(o)}" for o in mine]
        lines.append("")
    if pairs:
        lines.append(pairing_note(any(o.get("nested") for o in pairs), any(o["paired"] and not o.get("nested")
                                                                           for o in pairs)))
        lines.append("")
    return lines


# ---------------------------------------------------------------- replicates: variance and the study's question
VARIANCE_COLUMNS = ["comparison", "a", "b", "metric", "kernels", "n_bases", "n_seeds", "n_runs", "mean_diff", "low", "high",
                    "between_base_sd", "within_base_sd", "pred_low", "pred_high", "verdict", "note"]


def variance_table(final: pd.DataFrame, pairs: list[list[str]], pilot_within: dict[str, float] | None = None,
                   pilot_from: str = "") -> pd.DataFrame:
    """Per compared pair (a, b) and metric (benchmark of `final`): a - b paired by (base, seed)
    (`paired_difference`), its interval, the between-base SD (method x base interaction), the
    within-base SD (seed noise), the 95 % prediction interval of a new base's true difference and
    the verdict (difference shown / no difference shown / base-dependent). A value that cannot be
    estimated is nan with a `note` saying why (one base model: no between-base SD and no
    prediction interval; one seed per base: no within-base SD, so no between-base SD either;
    fewer than 3 bases: no prediction interval). `pilot_within`: a pilot's within-base SD
    (points) by comparison ("a - b", the study file's `within_base_sd`, measured `pilot_from`),
    used for a pair with one seed per base and named in its note."""
    rows = []
    for bench, g in final.groupby("benchmark", sort=False):
        recs = {r["variant"]: r for r in g.to_dict("records") if r["interval"] == "seeds"}
        for a, b in pairs:
            if a not in recs or b not in recs:
                continue
            va, vb = _per_seed(recs[a]), _per_seed(recs[b])
            common = [u for u in va if u in vb]
            families = [k for k in KERNEL_FAMILIES if k in {label_kernels(u) for u in common}]
            given = (pilot_within or {}).get(f"{a} - {b}")
            blocks = [(families[0] if len(families) == 1 else ("all" if families else NATIVE), common)]
            if len(families) > 1:  # a fixed block: the difference on each kernel family as well
                blocks += [(k, [u for u in common if label_kernels(u) == k]) for k in families]
            for kernels, units in blocks:
                rows.append(_variance_row(a, b, bench, kernels, units, va, vb, given, pilot_from))
    return pd.DataFrame(rows, columns=VARIANCE_COLUMNS)


def _variance_row(a: str, b: str, bench: str, kernels: str, common: list[str], va: dict, vb: dict,
                  given: float | None, pilot_from: str) -> dict[str, Any]:
    """One row of `variance_table`: a - b over the (base, seed) cells `common`."""
    row = {"comparison": f"{a} - {b}", "a": a, "b": b, "metric": bench, "kernels": kernels, "n_runs": len(common)}
    bases = [label_base(u) for u in common]
    per_base = sorted({bases.count(x) for x in set(bases)})
    row.update(n_bases=len(set(bases)), n_seeds="-".join(map(str, sorted({per_base[0], per_base[-1]})))
               if per_base else "0")
    if len(common) < 2:
        return {**row, "mean_diff": math.nan, "low": math.nan, "high": math.nan, "between_base_sd": math.nan,
                "within_base_sd": math.nan, "pred_low": math.nan, "pred_high": math.nan,
                "verdict": "n/a", "note": "fewer than 2 runs paired by (base, seed)"}
    p = paired_difference([va[u] for u in common], [vb[u] for u in common], bases,
                          within_sd=None if given is None else given / 100)
    notes = []
    if kernels == "all":
        notes.append("kernel families averaged within each base (the tests stay on per-base means)" if p["nested"]
                     else "the kernel families' runs of the one base taken as paired runs")
    if not p["nested"]:
        notes.append("one base model: the interval covers RL seeds only; no between-base SD, no prediction "
                     "interval")
    elif p["within_source"] == "given":
        notes.append(f"one seed per base: the within-base SD is the pilot's ({pilot_from or 'the study file'}"
                     "), not this study's")
    elif math.isnan(p["within_sd"]):
        notes.append("one seed per base and no pilot value for this pair (the study file's within_base_sd): "
                     "the within-base SD is not estimable here, so neither is the between-base SD nor the "
                     "prediction interval")
    elif row["n_bases"] < 3:
        notes.append("fewer than 3 bases: no prediction interval (t with bases - 2 df)")
    return {**row, "mean_diff": p["mean"], "low": p["low"], "high": p["high"],
            "between_base_sd": p["between_sd"], "within_base_sd": p["within_sd"],
            "pred_low": p["pred_low"], "pred_high": p["pred_high"], "verdict": difference_verdict(p),
            "note": "; ".join(notes)}


def question_markdown(variance: pd.DataFrame, pairs: list[list[str]], cost: dict[str, float] | None = None) -> str:
    """The study's primary comparisons (its `compare:`), first: each pair's difference on each
    metric with its interval, the verdict, and the bases x seeds a decision at 2 and 4 points
    would need (80 % power, one-sided at alpha 0.025: stats.bases_for_power), with its cost in
    core-hours from `cost` (core-seconds per run, per base-model build)."""
    from grpo_research.analysis.stats import bases_for_power

    if not pairs:
        return ""
    lines = ["## The study's question", ""]
    if variance.empty:
        return "\n".join(lines + ["_No finished runs of the compared variants._", ""]) + "\n"
    blocked = set(variance.loc[variance["kernels"] == "all", "comparison"]) if "kernels" in variance else set()
    for _, r in variance.iterrows():
        block = r.get("kernels", NATIVE)
        on_block = f", on kernel family {block} alone" if r["comparison"] in blocked and block != "all" else ""
        if r["verdict"] == "n/a":
            lines.append(f"- **{r['comparison']}** ({r['metric']}{on_block}): {r['note']}")
            continue
        on = (f"{r['n_bases']} base models x {_count(r['n_seeds'], 'seed')}, compare_nested" if r["n_bases"] >= 2
              else f"one base model, {r['n_runs']} paired runs, compare_paired: the interval covers RL seeds only")
        pred = (f"; a new base model: [{_pp(r['pred_low'])}, {_pp(r['pred_high'])}]"
                if not math.isnan(r["pred_low"]) else "")
        sds = f"; between-base SD {_p1(r['between_base_sd'])}, within-base SD {_p1(r['within_base_sd'])} points"
        note = f" ({r['note']})" if isinstance(r["note"], str) and r["note"] else ""
        lines.append(f"- **{r['comparison']}** ({r['metric']}{on_block}): {100 * r['mean_diff']:+.1f} points "
                     f"[{_pp(r['low'])}, {_pp(r['high'])}] ({on}){pred}{sds}: **{r['verdict']}**{note}")
        within = r["within_base_sd"]
        if r["n_bases"] >= 2 and not math.isnan(r["between_base_sd"]) and not math.isnan(within) and not on_block:
            plans = []
            for dist in (0.02, 0.04):
                best = None
                for seeds in (1, 2, 4):
                    g = bases_for_power(dist, float(r["between_base_sd"]), float(within), seeds, sides=2)
                    if g is None:
                        continue
                    hours = ((g * seeds * 2 * cost["run"] + g * cost["base"]) / 3600) if cost else math.nan
                    if best is None or (not math.isnan(hours) and hours < best[2]):
                        best = (g, seeds, hours)
                plans.append(f"{100 * dist:.0f} points: {best[0]} bases x {_count(best[1], 'seed')}"
                             + (f" ({best[2]:.1f} core-hours)" if not math.isnan(best[2]) else "")
                             if best else f"{100 * dist:.0f} points: beyond 1,000 bases")
            lines.append("  - a decision (80 % power, two-sided 95 %) at " + "; at ".join(plans))
    lines += ["", "Primary comparisons fixed in the study file (`compare:`) before its runs. Mean of the per-base "
              "mean differences, paired by (base, seed), [95 % Student-t interval over bases, bases - 1 df]; a new "
              "base model: the 95 % prediction interval of a new base's true difference (bases - 2 df); "
              "base-dependent: the interval excludes 0 while a new base's includes it. A decision: the fewest bases "
              "(at 1, 2 or 4 seeds each, the cheapest) for 80 % power at that difference given this study's between- "
              "and within-base SDs (stats.bases_for_power); core-hours of the two arms' training steps and the base "
              "builds (process start and evaluation excluded). All of it per compared pair in variance.csv.", ""]
    return "\n".join(lines) + "\n"
