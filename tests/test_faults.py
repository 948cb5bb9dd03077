"""Preemption (SIGTERM) and non-finite losses."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from grpo_research.config import load_config
from grpo_research.tracking import read_metrics
from grpo_research.trainers.common import EXIT_PREEMPTED, load_checkpoint
from tests.helpers import deterministic, fast_run, written_steps

EXE = str(Path(sys.executable).with_name("grpo-research"))
FAST = fast_run("reward.weights={overlong: 1.0}", "optim.lr=1e-2")
_strip = deterministic


def test_sigterm_checkpoints_exits_resumable_and_resume_matches(tiny_model_dir, tmp_path):
    args = [f"model.name_or_path={tiny_model_dir}", *FAST, "train.steps=40", "train.eval_every=10",
            "train.checkpoint_every=1000"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    ref = tmp_path / "ref"
    subprocess.run([EXE, "train", "--run-dir", str(ref), *args], check=True, env=env, capture_output=True)
    run = tmp_path / "run"
    cmd = [EXE, "train", "--run-dir", str(run), *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = run / "metrics.jsonl"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if any(step >= 7 for step in written_steps(metrics)):
            break
        time.sleep(0.005)
    t_sent = time.time()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert time.time() - t_sent < 10
    assert proc.returncode == EXIT_PREEMPTED, err
    assert "rerun the same command to resume" in err
    state = load_checkpoint(run)  # written at the step where SIGTERM arrived, not at a scheduled one
    assert state is not None and 7 <= state["step"] < 40
    assert not (run / "summary.json").exists()
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    assert _strip(read_metrics(metrics)) == _strip(read_metrics(ref / "metrics.jsonl"))


def test_nonfinite_loss_skips_the_update(tiny_model_dir, tmp_path, monkeypatch):
    import grpo_research.trainers.grpo as grpo

    cfg = load_config(None, [f"model.name_or_path={tiny_model_dir}", *FAST, "train.steps=3"])
    run = tmp_path / "r"
    run.mkdir()
    (run / "metrics.jsonl").write_text("")
    trainer = grpo.GRPOTrainer(cfg, run, tiny_model_dir)
    real = grpo.policy_loss

    def nan_loss(*a, **k):
        loss, stats = real(*a, **k)
        return loss * float("nan"), stats

    monkeypatch.setattr(grpo, "policy_loss", nan_loss)
    before = [p.detach().clone() for p in trainer.policy.parameters()]
    row = trainer.train_step()
    assert row["nonfinite_loss"] is True and row["step"] == 1
    assert all(torch.equal(p, q) for p, q in zip(before, trainer.policy.parameters()))
    assert all(torch.isfinite(p).all() for p in trainer.policy.parameters())
    monkeypatch.setattr(grpo, "policy_loss", real)
    row = trainer.train_step()  # training goes on
    assert "nonfinite_loss" not in row
    assert any(not torch.equal(p, q) for p, q in zip(before, trainer.policy.parameters()))


def test_sigterm_as_soon_as_the_run_dir_exists_exits_75_and_the_rerun_finishes(tiny_model_dir, tmp_path):
    """SIGTERM while `train` is still starting (imports, model load: before the loop's handler)
    exits 75 with one line, as during training; the same command then trains the run."""
    from grpo_research.cli import main

    run = tmp_path / "run"
    args = ["--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", *FAST, "train.steps=3"]
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([EXE, "train", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 120
    while not run.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.001)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_PREEMPTED, err
    assert err.strip().splitlines()[-1].startswith("preempted: ") and "Traceback" not in err, err
    assert not (run / "metrics.jsonl").exists() or not [r for r in read_metrics(run / "metrics.jsonl") if "loss" in r]
    assert main(["train", *args]) == 0
    assert [r["step"] for r in read_metrics(run / "metrics.jsonl") if "loss" in r] == [1, 2, 3]
