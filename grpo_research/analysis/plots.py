"""Figures of a study: one PNG per curve metric (mean over seeds, 95 % bootstrap band), a bar
chart of the final table, and pass@k / maj@k against k of the base model and the final models."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from grpo_research.analysis.aggregate import curve_specs

FIG_SIZE = (7.5, 4.6)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"font.size": 11, "axes.titlesize": 12, "axes.grid": True, "grid.alpha": 0.3,
                         "legend.fontsize": 9, "legend.framealpha": 0.9})
    return plt


def _colors(variants: list[str]) -> dict[str, tuple]:
    plt = _plt()
    cmap = plt.get_cmap("tab10" if len(variants) <= 10 else "tab20")
    return {v: cmap(i % cmap.N) for i, v in enumerate(variants)}


def slug(metric: str) -> str:
    return metric.replace("/", "_")


def smoothing_note(smooth: int, samples_per_step: int | None = None) -> str:
    """What a smoothed training curve shows, in words (empty when not smoothed)."""
    if smooth <= 1:
        return ""
    per = f" ({smooth * samples_per_step:,} samples)" if samples_per_step else ""
    return f"trailing rolling mean over {smooth} steps{per} per run, full windows only"


def plot_curves(curves: pd.DataFrame, out_dir: str | Path, study: str, smooth: int,
                variants: list[str] | None = None, left_out: list[str] | None = None) -> list[Path]:
    """One PNG per metric of `curve_specs` present in `curves`: a line per variant of `variants` (mean over seeds, 95 %
    bootstrap band) against generated samples. `left_out`: variants not drawn (the
    equal-wall-time control, which trains on more samples), named in the title."""
    plt = _plt()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    variants = variants or list(dict.fromkeys(curves["variant"]))
    colors = _colors(variants)
    everything = curves
    curves = curves[curves.variant.isin(variants)]
    paths = []
    for metric, (title, ylabel, smoothed) in curve_specs(curves["metric"]).items():
        sub = curves[curves.metric == metric]
        hidden = [v for v in left_out or [] if ((everything.metric == metric) & (everything.variant == v)).any()]
        if sub.empty:
            continue
        fig, ax = plt.subplots(figsize=FIG_SIZE)
        n_seeds = set()
        for v in variants:
            g = sub[sub.variant == v].sort_values("samples")
            if g.empty:
                continue
            n = int(g["n_seeds"].iloc[0])
            n_seeds.add(n)
            marker = "o" if metric.startswith("eval/") else None
            ax.plot(g["samples"], g["mean"], color=colors[v], lw=1.8, marker=marker, ms=4, label=f"{v} (n={n})")
            ax.fill_between(g["samples"], g["low"], g["high"], color=colors[v], alpha=0.18, lw=0)
        ax.set_xlabel("generated samples (completions)")
        ax.set_ylabel(ylabel)
        if metric.startswith("eval/"):  # a percentage: from 0, with room above the best band
            ax.set_ylim(0, min(100, max(5.0, 1.1 * float(sub["high"].max()))))
        note = f"\n{smoothing_note(smooth)}" if smoothed and smooth > 1 else ""
        if hidden:
            note += f"\nnot shown (trained on more samples): {', '.join(hidden)}"
        runs = "/".join(str(n) for n in sorted(n_seeds))
        ax.set_title(f"{study}: {title}\nmean over {runs} runs (base models x seeds), band: 95% bootstrap CI{note}",
                     fontsize=10)
        ax.ticklabel_format(axis="x", style="plain")
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.xaxis.set_major_formatter(plt.FuncFormatter(lambda x, _: f"{x:,.0f}"))
        ax.legend(loc="best")
        fig.tight_layout()
        path = out / f"curve_{slug(metric)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def final_bar_order(final: pd.DataFrame, variants: list[str]) -> list[str]:
    """Bars of the final-accuracy charts: rows outside `variants` (the base model) first, then `variants`."""
    return [v for v in dict.fromkeys(final["variant"]) if v not in variants] + list(variants)


def interval_caption(intervals: set[str]) -> str:
    """What the error bars of a final-accuracy chart are, from final_table's `interval` column."""
    how = []
    if "seeds" in intervals:
        how.append("n > 1: mean over runs (base models x seeds), 95 % bootstrap CI over them")
    if "problems" in intervals:
        how.append("n = 1: one model, 95 % interval over problems")
    return "; ".join(how)


