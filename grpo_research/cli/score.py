"""`grpo-research score`: grade external predictions on a benchmark and report pass@k
(the scoring: grpo_research/evaluation/score.py, whose docstring describes the files).

    grpo-research score --benchmark NAME --predictions FILE [--data PATH] --out OUT.json
                        [--workers N] [--timeout S]

Bad input (missing file, malformed JSONL line, missing field, unknown benchmark, unknown
task_id, an --out that is an input or cannot be written, an absurd --timeout) prints one line
`error: ...` to stderr, writes nothing and exits with code 2. A run where every graded
prediction hit a sandbox error (nothing scored) exits with code 1.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grpo_research.cli.common import Parser, run_command


def build_parser() -> Parser:
    p = Parser(prog="grpo-research score", description="Score external predictions on a benchmark (pass@k).")
    p.add_argument("--benchmark", required=True, help="task name: gsm8k, math500, humaneval, mbpp, mbpp_sanitized, ...")
    p.add_argument("--predictions", required=True, type=Path, help="JSONL rows {task_id, completion}")
    p.add_argument("--data", help="benchmark data: local file or folder, or a Hugging Face dataset name")
    p.add_argument("--out", required=True, help="summary JSON; OUT.samples.jsonl is written beside it")
    p.add_argument("--workers", type=int, help="parallel sandbox processes (default: one per core)")
    p.add_argument("--timeout", type=float, help="seconds per program (code benchmarks)")
    p.set_defaults(func=cmd_score)
    return p


def cmd_score(args: argparse.Namespace) -> int:
    from grpo_research.evaluation.score import (check_outputs, make_task, read_predictions, report_sandbox_errors,
                                                score_predictions, summary_line, write_results)

    out = check_outputs(args.out, [args.predictions], args.data)  # before any grading
    predictions, labels = read_predictions(args.predictions)
    task = make_task(args.benchmark, args.data, args.workers, args.timeout)
    summary, rows = score_predictions(task, predictions, labels)
    write_results(out, summary, rows)
    if not report_sandbox_errors(summary, out):
        return 1
    print(f"{summary_line(summary)} over {summary['n_tasks']} tasks, {summary['n_samples']} samples,"
          f" {summary['missing_tasks']} missing, {summary['elapsed_s']:.1f}s -> {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run `score`; argv excludes the word "score". Returns the exit code."""
    return run_command(build_parser(), sys.argv[1:] if argv is None else argv)
