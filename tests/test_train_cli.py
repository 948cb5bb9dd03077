"""CLI smoke runs of `grpo-research train` on a small model: files written, parameters
changed, kill-and-resume ends with the same metrics as an uninterrupted run."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from grpo_research.cli import main
from grpo_research.tracking import read_metrics
from tests.helpers import deterministic, fast_run, kill_after_step

EXE = str(Path(sys.executable).with_name("grpo-research"))
# Completion lengths of an untrained model vary, so a length-shaped reward gives every group
# a non-zero advantage (the arithmetic reward would be 0 everywhere).
FAST = fast_run(
    "train.eval_size=40", "reward.weights={overlong: 1.0, format: 0.2}",
    "reward.options={overlong: {max_len: 10, cache: 9}}", "optim.lr=1e-2", "tracking.wandb=offline",
)


def _train_args(model_dir, run_dir, *extra):
    return ["train", "--run-dir", str(run_dir), f"model.name_or_path={model_dir}", *FAST, *extra]


def test_smoke_run_writes_files_and_changes_parameters(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    assert main(_train_args(tiny_model_dir, run, "train.steps=4", "train.eval_every=2", "train.samples_every=2",
                            "tracking.wandb=offline")) == 0
    for name in ("config.yaml", "metrics.jsonl", "summary.json", "checkpoint/state.pt", "model/config.json",
                 "samples/step_000002.jsonl", "samples/step_000004.jsonl"):
        assert (run / name).exists(), name
    assert list((run / "wandb").glob("offline-run-*")), "offline W&B run missing"
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    assert cfg["algo"]["group_size"] == 4 and cfg["reward"]["weights"]["overlong"] == 1.0
    rows = read_metrics(run / "metrics.jsonl")
    train_rows = [r for r in rows if "reward_mean" in r]
    eval_rows = [r for r in rows if "eval/accuracy" in r]
    assert [r["step"] for r in train_rows] == [1, 2, 3, 4]
    assert [r["step"] for r in eval_rows] == [0, 2, 4]
    required = ["step", "samples", "tokens", "reward_mean", "reward_std", "frac_zero_std", "kl", "clip_frac",
                "entropy", "completion_len", "truncated_frac", "lr", "grad_norm", "step_s", "rollout_s",
                "update_s", "peak_mem_mb"]
    for r in train_rows:
        assert all(k in r for k in required), set(required) - set(r)
    assert [r["samples"] for r in train_rows] == [8, 16, 24, 32]
    assert all(r["reward_std"] > 0 for r in train_rows[:1])
    assert all(r["grad_norm"] > 0 for r in train_rows)
    sample = json.loads((run / "samples/step_000002.jsonl").read_text().splitlines()[0])
    assert set(sample) >= {"prompt", "completion", "reward"}
    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(run / "model/model.safetensors")
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) > len(before) // 2
    # where the invocation's time went (benchmarks/time_breakdown.py reads it)
    t = json.loads((run / "summary.json").read_text())["timings_this_invocation"]
    assert set(t) == {"startup_s", "load_s", "tracking_s", "resume_s", "eval_s", "rollout_s", "update_s",
                      "step_s", "samples_s", "checkpoint_s", "save_model_s", "wall_s"}, t
    assert t["step_s"] == pytest.approx(sum(r["step_s"] for r in train_rows), abs=0.01)
    assert t["rollout_s"] == pytest.approx(sum(r["rollout_s"] for r in train_rows), abs=0.01)
    assert t["eval_s"] >= sum(r["eval_s"] for r in eval_rows) - 0.01
    assert all(v >= 0 for v in t.values()) and t["checkpoint_s"] > 0 and t["load_s"] > 0
    parts = sum(v for k, v in t.items() if k not in ("wall_s", "rollout_s", "update_s"))
    assert parts <= t["wall_s"] + 0.01, t


_strip = deterministic


def test_kill_and_resume_matches_uninterrupted_run(tiny_model_dir, tmp_path):
    common = ["train.steps=30", "train.eval_every=10", "train.checkpoint_every=5", "tracking.wandb=disabled"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    ref_run = tmp_path / "ref"
    subprocess.run([EXE, *_train_args(tiny_model_dir, ref_run, *common)[0:]], check=True, env=env,
                   capture_output=True)
    run = tmp_path / "killed"
    cmd = [EXE, *_train_args(tiny_model_dir, run, *common)]
    metrics = run / "metrics.jsonl"
    proc, killed_at = kill_after_step(cmd, metrics, 12, env)
    proc.wait()
    assert killed_at is not None and killed_at < 30, "the run finished before it could be killed"
    assert not (run / "summary.json").exists()
    subprocess.run(cmd, check=True, env=env, capture_output=True)  # same command: resumes
    assert _strip(read_metrics(metrics)) == _strip(read_metrics(ref_run / "metrics.jsonl"))
    a = load_file(run / "model/model.safetensors")
    b = load_file(ref_run / "model/model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_rerun_of_a_finished_run_does_no_more_steps(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    args = _train_args(tiny_model_dir, run, "train.steps=2", "train.eval_every=2", "tracking.wandb=disabled")
    assert main(args) == 0
    before = (run / "metrics.jsonl").read_text()
    assert main(args) == 0
    assert (run / "metrics.jsonl").read_text() == before
