"""Aggregate a study's runs over seeds: curves, the final table, the cost table.

Curves: every training metric of `CURVES` against generated samples, per run smoothed with a
trailing rolling mean over `smooth` steps (full windows only: the first `smooth` - 1 steps have no point), put on the samples grid the seeds share, then the
mean over seeds with its 95 % bootstrap band (analysis.stats). Held-out accuracy is plotted at
its evaluation points, unsmoothed.

Final table: per variant and benchmark, the mean over seeds of pass@1 (from each run's
`eval/<benchmark>.json`) and of the trainer's last held-out accuracy, with the bootstrap
interval over seeds and the number of seeds; every pair of variants is compared paired by seed
(`comparisons`: `stats.compare_paired` over their common seeds), or, where it cannot be paired
(the base model is one model), by whether their intervals overlap, saying so.

Cost table: per variant, the mean over seeds of each run's peak memory, model state, seconds
per step, generation throughput and MFU (the trainer's `cost/` keys).

Over 400 lines for now: the curves, the final table, the cost table and the gains table share
one long-format frame and its seed pairing; the statistics issue (the atlas) splits it.
"""
from __future__ import annotations

import math
import re
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from grpo_research.analysis.load import Run, label_base, label_kernels
from grpo_research.provenance import KERNEL_FAMILIES, NATIVE
from grpo_research.analysis.stats import (N_BOOT, bootstrap_columns, bootstrap_mean_ci, compare_paired,
                                          intervals_overlap, nested_summary)

# key -> (title, y-axis label with unit, smoothed)
CURVES: dict[str, tuple[str, str, bool]] = {
    "reward_mean": ("Training reward", "reward per completion (weighted sum of terms)", True),
    "eval/accuracy": ("Held-out accuracy", "held-out accuracy, greedy (%)", False),
    "eval/accuracy_ood": ("Out-of-distribution held-out accuracy", "OOD held-out accuracy, greedy (%)", False),
    "kl": ("KL to the reference", "KL(policy || reference) per token (nats)", True),
    "entropy": ("Policy entropy", "entropy per completion token (nats)", True),
    "completion_len": ("Completion length", "completion length (tokens, EOS included)", True),
}
TRAINER_HELDOUT = "heldout (trainer)"
TRAINER_OOD = "heldout OOD (trainer)"  # the task's out-of-distribution split (arith ood_level)
COST_KEYS = [  # column, source key, reduction over steps, scale
    ("peak memory (MiB)", "cost/peak_mem_mb", "max", 1.0),
    ("model state (MiB)", "cost/model_state_mb", "last", 1.0),
    # of which: a critic (PPO) and a frozen reference (GRPO, PPO, DPO with beta > 0); 0 = none held
    ("critic state (MiB)", ("cost/critic_param_mb", "cost/critic_grad_mb", "cost/critic_optim_mb"), "last", 1.0),
    ("reference (MiB)", ("cost/reference_param_mb",), "last", 1.0),
    ("seconds / step", "step_s", "mean", 1.0),
    ("rollout s / step", "rollout_s", "mean", 1.0),
    ("update s / step", "update_s", "mean", 1.0),
    ("generated tokens / s", "cost/gen_tokens_per_s", "mean", 1.0),
    ("samples / s", "cost/samples_per_s", "mean", 1.0),
    ("MFU (%)", "cost/mfu", "mean", 100.0),
    ("training time (s)", "step_s", "sum", 1.0),
]


def natural_key(text: str) -> list:
    """Sort `grpo-G2` before `grpo-G16` and `beta0.01` before `beta0.1`."""
    parts = re.split(r"(\d+(?:\.\d+)?(?:e-?\d+)?)", text)
    return [(0, float(p), "") if re.fullmatch(r"\d+(?:\.\d+)?(?:e-?\d+)?", p) else (1, 0.0, p) for p in parts if p]


def order_variants(runs: list[Run], order: list[str] | None = None) -> list[str]:
    present = list(dict.fromkeys(r.variant for r in runs))
    if order:
        first = [v for v in order if v in present]
        return first + sorted((v for v in present if v not in first), key=natural_key)
    return sorted(present, key=natural_key)


