"""`grpo-research dashboard --study NAME`: the study's W&B workspace (grpo_research/tracking/dashboard.py).

    grpo-research dashboard --study ppo_vs_grpo [--runs runs] [--results results] [--entity E] [--project P]
    grpo-research dashboard --study ppo_vs_grpo --publish      # after `wandb login` and `wandb sync`

Offline (the default; nothing touches the network) it writes the workspace's view spec to
`<results>/<NAME>/wandb_workspace.json` and says how to publish it. `--publish` saves the view
to W&B and prints its URL. Entity and project: the flags, else WANDB_ENTITY / WANDB_PROJECT,
else the project the runs logged to (and, offline, a placeholder entity).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from grpo_research.cli.common import Parser, run_command
from grpo_research.errors import UsageError


def cmd_dashboard(args: argparse.Namespace) -> int:
    from grpo_research.tracking import dashboard as D

    runs = D.find_study_runs(args.study, args.runs)
    if args.publish:
        return _publish(runs, args)
    from grpo_research.files import check_output

    out = check_output(Path(args.out) if args.out else Path(args.results) / args.study / D.SPEC_FILE)
    entity, project = D.resolve_target(runs, args.entity, args.project)
    doc = D.write_spec(runs, out, entity, project)
    panels = D.spec_panels(doc["workspace"])
    print(f"{args.study}: W&B workspace of {len(runs.run_dirs)} runs (group {', '.join(runs.groups)}), "
          f"{len(panels)} panels -> {out}")
    flags = " --entity ENTITY" if entity == D.PLACEHOLDER_ENTITY else ""
    print(f"publish it: `wandb login`, `wandb sync {args.runs}/{args.study}/*/wandb/offline-run-*`, then "
          f"`grpo-research dashboard --study {args.study} --publish{flags}`")
    return 0


def _publish(runs, args: argparse.Namespace) -> int:
    """Online: save the view, print its URL (needs the network; kept apart from the offline path)."""
    from grpo_research.tracking import dashboard as D

    mode = os.environ.get("WANDB_MODE", "")
    if mode in ("offline", "disabled", "dryrun"):
        raise UsageError(f"--publish needs W&B online, but WANDB_MODE={mode}: unset it and `wandb login`")
    entity, project = D.resolve_target(runs, args.entity, args.project, online=True)
    print(D.publish(runs, entity, project))
    return 0


def build_parser() -> Parser:
    p = Parser(prog="grpo-research dashboard", description=__doc__.splitlines()[0])
    p.add_argument("--study", required=True, help="study name (its runs: <runs>/<NAME>/)")
    p.add_argument("--runs", default="runs", help="the runs root (default: runs)")
    p.add_argument("--results", default="results", help="the results root (default: results)")
    p.add_argument("--out", help="spec file (default: <results>/<NAME>/wandb_workspace.json)")
    p.add_argument("--entity", help="W&B entity (default: WANDB_ENTITY; offline a placeholder)")
    p.add_argument("--project", help="W&B project (default: WANDB_PROJECT, else the runs' tracking.project)")
    p.add_argument("--publish", action="store_true", help="save the view to W&B and print its URL (online)")
    p.set_defaults(func=cmd_dashboard)
    return p


def main(argv: list[str] | None = None) -> int:
    """`dashboard` subcommand; argv excludes the word "dashboard". Returns the exit code."""
    return run_command(build_parser(), sys.argv[1:] if argv is None else argv)
