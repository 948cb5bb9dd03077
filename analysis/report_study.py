"""Rebuild one study's tables, figures and report.html from its run dirs, by hand:

    .venv/bin/python analysis/report_study.py runs/ppo_vs_grpo results/ppo_vs_grpo [--n-boot 2000]

A researcher's starting point for a custom analysis: the library is grpo_research.analysis
(load_study_runs, final_table, curve_table, ...); `grpo-research report ...` is the full command
line the pipeline uses.
"""
import argparse
from pathlib import Path

from grpo_research.analysis.study import report_study


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", help="the study's run dirs' parent, e.g. runs/ppo_vs_grpo")
    p.add_argument("out", help="results dir of the study, e.g. results/ppo_vs_grpo")
    p.add_argument("--study-file", help="the study YAML (its description goes into the report)")
    p.add_argument("--n-boot", type=int, default=10_000, help="bootstrap resamples of the seed means")
    args = p.parse_args()
    path = report_study(Path(args.runs), Path(args.out), study_file=args.study_file, n_boot=args.n_boot)
    print(f"report -> {path}")


if __name__ == "__main__":
    main()
