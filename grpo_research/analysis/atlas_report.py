"""The atlas's outputs: `atlas.csv`, `atlas.md`, a forest plot and a self-contained `report.html`
(`write_atlas`), from the claims file and the studies' run dirs (grpo_research.analysis.atlas
computes every number; this module loads the runs and writes them down)."""
from __future__ import annotations

import datetime as _dt
import html
import math
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_research.analysis.atlas import ACCURACY, ALPHA, POWER, VERDICTS, build_atlas, claims_commit
from grpo_research.errors import UsageError
from grpo_research.provenance import base_model_environments, environments_html, environments_markdown, environments_of
from grpo_research.files import write_text_atomic

AA_NOTE = ("A/A calibration of the paired Student-t interval (benchmarks/aa_calibration.py, benchmarks/RESULTS.md, "
           "2026-12-03): on 30 GRPO seeds of one configuration split at random into two arms, it declared a "
           "difference 4.74 / 4.61 / 5.08 % of the time at 3 / 5 / 10 seeds per arm (nominal 5 %, two-sided; "
           "the percentile bootstrap the reports used before: 24.13 / 16.68 / 10.33 %). The atlas's own verdicts "
           "on 16 simulated null claims (aa_calibration.py --atlas 16, 20,000 atlases): a false 'reproduced' for "
           "2.47-2.50 % of claims unadjusted and in 2.28-2.52 % of atlases after Benjamini-Hochberg, against 33 % "
           "of atlases without it, at 3, 5 and 10 seeds.")
COLUMNS = ["id", "verdict", "phase", "n_bases", "n_seeds", "failed_precondition", "p_adjusted", "family", "effect",
           "low", "high", "unit", "seeds_needed", "bases_needed", "core_hours_needed", "sd_diff", "between_sd",
           "between_source", "kind", "metric", "budget",
           "arms", "smallest_effect", "margin", "ratio", "p_claim", "p_claim_adjusted", "p_contra",
           "p_contra_adjusted", "verdict_unadjusted", "eval_noise_share", "p_improvement", "p_improvement_low",
           "p_improvement_high", "first_run_created", "preregistered", "positive_control", "tuned", "validity", "arxiv", "setting", "claim", "note"]


CONFIRM_PREFIX = "confirm-"  # grpo_research.pipeline.ids.CONFIRM_PREFIX: the confirmatory runs of a study


def confirm_claims(claims: list[dict[str, Any]], frozen: dict[str, Any]) -> list[dict[str, Any]]:
    """The frozen family and positive controls, as frozen (bounds and validity thresholds), on
    the confirmatory runs (`confirm-<study>`)."""
    by_id = {c["id"]: c for c in claims}
    out = []
    for entry in [*frozen["family"], *frozen["positive_controls"]]:
        if entry["id"] not in by_id:
            raise UsageError(f"the freeze names claim {entry['id']!r}, which the claims file does not have")
        c = {**by_id[entry["id"]], "validity": entry["validity"], "smallest_effect": entry["smallest_effect"]}
        lrs = entry.get("tuned_lr") or {}
        c["arms"] = [{**a, "study": CONFIRM_PREFIX + a["study"],
                      "variant": a["variant"] + ("-lr" if f"{a['study']}/{a['variant']}" in lrs else "")}
                     for a in entry["arms"]]
        c["tuned_lr"] = lrs
        out.append(c)
    return out


def load_inputs(claims_path: str | Path, studies_dir: str | Path, runs_dir: str | Path,
                include: dict[str, list[str]] | None = None, frozen: dict[str, Any] | None = None):
    """(claims, runs by study, base-model evaluations by study) for the studies the claims name.
    `include`: study -> its run ids (the pipeline's; other dirs under runs/<study>/ are left out);
    without it every finished run of the study's dir. `frozen`: a freeze (analysis.freeze): only
    its claims, on the confirmatory runs."""
    from grpo_research.analysis.claims import load_claims
    from grpo_research.analysis.load import load_study_runs
    from grpo_research.analysis.study import base_model_runs

    claims = load_claims(claims_path, studies_dir)
    if frozen is not None:
        claims = confirm_claims(claims, frozen)
    studies = sorted({a["study"] for c in claims if "needs" not in c for a in c["arms"]})
    runs, bases = {}, {}
    for s in studies:
        d = Path(runs_dir) / s
        found = load_study_runs(d) if d.is_dir() else []
        if include and s in include:
            keep = set(include[s])
            found = [r for r in found if r.run_id in keep]
        runs[s] = found
        bases[s] = base_model_runs(d)  # base seed -> its evaluations ({} without them)
    return claims, runs, bases


def _num(v: Any, unit: str, signed: bool = True) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    if unit == ACCURACY:
        return f"{100 * v:+.1f}" if signed else f"{100 * v:.1f}"
    return f"{v:+.3g}" if signed else f"{v:.3g}"


