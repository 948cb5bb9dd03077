"""pass@k and maj@k of the base model against each variant's final models, for every benchmark
entry of a study evaluated with several samples per problem (`samples` > 1 in the study file).

Read from the eval files (`eval/<entry>.json` of the runs and of `_base_model/`, written by
`grpo-research eval`): `pass@k` and, for math benchmarks, `maj@k` (grpo_research/evaluation/
metrics.py defines both), `decoding` and `n_problems`. An entry counts when one of its files
reports pass@k beyond k = 1.

k: 1, 2, 4, ... and the largest k every file of the entry reports (`maj_ks`, as maj@k does).
Per variant and k: the mean over its seeds' final models with the 95 % percentile-bootstrap
interval over seeds (analysis.stats, as every other study table); a variant of one model, and
the base model, show the eval file's own 95 % interval over problems instead (`interval`).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from grpo_research.analysis.load import Run
from grpo_research.analysis.stats import N_BOOT, bootstrap_columns
from grpo_research.errors import UsageError
from grpo_research.evaluation.metrics import maj_ks

METRICS = ("pass@k", "maj@k")
COLUMNS = ["benchmark", "variant", "metric", "k", "mean", "low", "high", "n_seeds", "interval"]
SUMMARY_COLUMNS = ["benchmark", "variant", "k_max", "n_seeds", "interval",
                   *(f"{m} {c}" for m in ("pass@1", "pass@k_max", "maj@k_max") for c in ("mean", "low", "high"))]


def sampled_entries(runs: list[Run]) -> list[str]:
    """Benchmark entries that some run evaluated with more than one sample per problem."""
    return sorted({b for r in runs for b, s in r.benchmarks.items() if len(s.get("pass@k") or {}) > 1})


def decoding_of(run: Run, entry: str) -> dict[str, Any]:
    """{temperature, samples, n_problems} of a run's eval file (UsageError naming a file without them)."""
    s = run.benchmarks[entry]
    d = s.get("decoding")
    if not isinstance(d, dict) or s.get("n_problems") is None or d.get("samples") is None:
        raise UsageError(f"{run.path / 'eval' / (entry + '.json')}: no 'decoding' or 'n_problems' (not written by "
                         "`grpo-research eval`); rerun its evaluation or leave the run out with --include")
    return {"temperature": d.get("temperature"), "samples": int(d["samples"]), "n_problems": int(s["n_problems"])}


def passk_settings(runs: list[Run], entries: list[str]) -> dict[str, list[dict[str, Any]]]:
    """entry -> the distinct decoding settings of its eval files (one, unless files were made apart)."""
    out = {}
    for entry in entries:
        seen = [decoding_of(r, entry) for r in runs if entry in r.benchmarks]
        out[entry] = [dict(t) for t in dict.fromkeys(tuple(sorted(d.items())) for d in seen)]
    return out


def _ks(files: list[dict[str, Any]], metric: str) -> list[int]:
    """The k of `metric` shown for an entry: `maj_ks` of the largest k every file reports."""
    common = set.intersection(*(set(map(int, f.get(metric) or {})) for f in files))
    return [k for k in maj_ks(max(common)) if k in common] if common else []


