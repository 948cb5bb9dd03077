"""train.micro_batch_size: gradients accumulated over micro-batches give the update of the
whole batch (parameters equal to 1e-6), for every aggregation, for PPO and for the control."""
import pytest
import torch

from grpo_research.config import load_config
from grpo_research.trainers import build_trainer
from tests.helpers import fast_run

# the default lr 3e-5: AdamW's first step moves every parameter by about lr whatever its gradient, so
# rounding-level gradient differences show up as at most ~lr in the parameters
BASE = fast_run("reward.weights={overlong: 1.0}", "algo.beta=0.04", "rollout.prompts_per_step=4")


def _step(model_dir, run_dir, overrides):
    """One step; (the gradient it applied, per parameter; its metrics row; the trainer)."""
    cfg = load_config(None, [f"model.name_or_path={model_dir}", *BASE, *overrides])
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("")
    t = build_trainer(cfg, run_dir, model_dir)
    row = t.train_step()
    return [p.grad.detach().clone() for p in t.policy.parameters()], row, t


def _max_param_diff(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.policy.parameters(), b.policy.parameters()))


def _same_grads(whole, micro):
    assert sum(g.abs().sum().item() for g in whole) > 1e-3  # a real gradient: the comparison means something
    for a, b in zip(whole, micro):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("extra", [
    ["algo.loss_agg=sequence"],
    ["algo.loss_agg=token"],
    ["algo.loss_agg=constant"],
    ["method=gspo"],
    ["algo.loss_agg=token", "algo.num_iterations=2"],
])
def test_grpo_micro_batches_give_the_whole_batch_update(tiny_model_dir, tmp_path, extra):
    whole, row_w, w = _step(tiny_model_dir, tmp_path / "whole", extra)
    micro, row_m, m = _step(tiny_model_dir, tmp_path / "micro", [*extra, "train.micro_batch_size=4"])
    _same_grads(whole, micro)
    assert _max_param_diff(w, m) < 1e-6
    for k in ("loss", "kl", "clip_frac", "entropy", "reward_mean", "grad_norm"):
        assert row_m[k] == pytest.approx(row_w[k], rel=1e-5, abs=1e-7), k


def test_micro_batch_size_must_hold_whole_groups():
    from grpo_research.errors import ConfigError

    with pytest.raises(ConfigError, match="multiple of algo.group_size=4"):
        load_config(None, [*BASE, "train.micro_batch_size=6"])


def test_control_micro_batches_give_the_whole_batch_update(tiny_model_dir, tmp_path):
    whole, row_w, w = _step(tiny_model_dir, tmp_path / "whole", ["method=sft_control"])
    micro, row_m, m = _step(tiny_model_dir, tmp_path / "micro", ["method=sft_control", "train.micro_batch_size=4"])
    _same_grads(whole, micro)
    assert row_m["loss"] == pytest.approx(row_w["loss"], rel=1e-6)
    assert _max_param_diff(w, m) < 1e-5  # lr 1e-3 (the control's preset): AdamW moves each parameter by ~lr


@pytest.mark.parametrize("extra", [["critic.shared_trunk=false"], ["critic.shared_trunk=true", "algo.loss_agg=token"]])
def test_ppo_micro_batches_give_the_whole_batch_update(tiny_model_dir, tmp_path, extra):
    args = ["method=ppo", "ppo.epochs=1", *extra]
    whole, row_w, w = _step(tiny_model_dir, tmp_path / "whole", args)
    micro, row_m, m = _step(tiny_model_dir, tmp_path / "micro", [*args, "train.micro_batch_size=4"])
    _same_grads(whole, micro)
    assert _max_param_diff(w, m) < 1e-6
    critic_w = [q.grad for q in w.critic.parameters()]
    critic_m = [q.grad for q in m.critic.parameters()]
    for a, b in zip(critic_w, critic_m):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    for k in ("loss", "pg_loss", "value_loss", "clip_frac", "entropy", "value_mean"):
        assert row_m[k] == pytest.approx(row_w[k], rel=1e-5, abs=1e-7), k


@pytest.mark.parametrize("method", ["grpo", "ppo"])
def test_gradient_checkpointing_gives_the_same_gradients(tiny_model_dir, tmp_path, method):
    whole, row_w, w = _step(tiny_model_dir, tmp_path / "plain", [f"method={method}"])
    ckpt, row_c, c = _step(tiny_model_dir, tmp_path / "ckpt", [f"method={method}", "train.gradient_checkpointing=true",
                                                               "train.micro_batch_size=8"])
    from grpo_research.trainers.common import activation_checkpointing

    assert activation_checkpointing(c.policy) and not activation_checkpointing(w.policy)
    _same_grads(whole, ckpt)
    assert row_c["loss"] == pytest.approx(row_w["loss"], rel=1e-5, abs=1e-7)


