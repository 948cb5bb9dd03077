"""One study's results from its run dirs: the tables (`aggregate_study`), the figures
(`plot_study`) and report.html (`grpo_research.analysis.report.render_study`); `report_study`
does all three. Used by `grpo-research report ...` and by analysis/report_study.py."""
from __future__ import annotations

import datetime as _dt
import json
import re
from pathlib import Path
from typing import Any

from grpo_research.errors import UsageError
from grpo_research.files import write_text_atomic
from grpo_research.provenance import base_model_environments, environments_markdown, environments_of
from grpo_research.typed_config import safe_load


def base_model_run(runs_dir: Path, base: int = 0, kernels: str = "native"):
    """Base model `base`'s evaluations (<runs>/<study>/_base_model[-base<b>][-k<family>]/eval/) as a
    Run of the variant `base model` (None without them)."""
    from grpo_research.analysis.load import load_run

    from grpo_research.run_ids import base_suffix
    from grpo_research.studies import BASE_EVAL_DIR

    d = Path(runs_dir) / f"{BASE_EVAL_DIR}{base_suffix(base, kernels)}"
    if not (d / "eval").is_dir() or not any((d / "eval").glob("*.json")):
        return None
    run = load_run(d)
    run.variant, run.seed, run.config, run.base, run.kernels = "base model", None, {"method": "base"}, base, kernels
    return run


def base_model_runs(runs_dir: Path) -> dict[Any, Any]:
    """Every base model's evaluations of a study: base seed (native kernels) or (base seed,
    kernel family) -> its Run (`base_model_run`)."""
    from grpo_research.provenance import KERNEL_FAMILIES, NATIVE
    from grpo_research.studies import BASE_EVAL_DIR

    families = "|".join(re.escape(k) for k in KERNEL_FAMILIES if k != NATIVE)
    out = {}
    for d in sorted(Path(runs_dir).glob(f"{BASE_EVAL_DIR}*")) if Path(runs_dir).is_dir() else []:
        m = re.fullmatch(rf"{BASE_EVAL_DIR}(?:-base(\d+))?(?:-k({families}))?", d.name)
        if m:
            kernels = m.group(2) or NATIVE
            run = base_model_run(runs_dir, int(m.group(1) or 0), kernels)
            if run is not None:
                out[run.base if kernels == NATIVE else (run.base, kernels)] = run
    return dict(sorted(out.items(), key=lambda kv: (kv[0], "") if isinstance(kv[0], int) else kv[0]))


def study_compare(study_file: str | Path | None) -> list[list[str]]:
    """The primary comparisons (`compare:`) of a study file ([] without one)."""
    if not study_file or not Path(study_file).exists():
        return []
    return [list(p) for p in (safe_load(Path(study_file).read_text()) or {}).get("compare") or []]


def study_pilot_within(study_file: str | Path | None) -> tuple[dict[str, float], str]:
    """A study file's `within_base_sd` (points by "a - b") and where it was measured."""
    if not study_file or not Path(study_file).exists():
        return {}, ""
    raw = dict((safe_load(Path(study_file).read_text()) or {}).get("within_base_sd") or {})
    source = str(raw.pop("from", "") or "")
    return {str(k): float(v) for k, v in raw.items()}, source


def replicate_cost(runs: list) -> dict[str, float] | None:
    """Core-seconds of one run (training steps x threads, mean over runs; process start and
    evaluation excluded) and of one base-model build (its recorded seconds, counted at one
    core), for the design planner of `question_markdown`; None without timings."""
    per_run = [float(r.summary["train_s_this_invocation"]) * int(r.summary.get("threads") or 1)
               for r in runs if r.summary.get("train_s_this_invocation")]
    builds = []
    for path in {str(r.config.get("model", {}).get("name_or_path", "")) for r in runs}:
        f = Path(path) / "base_info.json"
        if path and f.exists():
            builds.append(float(json.loads(f.read_text()).get("seconds") or 0.0))
    if not per_run:
        return None
    return {"run": sum(per_run) / len(per_run), "base": (sum(builds) / len(builds)) if builds else 0.0}