def by_variant(runs: list[Run], order: list[str] | None = None) -> dict[str, list[Run]]:
    out = {v: [] for v in order_variants(runs, order)}
    for r in runs:
        out[r.variant].append(r)
    for v in out:
        out[v].sort(key=lambda r: (r.base, r.kernels, r.seed if r.seed is not None else 0))
    return out


# ---------------------------------------------------------------- curves
def _series(run: Run, key: str, smooth: int) -> tuple[np.ndarray, np.ndarray]:
    is_eval = key.startswith("eval/")
    rows = run.evals if is_eval else run.train
    pts = [(r["samples"], r[key]) for r in rows if r.get(key) is not None and r.get("samples") is not None]
    if is_eval:  # one value per sample count (a resumed run may repeat an evaluation)
        pts = list({s: (s, v) for s, v in pts}.values())
    if not pts:
        return np.zeros(0), np.zeros(0)
    x, y = (np.asarray(a, dtype=float) for a in zip(*sorted(pts)))
    if smooth > 1 and len(y) > 1:  # full windows only: each point the mean of `smooth` steps, none of fewer
        window = min(smooth, len(y))
        y = pd.Series(y).rolling(window, min_periods=window).mean().to_numpy()
        x, y = x[window - 1:], y[window - 1:]
    if is_eval:
        y = 100.0 * y
    return x, y


def default_smooth(runs: list[Run]) -> int:
    steps = [len(r.train) for r in runs if r.train]
    return max(1, round(min(steps) / 25)) if steps else 1


def curve_table(runs: list[Run], order: list[str] | None = None, smooth: int = 0, n_boot: int = N_BOOT,
                seed: int = 0, max_points: int = 300) -> pd.DataFrame:
    """Long table: variant, metric, samples, mean, low, high, n_seeds."""
    smooth = smooth or default_smooth(runs)
    out = []
    for variant, vruns in by_variant(runs, order).items():
        for key, (_, _, smoothed) in CURVES.items():
            series = [s for s in (_series(r, key, smooth if smoothed else 1) for r in vruns) if len(s[0])]
            if not series:
                continue
            lo_x = max(s[0][0] for s in series)
            hi_x = min(s[0][-1] for s in series)
            same = all(len(s[0]) == len(series[0][0]) and np.array_equal(s[0], series[0][0]) for s in series)
            if same:
                grid = series[0][0]
            else:  # seeds on different sample grids (dynamic sampling): interpolate onto the first one
                grid = series[0][0][(series[0][0] >= lo_x) & (series[0][0] <= hi_x)]
                if grid.size == 0:
                    continue
            if grid.size > max_points:
                grid = grid[np.unique(np.linspace(0, grid.size - 1, max_points).round().astype(int))]
            matrix = np.stack([np.interp(grid, x, y) for x, y in series])  # (n_seeds, P)
            mean, low, high = bootstrap_columns(matrix, n_boot=n_boot, seed=seed)
            out.append(pd.DataFrame({"variant": variant, "metric": key, "samples": grid, "mean": mean, "low": low,
                                     "high": high, "n_seeds": len(series)}))
    cols = ["variant", "metric", "samples", "mean", "low", "high", "n_seeds"]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)


# ---------------------------------------------------------------- final table
def run_scores(run: Run) -> dict[str, float]:
    """benchmark -> pass@1 of this run, plus the trainer's last held-out accuracy."""
    scores = {name: s.get("pass@1") for name, s in run.benchmarks.items() if s.get("pass@1") is not None}
    # the trainer's last held-out evaluations: from summary.json, else the last evaluation row
    for label, summary_key, eval_key in ((TRAINER_HELDOUT, "final_accuracy", "eval/accuracy"),
                                         (TRAINER_OOD, "final_accuracy_ood", "eval/accuracy_ood")):
        value = run.summary.get(summary_key)
        if value is None and run.evals:
            value = run.evals[-1].get(eval_key)
        if value is not None:
            scores[label] = value
    return scores


