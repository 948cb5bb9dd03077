"""method=nsr (negative sample reinforcement, arXiv 2506.01347): hand-computed advantages and a
run by `method=nsr` alone."""
import pytest
import torch

from grpo_research.algorithms import ADVANTAGES
from grpo_research.cli import main
from grpo_research.config import load_config
from grpo_research.tracking import read_metrics
from tests.helpers import fast_run


def test_negative_only_keeps_the_below_mean_part_of_the_group_advantage():
    a = load_config(None, ["method=nsr", "algo.group_size=4", "algo.adv_scale=none"]).algo
    assert a.advantage == "negative_only"
    # group [1, 0, 0, 3]: mean 1 -> centred [0, -1, -1, 2] -> [0, -1, -1, 0]; group [2, 2, 2, 2] -> zeros
    r = torch.tensor([1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 2.0, 2.0])
    assert ADVANTAGES[a.advantage](r, a).tolist() == [0.0, -1.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    # with group std scaling: [0, -1, -1, 2] / std 1.2247 -> negatives -0.8165
    g = load_config(None, ["method=nsr", "algo.group_size=4"]).algo
    adv = ADVANTAGES[g.advantage](r[:4], g)
    assert adv[1].item() == pytest.approx(-1 / 1.224744871, abs=1e-5) and adv[0] == 0 and adv[3] == 0


def test_nsr_runs_by_method_alone(tiny_model_dir, tmp_path):
    run = tmp_path / "nsr"
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", "method=nsr",
                 *fast_run("optim.lr=1e-2", "train.steps=2", "train.eval_every=2",
                           "reward.weights={overlong: 1.0}")]) == 0
    rows = [r for r in read_metrics(run / "metrics.jsonl") if "reward_mean" in r]
    assert len(rows) == 2 and all(r["grad_norm"] > 0 for r in rows)
