"""`grpo-research report ...`: tables, figures and the report of a study, the results index
(the library: grpo_research/analysis/).

    grpo-research report study --runs runs/ppo_vs_grpo --out results/ppo_vs_grpo [--study-file F]
    grpo-research report aggregate --runs runs/S --out results/S [--study NAME] [--study-file F]
                         [--variants a,b,...] [--include id,...] [--n-boot 10000] [--seed 0] [--smooth 0]
    grpo-research report plot --out results/S
    grpo-research report render --out results/S [--extra "HEADING=DIR"] [--extra-text "NAME=FILE"]
    grpo-research report index --results results [--out results/index.html]
    grpo-research report atlas --claims experiments/claims.yaml --runs runs --out results/atlas
                         [--studies-dir experiments] [--include STUDY=id,id,...]

`study` runs aggregate, plot and render in one process. Everything is computed from the run
directories under --runs.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grpo_research.cli.common import Parser, run_command
from grpo_research.errors import UsageError


def _names(text: str | None) -> list[str]:
    return [v for v in (text or "").split(",") if v]


def _study_outputs(args: argparse.Namespace) -> None:
    """--runs must be a folder; --out a folder that is not --runs nor inside it (checked first)."""
    from grpo_research.files import check_output_dir

    if not Path(args.runs).is_dir():
        raise UsageError(f"--runs {args.runs}: no such directory")
    check_output_dir(args.out, [args.runs])


def _aggregated(out: str) -> Path:
    """The summary.json that `report aggregate` wrote into --out (UsageError when absent)."""
    path = Path(out) / "summary.json"
    if not path.is_file():
        raise UsageError(f"--out {out}: no summary.json (run `grpo-research report aggregate` into it first)")
    return path


def cmd_aggregate(args: argparse.Namespace) -> int:
    from grpo_research.analysis.study import aggregate_study

    _study_outputs(args)
    meta = aggregate_study(args.runs, args.out, study=args.study, study_file=args.study_file,
                           variants=_names(args.variants), include=_names(args.include) or None,
                           n_boot=args.n_boot, seed=args.seed, smooth=args.smooth)
    print(f"{meta['study']}: {meta['n_runs']} runs, {len(meta['variants'])} variants -> {Path(args.out)}")
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from grpo_research.analysis.study import plot_study

    summary = _aggregated(args.out)
    paths = plot_study(args.out)
    study = json.loads(summary.read_text())["study"]
    print(f"{study}: {len(paths)} figures -> {Path(args.out) / 'figures'}")
    return 0


def pairs(items: list[str] | None) -> list[tuple[str, Path]]:
    """NAME=PATH arguments."""
    out = []
    for item in items or []:
        if "=" not in item:
            raise UsageError(f"expected NAME=PATH, got {item!r}")
        name, path = item.split("=", 1)
        out.append((name, Path(path)))
    return out


def cmd_render(args: argparse.Namespace) -> int:
    from grpo_research.analysis.report import render_study

    extra, extra_text = pairs(args.extra), pairs(args.extra_text)
    _aggregated(args.out)
    texts = {name: path.read_text() for name, path in extra_text if path.exists()}
    path = render_study(args.out, title=args.title, extra=extra, extra_text=texts)
    print(f"report -> {path}")
    return 0


def cmd_index(args: argparse.Namespace) -> int:
    from grpo_research.analysis.report import render_index

    from grpo_research.files import check_output

    if not Path(args.results).is_dir():
        raise UsageError(f"--results {args.results}: no such directory")
    path = render_index(args.results, check_output(args.out or Path(args.results) / "index.html"))
    print(f"index -> {path}")
    return 0


def cmd_study(args: argparse.Namespace) -> int:
    _study_outputs(args)
    return cmd_aggregate(args) or cmd_plot(args) or cmd_render(args)


def cmd_atlas(args: argparse.Namespace) -> int:
    from grpo_research.analysis.atlas_report import write_atlas
    from grpo_research.files import check_output_dir

    if not Path(args.runs).is_dir():
        raise UsageError(f"--runs {args.runs}: no such directory")
    if not Path(args.claims).is_file():
        raise UsageError(f"--claims {args.claims}: no such file")
    check_output_dir(args.out, [args.runs])
    include: dict[str, list[str]] = {}
    for item in args.include or []:
        study, sep, ids = item.partition("=")
        if not sep or not study:
            raise UsageError(f"--include {item!r}: expected STUDY=run_id,run_id,...")
        include[study] = _names(ids)
    from grpo_research.analysis.atlas import VERDICTS

    table = write_atlas(args.claims, args.studies_dir or Path(args.claims).parent, args.runs, args.out,
                        include=include or None, improvement=not args.no_improvement, phase=args.phase,
                        freeze_path=args.freeze)
    counts = table["verdict"].value_counts()
    print(f"atlas ({args.phase}): {len(table)} claims (" + ", ".join(f"{counts.get(v, 0)} {v}" for v in VERDICTS)
          + f") -> {Path(args.out) / 'report.html'}")
    return 0


def build_parser() -> Parser:
    p = Parser(prog="grpo-research report", description=__doc__.splitlines()[0])
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
    a = sub.add_parser("atlas", help="the replication atlas: a verdict for every claim of the claims file")
    a.add_argument("--claims", required=True, help="the claims file, e.g. experiments/claims.yaml")
    a.add_argument("--studies-dir", help="the study files the claims name (default: the claims file's folder)")
    a.add_argument("--runs", required=True, help="the runs dir holding runs/<study>/<run_id>/")
    a.add_argument("--out", required=True, help="e.g. results/atlas")
    a.add_argument("--include", action="append", help="STUDY=run_id,...: only these runs of STUDY (repeatable)")
    a.add_argument("--no-improvement", action="store_true", help="skip the probability of improvement (descriptive)")
    a.add_argument("--phase", choices=["exploratory", "confirmatory"], default="exploratory",
                   help="exploratory: Benjamini-Hochberg within each direction; confirmatory: Holm over both "
                        "directions of the frozen family (--freeze)")
    a.add_argument("--freeze", help="confirmatory: the committed freeze, e.g. experiments/atlas_freeze.json")
    a.set_defaults(func=cmd_atlas)
    return p


def main(argv: list[str] | None = None) -> int:
    """`report` subcommand; argv excludes the word "report". Returns the exit code."""
    return run_command(build_parser(), sys.argv[1:] if argv is None else argv)
