"""RL against the base model and the supervised control: which runs are the control
(`is_control`, `is_wall_control`), held-out accuracy against seconds of training
(`wall_curve_table`), and per RL variant its gain over the base model and over the control at
equal samples and at equal wall time, paired by seed (`gains_table`), in words
(`gains_sentences`, `gains_markdown`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from grpo_research.analysis.aggregate import TRAINER_HELDOUT, by_variant, pct, run_scores
from grpo_research.analysis.comparisons import paired_difference
from grpo_research.analysis.load import Run
from grpo_research.analysis.stats import N_BOOT, bootstrap_columns, compare_paired


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
