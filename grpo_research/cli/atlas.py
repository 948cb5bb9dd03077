"""`grpo-research atlas freeze`: fix the confirmatory phase of the replication atlas before it runs
(grpo_research/analysis/freeze.py).

    grpo-research atlas freeze [--claims experiments/claims.yaml]
                               [--exploratory results/atlas_exploratory/atlas.csv]
                               [--out experiments/atlas_freeze.json] [--runs runs] [--bases 8]
                               [--seeds 1] [--base-seed-start 1000] [--max-claims 6]

Commit the file it writes before `snakemake --cores all atlas` starts the confirmatory runs.
"""
from __future__ import annotations

import argparse
import sys

from grpo_research.cli.common import Parser, run_command


def cmd_freeze(args: argparse.Namespace) -> int:
    from grpo_research.analysis.freeze import freeze

    data = freeze(args.claims, args.exploratory, args.out, studies_dir=args.studies_dir, runs_dir=args.runs,
                  n_bases=args.bases, seeds=args.seeds, base_seed_start=args.base_seed_start,
                  max_claims=args.max_claims, tuning_dir=args.tuning)
    ids = ", ".join(c["id"] for c in data["family"]) or "none"
    print(f"atlas freeze: family of {len(data['family'])} ({ids}) and {len(data['positive_controls'])} positive "
          f"control(s) on base seeds {data['base_seeds'][0]}-{data['base_seeds'][-1]} x seeds {data['seeds']} "
          f"-> {args.out}; commit it before `snakemake --cores all atlas`")
    for c in data["left_out"]:
        print(f"  left out {c['id']}: {c['why']}")
    return 0


def build_parser() -> Parser:
    p = Parser(prog="grpo-research atlas", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    f = sub.add_parser("freeze", help="choose the confirmatory family and its new bases; write atlas_freeze.json")
    f.add_argument("--claims", default="experiments/claims.yaml")
    f.add_argument("--studies-dir", help="the study files (default: the claims file's folder)")
    f.add_argument("--exploratory", default="results/atlas_exploratory/atlas.csv",
                   help="the exploratory atlas the choice is made from")
    f.add_argument("--out", default="experiments/atlas_freeze.json")
    f.add_argument("--runs", default="runs", help="runs dir: base seeds already built there are not reused")
    f.add_argument("--bases", type=int, default=8, help="new base models (one RL seed each), at least 8")
    f.add_argument("--seeds", type=int, nargs="+", default=[1], help="RL seeds per base")
    f.add_argument("--base-seed-start", type=int, default=1000, help="first new base seed")
    f.add_argument("--max-claims", type=int, default=6)
    f.add_argument("--tuning", default="results/atlas_tuning", help="the tuned arms' searches (best.yaml each)")
    f.set_defaults(func=cmd_freeze)
    return p


def main(argv: list[str] | None = None) -> int:
    return run_command(build_parser(), sys.argv[1:] if argv is None else argv)
