"""Aggregate a study's runs over seeds: grouping runs by variant, the curves, the final table,
the cost table and the per-run table.

Curves: every training metric of `CURVES` (and each benchmark of train.eval_benchmarks:
`curve_specs`) against generated samples, per run smoothed with a trailing rolling mean over `smooth` steps (full windows only: the first `smooth` - 1 steps have no point), put on the samples grid the seeds share, then the
mean over seeds with its 95 % bootstrap band (analysis.stats). Held-out accuracy is plotted at
its evaluation points, unsmoothed.

Final table: per variant and benchmark, the mean over seeds of pass@1 (from each run's
`eval/<benchmark>.json`) and of the trainer's last held-out accuracy, with the bootstrap
interval over seeds and the number of seeds; its Markdown says how every pair of variants
compares (analysis.comparisons: paired by seed, or, where it cannot be paired, by whether their
intervals overlap).

Cost table: per variant, the mean over seeds of each run's peak memory, model state, seconds
per step, generation throughput and MFU (the trainer's `cost/` keys).

RL against the base model and the supervised control: analysis.gains.
"""
from __future__ import annotations

import math
import re
from typing import Any, Iterable

import numpy as np
import pandas as pd

from grpo_research.analysis.comparisons import overlap_sentences
from grpo_research.analysis.load import Run
from grpo_research.analysis.stats import N_BOOT, bootstrap_columns, bootstrap_mean_ci

# key -> (title, y-axis label with unit, smoothed)
CURVES: dict[str, tuple[str, str, bool]] = {
    "reward_mean": ("Training reward", "reward per completion (weighted sum of terms)", True),
    "eval/accuracy": ("Held-out accuracy", "held-out accuracy, greedy (%)", False),
    "eval/accuracy_ood": ("Out-of-distribution held-out accuracy", "OOD held-out accuracy, greedy (%)", False),
    "kl": ("KL to the reference", "KL(policy || reference) per token (nats)", True),
    "entropy": ("Policy entropy", "entropy per completion token (nats)", True),
    "completion_len": ("Completion length", "completion length (tokens, EOS included)", True),
}
# train.eval_benchmarks (grpo_research/trainers/bench_eval.py): eval/<benchmark>/pass@k and maj@k
BENCH_CURVE = re.compile(r"^eval/(?P<bench>[^/]+)/(?P<kind>pass|maj)@(?P<k>\d+)$")


def curve_specs(metrics: Iterable[str] = ()) -> dict[str, tuple[str, str, bool]]:
    """CURVES, then a curve for each benchmark metric of train.eval_benchmarks among `metrics`
    (the keys of the runs' evaluation rows, or the metric column of curves.csv)."""
    out = dict(CURVES)
    for key in sorted(set(metrics), key=natural_key):
        m = BENCH_CURVE.match(key)
        if m:
            name = f"{m['bench']} {m['kind']}@{m['k']}"
            out[key] = (f"{name} during training", f"{name}, train.eval_benchmarks (%)", False)
    return out


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
        for key, (_, _, smoothed) in curve_specs(k for r in vruns for row in r.evals for k in row).items():
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
    lines.append(f"Mean over runs, [95 % percentile-bootstrap interval over runs, {n_boot} resamples], "
                 "n = runs (base models x seeds); "
                 "a cell of one model (one run, or the base model) gives instead the 95 % interval over the "
                 "benchmark's problems from its evaluation file (`one model, problems`); "
                 "bold: the highest mean. pass@1 of the final model for each benchmark; "
                 f"`{TRAINER_HELDOUT}`: the trainer's last held-out evaluation"
                 + (f"; `{TRAINER_OOD}`: the same on the task's out-of-distribution split."
                    if TRAINER_OOD in set(final["benchmark"]) else "."))
    lines.append("")
    lines += overlap_sentences(final)
    return "\n".join(lines) + "\n"


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
