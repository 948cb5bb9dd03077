"""The continued-supervised-training control logs rows on the same axes as the RL methods."""
import pytest
import yaml

from grpo_research.cli import main
from grpo_research.config import load_config
from grpo_research.tracking import read_metrics
from grpo_research.trainers.sft_control import NoReferenceSolutions, SFTControlTrainer
from tests.helpers import fast_run

FAST = fast_run("train.eval_size=30", "train.steps=4", "train.eval_every=2")


def test_control_matches_rl_samples_and_evaluation(tiny_model_dir, tmp_path):
    runs = {}
    for method in ("grpo", "sft_control"):
        run = tmp_path / method
        assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", f"method={method}",
                     *FAST]) == 0
        runs[method] = read_metrics(run / "metrics.jsonl")
    for method, rows in runs.items():
        train_rows = [r for r in rows if "step_s" in r]
        assert [r["samples"] for r in train_rows] == [8, 16, 24, 32], method
    ev = {m: [(r["step"], r["samples"]) for r in rows if "eval/accuracy" in r] for m, rows in runs.items()}
    assert ev["grpo"] == ev["sft_control"] == [(0, 0), (2, 16), (4, 32)]
    # same base model, same held-out split: identical accuracy before any update
    first = {m: [r for r in rows if "eval/accuracy" in r][0]["eval/accuracy"] for m, rows in runs.items()}
    assert first["grpo"] == first["sft_control"]
    cfg = yaml.safe_load((tmp_path / "sft_control" / "config.yaml").read_text())
    assert cfg["optim"]["lr"] == 1e-3 and cfg["algo"]["beta"] == 0.0
    control_rows = [r for r in runs["sft_control"] if "step_s" in r]
    assert all(r["grad_norm"] > 0 for r in control_rows)
    assert control_rows[-1]["loss"] < control_rows[0]["loss"]  # lr 1e-3 on the solutions: the loss falls


def test_control_refuses_a_task_without_reference_solutions(tiny_model_dir, tmp_path):
    args = [f"model.name_or_path={tiny_model_dir}", "method=sft_control", "task.options={withhold_solutions: true}",
            *FAST]
    with pytest.raises(NoReferenceSolutions, match="withheld"):
        SFTControlTrainer(load_config(None, args), tmp_path, tiny_model_dir)
    run = tmp_path / "r"
    assert main(["train", "--run-dir", str(run), *args]) == 2
    assert not run.exists()
    # the RL methods train on the same task from the reward alone
    assert main(["train", "--run-dir", str(tmp_path / "rl"), *args[:1], *args[2:]]) == 0


def test_control_builds_no_rollout_backend_reward_or_reference(tiny_model_dir, tmp_path):
    # even with beta > 0 the control holds the policy alone: it samples nothing and has no KL term
    cfg = load_config(None, [f"model.name_or_path={tiny_model_dir}", "method=sft_control", "algo.beta=0.1", *FAST])
    t = SFTControlTrainer(cfg, tmp_path, tiny_model_dir)
    assert t.ref is None and not hasattr(t, "generate") and not hasattr(t, "reward_fn")
    assert list(t.cost.models) == ["policy"]