def decision_text(r) -> str:
    """New bases (one seed each) for 80 % power, with the core-hours of their runs."""
    n = r.get("bases_needed")
    if r["verdict"] not in ("reproduced", "contradicted", "inconclusive") or r.get("p_adjusted") == "outside the family":
        return ""
    if n is None or pd.isna(n):
        return "over 1000" if not pd.isna(r.get("sd_diff")) else "n/a"
    hours = r.get("core_hours_needed")
    return f"{int(n)}" + ("" if hours is None or pd.isna(hours) else f" ({hours:.2g} h)")


def unit_label(unit: str) -> str:
    return "points" if unit == ACCURACY else unit


def effect_text(r: dict[str, Any]) -> str:
    if r["verdict"] == "deferred" or r["n_seeds"] < 2 or pd.isna(r["effect"]):
        return "n/a"
    return f"{_num(r['effect'], r['unit'])} [{_num(r['low'], r['unit'])}, {_num(r['high'], r['unit'])}] {unit_label(r['unit'])}"


def bound_text(r: dict[str, Any]) -> str:
    unit = r["unit"]
    if r["kind"] == "equivalence":
        return f"margin ±{_num(r['margin'], unit, False)} {unit_label(unit)}"
    return f"smallest effect {_num(r['smallest_effect'], unit, False)} {unit_label(unit)}"


def with_preregistration(table: pd.DataFrame, commit: dict[str, Any]) -> pd.DataFrame:
    """`preregistered`: yes when the committed, unmodified claims file predates every run of the
    claim's arms (run dirs' config.yaml times); no, or unknown outside a git checkout."""
    out = []
    for _, r in table.iterrows():
        first = r["first_run_created"]
        if commit.get("time") is None:
            out.append("unknown (no git history)")
        elif commit.get("dirty"):
            out.append("no (claims file has uncommitted changes)")
        elif first is None or (isinstance(first, float) and math.isnan(first)):
            out.append("n/a")
        else:
            out.append("yes" if commit["time"] < first else "no (a run is older than the claims commit)")
    table = table.copy()
    table["preregistered"] = out
    return table


def prereg_note(r) -> str:
    """The note of a claim whose runs are not all younger than the committed claims file."""
    v = str(r.get("preregistered", "n/a"))
    return "" if v in ("yes", "n/a") else f"pre-registered: {v}"


def prereg_summary(table: pd.DataFrame) -> str:
    tested = table[table["preregistered"] != "n/a"]
    yes = int((tested["preregistered"] == "yes").sum())
    return (f"for {yes} of the {len(tested)} claims with runs, every run of the arms was created after that commit "
            "(run directories' creation times; the others say why in their note).")


def control_text(table: pd.DataFrame) -> str:
    """One sentence on the positive controls: the setting works, or is broken."""
    rows = table[table["positive_control"].fillna(False).astype(bool)] if "positive_control" in table else table.iloc[:0]
    if rows.empty:
        return "No positive control in this atlas: nothing checks that the setting can show an effect at all."
    failed = [r["id"] for _, r in rows.iterrows() if r["verdict"] != "reproduced"]
    if failed:
        return (f"POSITIVE CONTROL FAILED ({', '.join(failed)}): the setting is broken or too small to show a known "
                "effect; read no verdict of this atlas as evidence about its claims.")
    return (f"Positive control{'s' if len(rows) > 1 else ''} {', '.join(rows['id'])} reproduced (tested alone, outside "
            "the family): the setting can show a known effect.")


def atlas_markdown(table: pd.DataFrame, commit: dict[str, Any], where: str = "", phase_line: str = "") -> str:
    """The atlas table; `where`: grpo_research.provenance.environments_markdown of its runs."""
    counts = table["verdict"].value_counts()
    lines = [f"# The replication atlas: {len(table)} claims", "",
             ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS) + ".", "", control_text(table), "",
             *([phase_line, ""] if phase_line else []),
             f"Claims file committed at `{commit.get('commit') or 'unknown'}` ({commit.get('date') or 'n/a'})"
             + (" with uncommitted changes" if commit.get("dirty") else "") + "; " + prereg_summary(table), "",
             "| claim | verdict | phase | effect [95 % interval] | bases | n | seeds for 80 % power | "
             "new bases x 1 seed for a decision (core-hours) | bound | adjusted p | failed precondition | arms | metric |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in table.iterrows():
        need = "" if pd.isna(r["seeds_needed"]) or r["seeds_needed"] is None else str(int(r["seeds_needed"]))
        lines.append(f"| {r['id']}{' (tuned lr)' if r.get('tuned') else ''} | {r['verdict']} | {r['phase']} | {effect_text(r)} | {r['n_bases']} | {r['n_seeds']} | "
                     f"{need} | {decision_text(r)} | {bound_text(r)} | {r['p_adjusted']} | "
                     f"{r['failed_precondition'] or ''} | {r['arms']} | {r['metric']} |")
    lines += ["", method_text(), ""] + ([where] if where else [])
    return "\n".join(lines) + "\n"


