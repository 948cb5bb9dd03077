"""The interactive charts of a study's report: the curves of curves.csv (mean over seeds against
generated samples) as uPlot charts, the library (grpo_research/analysis/vendor/, pinned, MIT)
and the data inlined, so that nothing is fetched when the report is viewed."""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_research.analysis.aggregate import BENCH_CURVE, curve_specs

VENDOR = Path(__file__).with_name("vendor")  # uPlot 1.6.32 (MIT, npm `uplot`), inlined into each report


def script_json(value: Any) -> str:
    """JSON to inline in a <script>: `<`, `>` and `&` as \\u escapes (the same values to
    JavaScript), so that no text in it (a run dir named `x<!--<script>`, `</script>`) can end
    the script or change how the HTML parser reads it."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def interactive_curves(out: Path, meta: dict[str, Any], variants: list[str]) -> str:
    """The curves of curves.csv (mean over seeds against generated samples) as uPlot charts:
    the library (grpo_research/analysis/vendor/, pinned, MIT) and the data inlined, nothing
    fetched when the report is viewed."""
    curves = pd.read_csv(out / "curves.csv")
    charts = []
    for key, (ttl, ylabel, _) in curve_specs(curves["metric"]).items():
        sub = curves[(curves.metric == key) & curves.variant.isin(variants)]
        if sub.empty:
            continue
        xs = sorted(set(float(x) for x in sub["samples"]))
        index = {x: i for i, x in enumerate(xs)}
        series = []
        for v in variants:
            g = sub[sub.variant == v]
            if g.empty:
                continue
            ys: list[float | None] = [None] * len(xs)
            for x, y in zip(g["samples"], g["mean"]):
                ys[index[float(x)]] = round(float(y), 6)
            series.append({"label": f"{v} (n={int(g['n_seeds'].iloc[0])})", "y": ys})
        charts.append({"id": f"chart-{len(charts)}", "title": ttl, "ylabel": short_y(key), "caption": ylabel,
                       "x": xs, "series": series, "points": key.startswith("eval/")})
    if not charts:
        return ""
    js = (VENDOR / "uPlot.iife.min.js").read_text()
    css = (VENDOR / "uPlot.min.css").read_text()
    data = script_json(charts)
    divs = "".join(f'<figure class=chart><div id="{c["id"]}"></div><figcaption>{html.escape(c["title"])}: '
                   f'{html.escape(c["caption"])}, mean over seeds</figcaption></figure>' for c in charts)
    return (f"<style>{css}</style><div class=grid>{divs}</div>"
            f"<script>/* uPlot 1.6.32, MIT licence: grpo_research/analysis/vendor/uPlot.LICENSE */\n{js}</script>"
            f"<script>{CHARTS_JS.replace('__DATA__', data)}</script>")


SHORT_Y = {"reward_mean": "reward / completion", "eval/accuracy": "accuracy (%)",
           "eval/accuracy_ood": "OOD accuracy (%)", "kl": "KL / token (nats)", "entropy": "entropy / token (nats)",
           "completion_len": "tokens / completion"}  # y-axis labels short enough for a phone


def short_y(key: str) -> str:
    """A curve's y-axis label, short enough for a phone."""
    m = BENCH_CURVE.match(key)
    return SHORT_Y.get(key) or (f"{m['kind']}@{m['k']} (%)" if m else key)


CHARTS_JS = """
(function () {
  var charts = __DATA__;
  var palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"];
  var fmt = function (v, d) { return v == null ? "-" : Number(v).toLocaleString("en-US", {maximumFractionDigits: d}); };
  var made = [];
  charts.forEach(function (c) {
    var el = document.getElementById(c.id);
    var width = function () { return Math.max(260, Math.min(el.clientWidth || 600, 900)); };
    var series = [{label: "generated samples", value: function (u, v) { return fmt(v, 0); }}];
    c.series.forEach(function (s, i) {
      series.push({label: s.label, stroke: palette[i % palette.length], width: 1.8, spanGaps: true,
                   points: {show: c.points, size: 5}, value: function (u, v) { return fmt(v, 4); }});
    });
    var opts = {title: c.title, width: width(), height: 300, series: series, legend: {live: true},
                scales: {x: {time: false}},
                axes: [{label: "generated samples (completions)", values: function (u, ts) {
                          return ts.map(function (t) { return fmt(t, 0); }); }},
                       {label: c.ylabel, size: 64, values: function (u, ts) {
                          return ts.map(function (t) { return String(Number(t.toPrecision(4))); }); }}]};
    var data = [c.x].concat(c.series.map(function (s) { return s.y; }));
    var u = new uPlot(opts, data, el);
    el.dataset.rendered = "1";
    made.push([u, el, width]);
  });
  window.addEventListener("resize", function () {
    made.forEach(function (m) { m[0].setSize({width: m[2](), height: 300}); });
  });
})();
"""
