"""`grpo-research train | sft | config`: train a policy into a run dir, build the tiny base
model, print the resolved config (or the table of every key).

`train` with `train.launcher=torchrun` relaunches itself under torchrun
(grpo_research/trainers/launcher.py) and exits with its workers' status (0, 2, or 75).
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from grpo_research.cli.common import quiet_libraries
from grpo_research.config import key_table, load_config
from grpo_research.errors import ConfigError, UsageError
from grpo_research.rundir import check_dir_path, check_run_dir, environment_error, is_environment_error, write_config

EXIT_PREEMPTED = 75  # as grpo_research.trainers.common (imported here without torch)


def record_usage_exit(code: int) -> None:
    """A torchrun worker's exit status (a usage error, a preemption): tell the launcher (a no-op
    outside torchrun)."""
    from grpo_research.trainers.launcher import record_exit

    record_exit(code)


class StartupPreempted(BaseException):
    """SIGTERM or SIGINT before the training loop's own handler took over (imports, model load,
    the base-model build) or after it let go (saving the model): nothing half-written is left
    (every file is written atomically), so `train` exits 75 at once and a rerun resumes. A
    BaseException, so that no library's `except Exception` swallows it."""


class EarlyStop:
    """From the start of `train` until the training loop installs its own handler
    (`trainers.common.StopFlag`, which finishes the step and checkpoints): SIGTERM or SIGINT
    raises `StartupPreempted` once (later signals only set `raised`)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.raised = False
        self._previous = {}
        for sig in self.SIGNALS:
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: no handler
                pass

    def _handle(self, signum, frame) -> None:
        if self.raised:
            return
        self.raised = True
        raise StartupPreempted(signum)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def cmd_train(args: argparse.Namespace) -> int:
    early = EarlyStop()  # SIGTERM from here on exits 75 (the run dir may exist already)
    try:
        return _train(args, early)
    except StartupPreempted:
        print("preempted: stopped before a checkpoint was due, nothing lost; rerun the same command to resume",
              file=sys.stderr, flush=True)
        record_usage_exit(EXIT_PREEMPTED)
        return EXIT_PREEMPTED
    finally:
        early.restore()


def _train(args: argparse.Namespace, early: EarlyStop) -> int:
    cfg = load_config(args.config, args.overrides)  # launcher=torchrun: also refuses what cannot shard
    check_run_dir(args.run_dir, cfg)  # also refuses "" (it would be the current directory)
    run_dir = Path(args.run_dir)
    from grpo_research.trainers import launcher

    if cfg.train.launcher == "torchrun" and not launcher.under_torchrun():
        argv = ["--run-dir", args.run_dir, *(["--config", args.config] if args.config else []), *args.overrides]
        return launcher.launch(argv, cfg.train.nproc_per_node, cfg.train.threads)
    quiet_libraries()
    from grpo_research.config_checks import data_parallel_problem
    from grpo_research.trainers import build_trainer, distributed
    from grpo_research.rollout.scored import InfrastructureFailure
    from grpo_research.locks import DirLock
    from grpo_research.models.real import PACKAGED_MODELS
    from grpo_research.trainers.common import Preempted, resolve_device
    from grpo_research.trainers.sft import cache_root, ensure_base_model

    model_cache = cache_root(cfg)
    builds = cfg.model.name_or_path == "tiny" or cfg.model.name_or_path in PACKAGED_MODELS  # into model_cache
    if builds:
        check_model_cache(model_cache)  # before the run dir is made
    from grpo_research.tasks import build_task
    from grpo_research.tasks.base import heldout_or_refuse

    # before a base model is built (minutes): more held-out problems than the split holds
    heldout_or_refuse(build_task(cfg.task), cfg.train.eval_size, f"train.eval_size={cfg.train.eval_size}")
    launcher.record_pid()
    dp, _ = distributed.setup(resolve_device(cfg.model.device))  # world 1 unless torchrun started us
    # one process trains a run dir at a time: held (by rank 0, for all ranks) from before the run
    # dir is checked again until the run ends, so two processes started at the same moment cannot
    # both find it new; the kernel releases it when the holder dies, so a crashed run resumes at once
    lock = DirLock(run_dir / ".lock", f"run dir {run_dir}", cfg.train.lock_wait)
    created = not run_dir.exists()
    try:
        if dp.main:
            try:
                lock.acquire()
            except OSError as e:
                if not is_environment_error(e):
                    raise
                raise environment_error(e, f"run dir {run_dir} cannot be written") from None
            changed = check_run_dir(run_dir, cfg)  # again under the lock: another process may have written it meanwhile
            if changed:
                print(f"run dir {run_dir}: resuming with operational keys changed ({'; '.join(changed)})",
                      file=sys.stderr, flush=True)
        problem = data_parallel_problem(cfg, dp.world, "WORLD_SIZE")
        if problem:
            raise ConfigError(problem)
        if not dp.main:
            dp.barrier()  # rank 0 builds the tiny base model (when not cached yet) alone
        try:
            model_path = ensure_base_model(cfg, progress=cfg.tracking.progress and dp.main)
        except OSError as e:
            if not (builds and is_environment_error(e)):
                raise
            raise environment_error(e, f"the base model cannot be built in the model cache {model_cache} "
                                       "(model.cache_dir, GRPO_RESEARCH_CACHE)") from None
        if dp.main:
            dp.barrier()
        trainer = build_trainer(cfg, run_dir, model_path)  # may still refuse the config; writes nothing
        if dp.main:
            write_config(run_dir, cfg)
            from grpo_research.files import write_text_atomic
            from grpo_research.tasks.prompting import describe

            prompt = json.dumps(describe(trainer.task, trainer.tokenizer), indent=2) + "\n"
            write_text_atomic(run_dir / "prompt.json", prompt)  # the prompts exactly as the model sees them
        if early.raised:  # a signal whose exception some library swallowed
            raise StartupPreempted()
        try:
            summary, code = trainer.train(lock=lock, early_stop=early), 0
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


def check_model_cache(root: Path) -> None:
    """The model cache (where the tiny base model or a packaged real model is built) must be a
    directory or creatable; whether it can be written is found when a base model has to be
    built there (a read-only cache that holds it already is fine)."""
    for p in (root, *root.parents):
        if p.exists() or p.is_symlink():
            if not p.is_dir():
                raise UsageError(f"model cache {root} (model.cache_dir, GRPO_RESEARCH_CACHE): {p} is a file, "
                                 "not a directory")
            return


def cmd_sft(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)
    check_dir_path(args.out, "--out", file_ok=True)  # empty, a name too long, inside a file, read-only
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
