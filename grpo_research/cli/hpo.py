"""`grpo-research hpo search | export`: an Optuna search whose trials are ordinary runs
(the search: grpo_research/hpo/).

    grpo-research hpo search --name grpo-arith --method grpo --out results/hpo/grpo-arith \\
        --runs runs/_hpo/grpo-arith --n-trials 20 --budget-samples 6400 [--eval-every-samples 1280] \\
        [--storage sqlite:///results/hpo/grpo-arith/optuna.db] [--space FILE_OR_YAML] \\
        [--pruner YAML] [--sampler-seed S] [--train-seed S] [--heartbeat-interval S] \\
        [--grace-period S] [--max-retry N] [--exclusive] [key=value ...]
    grpo-research hpo export --name grpo-arith --method grpo --out results/hpo/grpo-arith [--storage URL]

`search` runs trials until `--n-trials` are COMPLETE or PRUNED in storage (rerunning it
resumes; it then writes `trials.csv`); `export` writes `best.yaml`, `trials.csv` and
`plots/*.png` from storage. Trailing `key=value` are run-config overrides of every trial
(e.g. `model.name_or_path=runs/_base/tiny-arith task.name=arith`). An option left out takes
the default of `grpo_research.hpo.search.SearchSpec` (shown in `hpo search --help`).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


from grpo_research.cli.common import Parser, run_command
from grpo_research.errors import ConfigError

# options of `search` that set a SearchSpec field of the same name only when given
OPTIONAL_FIELDS = ("eval_every_samples", "sampler_seed", "train_seed", "heartbeat_interval", "grace_period",
                   "max_retry", "exclusive")


def yaml_arg(text: str, flag: str) -> dict:
    """A mapping given inline as YAML/JSON or as the path of a .yaml/.yml/.json file (ConfigError
    naming `flag` when it is neither)."""
    from grpo_research.typed_config import load_yaml, parse_yaml

    path = Path(text)
    if path.suffix in (".yaml", ".yml", ".json"):
        if not path.is_file():
            raise ConfigError(f"{flag} {text}: no such file")
        data = load_yaml(path)
    else:
        data = parse_yaml(text, flag)
    if not isinstance(data, dict):
        raise ConfigError(f"{flag}: expected a mapping, got {text!r}")
    return data


def make_spec(args: argparse.Namespace):
    from grpo_research.hpo.search import DEFAULT_SPACE, SearchSpec

    storage = args.storage or f"sqlite:///{Path(args.out) / 'optuna.db'}"
    space = getattr(args, "space", None)
    optional = {k: getattr(args, k, None) for k in OPTIONAL_FIELDS}
    if getattr(args, "pruner", None) is not None:
        optional["pruner"] = yaml_arg(args.pruner, "--pruner")
    return SearchSpec(
        name=args.name, method=args.method, storage=storage, out_dir=Path(args.out),
        runs_dir=Path(getattr(args, "runs", None) or Path(args.out) / "trials"),
        n_trials=getattr(args, "n_trials", 0) or 0, budget_samples=getattr(args, "budget_samples", 0) or 0,
        space=yaml_arg(space, "--space") if space is not None else DEFAULT_SPACE,
        overrides=list(getattr(args, "overrides", []) or []),
        **{k: v for k, v in optional.items() if v is not None},
    )


def cmd_search(args: argparse.Namespace) -> int:
    from grpo_research.config import load_config
    from grpo_research.files import write_text_atomic
    from grpo_research.hpo.search import check_space, finished, run_search
    from grpo_research.studies import override

    spec = make_spec(args)
    load_config(None, [override("method", spec.method), *spec.overrides])  # fail fast on a bad key
    check_space(spec.space, spec.method, spec.overrides, "--space")
    study = run_search(spec)
    spec.out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(spec.out_dir / "trials.csv", study.trials_dataframe().to_csv(index=False))
    n = len(finished(study))
    best = study.best_trial if n else None
    print(f"{spec.name}: {n} finished trials" + (f", best #{best.number} = {best.value:.4f} {best.params}" if best else ""))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from grpo_research.hpo.search import export_study

    paths = export_study(make_spec(args))
    print(f"wrote {paths['best']}, {paths['trials']} and {len(paths) - 2} plots")
    return 0


def build_parser() -> Parser:
    from grpo_research.hpo.search import DEFAULT_PRUNER, spec_default

    def default(name: str) -> str:
        return f"(default {spec_default(name)})"

    p = Parser(prog="grpo-research hpo", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("search", help="run (or resume) an Optuna search")
    e = sub.add_parser("export", help="write best.yaml, trials.csv and plots from storage")
    for q in (s, e):
        q.add_argument("--name", required=True, help="study name in storage, e.g. grpo-arith")
        q.add_argument("--method", required=True)
        q.add_argument("--out", required=True, help="output dir (trials.csv, best.yaml, plots/)")
        q.add_argument("--storage", help="RDB URL (default: sqlite:///<out>/optuna.db)")
    s.add_argument("--runs", help="parent of the trials' run dirs (default: <out>/trials)")
    s.add_argument("--n-trials", type=int, required=True, help="COMPLETE + PRUNED trials wanted in storage")
    s.add_argument("--budget-samples", type=int, required=True, help="generated samples per trial")
    s.add_argument("--eval-every-samples", type=int,
                   help="held-out evaluation (pruning checkpoint) interval (default: none)")
    s.add_argument("--space", help="search space: a YAML file or inline YAML {key: {type, ...}} "
                                   "(default: grpo_research.hpo.search.DEFAULT_SPACE)")
    s.add_argument("--pruner", help="inline YAML, e.g. '{type: median, n_startup_trials: 5, n_warmup_samples: 0}'; "
                                    f"keys left out: {DEFAULT_PRUNER}")
    s.add_argument("--sampler-seed", type=int, help=default("sampler_seed"))
    s.add_argument("--train-seed", type=int, help=default("train_seed"))
    s.add_argument("--heartbeat-interval", type=int, help=f"seconds {default('heartbeat_interval')}")
    s.add_argument("--grace-period", type=int, help=f"seconds {default('grace_period')}")
    s.add_argument("--max-retry", type=int, help=default("max_retry"))
    s.add_argument("--exclusive", action="store_true", default=None,
                   help="the only worker: retry trials a killed search left RUNNING now, not after the grace period")
    s.add_argument("overrides", nargs="*", metavar="key=value", help="run config of every trial")
    s.set_defaults(func=cmd_search)
    e.set_defaults(func=cmd_export)
    return p


def main(argv: list[str] | None = None) -> int:
    """`hpo` subcommand; argv excludes the word "hpo". Returns the exit code."""
    return run_command(build_parser(), sys.argv[1:] if argv is None else argv)