def final_table(runs: list[Run], order: list[str] | None = None, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """variant, method, benchmark, mean, low, high, n_seeds, seeds, values (accuracies in [0, 1])."""
    rows = []
    groups = by_variant(runs, order)
    # benchmarks by name, then the trainer's in-distribution split and its OOD split beside it
    last = {TRAINER_HELDOUT: 1, TRAINER_OOD: 2}
    benchmarks = sorted({b for r in runs for b in run_scores(r)}, key=lambda b: (last.get(b, 0), b))
    for variant, vruns in groups.items():
        for bench in benchmarks:
            vals = [(r.label, run_scores(r).get(bench)) for r in vruns]
            vals = [(s, v) for s, v in vals if v is not None]
            if not vals:
                continue
            mean, low, high = bootstrap_mean_ci([v for _, v in vals], n_boot=n_boot, seed=seed)
            interval = "seeds"
            if len(vals) == 1:  # one model: the interval over the benchmark's problems (its eval file's)
                (run,) = [r for r in vruns if run_scores(r).get(bench) is not None]
                ci = ((run.benchmarks.get(bench) or {}).get("pass@k") or {}).get("1", {}).get("ci95")
                low, high, interval = (ci[0], ci[1], "problems") if ci else (float("nan"), float("nan"), "none")
            rows.append({"variant": variant, "method": vruns[0].method, "benchmark": bench, "mean": mean,
                         "low": low, "high": high, "n_seeds": len(vals), "interval": interval,
                         "seeds": " ".join(str(s) for s, _ in vals),
                         "values": " ".join(f"{v:.4f}" for _, v in vals)})
    cols = ["variant", "method", "benchmark", "mean", "low", "high", "n_seeds", "interval", "seeds", "values"]
    return pd.DataFrame(rows, columns=cols)


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


def pct(v: float) -> str:
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.1f}"


def final_markdown(final: pd.DataFrame, n_boot: int = N_BOOT) -> str:
    if final.empty:
        return "_No finished runs with evaluations._\n"
    benches = list(dict.fromkeys(final["benchmark"]))
    lines = ["| variant | " + " | ".join(f"{b} (%)" for b in benches) + " |",
             "|---|" + "---|" * len(benches)]
    best = {b: final[final.benchmark == b]["mean"].max() for b in benches}
    for variant, g in final.groupby("variant", sort=False):
        cells = []
        for b in benches:
            r = g[g.benchmark == b]
            if r.empty:
                cells.append("")
                continue
            r = r.iloc[0]
            n = f"n={r['n_seeds']}" if r["interval"] == "seeds" else f"one model, {r['interval']}"
            cell = f"{pct(r['mean'])} [{pct(r['low'])}, {pct(r['high'])}] ({n})"
            cells.append(f"**{cell}**" if r["mean"] == best[b] else cell)
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Mean over seeds, [95 % percentile-bootstrap interval over seeds, {n_boot} resamples], n = seeds; "
                 "a cell of one model (one seed, or the base model) gives instead the 95 % interval over the "
                 "benchmark's problems from its evaluation file (`one model, problems`); "
                 "bold: the highest mean. pass@1 of the final model for each benchmark; "
                 f"`{TRAINER_HELDOUT}`: the trainer's last held-out evaluation"
                 + (f"; `{TRAINER_OOD}`: the same on the task's out-of-distribution split."
                    if TRAINER_OOD in set(final["benchmark"]) else "."))
    lines.append("")
    lines += overlap_sentences(final)
    return "\n".join(lines) + "\n"


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


# ---------------------------------------------------------------- cost table
def cost_table(runs: list[Run], order: list[str] | None = None) -> pd.DataFrame:
    rows = []
    for variant, vruns in by_variant(runs, order).items():
        per_run = []
        for r in vruns:
            vals = {}
            for col, key, red, scale in COST_KEYS:
                xs = [_cost_value(row, key) for row in r.train]
                xs = [x for x in xs if x is not None]
                if not xs:
                    continue
                v = {"max": max, "last": lambda a: a[-1], "mean": lambda a: sum(a) / len(a), "sum": sum}[red](xs)
                vals[col] = v * scale
            per_run.append(vals)
        row: dict[str, Any] = {"variant": variant, "method": vruns[0].method, "n_seeds": len(vruns)}
        for col, *_ in COST_KEYS:
            xs = [p[col] for p in per_run if col in p]
            row[col] = sum(xs) / len(xs) if xs else float("nan")
        rows.append(row)
    return pd.DataFrame(rows)


