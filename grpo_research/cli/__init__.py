"""`grpo-research train | sft | config | eval | score | cost | hpo | atlas | report | study | dashboard`.

Every command-line entry point of the project lives in this package, and nothing outside it
imports it: one module per command group (train.py: train, sft, config; eval.py, score.py,
cost.py, hpo.py, atlas.py, report.py, study.py, dashboard.py). `main` dispatches on the first word.

Usage errors (bad arguments, config, files, a run dir holding another config) print one line,
`error: ...`, and exit with status 2 before any compute and before anything is written
(`grpo_research.cli.common.run_command`, which every subcommand goes through).

`train` with `train.launcher=torchrun` relaunches itself under torchrun
(grpo_research/trainers/launcher.py) and exits with its workers' status (0, 2, or 75).
"""
from __future__ import annotations

import importlib
import sys

from grpo_research.cli.common import Parser, quiet_libraries, run_command

__all__ = ["build_parser", "main", "quiet_libraries", "run_command"]

# command -> (module of this package with its own `main(argv)`, help line)
DELEGATED = {
    "eval": ("eval", "generate on a benchmark from a checkpoint and score (see `eval --help`)"),
    "score": ("score", "score external predictions on a benchmark (see `score --help`)"),
    "cost": ("cost", "a few steps of GRPO and PPO side by side: memory, step time (see `cost --help`)"),
    "hpo": ("hpo", "Optuna search over G, beta, eps, temperature, lr (see `hpo --help`)"),
    "atlas": ("atlas", "freeze the atlas's confirmatory family before its runs (see `atlas --help`)"),
    "report": ("report", "tables, figures and report.html from run dirs; the results index (see `report --help`)"),
    "study": ("study", "study runs: train at a sample budget, the equal-wall-time control, list (see `study --help`)"),
    "dashboard": ("dashboard", "a study's W&B workspace: spec offline, saved view with --publish (see `dashboard --help`)"),
}


def build_parser() -> Parser:
    from grpo_research.cli.train import add_parsers

    p = Parser(prog="grpo-research", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    add_parsers(sub)
    for name, (_, help_line) in DELEGATED.items():
        sub.add_parser(name, help=help_line, add_help=False)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run `grpo-research ARGV...`; returns the exit status.

    Called as the process's entry point (no `argv`), `train` keeps its exit status through the
    interpreter's shutdown: a SIGTERM or SIGINT then (a second or so of library teardown after
    everything is written) is ignored, so the process still ends with that status, not 143."""
    process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        module = importlib.import_module(f"grpo_research.cli.{DELEGATED[argv[0]][0]}")
        return module.main(argv[1:])
    code = run_command(build_parser(), argv)
    if process and argv and argv[0] == "train":
        _keep_status_on_signal(code)
    return code


def _keep_status_on_signal(code: int) -> None:
    """Ignore SIGTERM and SIGINT from here on: Python's shutdown resets Python-level handlers to
    the default (killed by the signal, status 143) but leaves ignored signals ignored."""
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