def aggregate_study(runs_dir: str | Path, out: str | Path, *, study: str | None = None,
                    study_file: str | Path | None = None, variants: list[str] | None = None,
                    include: list[str] | None = None, n_boot: int = 10_000, seed: int = 0,
                    smooth: int = 0) -> dict[str, Any]:
    """final.csv/.md, cost.csv/.md, curves.csv, runs.csv, gains.csv/.md, wall_curves.csv,
    passk.csv/.md (pass@k and maj@k of benchmarks sampled several times per problem) and
    summary.json of the finished runs under `runs_dir` (only those of `include` when given) into
    `out`; returns the summary. `variants`: display order; `smooth` 0: about 1/25 of a run."""
    from grpo_research.analysis.aggregate import (cost_markdown, cost_table, curve_table, default_smooth,
                                                  final_markdown, final_table, order_variants, runs_table)
    from grpo_research.analysis.comparisons import question_markdown, variance_table
    from grpo_research.analysis.gains import gains_markdown, gains_table, is_wall_control, wall_curve_table
    from grpo_research.analysis.load import load_study_runs
    from grpo_research.analysis.passk import passk_markdown, passk_settings, passk_summary, passk_table

    runs_dir, out = Path(runs_dir), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    runs = load_study_runs(runs_dir) if runs_dir.is_dir() else []
    if include:  # only the study's current runs (not dirs of runs since removed from it)
        keep = set(include)
        runs = [r for r in runs if r.run_id in keep]
    if not runs:
        raise UsageError(f"no finished run (with summary.json) under {runs_dir}")
    name = study or runs_dir.name
    variants = order_variants(runs, list(variants or []))
    smooth = smooth or default_smooth(runs)
    base_runs = base_model_runs(runs_dir)  # base models' benchmark evaluations, when the study made them
    base = base_runs.get(0) or next(iter(base_runs.values()), None)
    final = final_table(list(base_runs.values()) + runs, (["base model"] if base_runs else []) + variants,
                        n_boot=n_boot, seed=seed)
    compare = [p for p in study_compare(study_file) if all(v in variants for v in p)]
    pilot_within, pilot_from = study_pilot_within(study_file)
    variance = variance_table(final, compare or [[a, b] for i, a in enumerate(variants) for b in variants[i + 1:]],
                              pilot_within, pilot_from)
    write_text_atomic(out / "variance.csv", variance.to_csv(index=False, na_rep="nan"))
    question = question_markdown(variance, compare, replicate_cost(runs)) if compare else ""
    cost = cost_table(runs, variants)
    curves = curve_table(runs, variants, smooth=smooth, n_boot=n_boot, seed=seed)
    write_text_atomic(out / "final.csv", final.to_csv(index=False))
    envs = environments_of([r.summary for r in runs])  # machines and versions the runs ran on
    bases = base_model_environments([r.config for r in runs])
    write_text_atomic(out / "final.md", f"# {name}: final accuracy\n\n" + (question + "\n" if question else "")
                      + final_markdown(final, n_boot)
                      + "\n" + environments_markdown(envs, bases))
    write_text_atomic(out / "cost.csv", cost.to_csv(index=False))
    write_text_atomic(out / "cost.md", f"# {name}: cost per method\n\n" + cost_markdown(cost))
    write_text_atomic(out / "curves.csv", curves.to_csv(index=False))
    write_text_atomic(out / "runs.csv", runs_table(runs).to_csv(index=False))
    gains = gains_table(runs, variants, n_boot=n_boot, seed=seed)
    write_text_atomic(out / "gains.csv", gains.to_csv(index=False))
    write_text_atomic(out / "gains.md", f"# {name}: RL against the base model and the supervised "
                                        "control\n\n" + gains_markdown(gains))
    write_text_atomic(out / "wall_curves.csv",
                      wall_curve_table(runs, variants, n_boot=n_boot, seed=seed).to_csv(index=False))
    passk = passk_table(runs, base, variants, n_boot=n_boot, seed=seed)
    settings = passk_settings(([base] if base else []) + runs, list(dict.fromkeys(passk["benchmark"])))
    write_text_atomic(out / "passk.csv", passk.to_csv(index=False))
    write_text_atomic(out / "passk.md", f"# {name}: pass@k and maj@k, base model against final models\n\n"
                                        + passk_markdown(passk_summary(passk), settings))
    description = ""
    if study_file and Path(study_file).exists():
        description = str((safe_load(Path(study_file).read_text()) or {}).get("description", "")).strip()
    best = {}
    for bench, g in final.groupby("benchmark", sort=False):
        r = g.loc[g["mean"].idxmax()]
        best[bench] = {"variant": r["variant"], "mean": float(r["mean"]), "low": float(r["low"]),
                       "high": float(r["high"])}
    meta = {
        "study": name, "description": description, "runs_dir": str(runs_dir),
        "n_runs": len(runs), "variants": variants, "seeds": sorted({r.seed for r in runs if r.seed is not None}),
        "base_seeds": sorted({r.base for r in runs}), "compare": compare, "question_md": question,
        "samples_per_run": sorted({r.summary.get("samples") for r in runs if r.summary.get("samples")}),
        "n_boot": n_boot, "bootstrap_seed": seed, "smooth_steps": smooth,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "best": best,
        "passk_settings": settings,  # entry -> its eval files' distinct {temperature, samples, n_problems}
        # the equal-wall-time control: trained on more samples, so left out of the equal-samples panels
        "wall_variants": [v for v in variants if any(r.variant == v and is_wall_control(r) for r in runs)],
        "steps_per_run": sorted({len(r.train) for r in runs if r.train}),
        "environments": envs, "base_model_environments": bases,
    }
    write_text_atomic(out / "summary.json", json.dumps(meta, indent=2) + "\n")
    return meta


def plot_study(out: str | Path) -> list[Path]:
    """figures/*.png of a study from the tables `aggregate_study` wrote into `out` (old PNGs removed)."""
    import pandas as pd

    from grpo_research.analysis.plots import plot_curves, plot_final, plot_passk, plot_wall

    out = Path(out)
    meta = json.loads((out / "summary.json").read_text())
    figs = out / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    for old in figs.glob("*.png"):
        old.unlink()
    curves = pd.read_csv(out / "curves.csv")
    final = pd.read_csv(out / "final.csv")
    wall = set(meta.get("wall_variants", []))
    paths = plot_curves(curves, figs, meta["study"], meta["smooth_steps"], [v for v in meta["variants"] if v not in wall],
                        left_out=sorted(wall))
    paths += plot_final(final, figs, meta["study"], meta["variants"])
    paths += plot_wall(pd.read_csv(out / "wall_curves.csv"), figs, meta["study"], meta["variants"])
    paths += plot_passk(pd.read_csv(out / "passk.csv"), figs, meta["study"], meta["passk_settings"], meta["variants"])
    return paths


def report_study(runs_dir: str | Path, out: str | Path, *, title: str | None = None,
                 extra: list[tuple[str, Path]] | None = None, extra_text: dict[str, str] | None = None,
                 **aggregate: Any) -> Path:
    """Tables, figures and report.html of a study (keyword arguments of `aggregate_study`)."""
    from grpo_research.analysis.report import render_study

    aggregate_study(runs_dir, out, **aggregate)
    plot_study(out)
    return render_study(out, title=title, extra=extra, extra_text=extra_text)