def _cost_value(row: dict, key: str | tuple[str, ...]) -> float | None:
    """A row's value of a cost column: one key, or the sum of a model's keys, which count 0 in a
    row that logs model state but not that model (the method does not hold it)."""
    if isinstance(key, str):
        return row.get(key)
    if row.get("cost/model_state_mb") is None:
        return None
    return sum(row.get(k) or 0.0 for k in key)


def cost_markdown(cost: pd.DataFrame) -> str:
    if cost.empty:
        return "_No cost metrics._\n"
    cols = [c for c, *_ in COST_KEYS if c in cost.columns]
    lines = ["| variant | method | n | " + " | ".join(cols) + " |", "|---|---|---|" + "---|" * len(cols)]
    for _, r in cost.iterrows():
        cells = []
        for c in cols:
            v = r[c]
            cells.append("n/a" if pd.isna(v) else (f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"))
        lines.append(f"| {r['variant']} | {r['method']} | {r['n_seeds']} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Mean over seeds of each run's value: peak process memory (max over steps), bytes of parameters, "
                 "gradients and optimizer state of every model the method holds (of which the critic's, and the "
                 "frozen reference's parameters; 0: the method holds none), mean seconds per step (rollout, "
                 "update), generation throughput, and model FLOP utilisation against the peak matmul FLOP/s the "
                 "process measured at start (grpo_research/trainers/cost.py). Timings depend on the machine's load.")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- per-run table
def runs_table(runs: list[Run]) -> pd.DataFrame:
    rows = []
    for r in runs:
        row = {"run_id": r.run_id, "variant": r.variant, "method": r.method, "seed": r.seed,
               "steps": r.summary.get("steps"), "samples": r.summary.get("samples"),
               "initial_accuracy": r.summary.get("initial_accuracy"), "final_accuracy": r.summary.get("final_accuracy")}
        for name, s in r.benchmarks.items():
            row[f"{name} pass@1"] = s.get("pass@1")
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------- the supervised control
# Every study (by default) trains `sft_control`: continued supervised training of the same base
# model on the same prompts with their reference solutions, once at the study's sample budget
# and once (`sft_control-wall`, a run dir with wall_budget.json) for as long as the longest RL
# run of its seed trained. RL gains are read against both.
CONTROL_METHOD = "sft_control"


def is_control(run: Run) -> bool:
    return run.method == CONTROL_METHOD


def is_wall_control(run: Run) -> bool:
    return is_control(run) and run.wall_budget is not None


def train_seconds(run: Run) -> float:
    """Summed step seconds of a run's training (evaluation excluded)."""
    return float(sum(r["step_s"] for r in run.train))


def eval_wall_times(run: Run) -> tuple[np.ndarray, np.ndarray]:
    """(seconds of training before each held-out evaluation, its accuracy in [0, 1])."""
    cum, total = {0: 0.0}, 0.0
    for r in sorted(run.train, key=lambda r: r["step"]):
        total += r["step_s"]
        cum[r["step"]] = total
    pts = {r["step"]: r["eval/accuracy"] for r in run.evals if r.get("step") in cum}
    steps = sorted(pts)
    return np.array([cum[s] for s in steps], dtype=float), np.array([pts[s] for s in steps], dtype=float)


def accuracy_at_seconds(run: Run, seconds: float) -> tuple[float, bool]:
    """Held-out accuracy of `run` after `seconds` of training, linear between its evaluations;
    beyond its last evaluation the last value, flagged True (the run stopped earlier)."""
    t, acc = eval_wall_times(run)
    if t.size == 0:
        return float("nan"), False
    return float(np.interp(seconds, t, acc)), bool(seconds > t[-1] + 1e-9)


def wall_curve_table(runs: list[Run], order: list[str] | None = None, n_boot: int = N_BOOT, seed: int = 0,
                     points: int = 60) -> pd.DataFrame:
    """Held-out accuracy (%) against seconds of training: variant, train_s, mean, low, high, n_seeds.
    Seeds with the same evaluation steps are averaged point by point (x = the mean time of that
    evaluation); otherwise interpolated onto a grid up to the shortest seed's last evaluation."""
    out = []
    for variant, vruns in by_variant(runs, order).items():
        series = [s for s in (eval_wall_times(r) for r in vruns) if s[0].size]
        if not series:
            continue
        if all(s[0].size == series[0][0].size for s in series):
            x = np.mean([s[0] for s in series], axis=0)
            matrix = 100.0 * np.stack([s[1] for s in series])
        else:
            x = np.linspace(0.0, min(s[0][-1] for s in series), points)
            matrix = 100.0 * np.stack([np.interp(x, t, a) for t, a in series])
        mean, low, high = bootstrap_columns(matrix, n_boot=n_boot, seed=seed)
        out.append(pd.DataFrame({"variant": variant, "train_s": x, "mean": mean, "low": low, "high": high,
                                 "n_seeds": len(series)}))
    cols = ["variant", "train_s", "mean", "low", "high", "n_seeds"]
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=cols)


def verdict(low: float, high: float, n: int, rl: str, other: str) -> str:
    """What a paired difference's interval says, in words."""
    if n == 0:
        return "n/a"
    if n < 2:
        return "one seed: no interval"
    if math.isnan(low):
        return "n/a"
    if low > 0:
        return f"{rl} higher"
    if high < 0:
        return f"{other} higher"
    return "no difference shown"


def gains_table(runs: list[Run], order: list[str] | None = None, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """Per RL variant: its final held-out accuracy and three paired differences over seeds, each
    with `compare_paired`'s 95 % Student-t interval (accuracy points in [0, 1]):
    - vs_base: final - initial accuracy of the same run (the base model, step 0);
    - vs_control: final - the equal-samples control's final accuracy, same seed;
    - vs_wall: final - the equal-wall-time control's accuracy after as many seconds of training as
      this run trained (same seed; `wall_beyond` counts seeds where the run trained longer than
      the control's last evaluation, compared with that last value)."""
    controls = {r.unit: r for r in runs if is_control(r) and not is_wall_control(r)}
    walls = {r.unit: r for r in runs if is_wall_control(r)}
    rows = []
    for variant, vruns in by_variant([r for r in runs if not is_control(r)], order).items():
        finals = {r.unit: run_scores(r).get(TRAINER_HELDOUT) for r in vruns}
        # (RL, other, base) per (base, seed) that both have
        d_base = [(finals[r.unit], r.evals[0]["eval/accuracy"], r.base) for r in vruns
                  if finals[r.unit] is not None and r.evals and r.evals[0].get("step") == 0]
        d_ctrl = [(finals[u], run_scores(controls[u]).get(TRAINER_HELDOUT), u[0]) for u in finals
                  if u in controls and finals[u] is not None and run_scores(controls[u]).get(TRAINER_HELDOUT) is not None]
        d_wall, beyond, wall_s = [], 0, []
        for r in vruns:
            if r.unit in walls and finals[r.unit] is not None:
                acc, past = accuracy_at_seconds(walls[r.unit], train_seconds(r))
                if not math.isnan(acc):
                    d_wall.append((finals[r.unit], acc, r.base))
                    beyond += past
                    wall_s.append(train_seconds(r))
        row: dict[str, Any] = {"variant": variant, "method": vruns[0].method, "n_seeds": len(vruns),
                               "final": float(np.mean([v for v in finals.values() if v is not None]))
                               if any(v is not None for v in finals.values()) else float("nan"),
                               "train_s": float(np.mean(wall_s)) if wall_s else float(np.mean([train_seconds(r) for r in vruns]))}
        for key, pairs, other in (("vs_base", d_base, "base model"), ("vs_control", d_ctrl, "control"),
                                  ("vs_wall", d_wall, "control")):
            if len({g for _, _, g in pairs}) >= 2:
                p = paired_difference([x for x, _, _ in pairs], [y for _, y, _ in pairs], [g for _, _, g in pairs])
                mean, low, high = p["mean"], p["low"], p["high"]
            else:
                mean, low, high = compare_paired([x for x, _, _ in pairs], [y for _, y, _ in pairs])
            row.update({f"{key}_mean": mean, f"{key}_low": low, f"{key}_high": high, f"{key}_n": len(pairs),
                        f"{key}_bases": len({g for _, _, g in pairs}),
                        f"{key}_verdict": verdict(low, high, len(pairs), "RL", other)})
        row["wall_beyond"] = beyond
        rows.append(row)
    return pd.DataFrame(rows)


def _points(mean: float, low: float, high: float, n: int, bases: int = 1) -> str:
    if n == 0 or math.isnan(mean):
        return "n/a"
    on = f", {bases} bases" if bases >= 2 else ""
    return f"{100 * mean:+.1f} points [{100 * low:+.1f}, {100 * high:+.1f}] (n={n}{on})"


def gains_sentences(gains: pd.DataFrame, runs: list[Run] | None = None) -> list[str]:
    """One plain sentence per RL variant, and a first line counting where the control wins."""
    if gains.empty:
        return ["No RL run to compare."]
    has_ctrl = bool((gains["vs_control_n"] > 0).any())
    has_wall = bool((gains["vs_wall_n"] > 0).any())
    lines = []
    if not has_ctrl and not has_wall:
        lines.append("No supervised control in this comparison (a study with control: false, e.g. a task without "
                     "reference solutions, or Optuna's reruns): gains are over the base model only.")
    else:
        said = []
        for key, budget in (("vs_control", "equal samples"), ("vs_wall", "equal wall time")):
            n = int((gains[f"{key}_n"] > 0).sum())
            wins = int((gains[f"{key}_verdict"] == "control higher").sum())
            said.append(f"{wins} of {n} RL variants at {budget}" if n else f"none at {budget} (no control run there)")
        lines.append(f"The supervised control wins (the interval of RL minus control entirely below 0) against "
                     f"{said[0]} and {said[1]}.")
    for _, g in gains.iterrows():
        parts = [f"{g['variant']}: {pct(g['final'])} % held-out accuracy; "
                 f"{_points(g['vs_base_mean'], g['vs_base_low'], g['vs_base_high'], g['vs_base_n'], g.get('vs_base_bases', 1))} over the base model"]
        if g["vs_control_n"]:
            parts.append(f"{_points(g['vs_control_mean'], g['vs_control_low'], g['vs_control_high'], g['vs_control_n'], g.get('vs_control_bases', 1))}"
                         f" against the control at equal samples ({_say(g['vs_control_verdict'])})")
        if g["vs_wall_n"]:
            beyond = (f"; for {g['wall_beyond']} seed(s) the RL run trained longer than the control's last "
                      "evaluation, compared with that value") if g["wall_beyond"] else ""
            parts.append(f"{_points(g['vs_wall_mean'], g['vs_wall_low'], g['vs_wall_high'], g['vs_wall_n'], g.get('vs_wall_bases', 1))}"
                         f" against the control at equal wall time, {g['train_s']:.0f} s of training "
                         f"({_say(g['vs_wall_verdict'])}{beyond})")
        lines.append("; ".join(parts) + ".")
    return lines


def _say(v: str) -> str:
    return {"control higher": "the control wins", "RL higher": "RL wins",
            "no difference shown": "intervals include 0: no difference shown"}.get(v, v)


def gains_markdown(gains: pd.DataFrame) -> str:
    lines = gains_sentences(gains)
    out = [lines[0], ""] + [f"- {l}" for l in lines[1:]]
    nested = any(int(gains[c].max()) >= 2 for c in ("vs_base_bases", "vs_control_bases", "vs_wall_bases")
                 if c in gains and not gains.empty)
    how = ("Differences in held-out accuracy points, paired by base model and seed: on two or more bases the mean "
           "of the per-base mean differences [95 % Student-t interval over the per-base means, bases - 1 degrees of "
           "freedom: grpo_research.analysis.stats.compare_nested] (n = paired runs); on one base" if nested else
           "Differences in held-out accuracy points, paired by seed")
    out += ["", f"{how}, mean [95 % Student-t interval of the "
            "paired differences, n - 1 degrees of freedom: grpo_research.analysis.stats.compare_paired, whose "
            "false-difference rate on A/A data is in benchmarks/RESULTS.md] (n = paired seeds)"
            + ("" if nested else "; one base model: the interval covers RL seeds only") + ". Base model: the run's own "
            "step-0 evaluation. Equal wall time: the "
            "control's accuracy interpolated at the RL run's summed step seconds (evaluation excluded; timings "
            "depend on the machine's load)."]
    return "\n".join(out) + "\n"


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
        on = (f"{r['n_bases']} base models x {r['n_seeds']} seeds, compare_nested" if r["n_bases"] >= 2
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
                plans.append(f"{100 * dist:.0f} points: {best[0]} bases x {best[1]} seeds"
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
