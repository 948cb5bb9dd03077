"""The methods that learn from verified samples: rft, online_rft (DeepSeekMath arXiv 2402.03300
section 5.2), dpo and online_dpo (arXiv 2305.18290, 2402.04792): who samples their data
(`algo.sampler_sync_every`), micro-batch equivalence, kill-and-resume, and config errors.

An untrained model answers nothing right, so these runs accept samples by the `random` reward
term (`algo.accept_term=random`): about half the samples are kept / chosen."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grpo_research.cli import main
from grpo_research.config import load_config
from grpo_research.errors import ConfigError
from grpo_research.tracking import read_metrics
from grpo_research.trainers import build_trainer
from tests.helpers import deterministic, fast_run, kill_after_step

EXE = str(Path(sys.executable).with_name("grpo-research"))
METHODS = ["rft", "online_rft", "dpo", "online_dpo"]
RANDOM = ["reward.weights={random: 1.0}", "algo.accept_term=random"]
FAST = fast_run(*RANDOM, "optim.lr=1e-2", "rollout.prompts_per_step=4")


def _trainer(model_dir, run_dir, *extra):
    cfg = load_config(None, [f"model.name_or_path={model_dir}", *FAST, *extra])
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("")
    return build_trainer(cfg, run_dir, model_dir)


def _params(model):
    return [p.detach().clone() for p in model.parameters()]


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("method", METHODS)
def test_each_method_trains_on_its_samples_and_counts_every_one(tiny_model_dir, tmp_path, method):
    run = tmp_path / method
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", f"method={method}", *FAST,
                 "train.steps=3", "train.eval_every=3"]) == 0
    rows = [r for r in read_metrics(run / "metrics.jsonl") if "reward_mean" in r]
    assert [r["samples"] for r in rows] == [16, 32, 48]  # 4 prompts x G = 4 per step, all counted
    used = "accepted" if "rft" in method else "pairs"
    assert all(r[used] > 0 for r in rows) and all("grad_norm" in r and "entropy" in r for r in rows)
    if used == "pairs":
        assert all(0 <= r["dpo/accuracy"] <= 1 and r["loss"] > 0 for r in rows)
    a, b = load_file(run / "model/model.safetensors"), load_file(tiny_model_dir / "model.safetensors")
    assert any(not torch.equal(a[k], b[k]) for k in a)  # the policy trained


def test_offline_samples_the_base_model_online_the_policy_iterative_a_refreshed_copy(tiny_model_dir, tmp_path):
    base = _params(_trainer(tiny_model_dir, tmp_path / "probe", "method=online_rft").policy)
    off = _trainer(tiny_model_dir, tmp_path / "off", "method=rft")
    row = [off.train_step() for _ in range(2)][-1]
    assert _same(_params(off.sampler()), base) and not _same(_params(off.policy), base)
    assert row["cost/sampler_param_mb"] > 0 and off.extra_frozen_models() == 1  # the base copy is counted
    on = _trainer(tiny_model_dir, tmp_path / "on", "method=online_rft")
    on.train_step()
    assert on.sampler() is on.policy and on.extra_frozen_models() == 0
    dpo = _trainer(tiny_model_dir, tmp_path / "dpo", "method=dpo")
    assert dpo.sampler() is dpo.ref and dpo.extra_frozen_models() == 0  # offline DPO samples its reference
    it = _trainer(tiny_model_dir, tmp_path / "it", "method=online_dpo", "algo.sampler_sync_every=2")
    it.train_step()
    assert _same(_params(it.sampler()), base) and not _same(_params(it.policy), base)  # step 1: still step 0's copy
    it.train_step()
    assert _same(_params(it.sampler()), _params(it.policy))  # step 2: refreshed
    assert it.sampler() is not it.policy and it.extra_frozen_models() == 1


@pytest.mark.parametrize("method", ["online_rft", "online_dpo"])
def test_micro_batches_give_the_whole_batch_update(tiny_model_dir, tmp_path, method):
    grads = []
    for name, extra in (("whole", []), ("micro", ["train.micro_batch_size=4"])):
        t = _trainer(tiny_model_dir, tmp_path / name, f"method={method}", "optim.lr=3e-5", *extra)
        row = t.train_step()
        grads.append(([p.grad.detach().clone() for p in t.policy.parameters()], row))
    (whole, rw), (micro, rm) = grads
    assert sum(g.abs().sum().item() for g in whole) > 1e-3
    for a, b in zip(whole, micro):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    keys = ["loss", "entropy", "grad_norm"] + (["dpo/margin", "dpo/accuracy"] if "dpo" in method else ["accepted"])
    for k in keys:
        assert rm[k] == pytest.approx(rw[k], rel=1e-5, abs=1e-7), k


@pytest.mark.parametrize("method, extra", [("rft", []), ("online_dpo", ["algo.sampler_sync_every=4"])])
def test_kill_and_resume_matches_the_uninterrupted_run(tiny_model_dir, tmp_path, method, extra):
    args = [f"model.name_or_path={tiny_model_dir}", f"method={method}", *FAST, *extra, "train.steps=24",
            "train.eval_every=8", "train.checkpoint_every=5", "optim.lr=3e-3"]
    env = {**os.environ, "WANDB_MODE": "disabled"}
    ref = tmp_path / "ref"
    subprocess.run([EXE, "train", "--run-dir", str(ref), *args], check=True, env=env, capture_output=True)
    run = tmp_path / "killed"
    cmd = [EXE, "train", "--run-dir", str(run), *args]
    proc, killed_at = kill_after_step(cmd, run / "metrics.jsonl", 12, env)
    proc.wait()
    assert killed_at is not None and killed_at < 24, "the run finished before it could be killed"
    subprocess.run(cmd, check=True, env=env, capture_output=True)  # resumes from its step-10 checkpoint
    assert deterministic(read_metrics(run / "metrics.jsonl")) == deterministic(read_metrics(ref / "metrics.jsonl"))
    a, b = load_file(run / "model/model.safetensors"), load_file(ref / "model/model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("overrides, needle", [
    (["method=rft", "reward.weights={format: 1.0}"], "'algo.accept_term' = 'correct': method=rft keeps"),
    (["method=grpo", "algo.sampler_sync_every=0"], "method=grpo always samples the current policy"),
    (["method=dpo", "algo.beta=0.1"], "'algo.beta' = 0.1: method=dpo has no KL term (algo.beta must be 0); "
                                      "DPO's own beta is dpo.beta (now 0.1)"),
    (["method=online_dpo", "dpo.beta=0"], "'dpo.beta' = 0"),
    (["method=online_dpo", "dpo.label_smoothing=0.5"], "'dpo.label_smoothing' = 0.5 must be in [0, 0.5)"),
    (["method=dpo", "dpo.loss_type=hinge"], "'dpo.loss_type'"),
])
def test_bad_settings_are_one_line_naming_the_key(overrides, needle):
    with pytest.raises(ConfigError) as e:
        load_config(None, overrides)
    assert needle in str(e.value) and "\n" not in str(e.value)
