"""`grpo-research hpo search | export`: an Optuna search whose trials are ordinary runs.

    grpo-research hpo search --name grpo-arith --method grpo --out results/hpo/grpo-arith \\
        --runs runs/_hpo/grpo-arith --n-trials 20 --budget-samples 6400 [--eval-every-samples 1280] \\
        [--storage sqlite:///results/hpo/grpo-arith/optuna.db] [--space FILE_OR_YAML] \\
        [--pruner YAML] [--sampler-seed 0] [--train-seed 0] [--heartbeat-interval 60] \\
        [--grace-period 180] [--max-retry 2] [--exclusive] [key=value ...]
    grpo-research hpo export --name grpo-arith --method grpo --out results/hpo/grpo-arith [--storage URL]

`search` runs trials until `--n-trials` are COMPLETE or PRUNED in storage (rerunning it
resumes; it then writes `trials.csv`); `export` writes `best.yaml`, `trials.csv` and
`plots/*.png` from storage. Trailing `key=value` are run-config overrides of every trial
(e.g. `model.name_or_path=runs/_base/tiny-arith task.name=arith`). Also available as
`python -m grpo_research.hpo ...`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from grpo_research.config import ConfigError

DEFAULT_SPACE = {
    "algo.group_size": {"type": "categorical", "choices": [2, 4, 8, 16]},
    "algo.beta": {"type": "float", "low": 0.0, "high": 0.1},
    "algo.clip_eps": {"type": "float", "low": 0.1, "high": 0.3},
    "rollout.temperature": {"type": "float", "low": 0.6, "high": 1.2},
    "optim.lr": {"type": "float", "low": 1e-5, "high": 3e-4, "log": True},
}


def _yaml_arg(text: str | None, default):
    if text is None:
        return default
    path = Path(text)
    data = yaml.safe_load(path.read_text()) if path.suffix in (".yaml", ".yml", ".json") and path.exists() \
        else yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ConfigError(f"expected a mapping, got {text!r}")
    return data


def _spec(args: argparse.Namespace):
    from grpo_research.hpo.search import SearchSpec

    storage = args.storage or f"sqlite:///{Path(args.out) / 'optuna.db'}"
    return SearchSpec(
        name=args.name, method=args.method, storage=storage, out_dir=Path(args.out),
        runs_dir=Path(getattr(args, "runs", None) or Path(args.out) / "trials"),
        n_trials=getattr(args, "n_trials", 0) or 0, budget_samples=getattr(args, "budget_samples", 0) or 0,
        eval_every_samples=getattr(args, "eval_every_samples", None),
        space=_yaml_arg(getattr(args, "space", None), DEFAULT_SPACE),
        sampler_seed=getattr(args, "sampler_seed", 0), train_seed=getattr(args, "train_seed", 0),
        pruner=_yaml_arg(getattr(args, "pruner", None), {"type": "median"}),
        heartbeat_interval=getattr(args, "heartbeat_interval", 60), grace_period=getattr(args, "grace_period", 180),
        max_retry=getattr(args, "max_retry", 2), exclusive=getattr(args, "exclusive", False),
        overrides=list(getattr(args, "overrides", []) or []),
    )


def cmd_search(args: argparse.Namespace) -> int:
    from grpo_research.files import write_text_atomic
    from grpo_research.hpo.search import finished, run_search

    spec = _spec(args)
    from grpo_research.config import load_config
    from grpo_research.studies import override

    load_config(None, [override("method", spec.method), *spec.overrides])  # fail fast on a bad key
    study = run_search(spec)
    spec.out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(spec.out_dir / "trials.csv", study.trials_dataframe().to_csv(index=False))
    n = len(finished(study))
    best = study.best_trial if n else None
    print(f"{spec.name}: {n} finished trials" + (f", best #{best.number} = {best.value:.4f} {best.params}" if best else ""))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from grpo_research.hpo.search import export_study

    paths = export_study(_spec(args))
    print(f"wrote {paths['best']}, {paths['trials']} and {len(paths) - 2} plots")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="grpo-research hpo", description=__doc__.splitlines()[0])
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
    s.add_argument("--eval-every-samples", type=int, help="held-out evaluation (pruning checkpoint) interval")
    s.add_argument("--space", help="search space: a YAML file or inline YAML {key: {type, ...}}")
    s.add_argument("--pruner", help="inline YAML, e.g. '{type: median, n_startup_trials: 5, n_warmup_samples: 0}'")
    s.add_argument("--sampler-seed", type=int, default=0)
    s.add_argument("--train-seed", type=int, default=0)
    s.add_argument("--heartbeat-interval", type=int, default=60)
    s.add_argument("--grace-period", type=int, default=180)
    s.add_argument("--max-retry", type=int, default=2)
    s.add_argument("--exclusive", action="store_true",
                   help="the only worker: retry trials a killed search left RUNNING now, not after the grace period")
    s.add_argument("overrides", nargs="*", metavar="key=value", help="run config of every trial")
    s.set_defaults(func=cmd_search)
    e.set_defaults(func=cmd_export)
    return p


def main(argv: list[str] | None = None) -> int:
    """`hpo` subcommand; argv excludes the word "hpo". Returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
