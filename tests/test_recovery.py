"""Nothing lost, nothing silently wrong (issue 13): the run-dir lock, damaged checkpoints and
metrics files repaired on resume, SIGINT handled like SIGTERM."""
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

from grpo_research.cli import main
from grpo_research.locks import DirLock, Locked
from grpo_research.tracking import read_metrics
from grpo_research.trainers.common import EXIT_PREEMPTED, CheckpointDamaged, load_checkpoint
from tests.helpers import deterministic, fast_run, kill_after_step

EXE = str(Path(sys.executable).with_name("grpo-research"))
FAST = fast_run("reward.weights={overlong: 1.0}", "optim.lr=1e-2", "train.eval_every=2")


def _args(model, run, *extra):
    return ["train", "--run-dir", str(run), f"model.name_or_path={model}", *FAST, *extra]


# ---------------------------------------------------------------- the lock
def test_a_second_process_on_a_run_dir_is_refused_naming_the_holder(tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    with DirLock(run / ".lock", "test holder"):
        assert main(_args(tiny_model_dir, run, "train.steps=2")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: run dir") and f"pid {os.getpid()} on host" in err[-1]
    assert not (run / "metrics.jsonl").exists()  # nothing written by the refused process
    assert main(_args(tiny_model_dir, run, "train.steps=2")) == 0  # released: the run trains


def test_two_train_processes_started_at_the_same_moment(tiny_model_dir, tmp_path):
    """Two `train` processes with different configs (seed 1, seed 2) started together on one new
    run dir: one trains, the other exits 2 naming the holder or the config it conflicts with; the
    run dir's config is the winner's and metrics.jsonl holds its rows once."""
    import yaml

    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    cmds = [[sys.executable, "-m", "grpo_research.cli", *_args(tiny_model_dir, run, "train.steps=3", f"seed={seed}")]
            for seed in (1, 2)]
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    winner = [1, 2][[code for code, _ in results].index(0)]
    loser_err = next(err for code, err in results if code == 2).strip().splitlines()
    assert loser_err[-1].startswith("error: ") and ("is in use by pid" in loser_err[-1]
                                                    or "holds a different config" in loser_err[-1]), loser_err
    assert yaml.safe_load((run / "config.yaml").read_text())["seed"] == winner
    rows = [r for r in read_metrics(run / "metrics.jsonl") if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]


def test_lock_wait_outlasts_a_holder_that_finishes(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lock = DirLock(run / ".lock", "predecessor")
    lock.acquire()
    threading.Timer(1.0, lock.release).start()
    assert main(_args(tiny_model_dir, run, "train.steps=2", "train.lock_wait=30")) == 0


def test_the_lock_dies_with_its_holder(tmp_path):
    path = tmp_path / ".lock"
    code = ("import sys, time; from grpo_research.locks import DirLock; "
            f"DirLock({str(path)!r}, 'x').acquire(); print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(Locked, match="in use by pid"):
        DirLock(path, "x").acquire()
    proc.kill()
    proc.wait()
    with DirLock(path, "x"):  # SIGKILL released it
        pass


def test_a_waiter_on_a_removed_lock_file_locks_the_new_one(tmp_path):
    """A refused `train` removes the run dir it created (lock file included) while holding the
    lock; a process that was waiting on the old file must not think it holds the lock."""
    path = tmp_path / "run" / ".lock"
    first = DirLock(path, "run dir")
    first.acquire()
    got = []
    waiter = threading.Thread(target=lambda: (DirLock(path, "run dir", wait_s=10).acquire(), got.append(1)))
    waiter.start()
    threading.Event().wait(0.5)  # the waiter has opened the old file and polls it
    first.remove()
    waiter.join(timeout=20)
    assert got == [1] and path.exists()  # it locked a new lock file
    with pytest.raises(Locked):
        DirLock(path, "run dir").acquire()  # and really holds it


# ---------------------------------------------------------------- damaged files
def _finished_run(model, tmp_path, name):
    run = tmp_path / name
    assert main(_args(model, run, "train.steps=4", "train.checkpoint_every=2", "tracking.wandb=disabled")) == 0
    return run


def test_a_damaged_checkpoint_is_named_and_the_previous_one_used(tiny_model_dir, tmp_path, capsys):
    ref = _finished_run(tiny_model_dir, tmp_path, "ref")
    run = _finished_run(tiny_model_dir, tmp_path, "run")
    assert (run / "checkpoint.prev" / "state.pt").exists()  # kept until the next one is complete
    state = run / "checkpoint" / "state.pt"
    state.write_bytes(state.read_bytes()[: state.stat().st_size // 2])  # cut short
    text = (run / "metrics.jsonl").read_text()
    (run / "metrics.jsonl").write_text(text[: len(text) // 3])  # cut inside a row the checkpoints cover
    capsys.readouterr()
    assert main(_args(tiny_model_dir, run, "train.steps=4", "train.checkpoint_every=2",
                      "tracking.wandb=disabled")) == 0
    err = capsys.readouterr().err
    assert f"checkpoint {state} (" in err and "is damaged; resuming from" in err and "(step 2)" in err
    assert "does not match its checkpoint" in err
    # steps 3 and 4 retrained from the step-2 checkpoint: the same rows as the uninterrupted run
    assert deterministic(read_metrics(run / "metrics.jsonl")) == deterministic(read_metrics(ref / "metrics.jsonl"))


def test_every_checkpoint_damaged_is_one_line_saying_how_to_start_over(tiny_model_dir, tmp_path, capsys):
    run = _finished_run(tiny_model_dir, tmp_path, "run")
    for name in ("checkpoint", "checkpoint.prev"):
        (run / name / "state.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointDamaged, match="is damaged and no earlier checkpoint"):
        load_checkpoint(run)
    capsys.readouterr()
    assert main(_args(tiny_model_dir, run, "train.steps=4", "train.checkpoint_every=2",
                      "tracking.wandb=disabled")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: checkpoint ") and "delete" in err[-1]


def test_a_metrics_file_cut_inside_its_checkpoint_is_restored(tiny_model_dir, tmp_path):
    run = _finished_run(tiny_model_dir, tmp_path, "run")
    before = (run / "metrics.jsonl").read_bytes()
    (run / "metrics.jsonl").write_bytes(before[:-40])  # a partial last row
    assert main(_args(tiny_model_dir, run, "train.steps=4", "train.checkpoint_every=2",
                      "tracking.wandb=disabled")) == 0
    assert (run / "metrics.jsonl").read_bytes() == before


# ---------------------------------------------------------------- SIGINT
def test_sigint_checkpoints_exits_75_and_the_rerun_matches(tiny_model_dir, tmp_path):
    env = {**os.environ, "WANDB_MODE": "disabled"}
    args = [*FAST[0:], "train.steps=30", "train.eval_every=10", "train.checkpoint_every=1000",
            f"model.name_or_path={tiny_model_dir}"]
    ref = tmp_path / "ref"
    subprocess.run([EXE, "train", "--run-dir", str(ref), *args], check=True, env=env, capture_output=True)
    run = tmp_path / "run"
    cmd = [EXE, "train", "--run-dir", str(run), *args]
    proc, seen = kill_after_step(cmd, run / "metrics.jsonl", 5, env, sig=signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert seen is not None and proc.returncode == EXIT_PREEMPTED, err
    assert "checkpoint written" in err and "Traceback" not in err
    step = load_checkpoint(run)["step"]
    assert 5 <= step < 30
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    assert deterministic(read_metrics(run / "metrics.jsonl")) == deterministic(read_metrics(ref / "metrics.jsonl"))
    a, b = torch.load(run / "checkpoint" / "state.pt", weights_only=False), torch.load(
        ref / "checkpoint" / "state.pt", weights_only=False)
    assert all(torch.equal(a["policy"][k], b["policy"][k]) for k in a["policy"])


# ---------------------------------------------------------------- a full disk
@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_full_disk_is_one_line_and_the_run_resumes_once_there_is_space(tiny_model_dir, tmp_path, small_disk,
                                                                          capsys):
    ref = _finished_run(tiny_model_dir, tmp_path, "ref")
    run = small_disk / "run"
    args = _args(tiny_model_dir, run, "train.steps=4", "train.checkpoint_every=2", "tracking.wandb=disabled")
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: no space left on the device of") and "Traceback" not in "\n".join(err)
    subprocess.run(["mount", "-o", "remount,size=50m", str(small_disk)], check=True)
    assert main(args) == 0
    assert deterministic(read_metrics(run / "metrics.jsonl")) == deterministic(read_metrics(ref / "metrics.jsonl"))


def test_a_full_disk_with_wandb_logging_is_still_one_line(tiny_model_dir, small_disk, capsys, monkeypatch):
    """W&B's log file fails on a full disk too; its logging errors (274 lines) are not printed."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    run = small_disk / "run"
    assert main(_args(tiny_model_dir, run, "train.steps=4", "train.checkpoint_every=2", "tracking.wandb=offline")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: no space left on the device of"), err[:2000]
    assert (run / "config.yaml").exists()  # what was written is kept


def test_a_step_where_every_completion_is_an_infrastructure_failure_fails_loudly(tiny_model_dir, tmp_path, capsys,
                                                                                 monkeypatch):
    """E.g. a broken sandbox: training on it would be steps of nothing, exit 0. It exits 1 with
    one line, and a rerun (sandbox fixed) resumes."""
    from dataclasses import replace

    from grpo_research.rewards.base import WeightedReward

    real = WeightedReward.__call__
    calls = []

    def broken_from_step_2(self, problems, completions, finished):
        calls.append(1)
        rb = real(self, problems, completions, finished)
        return rb if len(calls) < 2 else replace(rb, mask=[False] * len(rb.mask), total=[0.0] * len(rb.total))

    monkeypatch.setattr(WeightedReward, "__call__", broken_from_step_2)
    run = tmp_path / "run"
    assert main(_args(tiny_model_dir, run, "train.steps=3", "train.checkpoint_every=1")) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: step 2: every one of the 8 completions hit an infrastructure failure"), err
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl") if "loss" in r] == [1]
    monkeypatch.setattr(WeightedReward, "__call__", real)
    assert main(_args(tiny_model_dir, run, "train.steps=3", "train.checkpoint_every=1")) == 0
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl") if "loss" in r] == [1, 2, 3]
