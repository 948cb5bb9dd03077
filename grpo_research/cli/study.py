"""`grpo-research study train-budget | train-wall | list`: train one run of a study at a budget
of generated samples, train the equal-wall-time supervised control, print a study's runs (the
study library: grpo_research/studies.py and study_budget.py). The Snakemake rules call the first
two."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpo_research.cli.common import Parser, run_command
from grpo_research.config import load_config
from grpo_research.run_ids import base_suffix
from grpo_research.studies import expand_study, load_study_file, override
from grpo_research.study_budget import budget_overrides, prepare_wall_run, set_aside_stale_run


def train(argv: list[str]) -> int:
    """`grpo-research train ARGV...` in this process."""
    from grpo_research.cli import main

    return main(["train", *argv])


def cmd_train_budget(args: argparse.Namespace) -> int:
    """Resolve the config, set train.steps (and eval_every) from the budget, train."""
    overrides = list(args.overrides)
    cfg = load_config(args.config, overrides)
    extra = budget_overrides(cfg, args.budget_samples, args.eval_every_samples)
    if args.replace_stale:
        stale = set_aside_stale_run(args.run_dir, load_config(args.config, [*overrides, *extra]).dump())
        if stale is not None:
            print(f"{Path(args.run_dir)} held another config: moved to {stale.name}, training afresh", file=sys.stderr)
    return train(["--run-dir", args.run_dir, *(["--config", args.config] if args.config else []), *overrides, *extra])


def cmd_train_wall(args: argparse.Namespace) -> int:
    budget = prepare_wall_run(args.run_dir, args.match, args.probe, args.evals)
    return train(["--run-dir", args.run_dir, *args.overrides,
                  override("train.steps", budget["steps"]), override("train.eval_every", budget["eval_every"])])


def cmd_list(args: argparse.Namespace) -> int:
    raw = load_study_file(args.study, args.schema)
    # base b's runs train from the pipeline's <model>-base<b> beside --model-path (base_seeds)
    paths = {b: (args.model_path + base_suffix(b) if args.model_path else None) for b in raw.get("base_seeds") or [0]}
    study = expand_study(raw, Path(args.study).stem, path=args.study, model_path=args.model_path, base_paths=paths)
    for r in study.runs:
        wall = f"\twall-time match of {','.join(r.wall_match)}" if r.wall_match else ""
        print(f"{r.run_id}\tsteps={r.steps}{wall}\t{' '.join(r.overrides)}")
    return 0


def build_parser() -> Parser:
    p = Parser(prog="grpo-research study", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train-budget", help="train one run at a budget of generated samples")
    t.add_argument("--budget-samples", type=int, required=True)
    t.add_argument("--eval-every-samples", type=int)
    t.add_argument("--run-dir", required=True)
    t.add_argument("--config")
    t.add_argument("--replace-stale", action="store_true",
                   help="a run dir holding another config is moved aside (<dir>.stale-N) instead of refused")
    t.add_argument("overrides", nargs="*", metavar="key=value")
    t.set_defaults(func=cmd_train_budget)
    w = sub.add_parser("train-wall", help="train the equal-wall-time supervised control")
    w.add_argument("--match", action="append", required=True, help="an RL run dir whose training time to match")
    w.add_argument("--probe", required=True, help="the equal-samples control run dir (its seconds per step)")
    w.add_argument("--evals", type=int, default=6, help="held-out evaluations over the run (besides step 0)")
    w.add_argument("--run-dir", required=True)
    w.add_argument("overrides", nargs="*", metavar="key=value")
    w.set_defaults(func=cmd_train_wall)
    s = sub.add_parser("list", help="print the runs of a study file")
    s.add_argument("study")
    s.add_argument("--schema")
    s.add_argument("--model-path")
    s.set_defaults(func=cmd_list)
    return p


def main(argv: list[str] | None = None) -> int:
    """`study` subcommand; argv excludes the word "study". Returns the exit code."""
    return run_command(build_parser(), sys.argv[1:] if argv is None else argv)
