"""`train.launcher=torchrun`: the parent side (no torch import, so it starts fast).

`grpo-research train ... train.launcher=torchrun` runs
`python -m torch.distributed.run --standalone --nproc_per_node N -m grpo_research.cli train <same args>`
(`launch`; `--standalone` picks a free port) and returns the workers' common exit code: 0, 75
(preempted, checkpoint written: rerun the same command to resume) or 2 (usage error). Workers
record their pid and exit code in a temporary directory named by `GRPO_RESEARCH_EXIT_DIR`; the
launcher forwards SIGTERM to them (to torchrun while they start), and falls back to torchrun's
own status when they did not all record the same code. Run torchrun yourself and you get
torchrun's status instead (1 for any worker failure). The training side is
grpo_research/trainers/distributed.py.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

EXIT_DIR_ENV = "GRPO_RESEARCH_EXIT_DIR"  # set by `launch`: workers record their pid and exit code there


def under_torchrun() -> bool:
    return "WORLD_SIZE" in os.environ


def reporting() -> bool:
    """This process is a worker that `launch` started (it records its exit code for the launcher)."""
    return bool(os.environ.get(EXIT_DIR_ENV)) and "RANK" in os.environ


def record_pid() -> None:
    """Worker: tell the launcher where to forward SIGTERM (no-op unless `launch` started us)."""
    _record("pid", os.getpid())


def record_exit(code: int) -> None:
    """Worker: record this rank's exit code for the launcher (no-op unless `launch` started us)."""
    _record("exit", code)


def _record(kind: str, value: int) -> None:
    if not reporting():
        return
    path = Path(os.environ[EXIT_DIR_ENV]) / f"{kind}.{os.environ['RANK']}"
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(str(value))
    os.replace(tmp, path)


def _read(exit_dir: Path, kind: str, n: int) -> list[int]:
    out = []
    for r in range(n):
        try:
            out.append(int((exit_dir / f"{kind}.{r}").read_text()))
        except (OSError, ValueError):
            pass
    return out


def launch(train_args: list[str], nproc: int, threads: int) -> int:
    """Run `grpo-research train <train_args>` under torchrun with `nproc` processes on this node.

    SIGTERM to this process goes to the workers (to torchrun while they are starting); the
    return value is the workers' exit code when they all recorded the same (0, 2, 75), else
    torchrun's. OMP_NUM_THREADS defaults to `threads` or the CPUs shared out between workers."""
    with tempfile.TemporaryDirectory(prefix="grpo-research-torchrun-") as tmp:
        exit_dir = Path(tmp)
        env = {**os.environ, EXIT_DIR_ENV: tmp}
        per_worker = threads if isinstance(threads, int) and threads > 0 else max(1, (os.cpu_count() or 1) // nproc)
        env.setdefault("OMP_NUM_THREADS", str(per_worker))
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "grpo_research.cli", "train", *train_args]
        proc = subprocess.Popen(cmd, env=env)

        def forward(signum, frame) -> None:
            pids = _read(exit_dir, "pid", nproc)
            for pid in pids if len(pids) == nproc else [proc.pid]:
                try:
                    os.kill(pid, signum)
                except ProcessLookupError:
                    pass

        previous = signal.signal(signal.SIGTERM, forward)
        try:
            while True:
                try:
                    rc = proc.wait()
                    break
                except KeyboardInterrupt:  # Ctrl-C reached torchrun and its workers too: wait for them
                    continue
        finally:
            signal.signal(signal.SIGTERM, previous)
        codes = _read(exit_dir, "exit", nproc)
    if len(codes) == nproc and len(set(codes)) == 1:
        return codes[0]
    return rc if rc >= 0 else 128 - rc  # torchrun killed by signal N: 128 + N, as a shell reports it
