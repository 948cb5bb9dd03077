"""`grpo-research train | sft | config`: train a policy into a run dir, build the tiny base
model, print the resolved config (or the table of every key).

`train` with `train.launcher=torchrun` relaunches itself under torchrun
(grpo_research/trainers/launcher.py) and exits with its workers' status (0, 2, or 75).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from grpo_research.cli.common import quiet_libraries
from grpo_research.config import key_table, load_config
from grpo_research.errors import ConfigError, UsageError
from grpo_research.rundir import check_run_dir, write_config


def record_usage_exit(code: int) -> None:
    """A torchrun worker's usage error: tell the launcher (a no-op outside torchrun)."""
    from grpo_research.trainers.launcher import record_exit

    record_exit(code)


def cmd_train(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)  # launcher=torchrun: also refuses what cannot shard
    run_dir = Path(args.run_dir)
    check_run_dir(run_dir, cfg)
    from grpo_research.trainers import launcher

    if cfg.train.launcher == "torchrun" and not launcher.under_torchrun():
        argv = ["--run-dir", args.run_dir, *(["--config", args.config] if args.config else []), *args.overrides]
        return launcher.launch(argv, cfg.train.nproc_per_node, cfg.train.threads)
    quiet_libraries()
    from grpo_research.config import data_parallel_problem
    from grpo_research.trainers import build_trainer, distributed
    from grpo_research.trainers.base import InfrastructureFailure
    from grpo_research.trainers.common import EXIT_PREEMPTED, Preempted, resolve_device
    from grpo_research.trainers.sft import ensure_base_model

    from grpo_research.locks import DirLock

    launcher.record_pid()
    dp, _ = distributed.setup(resolve_device(cfg.model.device))  # world 1 unless torchrun started us
    # one process trains a run dir at a time: held (by rank 0, for all ranks) from before the run
    # dir is checked again until the run ends, so two processes started at the same moment cannot
    # both find it new; the kernel releases it when the holder dies, so a crashed run resumes at once
    lock = DirLock(run_dir / ".lock", f"run dir {run_dir}", cfg.train.lock_wait)
    created = not run_dir.exists()
    try:
        if dp.main:
            lock.acquire()
            check_run_dir(run_dir, cfg)  # again under the lock: another process may have written it meanwhile
        problem = data_parallel_problem(cfg, dp.world, "WORLD_SIZE")
        if problem:
            raise ConfigError(problem)
        if not dp.main:
            dp.barrier()  # rank 0 builds the tiny base model (when not cached yet) alone
        model_path = ensure_base_model(cfg, progress=cfg.tracking.progress and dp.main)
        if dp.main:
            dp.barrier()
        trainer = build_trainer(cfg, run_dir, model_path)  # may still refuse the config; writes nothing
        if dp.main:
            write_config(run_dir, cfg)
            from grpo_research.files import write_text_atomic
            from grpo_research.tasks.prompting import describe

            prompt = json.dumps(describe(trainer.task, trainer.tokenizer), indent=2) + "\n"
            write_text_atomic(run_dir / "prompt.json", prompt)  # the prompts exactly as the model sees them
        try:
            summary, code = trainer.train(lock=lock), 0
        except InfrastructureFailure as e:
            if dp.main:
                print(f"error: {e}", file=sys.stderr)
            summary, code = None, 1
        except Preempted as e:
            if dp.main:
                print(f"preempted: checkpoint written at step {e.step}; rerun the same command to resume",
                      file=sys.stderr)
            code = EXIT_PREEMPTED
        if dp.main and code == 0:
            print(json.dumps(summary))
        launcher.record_exit(code)
        dp.barrier()  # rank 0 has written everything before any process exits
        if code == EXIT_PREEMPTED and launcher.reporting():
            return 0  # the launcher returns 75 from the recorded codes; torchrun would print a failure report
        return code
    finally:
        if created and lock.held and [p.name for p in run_dir.iterdir()] == [".lock"]:
            lock.remove()  # refused before writing anything: leave no run dir behind
            run_dir.rmdir()
        lock.release()
        distributed.shutdown()


def cmd_sft(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; give a new or empty directory")
    from grpo_research.locks import DirLock

    # one build of an --out at a time (a second process gets one line naming the holder)
    with DirLock(out.with_name(out.name + ".lock"), f"the model build {out}"):
        if out.exists() and any(out.iterdir()):
            raise UsageError(f"output dir {out} exists and is not empty")
        quiet_libraries()
        from grpo_research.trainers.sft import train_base_model

        info = train_base_model(cfg, out, progress=cfg.tracking.progress)
    print(json.dumps({k: v for k, v in info.items() if k != "history"}))
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    if args.table:
        print(key_table())
    else:
        print(load_config(args.config, args.overrides).dump(), end="")
    return 0


def add_parsers(sub) -> None:
    """The `train`, `sft` and `config` subcommands, on the subparsers of `grpo-research`."""
    t = sub.add_parser("train", help="train a policy (GRPO by default) into a run dir; reruns resume")
    t.add_argument("--config", help="YAML config file (defaults < file < key=value)")
    t.add_argument("--run-dir", required=True, help="output directory of the run")
    t.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. algo.beta=0.04")
    t.set_defaults(func=cmd_train, on_usage_error=record_usage_exit)

    s = sub.add_parser("sft", help="build the tiny base model (supervised warm-up) into a directory")
    s.add_argument("--config")
    s.add_argument("--out", required=True)
    s.add_argument("overrides", nargs="*", metavar="key=value")
    s.set_defaults(func=cmd_sft)

    c = sub.add_parser("config", help="print the resolved config, or the table of every key")
    c.add_argument("--config")
    c.add_argument("--table", action="store_true")
    c.add_argument("overrides", nargs="*", metavar="key=value")
    c.set_defaults(func=cmd_config)