def test_memory_estimate_hand_computed():
    from grpo_research.trainers.cost import estimate_step_bytes

    e = estimate_step_bytes(n_params=10, trained_models=1, frozen_models=1, param_bytes=4, hidden=2, intermediate=4,
                            layers=3, vocab=5, rows=2, seq_len=3, checkpointing=False)
    # state: 10 x (4 x 2 models + 1 trained x (4 grad + 8 moments)) = 200
    # activations: 6 tokens x 3 layers x (10 x 2 + 3 x 4) x 4 bytes = 2304; logits 6 x 5 x 4 x 3 = 360
    assert e == {"state": 200.0, "activations": 2664.0, "total": 2864.0}
    c = estimate_step_bytes(n_params=10, trained_models=1, frozen_models=1, param_bytes=4, hidden=2, intermediate=4,
                            layers=3, vocab=5, rows=2, seq_len=3, checkpointing=True)
    assert c["activations"] == 6 * (3 * 2 * 4 + 32 * 4) + 360  # layer inputs kept, one layer recomputed


def test_a_step_that_cannot_fit_is_refused_with_its_estimate(tiny_model_dir, tmp_path, monkeypatch, capsys):
    import grpo_research.trainers.cost as cost
    from grpo_research.cli import main

    monkeypatch.setattr(cost, "memory_limit_bytes", lambda device: 2**20)  # a 1 MiB machine
    run = tmp_path / "run"
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", *BASE]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a training step needs about" in err[0] and "train.micro_batch_size" in err[0]
    assert not (run / "metrics.jsonl").exists()


def test_the_summary_records_the_up_front_memory_estimate(tiny_model_dir, tmp_path, monkeypatch):
    """summary.json's step_memory_estimate_mb is the estimate the trainer checked before training
    (RESULTS.md sets it beside a measured peak)."""
    import json

    import grpo_research.trainers.cost as cost
    from grpo_research.cli import main

    seen = []

    def fake(**kw):
        seen.append(kw)
        return {"state": 3 * 2**20, "activations": 2 * 2**20, "total": 5 * 2**20}

    monkeypatch.setattr(cost, "estimate_step_bytes", fake)
    run = tmp_path / "run"
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", *BASE,
                 "train.steps=1", "train.micro_batch_size=8"]) == 0
    assert json.loads((run / "summary.json").read_text())["step_memory_estimate_mb"] == 5
    assert seen and seen[0]["rows"] == 8  # the micro-batch, not the whole step's 4 x G rows


def test_memory_estimate_counts_gradients_and_moments_of_the_trained_parameters_only():
    from grpo_research.trainers.cost import estimate_step_bytes

    e = estimate_step_bytes(n_params=10, trained_models=2, frozen_models=0, param_bytes=4, hidden=2, intermediate=4,
                            layers=3, vocab=5, rows=2, seq_len=3, checkpointing=False, n_trainable=1)
    # state: 10 x 4 x 2 models + 2 trained x 1 parameter x (4 grad + 8 moments) = 104
    assert e["state"] == 104.0


@pytest.mark.parametrize("method,extra,trained,frozen", [
    ("grpo", [], 1, 1), ("grpo", ["model.lora_rank=2"], 1, 0), ("ppo", ["model.lora_rank=2"], 2, 0),
    ("ppo", ["critic.shared_trunk=true"], 1, 1)])
def test_the_estimate_sees_adapters_and_a_shared_critic(tiny_model_dir, tmp_path, monkeypatch, method, extra, trained,
                                                        frozen):
    """With adapters only they carry gradients and AdamW moments and the reference is the
    policy with them off (no copy); a critic on the policy's trunk is no second trained model."""
    import grpo_research.trainers.cost as cost
    from grpo_research.cli import main

    seen = []

    def fake(**kw):
        seen.append(kw)
        return {"state": 0.0, "activations": 0.0, "total": 0.0}

    monkeypatch.setattr(cost, "estimate_step_bytes", fake)
    assert main(["train", "--run-dir", str(tmp_path / "run"), f"model.name_or_path={tiny_model_dir}", *BASE,
                 "train.steps=1", f"method={method}", "algo.beta=0.04", *extra]) == 0
    kw = seen[0]
    assert (kw["trained_models"], kw["frozen_models"]) == (trained, frozen)
    assert (kw["n_trainable"] < kw["n_params"]) == bool(extra and "lora" in extra[0])
