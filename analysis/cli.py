"""`python -m analysis ...` (or `grpo-research report ...`): tables, figures and the report.

    python -m analysis study --runs runs/ppo_vs_grpo --out results/ppo_vs_grpo [--study-file F]
    python -m analysis aggregate --runs runs/S --out results/S [--study NAME] [--study-file F]
                       [--variants a,b,...] [--n-boot 10000] [--seed 0] [--smooth 0]
    python -m analysis plot --out results/S
    python -m analysis render --out results/S [--extra "HEADING=DIR"] [--extra-text "NAME=FILE"]
    python -m analysis index --results results [--out results/index.html]

`study` runs aggregate, plot and render in one process. Everything is computed from the run
directories under --runs.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
from pathlib import Path

import yaml


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def cmd_aggregate(args: argparse.Namespace) -> int:
    from analysis.aggregate import (cost_markdown, cost_table, curve_table, default_smooth, final_markdown,
                                    final_table, gains_markdown, gains_table, order_variants, runs_table,
                                    wall_curve_table)
    from analysis.load import load_study_runs

    runs_dir, out = Path(args.runs), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runs = load_study_runs(runs_dir) if runs_dir.is_dir() else []
    if args.include:  # only the study's current runs (not dirs of runs since removed from it)
        keep = set(args.include.split(","))
        runs = [r for r in runs if r.run_id in keep]
    if not runs:
        print(f"error: no finished run (with summary.json) under {runs_dir}", file=sys.stderr)
        return 2
    order = [v for v in (args.variants or "").split(",") if v]
    variants = order_variants(runs, order)
    smooth = args.smooth or default_smooth(runs)
    final = final_table(runs, variants, n_boot=args.n_boot, seed=args.seed)
    cost = cost_table(runs, variants)
    curves = curve_table(runs, variants, smooth=smooth, n_boot=args.n_boot, seed=args.seed)
    _write(out / "final.csv", final.to_csv(index=False))
    _write(out / "final.md", f"# {args.study or runs_dir.name}: final accuracy\n\n" + final_markdown(final, args.n_boot))
    _write(out / "cost.csv", cost.to_csv(index=False))
    _write(out / "cost.md", f"# {args.study or runs_dir.name}: cost per method\n\n" + cost_markdown(cost))
    _write(out / "curves.csv", curves.to_csv(index=False))
    _write(out / "runs.csv", runs_table(runs).to_csv(index=False))
    gains = gains_table(runs, variants, n_boot=args.n_boot, seed=args.seed)
    _write(out / "gains.csv", gains.to_csv(index=False))
    _write(out / "gains.md", f"# {args.study or runs_dir.name}: RL against the base model and the supervised "
                             "control\n\n" + gains_markdown(gains))
    _write(out / "wall_curves.csv", wall_curve_table(runs, variants, n_boot=args.n_boot, seed=args.seed)
           .to_csv(index=False))
    description = ""
    if args.study_file and Path(args.study_file).exists():
        description = str((yaml.safe_load(Path(args.study_file).read_text()) or {}).get("description", "")).strip()
    best = {}
    for bench, g in final.groupby("benchmark", sort=False):
        r = g.loc[g["mean"].idxmax()]
        best[bench] = {"variant": r["variant"], "mean": float(r["mean"]), "low": float(r["low"]),
                       "high": float(r["high"])}
    meta = {
        "study": args.study or runs_dir.name, "description": description, "runs_dir": str(runs_dir),
        "n_runs": len(runs), "variants": variants, "seeds": sorted({r.seed for r in runs if r.seed is not None}),
        "samples_per_run": sorted({r.summary.get("samples") for r in runs if r.summary.get("samples")}),
        "n_boot": args.n_boot, "bootstrap_seed": args.seed, "smooth_steps": smooth,
        "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "best": best,
    }
    _write(out / "summary.json", json.dumps(meta, indent=2) + "\n")
    print(f"{meta['study']}: {len(runs)} runs, {len(variants)} variants -> {out}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    import pandas as pd

    from analysis.plots import plot_curves, plot_final, plot_wall

    out = Path(args.out)
    meta = json.loads((out / "summary.json").read_text())
    figs = out / "figures"
    figs.mkdir(parents=True, exist_ok=True)
    for old in figs.glob("*.png"):
        old.unlink()
    curves = pd.read_csv(out / "curves.csv")
    final = pd.read_csv(out / "final.csv")
    paths = plot_curves(curves, figs, meta["study"], meta["smooth_steps"], meta["variants"])
    paths += plot_final(final, figs, meta["study"], meta["variants"])
    paths += plot_wall(pd.read_csv(out / "wall_curves.csv"), figs, meta["study"], meta["variants"])
    print(f"{meta['study']}: {len(paths)} figures -> {figs}")
    return 0


def _pairs(items: list[str] | None) -> list[tuple[str, Path]]:
    out = []
    for item in items or []:
        if "=" not in item:
            raise SystemExit(f"error: expected NAME=PATH, got {item!r}")
        name, path = item.split("=", 1)
        out.append((name, Path(path)))
    return out


def cmd_render(args: argparse.Namespace) -> int:
    from analysis.report import render_study

    texts = {name: path.read_text() for name, path in _pairs(args.extra_text) if path.exists()}
    path = render_study(args.out, title=args.title, extra=_pairs(args.extra), extra_text=texts)
    print(f"report -> {path}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from analysis.report import render_index

    path = render_index(args.results, args.out)
    print(f"index -> {path}")
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    rc = cmd_aggregate(args)
    if rc:
        return rc
    return cmd_plot(args) or cmd_render(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m analysis", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    agg = argparse.ArgumentParser(add_help=False)
    agg.add_argument("--runs", required=True, help="the study's run dirs' parent, e.g. runs/ppo_vs_grpo")
    agg.add_argument("--study", help="study name (default: the --runs folder name)")
    agg.add_argument("--study-file", help="the study YAML (for its description)")
    agg.add_argument("--variants", help="comma-separated display order of the variants")
    agg.add_argument("--include", help="comma-separated run ids to aggregate (default: every finished run)")
    agg.add_argument("--n-boot", type=int, default=10_000)
    agg.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    agg.add_argument("--smooth", type=int, default=0, help="rolling mean of training curves in steps (0: auto)")
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--out", required=True, help="results dir of the study, e.g. results/ppo_vs_grpo")
    ren = argparse.ArgumentParser(add_help=False)
    ren.add_argument("--title")
    ren.add_argument("--extra", action="append", help="HEADING=DIR: a section with every PNG of DIR")
    ren.add_argument("--extra-text", action="append", help="NAME=FILE: a text file shown in the extra section")
    sub.add_parser("study", parents=[agg, out, ren], help="aggregate + plot + render").set_defaults(func=cmd_study)
    sub.add_parser("aggregate", parents=[agg, out], help="tables and curves").set_defaults(func=cmd_aggregate)
    sub.add_parser("plot", parents=[out], help="figures from the tables").set_defaults(func=cmd_plot)
    sub.add_parser("render", parents=[out, ren], help="report.html").set_defaults(func=cmd_render)
    i = sub.add_parser("index", help="results/index.html linking every study report")
    i.add_argument("--results", required=True)
    i.add_argument("--out")
    i.set_defaults(func=cmd_index)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