def plot_final(final: pd.DataFrame, out_dir: str | Path, study: str, variants: list[str] | None = None) -> list[Path]:
    """One bar chart per benchmark: mean accuracy with its 95 % interval (over seeds; over the
    benchmark's problems for a single model, e.g. the base model), seeds as dots. Rows of
    `final` outside `variants` (the base model) come first, in grey."""
    plt = _plt()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    if final.empty:
        return paths
    variants = variants or list(dict.fromkeys(final["variant"]))
    colors = _colors(variants)
    order = final_bar_order(final, variants)
    colors.update({v: (0.55, 0.55, 0.55, 1.0) for v in order if v not in variants})
    for bench, g in final.groupby("benchmark", sort=False):
        present = set(g["variant"])
        g = g.set_index("variant").reindex([v for v in order if v in present])
        fig, ax = plt.subplots(figsize=(max(6.5, 1.1 * len(g) + 4.0), 4.4))
        x = np.arange(len(g))
        means = 100 * g["mean"].to_numpy()
        err = np.vstack([means - 100 * g["low"].to_numpy(), 100 * g["high"].to_numpy() - means])
        ax.bar(x, means, color=[colors[v] for v in g.index], alpha=0.75, yerr=err, capsize=5)
        for i, vals in enumerate(g["values"]):
            ys = [100 * float(v) for v in str(vals).split()]
            ax.scatter(np.full(len(ys), x[i]) + np.linspace(-0.12, 0.12, len(ys)), ys, color="black", s=14, zorder=3)
        intervals = set(g["interval"]) if "interval" in g else {"seeds"}
        ax.set_xticks(x, [f"{v}\n(n={int(n)})" for v, n in zip(g.index, g["n_seeds"])], fontsize=9)
        ax.set_ylabel(f"{bench}: accuracy (%)")
        ax.set_xlabel("variant (n = runs: base models x seeds)")
        ax.set_ylim(0, min(100, max(5.0, 1.15 * max(float(np.nanmax(100 * g["high"].to_numpy())), 0))))
        ax.set_title(f"{study}: final {bench} accuracy\n" + interval_caption(intervals), fontsize=10)
        handles = [Patch(facecolor="0.75", label="mean"),
                   Line2D([], [], color="black", marker="_", markersize=10, linestyle="-", label="95 % interval"),
                   Line2D([], [], color="black", marker="o", markersize=4, linestyle="", label="one run")]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
        fig.tight_layout()
        path = out / f"final_{slug(bench).replace(' ', '_').replace('(', '').replace(')', '')}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def plot_wall(wall: pd.DataFrame, out_dir: str | Path, study: str, variants: list[str] | None = None) -> list[Path]:
    """Held-out accuracy against seconds of training (the equal-wall-time panel)."""
    if wall.empty:
        return []
    plt = _plt()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    variants = [v for v in (variants or list(dict.fromkeys(wall["variant"]))) if v in set(wall["variant"])]
    colors = _colors(variants)
    fig, ax = plt.subplots(figsize=FIG_SIZE)
    for v in variants:
        g = wall[wall.variant == v].sort_values("train_s")
        n = int(g["n_seeds"].iloc[0])
        ax.plot(g["train_s"], g["mean"], color=colors[v], lw=1.8, marker="o", ms=4, label=f"{v} (n={n})")
        ax.fill_between(g["train_s"], g["low"], g["high"], color=colors[v], alpha=0.18, lw=0)
    ax.set_xlabel("training time (s, summed step time, evaluation excluded)")
    ax.set_ylabel("held-out accuracy, greedy (%)")
    ax.set_ylim(0, min(100, max(5.0, 1.1 * float(wall["high"].max()))))
    ax.set_title(f"{study}: held-out accuracy at equal wall time\nmean over runs (base models x seeds), "
                 "band: 95% bootstrap CI",
                 fontsize=11)
    ax.legend(loc="best")
    fig.tight_layout()
    path = out / "curve_eval_accuracy_wall.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def plot_passk(passk: pd.DataFrame, out_dir: str | Path, study: str, settings: dict[str, list[dict]],
               variants: list[str]) -> list[Path]:
    """One figure per benchmark entry of `passk` (analysis.passk.passk_table): pass@k (left) and,
    for math benchmarks, maj@k (right) against k on a log2 axis; a line per variant of
    `variants` (mean over its seeds' final models, band: 95 % bootstrap CI over seeds, or one
    model's interval over problems) and rows outside `variants` (the base model) dashed, in grey,
    with their interval over problems. `settings`: entry -> its eval files' decoding (caption)."""
    from grpo_research.analysis.passk import settings_caption

    plt = _plt()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    colors = _colors(variants)
    paths = []
    for entry, g in passk.groupby("benchmark", sort=False):
        order = final_bar_order(g, variants)  # the base model first, then the variants
        metrics = [m for m in ("pass@k", "maj@k") if m in set(g["metric"])]
        fig, axes = plt.subplots(1, len(metrics), figsize=(5.4 * len(metrics) + 2.6, 4.8), squeeze=False)
        for ax, metric in zip(axes[0], metrics):
            sub = g[g.metric == metric]
            for v in order:
                r = sub[sub.variant == v].sort_values("k")
                if r.empty:
                    continue
                base = v not in variants
                color = (0.25, 0.25, 0.25, 1.0) if base else colors[v]
                label = f"{v} (one model)" if base else f"{v} (n={int(r['n_seeds'].iloc[0])})"
                ax.plot(r["k"], 100 * r["mean"], color=color, lw=1.8, ls="--" if base else "-", marker="o", ms=4,
                        label=label)
                ax.fill_between(r["k"], 100 * r["low"], 100 * r["high"], color=color, alpha=0.12 if base else 0.18,
                                lw=0)
            ks = sorted(set(sub["k"]))
            ax.set_xscale("log", base=2)
            ax.set_xticks(ks, [str(k) for k in ks])
            ax.minorticks_off()
            ax.set_xlabel("k (samples per problem)")
            ax.set_ylabel(f"{metric} (%)")
            ax.set_ylim(0, min(100, max(5.0, 1.1 * float(100 * sub["high"].max()))))
            ax.set_title("pass@k: some of k samples correct" if metric == "pass@k"
                         else "maj@k: the majority answer of k samples correct", fontsize=10)
        axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
        how = interval_caption(set(g[g.variant.isin(variants)]["interval"]))
        fig.suptitle(f"{study}: {entry}, base model (dashed) against the variants' final models\n"
                     f"{settings_caption(settings[entry])}\n{how}; base model: 95 % interval over problems",
                     fontsize=10)
        fig.tight_layout()
        path = out / f"passk_{slug(entry)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def plot_forest(table: pd.DataFrame, path: Path) -> Path | None:
    """The replication atlas (grpo_research.analysis.atlas): effect and interval of every tested
    claim in units of its bound (smallest effect or margin), coloured by verdict; claims outside
    the multiplicity family (not testable here, rerun needed, measurements) are left out."""
    rows = table[(table["verdict"].isin(["reproduced", "contradicted", "inconclusive"])) & table["effect"].notna()
                 & (table["p_adjusted"] != "outside the family" if "p_adjusted" in table else True)]
    if rows.empty:
        return None
    plt = _plt()
    colors = {"reproduced": "#2a7d2a", "contradicted": "#b22222", "inconclusive": "#777777"}
    fig, ax = plt.subplots(figsize=(9.5, 0.42 * len(rows) + 1.6))
    for i, (_, r) in enumerate(rows.iloc[::-1].iterrows()):
        scale = float(r["margin"] if r["kind"] == "equivalence" else r["smallest_effect"])
        e, lo, hi = (float(r[k]) / scale for k in ("effect", "low", "high"))
        c = colors[r["verdict"]]
        if not math.isnan(lo):
            ax.plot([lo, hi], [i, i], color=c, linewidth=2.2)
        ax.plot([e], [i], marker="o", color=c, markersize=6)
    ax.axvline(0, color="black", linewidth=0.8)
    for x in (-1, 1):
        ax.axvline(x, color="black", linewidth=0.8, linestyle=":")
    ax.set_yticks(range(len(rows)), list(rows["id"].iloc[::-1]), fontsize=9)
    ax.set_xlabel("effect (first arm minus second, per seed) in units of the claim's smallest effect or margin")
    ax.set_title("Replication atlas: mean paired difference with 95 % Student-t interval", fontsize=10)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, marker="o", label=v) for v, c in colors.items()]
    handles.append(Line2D([], [], color="black", linestyle=":", label="± smallest effect / margin"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