def passk_table(runs: list[Run], base: Run | None, order: list[str], n_boot: int = N_BOOT,
                seed: int = 0) -> pd.DataFrame:
    """Long table (COLUMNS) of pass@k and maj@k per entry, variant (the base model first) and k,
    in [0, 1]. `order`: the variants in display order."""
    from grpo_research.analysis.aggregate import by_variant

    everyone = ([base] if base else []) + runs
    groups = {**({base.variant: [base]} if base else {}), **by_variant(runs, order)}
    rows = []
    for entry in sampled_entries(everyone):
        all_files = [r.benchmarks[entry] for r in everyone if entry in r.benchmarks]
        for metric in METRICS:
            if not all(metric in f for f in all_files):
                continue  # maj@k: math benchmarks only
            ks = _ks(all_files, metric)
            for variant, vruns in groups.items():
                files = [r for r in vruns if entry in r.benchmarks]
                if not files or not ks:
                    continue
                cells = [[r.benchmarks[entry][metric][str(k)] for k in ks] for r in files]  # (n_seeds, K)
                if len(files) == 1:  # one model: its interval over problems
                    (c,) = cells
                    mean = [x["value"] for x in c]
                    low, high = [x["ci95"][0] for x in c], [x["ci95"][1] for x in c]
                    interval = "problems"
                else:
                    matrix = np.array([[x["value"] for x in c] for c in cells])  # (n_seeds, K)
                    mean, low, high = bootstrap_columns(matrix, n_boot=n_boot, seed=seed)
                    interval = "seeds"
                for i, k in enumerate(ks):
                    rows.append({"benchmark": entry, "variant": variant, "metric": metric, "k": k,
                                 "mean": float(mean[i]), "low": float(low[i]), "high": float(high[i]),
                                 "n_seeds": len(files), "interval": interval})
    return pd.DataFrame(rows, columns=COLUMNS)


def passk_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per entry and variant: pass@1, pass@k_max and maj@k_max (mean, low, high), k_max the largest k."""
    rows = []
    for (entry, variant), g in table.groupby(["benchmark", "variant"], sort=False):
        k_max = int(g["k"].max())
        row: dict[str, Any] = {"benchmark": entry, "variant": variant, "k_max": k_max,
                               "n_seeds": int(g["n_seeds"].iloc[0]), "interval": g["interval"].iloc[0]}
        for label, metric, k in (("pass@1", "pass@k", 1), ("pass@k_max", "pass@k", k_max),
                                 ("maj@k_max", "maj@k", k_max)):
            r = g[(g.metric == metric) & (g.k == k)]
            for col in ("mean", "low", "high"):
                row[f"{label} {col}"] = float(r[col].iloc[0]) if len(r) else float("nan")
        rows.append(row)
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def settings_caption(settings: list[dict[str, Any]]) -> str:
    """`temperature 1.0, 200 problems x 64 samples per problem` (each distinct setting, `; `-joined)."""
    parts = [f"temperature {s['temperature']}, {s['n_problems']} problems x {s['samples']} samples per problem"
             for s in settings]
    return "; ".join(parts) if len(parts) == 1 else "eval files differ: " + "; ".join(parts)


def passk_markdown(summary: pd.DataFrame, settings: dict[str, list[dict[str, Any]]]) -> str:
    """One table per entry: pass@1, pass@k_max and maj@k_max of the base model and each variant."""
    from grpo_research.analysis.aggregate import pct

    if summary.empty:
        return "_No benchmark evaluated with several samples per problem._\n"
    lines = []
    for entry, g in summary.groupby("benchmark", sort=False):
        k = int(g["k_max"].max())
        lines += [f"## {entry}", "", settings_caption(settings[entry]), "",
                  f"| variant | pass@1 (%) | pass@{k} (%) | maj@{k} (%) |", "|---|---|---|---|"]
        for _, r in g.iterrows():
            n = f"n={r['n_seeds']}" if r["interval"] == "seeds" else "one model, problems"
            cells = [f"{pct(r[f'{m} mean'])} [{pct(r[f'{m} low'])}, {pct(r[f'{m} high'])}]" if not np.isnan(r[f"{m} mean"])
                     else "n/a" for m in ("pass@1", "pass@k_max", "maj@k_max")]
            lines.append(f"| {r['variant']} ({n}) | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append("Mean over seeds of each final model's value [95 % percentile-bootstrap interval over seeds]; "
                 "a row of one model (the base model, or one seed) gives the eval file's 95 % interval over "
                 "problems. pass@k: the unbiased estimator; maj@k: majority vote over blocks of k samples "
                 "(grpo_research/evaluation/metrics.py); n/a: the eval files report no maj@k (code benchmarks "
                 "have no extracted answer to vote on).")
    return "\n".join(lines) + "\n"