def method_text() -> str:
    return (f"Effect: mean over seeds of the per-seed difference of the arms (first minus second; an ordering: its "
            f"weakest step), with the 95 % Student-t interval of grpo_research.analysis.stats.compare_paired. "
            f"Verdicts: one-sided t-tests at {ALPHA:.3g} of the claim and of its negation at the smallest effect that "
            f"matters, Benjamini-Hochberg adjusted across the atlas (each family), so at most {100 * ALPHA:.1f} % of "
            f"the 'reproduced' (and of the 'contradicted') verdicts are expected to be false. Seeds for "
            f"{100 * POWER:.0f} % power: from the spread of the present seeds, for a new fixed set of runs in which "
            f"these are pilots (adding seeds to these runs and testing again would be optional stopping). "
            + AA_NOTE)


def atlas_html(table: pd.DataFrame, commit: dict[str, Any], forest: Path | None,
               envs: list[dict[str, Any]] | None = None, phase_line: str = "") -> str:
    from grpo_research.analysis.report import CSS, figure, html_table

    counts = table["verdict"].value_counts()
    parts = ["<!DOCTYPE html><html lang=en><head><meta charset=utf-8><meta name=viewport "
             "content='width=device-width, initial-scale=1'><title>Replication atlas</title>"
             f"<style>{CSS} .reproduced{{color:#2a7d2a;font-weight:bold}} .contradicted{{color:#b22222;"
             "font-weight:bold}} .inconclusive{color:#555} .wrap{overflow-x:auto} td.claim{min-width:22em} td.note{min-width:14em} body{max-width:1400px}</style>"
             "</head><body><h1>Replication atlas</h1>"]
    parts.append(f"<p>{len(table)} published claims, each tested on its arms' runs, paired by seed: "
                 + ", ".join(f"<b>{counts.get(v, 0)}</b> {v}" for v in VERDICTS) + ".</p>")
    parts.append(f"<p><b>{html.escape(control_text(table))}</b></p>")
    if phase_line:
        parts.append(f"<p>{html.escape(phase_line)}</p>")
    c = commit.get("commit")
    parts.append("<p class=muted>Claims file (<code>experiments/claims.yaml</code>) committed at "
                 f"<code>{html.escape(c or 'unknown')}</code> on {html.escape(commit.get('date') or 'n/a')}"
                 + (" <b>with uncommitted changes</b>" if commit.get("dirty") else "")
                 + f"; {html.escape(prereg_summary(table))} Generated "
                 + _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") + ".</p>")
    parts.append(environments_html(envs or []))  # results differ across CPUs: say where the runs ran
    if forest is not None:
        parts.append(figure(forest, "Each claim's effect with its 95 % interval, divided by its smallest effect "
                                    "(or equivalence margin): dotted lines at ±1; colour: the verdict."))
    headers = ["claim", "verdict", "effect [95 % interval]", "n seeds", "seeds for 80 % power", "bound",
               "p claim / negation (BH)", "eval-noise share", "P(first > second) [95 %]", "note"]
    rows, classes = [], []
    for _, r in table.iterrows():
        need = "" if pd.isna(r["seeds_needed"]) or r["seeds_needed"] is None else str(int(r["seeds_needed"]))
        p = ("n/a" if pd.isna(r["p_claim_adjusted"]) else f"{r['p_claim_adjusted']:.2g} / {r['p_contra_adjusted']:.2g}")
        noise = r["eval_noise_share"]
        noise = "n/a" if noise is None or pd.isna(noise) else ("≥ 100 %" if noise >= 1 else f"≤ {100 * noise:.0f} %")
        poi = ("n/a" if pd.isna(r["p_improvement"]) else
               f"{r['p_improvement']:.2f} [{r['p_improvement_low']:.2f}, {r['p_improvement_high']:.2f}]")
        src = (f"arXiv <a href='https://arxiv.org/abs/{r['arxiv']}'>{r['arxiv']}</a>" if r["arxiv"] else "no source pinned")
        verdict = r["verdict"] + ("" if r["verdict_unadjusted"] == r["verdict"] else
                                  f" <span class=muted>(unadjusted: {r['verdict_unadjusted']})</span>")
        claim = (f"<b>{html.escape(r['id'])}</b>: {html.escape(r['claim'])}<br><span class=muted>{src}; "
                 f"{html.escape(r['kind'])}; {html.escape(r['metric'])}, {html.escape(r['budget'])}; arms "
                 f"{html.escape(r['arms'])}</span>")
        rows.append([claim, f"<span class={r['verdict'].split()[0]}>{verdict}</span>", html.escape(effect_text(r)),
                     str(r["n_seeds"]), need, html.escape(bound_text(r)), p, noise, poi,
                     html.escape("; ".join(x for x in [str(r["failed_precondition"] or ""), str(r["note"] or ""),
                                                       str(r.get("tuned") or ""), prereg_note(r)] if x)
                                 ).replace("; ", "<br>")])
        classes.append(["l claim", "l", "", "", "", "l", "", "", "", "l note"])
    parts.append("<h2>Claims</h2><div class=wrap>" + html_table(headers, rows, classes) + "</div>")
    parts.append(f"<h2>Method</h2><p>{html.escape(method_text())}</p>")
    parts.append("<p class=muted>Eval-noise share: the binomial variance of each arm's evaluation over its "
                 "problems, p(1-p)/N, summed over the arms, divided by the variance of the per-seed differences; an "
                 "upper bound (arms evaluated on the same problems share part of it). P(first > second): rliable's "
                 "probability of improvement (arXiv 2108.13264) over run pairs, ties half, with a percentile "
                 "interval from a bootstrap of each arm's runs, descriptive: a bootstrap over 3 seeds is too narrow to decide anything. The base "
                 "model as an arm: each run's own step-0 evaluation (held-out metrics) or the study's one "
                 "base-model evaluation (a benchmark entry: a constant, its own noise not in the interval).</p>")
    parts.append("</body></html>")
    return "".join(parts)


PHASE_PROCEDURE = {"exploratory": "bh", "confirmatory": "holm"}


def freeze_text(frozen: dict[str, Any] | None, changed: list[str]) -> str:
    """What the confirmatory verdicts were frozen under, or that the verdicts are exploratory."""
    if frozen is None:
        return ("Exploratory phase: every claim on the bases its studies already use, Benjamini-Hochberg within each "
                "direction; these verdicts choose what the confirmatory phase tests, they do not settle a claim.")
    text = (f"Confirmatory phase: the family frozen in experiments/atlas_freeze.json at commit "
            f"{frozen.get('commit') or 'unknown'} ({frozen.get('created', 'n/a')}), {len(frozen['family'])} claims on "
            f"new base seeds {frozen['base_seeds'][0]}-{frozen['base_seeds'][-1]} x RL seeds {frozen['seeds']}; "
            f"{frozen.get('promise', '')}.")
    if changed:
        text += (" Analysis code changed since the freeze: " + ", ".join(changed) + " (allowed only when atlas.csv over "
                 "the frozen runs is identical with the frozen code; check it before reading these verdicts).")
    return text


def write_atlas(claims_path: str | Path, studies_dir: str | Path, runs_dir: str | Path, out: str | Path,
                include: dict[str, list[str]] | None = None, improvement: bool = True,
                phase: str = "exploratory", freeze_path: str | Path | None = None) -> pd.DataFrame:
    """atlas.csv, atlas.md, figures/forest.png and report.html into `out`; returns the table.
    The confirmatory phase needs `freeze_path` (and tests only the frozen claims, by Holm)."""
    frozen, changed = None, []
    if phase == "confirmatory":
        from grpo_research.analysis.freeze import check_freeze, load_freeze
        from grpo_research.provenance import git

        if freeze_path is None:
            raise UsageError("the confirmatory atlas needs --freeze experiments/atlas_freeze.json")
        frozen = load_freeze(freeze_path)
        changed = check_freeze(frozen, claims_path)
        where = Path(freeze_path).resolve()
        frozen["commit"] = git(where.parent, "log", "-1", "--format=%H", "--", where.name) or None
    claims, runs, bases = load_inputs(claims_path, studies_dir, runs_dir, include, frozen)
    if not any(runs.values()):
        raise UsageError(f"no finished run of any claim's study under {runs_dir} "
                         "(run `snakemake --cores all atlas`, which trains them)")
    out = Path(out)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    commit = claims_commit(claims_path)
    table = with_preregistration(build_atlas(claims, runs, bases, improvement, procedure=PHASE_PROCEDURE[phase],
                                             phase=phase), commit)
    write_text_atomic(out / "atlas.csv", table.reindex(columns=COLUMNS).to_csv(index=False))
    every = [r for rs in runs.values() for r in rs]
    envs = environments_of([r.summary for r in every])
    where = environments_markdown(envs, base_model_environments([r.config for r in every]))
    phase_line = freeze_text(frozen, changed)
    write_text_atomic(out / "atlas.md", atlas_markdown(table, commit, where, phase_line))
    from grpo_research.analysis.plots import plot_forest

    forest = plot_forest(table, out / "figures" / "forest.png")
    write_text_atomic(out / "report.html", atlas_html(table, commit, forest, envs, phase_line))
    return table
