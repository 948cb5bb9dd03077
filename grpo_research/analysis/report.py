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

from grpo_research.analysis.aggregate import (
    COST_KEYS,
    CURVES,
    TRAINER_HELDOUT,
    comparison_sentence,
    comparisons,
    gains_sentences,
    pct,
)
from grpo_research.files import write_text_atomic

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;
color:#222;line-height:1.45}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:.92em} th,td{border:1px solid #ccc;padding:.3em .6em;
text-align:right} th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
.best{font-weight:bold;background:#eef7ee} td.l,th.l{text-align:left} .muted{color:#666;font-size:.9em}
figure{margin:1em 0} figure img{max-width:100%;border:1px solid #eee} figcaption{color:#555;font-size:.9em}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:1em}
pre{background:#f7f7f7;padding:.8em;overflow-x:auto} ul.overlap li{margin:.15em 0}
"""


def data_uri(path: str | Path) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def figure(path: Path, caption: str) -> str:
    return (f'<figure><img alt="{html.escape(caption)}" src="{data_uri(path)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def _table(headers: list[str], rows: list[list[str]], classes: list[list[str]] | None = None) -> str:
    out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr></thead><tbody>"]
    for i, row in enumerate(rows):
        cls = classes[i] if classes else [""] * len(row)
        out.append("<tr>" + "".join(f'<td class="{c}">{v}</td>' for v, c in zip(row, cls)) + "</tr>")
    out.append("</tbody></table>")
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
    pairs = comparisons(final)
    items = [f"<li><b>{html.escape(o['benchmark'])}</b>: {html.escape(comparison_sentence(o))}</li>"
             for bench in benches for o in pairs if o["benchmark"] == bench]
    overlap_html = (f"<h3>Differences between variants</h3><ul class=overlap>{''.join(items)}</ul>"
                    "<p class=muted>Paired by seed: the mean of the per-seed differences and its 95% Student-t "
                    "interval over the seeds both variants have (<code>compare_paired</code>).</p>") if items else ""
    return _table(headers, rows, classes) + overlap_html


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
        parts.append(_table(["variant", "models", "pass@1 (%)", f"pass@{k} (%)", f"maj@{k} (%)"], rows))
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
    out.append(_table(["RL variant", "final held-out acc. (%)", "training time (s)", "gain over base model (points)",
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
    return _table(["variant", "method", "seeds", *cols], rows)


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
    return _table([h.replace("accuracy", "acc. (%)").replace("pass@1", "pass@1 (%)") for h in headers], rows)


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
    parts = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(title or study)}</title>"
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
    parts.append("<h2>Final accuracy</h2>")
    parts.append(final_html(final))
    parts.append(f"<p class=muted>Mean over seeds with a 95% percentile-bootstrap interval over seeds "
                 f"({meta['n_boot']:,} resamples, seed {meta['bootstrap_seed']}); n = seeds. pass@1 of each run's "
                 f"final model (<code>grpo-research eval</code>: greedy, or for a benchmark entry sampled several "
                 f"times per problem the mean share of correct samples, see the pass@k section); "
                 f"<code>{TRAINER_HELDOUT}</code> is the "
                 "trainer's last held-out evaluation. With 3 seeds the bootstrap interval is narrow: it describes "
                 "one variant's spread; differences between variants are tested paired by seed below. A cell of one model (the base model, or one seed) "
                 "shows the 95% interval over the benchmark's problems from its evaluation file instead.</p>")
    bars = sorted(figs.glob("final_*.png"))
    if bars:
        parts.append("<div class=grid>" + "".join(figure(p, p.stem.replace("final_", "final accuracy: "))
                                                  for p in bars) + "</div>")
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
        panels = [(figs / "curve_eval_accuracy.png", "equal samples: held-out accuracy against generated samples"),
                  (figs / "curve_eval_accuracy_wall.png", "equal wall time: held-out accuracy against seconds "
                                                          "of training")]
        parts.append("<div class=grid>" + "".join(figure(p, c) for p, c in panels if p.exists()) + "</div>")
    parts.append("<h2>Curves against generated samples</h2><div class=grid>")
    for key, (ttl, ylabel, _) in CURVES.items():
        p = figs / f"curve_{key.replace('/', '_')}.png"
        if p.exists():
            parts.append(figure(p, f"{ttl}: {ylabel}, mean over seeds with a 95% bootstrap band"))
    parts.append("</div>")
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
    doc = (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>grpo-research results</title>"
           f"<style>{CSS}</style></head><body><h1>grpo-research results</h1>"
           f"<p class=muted>Every study report under <code>{html.escape(str(results))}</code>, built {now}. "
           "Each report is one self-contained HTML file.</p>" + body + "</body></html>")
    write_text_atomic(out, doc)
    return out
