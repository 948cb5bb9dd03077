"""Self-contained HTML: a study's report (every figure embedded as a PNG data URI, no
external file, script or font: it opens offline) and the index linking every study."""
from __future__ import annotations

import base64
import datetime as _dt
import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_research.analysis.aggregate import COST_KEYS, TRAINER_HELDOUT, curve_specs, pct
from grpo_research.analysis.comparisons import against_best, best_variant, same_numbers
from grpo_research.analysis.gains import gains_sentences
from grpo_research.analysis.charts import interactive_curves
from grpo_research.analysis.plots import smoothing_note
from grpo_research.files import write_text_atomic
from grpo_research.provenance import environments_html

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:.92em} th,td{border:1px solid #ccc;padding:.3em .6em;
text-align:right} th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
.best{font-weight:bold;background:#eef7ee} td.l,th.l{text-align:left} .muted{color:#666;font-size:.9em}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee} figcaption{color:#555;font-size:.9em}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(480px,100%),1fr));gap:1em}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto} .tw{overflow-x:auto;max-width:100%}
.chart{min-height:340px} .chart .u-legend{font-size:.85em} details summary{cursor:pointer;color:#555;font-size:.9em}
code{word-break:break-word}
@media (max-width:600px){body{margin:1em auto;padding:0 .6em} table{font-size:.8em} h1{font-size:1.5em}}
"""
HEAD = '<meta charset=utf-8><meta name=viewport content="width=device-width, initial-scale=1">'


def data_uri(path: str | Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def figure(path: Path, caption: str) -> str:
    return (f'<figure><img alt="{html.escape(caption)}" src="{data_uri(path)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def html_table(headers: list[str], rows: list[list[str]], classes: list[list[str]] | None = None) -> str:
    out = ["<div class=tw><table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers)
           + "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = classes[i] if classes else [""] * len(row)
        out.append("<tr>" + "".join(f'<td class="{c}">{v}</td>' for v, c in zip(row, cls)) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def final_html(final: pd.DataFrame) -> str:
    if final.empty:
        return "<p>No finished runs with evaluations yet.</p>"
    benches = list(dict.fromkeys(final["benchmark"]))
    best = {b: final[final.benchmark == b]["mean"].max() for b in benches}
    rows, classes = [], []
    for variant, g in final.groupby("variant", sort=False):
        row, cls = [html.escape(variant), html.escape(str(g["method"].iloc[0]))], ["", ""]
        for b in benches:
            r = g[g.benchmark == b]
            if r.empty:
                row.append("")
                cls.append("")
                continue
            r = r.iloc[0]
            n = f"n={r['n_seeds']}" if r.get("interval", "seeds") == "seeds" else f"one model, over {r['interval']}"
            row.append(f"{pct(r['mean'])} <span class=muted>[{pct(r['low'])}, {pct(r['high'])}] {n}</span>")
            cls.append("best" if r["mean"] == best[b] else "")
        rows.append(row)
        classes.append(cls)
    headers = ["variant", "method", *[f"{b} (%)" for b in benches]]
    return html_table(headers, rows, classes)


def differences_html(final: pd.DataFrame, exclude: set[str] = frozenset()) -> str:
    """Per benchmark, the highest-mean variant against each other one, paired by seed
    (`compare_paired`); a benchmark holding the same numbers as an earlier one is named, not
    repeated; `exclude`: variants left out (the equal-wall-time control, said below the table)."""
    repeats = same_numbers(final)
    pairs = against_best(final, exclude)
    parts = []
    for bench in dict.fromkeys(final["benchmark"]):
        if bench in repeats:
            continue
        mine = [o for o in pairs if o["benchmark"] == bench]
        if not mine:
            continue
        best = best_variant(final[final.benchmark == bench], exclude)
        rows = []
        for o in mine:
            other = o["b"] if o["a"] == best else o["a"]
            sign = 1 if o["higher"] == best else -1
            if o["paired"]:
                diff = (f"{sign * 100 * o['paired_difference']:+.1f} <span class=muted>"
                        f"[{100 * min(sign * o['low'], sign * o['high']):+.1f}, "
                        f"{100 * max(sign * o['low'], sign * o['high']):+.1f}]</span>")
                words = ("interval excludes 0" if o["shown"] else
                         f"interval includes 0: not resolved with {o['n']} seeds")
                rows.append([html.escape(other), diff, str(o["n"]), words])
            else:
                rows.append([html.escape(other), f"{sign * 100 * o['difference']:+.1f} <span class=muted>(means)</span>",
                             "-", html.escape(f"not paired ({o['why']}): no test")])
        same = [b for b, first in repeats.items() if first == bench]
        also = f" (and {', '.join(same)}: the same numbers)" if same else ""
        parts.append(f"<h4>{html.escape(bench)}{html.escape(also)}: {html.escape(best)} against each other variant</h4>")
        parts.append(html_table(["variant", f"{best} minus it (points)", "seeds paired", "reading"], rows,
                            [["l", "", "", "l"]] * len(rows)))
    if not parts:
        return ""
    return ("<h3>Differences from the highest mean</h3>" + "".join(parts) +
            "<p class=muted>Paired by seed: the mean of the per-seed differences in accuracy points and its 95% "
            "Student-t interval over the seeds both variants have (<code>compare_paired</code>). An interval that "
            "includes 0 does not show the variants equal, only that these seeds do not resolve a difference. A row "
            "of one model (the base model) cannot be paired: only the difference of means is given. Every pair: "
            "final.md." + (f" Not in this table: {html.escape(', '.join(sorted(exclude)))} (trained on more samples "
                           "than the budget; compared in the gains table below)." if exclude else "") + "</p>")


def passk_html(out: Path, settings: dict[str, list[dict]]) -> str:
    """The pass@k / maj@k section: per benchmark entry sampled several times per problem, its
    figure and a table of pass@1, pass@k_max and maj@k_max of the base model and each variant."""
    from grpo_research.analysis.passk import passk_summary, settings_caption
    from grpo_research.analysis.plots import slug

    summary = passk_summary(pd.read_csv(out / "passk.csv"))
    parts = []
    for entry, g in summary.groupby("benchmark", sort=False):
        k = int(g["k_max"].max())
        caption = settings_caption(settings[entry])
        rows = []
        for _, r in g.iterrows():
            n = f"n={r['n_seeds']}" if r["interval"] == "seeds" else "one model, over problems"
            cells = [html.escape(str(r["variant"])), n]
            for m in ("pass@1", "pass@k_max", "maj@k_max"):
                cells.append("n/a" if pd.isna(r[f"{m} mean"]) else
                             f"{pct(r[f'{m} mean'])} <span class=muted>[{pct(r[f'{m} low'])}, "
                             f"{pct(r[f'{m} high'])}]</span>")
            rows.append(cells)
        parts.append(f"<h3>{html.escape(entry)}</h3>")
        png = out / "figures" / f"passk_{slug(entry)}.png"
        if png.exists():
            parts.append(figure(png, f"{entry}: pass@k and maj@k against k (log2 axis), base model dashed; "
                                     f"{caption}"))
        parts.append(html_table(["variant", "models", "pass@1 (%)", f"pass@{k} (%)", f"maj@{k} (%)"], rows))
        parts.append(f"<p class=muted>{html.escape(caption)}. Sampled decoding: pass@1 here is the mean "
                     "share of correct samples, not the greedy score of the final table.</p>")
    if parts:
        parts.append("<p class=muted>Mean over seeds of each final model's value [95% percentile-bootstrap "
                     "interval over seeds]; a row of one model (the base model, or one seed) shows the eval file's "
                     "95% interval over problems. pass@k: Chen et al.'s unbiased estimator; maj@k: the majority "
                     "answer of k samples (finished samples with an extracted answer vote; ties to the answer seen "
                     "first), averaged over disjoint blocks of k samples (grpo_research/evaluation/metrics.py); "
                     "n/a: the eval files report no maj@k (code benchmarks have no extracted answer to vote "
                     "on).</p>")
    return "".join(parts)


def gains_html(gains: pd.DataFrame) -> str:
    """The RL-vs-control section: a sentence per RL variant and the table of paired differences."""
    lines = gains_sentences(gains)
    out = [f"<p><b>{html.escape(lines[0])}</b></p>"]
    if gains.empty:
        return "".join(out)
    out.append("<ul>" + "".join(f"<li>{html.escape(l)}</li>" for l in lines[1:]) + "</ul>")

    def cell(g, key):
        if not g[f"{key}_n"]:
            return "n/a"
        return (f"{100 * g[f'{key}_mean']:+.1f} <span class=muted>[{100 * g[f'{key}_low']:+.1f}, "
                f"{100 * g[f'{key}_high']:+.1f}] n={g[f'{key}_n']}</span><br>{html.escape(g[f'{key}_verdict'])}")

    rows = [[html.escape(str(g["variant"])), pct(g["final"]), f"{g['train_s']:.0f}", cell(g, "vs_base"),
             cell(g, "vs_control"), cell(g, "vs_wall")] for _, g in gains.iterrows()]
    out.append(html_table(["RL variant", "final held-out acc. (%)", "training time (s)", "gain over base model (points)",
                       "vs control, equal samples (points)", "vs control, equal wall time (points)"], rows))
    out.append("<p class=muted>Differences in held-out accuracy points, paired by seed, mean [95% Student-t "
               "interval of the paired differences, n - 1 degrees of freedom "
               "(<code>grpo_research.analysis.stats.compare_paired</code>; its false-difference rate on A/A data "
               "is in benchmarks/RESULTS.md)]. Base model: each run's own step-0 evaluation. The control "
               "(<code>method=sft_control</code>) continues the base model's supervised training from the same "
               "checkpoint on the same prompts with their reference solutions; at equal wall time its accuracy is "
               "interpolated at each RL run's summed step seconds (evaluation excluded; timings depend on the "
               "machine's load).</p>")
    return "".join(out)


def _pts(v: Any, signed: bool = True) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return "nan"
    if v != v:
        return "nan"
    return f"{100 * v:+.1f}" if signed else f"{100 * v:.1f}"


def variance_html(variance: pd.DataFrame, compare: list[list[str]] | None = None) -> str:
    """Rows of variance.csv (those of `compare` when given): the difference paired by (base,
    seed), its interval, the between- and within-base SDs, a new base's prediction interval and
    the verdict."""
    if variance.empty:
        return "<p class=muted>No pair of variants with runs paired by (base, seed).</p>"
    keep = {f"{a} - {b}" for a, b in compare} if compare else None
    rows, classes = [], []
    blocked = set(variance.loc[variance["kernels"] == "all", "comparison"]) if "kernels" in variance else set()
    for _, r in variance.iterrows():
        if keep is not None and r["comparison"] not in keep:
            continue
        verdict = str(r["verdict"])
        block = str(r.get("kernels", "native"))
        metric = str(r["metric"]) + (f" (kernels {block} alone)" if r["comparison"] in blocked and block != "all"
                                     else "")
        rows.append([html.escape(str(r["comparison"])), html.escape(metric),
                     f"{r['n_bases']} x {html.escape(str(r['n_seeds']))}",
                     f"{_pts(r['mean_diff'])} <span class=muted>[{_pts(r['low'])}, {_pts(r['high'])}]</span>",
                     f"[{_pts(r['pred_low'])}, {_pts(r['pred_high'])}]", _pts(r["between_base_sd"], False),
                     _pts(r["within_base_sd"], False), f"<b>{html.escape(verdict)}</b>",
                     html.escape(str(r["note"]) if isinstance(r["note"], str) else "")])
        classes.append([""] * 9)
    if not rows:
        return ""
    return html_table(["comparison", "metric", "bases x seeds", "difference (points) [95%]",
                       "a new base model [95% prediction]", "between-base SD", "within-base SD", "verdict", "note"],
                      rows, classes)


VARIANCE_NOTE = ("<p class=muted>Differences a - b in accuracy points, paired by (base model, RL seed). On two or more "
                 "base models: the mean of the per-base mean differences with its 95% Student-t interval over bases "
                 "(bases - 1 df, <code>grpo_research.analysis.stats.compare_nested</code>); the between-base SD is "
                 "the method x base interaction (method of moments), the within-base SD the seed noise; a new base "
                 "model: the 95% prediction interval of a new base's true difference (bases - 2 df, Higgins, Thompson "
                 "&amp; Spiegelhalter 2009); <b>base-dependent</b>: the interval excludes 0 while a new base's "
                 "includes it. On one base model the interval covers RL seeds only. nan: not estimable (see the "
                 "note).</p>")


def cost_html(cost: pd.DataFrame) -> str:
    if cost.empty:
        return "<p>No cost metrics.</p>"
    cols = [c for c, *_ in COST_KEYS if c in cost.columns]
    rows = []
    for _, r in cost.iterrows():
        cells = [html.escape(str(r["variant"])), html.escape(str(r["method"])), str(r["n_seeds"])]
        for c in cols:
            v = r[c]
            cells.append("n/a" if pd.isna(v) else (f"{v:.3f}" if abs(v) < 10 else f"{v:,.0f}"))
        rows.append(cells)
    return html_table(["variant", "method", "seeds", *cols], rows)


def runs_html(runs: pd.DataFrame) -> str:
    if runs.empty:
        return ""
    headers = list(runs.columns)
    rows = []
    for _, r in runs.iterrows():
        cells = []
        for h in headers:
            v = r[h]
            if isinstance(v, float) and ("accuracy" in h or "pass@1" in h):
                cells.append(pct(v))
            else:
                cells.append(html.escape("" if v is None or (isinstance(v, float) and pd.isna(v)) else str(v)))
        rows.append(cells)
    return html_table([h.replace("accuracy", "acc. (%)").replace("pass@1", "pass@1 (%)") for h in headers], rows)


def render_study(out_dir: str | Path, title: str | None = None, extra: list[tuple[str, Path]] | None = None,
                 extra_text: dict[str, str] | None = None) -> Path:
    """results/<study>/report.html from the files `aggregate` and `plot` wrote there."""
    out = Path(out_dir)
    meta: dict[str, Any] = json.loads((out / "summary.json").read_text())
    study = meta["study"]
    final = pd.read_csv(out / "final.csv")
    cost = pd.read_csv(out / "cost.csv")
    runs = pd.read_csv(out / "runs.csv")
    figs = out / "figures"
    wall = list(meta.get("wall_variants", []))
    parts = [f"<!DOCTYPE html><html lang=en><head>{HEAD}<title>{html.escape(title or study)}</title>"
             f"<style>{CSS}</style></head><body>",
             f"<h1>{html.escape(title or study)}</h1>"]
    if meta.get("description"):
        parts.append(f"<p>{html.escape(meta['description'])}</p>")
    facts = [f"{meta['n_runs']} finished runs", f"{len(meta['variants'])} variants",
             f"seeds: {', '.join(map(str, meta['seeds']))}"]
    if meta.get("samples_per_run"):
        facts.append(f"generated samples per run: {', '.join(f'{s:,}' for s in meta['samples_per_run'])}")
    parts.append(f"<p class=muted>{' &middot; '.join(facts)}. Built from the run directories under "
                 f"<code>{html.escape(meta['runs_dir'])}</code> on {html.escape(meta['generated'])}.</p>")
    # results differ across CPUs: say where they were computed
    parts.append(environments_html(meta.get("environments") or [], meta.get("base_model_environments")))
    variance = pd.read_csv(out / "variance.csv") if (out / "variance.csv").exists() else pd.DataFrame()
    if meta.get("compare"):  # the study's own question first
        parts.append("<h2>The study's question</h2><p>Primary comparisons, fixed in the study file "
                     "(<code>compare:</code>) before its runs.</p>")
        parts.append(variance_html(variance, meta["compare"]))
        plans = [l.strip()[2:] for l in str(meta.get("question_md") or "").splitlines()
                 if l.strip().startswith("- a decision")]
        if plans:
            parts.append("<ul>" + "".join(f"<li>{html.escape(p)}</li>" for p in plans) + "</ul>")
        parts.append(VARIANCE_NOTE)
    parts.append("<h2>Final accuracy</h2>")
    parts.append(final_html(final))
    parts.append(f"<p class=muted>Mean over runs with a 95% percentile-bootstrap interval over runs "
                 f"({meta['n_boot']:,} resamples, seed {meta['bootstrap_seed']}); n = runs (base models x seeds). pass@1 of each run's "
                 f"final model (<code>grpo-research eval</code>: greedy, or for a benchmark entry sampled several "
                 f"times per problem the mean share of correct samples, see the pass@k section); "
                 f"<code>{TRAINER_HELDOUT}</code> is the "
                 "trainer's last held-out evaluation. With 3 seeds the bootstrap interval is narrow: it describes "
                 "one variant's spread; differences between variants are tested paired by seed below the charts. A cell of one model (the base model, or one seed) "
                 "shows the 95% interval over the benchmark's problems from its evaluation file instead.</p>")
    bars = sorted(figs.glob("final_*.png"))
    if bars:
        parts.append("<div class=grid>" + "".join(figure(p, p.stem.replace("final_", "final accuracy: "))
                                                  for p in bars) + "</div>")
    if not final.empty:
        parts.append(differences_html(final, set(wall)))
    passk = passk_html(out, meta["passk_settings"])
    if passk:
        parts.append("<h2>pass@k and maj@k: the base model against the final models</h2>" + passk)
    gains_csv = out / "gains.csv"
    if gains_csv.exists():
        try:
            gains = pd.read_csv(gains_csv)
        except pd.errors.EmptyDataError:
            gains = pd.DataFrame()
        parts.append("<h2>RL against the base model and the supervised control</h2>" + gains_html(gains))
        wall_note = (f" ({', '.join(wall)}, trained on more samples, is in the equal-wall-time panel)"
                     if wall else "")
        panels = [(figs / "curve_eval_accuracy.png", "equal samples: held-out accuracy against generated samples, "
                                                     f"the arms trained on the sample budget{wall_note}"),
                  (figs / "curve_eval_accuracy_wall.png", "equal wall time: held-out accuracy against seconds "
                                                          "of training")]
        parts.append("<div class=grid>" + "".join(figure(p, c) for p, c in panels if p.exists()) + "</div>")
    smooth = smoothing_note(int(meta.get("smooth_steps") or 1))
    parts.append("<h2>Curves against generated samples</h2>")
    parts.append("<p class=muted>Interactive: hover for the values at a sample count, click a legend entry to hide "
                 "or show a variant, drag to zoom (double-click to reset). Lines: mean over seeds; the 95% bootstrap "
                 "bands are in each static figure. Training metrics: "
                 + (html.escape(smooth) if smooth else "per step, unsmoothed")
                 + "; held-out accuracy: the evaluations themselves."
                 + (html.escape(f" Not shown: {', '.join(wall)} (trained on more samples than the budget).")
                    if wall else "") + "</p>")
    parts.append(interactive_curves(out, meta, [v for v in meta["variants"] if v not in wall]))
    parts.append("<div class=grid>")
    for key, (ttl, ylabel, smoothed) in curve_specs(pd.read_csv(out / "curves.csv")["metric"]).items():
        p = figs / f"curve_{key.replace('/', '_')}.png"
        if p.exists():
            how = f", {smooth}" if smoothed and smooth else ""
            cap = f"{ttl}: {ylabel}, mean over seeds with a 95% bootstrap band{how}"
            parts.append(f"<details><summary>static figure: {html.escape(ttl)}</summary>{figure(p, cap)}</details>")
    parts.append("</div>")
    if not variance.empty:
        parts.append("<h2>Variance components: base models and seeds</h2>" + variance_html(variance) + VARIANCE_NOTE)
    parts.append("<h2>Cost per method</h2>" + cost_html(cost))
    parts.append("<p class=muted>Mean over seeds of each run's value, from the trainer's <code>cost/</code> metrics "
                 "(peak memory: max over steps; MFU: model FLOP/s over the peak matmul FLOP/s the process measured "
                 "at start). Timings depend on the machine's load.</p>")
    for heading, directory in extra or []:
        pngs = sorted(Path(directory).glob("*.png"))
        parts.append(f"<h2>{html.escape(heading)}</h2>")
        for name, text in (extra_text or {}).items():
            parts.append(f"<p><b>{html.escape(name)}</b></p><pre>{html.escape(text)}</pre>")
        parts.append("<div class=grid>" + "".join(figure(p, p.stem.replace("_", " ")) for p in pngs) + "</div>")
    parts.append("<h2>Runs</h2>" + runs_html(runs))
    parts.append("<p class=muted>Tables as files beside this report: final.csv, final.md, gains.csv, gains.md, "
                 "passk.csv, passk.md, cost.csv, cost.md, curves.csv, wall_curves.csv, runs.csv.</p></body></html>")
    path = out / "report.html"
    write_text_atomic(path, "\n".join(parts))
    return path


def render_index(results_dir: str | Path, out: str | Path | None = None) -> Path:
    """results/index.html: a link and a one-line summary for every study report under results/."""
    results = Path(results_dir)
    out = Path(out) if out else results / "index.html"
    items = []
    for summary in sorted(results.glob("*/summary.json")):
        d = summary.parent
        if not (d / "report.html").exists():
            continue
        meta = json.loads(summary.read_text())
        best = meta.get("best", {})
        best_txt = "; ".join(f"{html.escape(b)}: {html.escape(v['variant'])} {pct(v['mean'])}%"
                             for b, v in best.items())
        rel = (d / "report.html").relative_to(out.parent) if d.is_relative_to(out.parent) else (d / "report.html")
        items.append(f"<tr><td><a href=\"{html.escape(str(rel))}\">{html.escape(meta['study'])}</a></td>"
                     f"<td class=l>{html.escape(meta.get('description', ''))[:300]}</td><td>{meta['n_runs']}</td>"
                     f"<td>{len(meta['variants'])}</td><td class=l>{best_txt}</td></tr>")
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = ("<table><thead><tr><th>study</th><th class=l>description</th><th>runs</th><th>variants</th>"
            "<th class=l>highest mean per benchmark</th></tr></thead><tbody>" + "".join(items) + "</tbody></table>"
            if items else "<p>No study reports yet.</p>")
    doc = (f"<!DOCTYPE html><html lang=en><head>{HEAD}<title>grpo-research results</title>"
           f"<style>{CSS}</style></head><body><h1>grpo-research results</h1>"
           f"<p class=muted>Every study report under <code>{html.escape(str(results))}</code>, built {now}. "
           "Each report is one self-contained HTML file.</p>" + body + "</body></html>")
    write_text_atomic(out, doc)
    return out
