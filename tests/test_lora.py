"""LoRA (`model.lora_rank` > 0, grpo_research/models/lora.py): only the adapters train, the
reference is the base with the adapters off, kill -9 and resume give the same metrics, micro-
batches and gradient checkpointing give the whole batch's gradients, the final model is saved
as adapters and merged, and `grpo-research cost` sees the smaller model state."""
import json
import os
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grpo_research.cli import main
from grpo_research.config import load_config
from grpo_research.tracking import read_metrics
from grpo_research.trainers import build_trainer
from tests.helpers import deterministic, fast_run, kill_after_step

EXE = str(Path(sys.executable).with_name("grpo-research"))
LORA = ["model.lora_rank=4", "model.lora_alpha=8", "reward.weights={random: 1.0}", "optim.lr=1e-2"]


def _args(model_dir, run, *extra):
    return ["train", "--run-dir", str(run), f"model.name_or_path={model_dir}", *fast_run(*LORA, *extra)]


def _step(model_dir, run_dir, overrides):
    """One step: (the gradients of the trainable parameters, the metrics row, the trainer)."""
    cfg = load_config(None, [f"model.name_or_path={model_dir}", *fast_run(*LORA, "rollout.prompts_per_step=4"),
                             *overrides])
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("")
    t = build_trainer(cfg, run_dir, model_dir)
    row = t.train_step()
    return [p.grad.detach().clone() for p in t.policy.parameters() if p.requires_grad], row, t


def test_only_the_adapters_train_and_the_reference_is_the_base(tiny_model_dir, tmp_path):
    cfg = load_config(None, [f"model.name_or_path={tiny_model_dir}", *fast_run(*LORA, "algo.beta=0.04")])
    (tmp_path / "r").mkdir()
    t = build_trainer(cfg, tmp_path / "r", tiny_model_dir)
    frozen = {n: p.detach().clone() for n, p in t.policy.named_parameters() if not p.requires_grad}
    names = [n for n, p in t.policy.named_parameters() if p.requires_grad]
    assert names and all("lora_" in n for n in names)
    assert sum(p.numel() for p in frozen.values()) > 5 * sum(p.numel() for p in t.policy.parameters() if p.requires_grad)
    first = t.train_step()
    assert first["kl"] == 0.0  # step 1: the adapters' B is 0, so the policy is its reference exactly
    assert "cost/reference_param_mb" not in first  # no second copy of the weights
    assert first["grad_norm"] > 0 and all(p.grad is None for p in t.policy.parameters() if not p.requires_grad)
    second = t.train_step()
    assert second["kl"] > 0  # the adapters moved: policy and reference now differ
    assert all(torch.equal(frozen[n], p) for n, p in t.policy.named_parameters() if n in frozen)  # base untouched
    ids = torch.randint(3, 20, (2, 6))
    with torch.no_grad(), t.policy.disable_adapter():
        off = t.policy(input_ids=ids).logits
    with torch.no_grad():
        assert torch.equal(t.ref(input_ids=ids).logits, off)
        assert (t.policy(input_ids=ids).logits - off).abs().max() > 0
    assert t.policy.training  # calling the reference left the policy's mode alone


def test_the_final_model_is_saved_as_adapters_and_merged(tiny_model_dir, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    run = tmp_path / "r"
    assert main(_args(tiny_model_dir, run, "train.steps=3")) == 0
    assert (run / "adapter" / "adapter_config.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(run / "model")
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model_dir), run / "adapter")
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    ids = torch.randint(3, 20, (2, 7))
    with torch.no_grad():
        a, b, c = merged(input_ids=ids).logits, adapted(input_ids=ids).logits, base(input_ids=ids).logits
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)  # merged = base + adapters
    assert (a - c).abs().max() > 1e-4  # and training moved it off the base
    out = tmp_path / "eval.json"  # the merged model is a plain checkpoint
    assert main(["eval", "--checkpoint", str(run), "--benchmark", "arith", "--n", "4", "--out", str(out),
                 "--threads", "1"]) == 0


def test_kill_and_resume_with_adapters_matches_the_uninterrupted_run(tiny_model_dir, tmp_path):
    common = ["train.steps=16", "train.eval_every=8", "train.checkpoint_every=4", "train.eval_size=8"]
    ref = tmp_path / "ref"
    assert main(_args(tiny_model_dir, ref, *common)) == 0
    run = tmp_path / "killed"
    args = _args(tiny_model_dir, run, *common)
    proc, killed_at = kill_after_step([EXE, *args], run / "metrics.jsonl", 6, {**os.environ, "WANDB_MODE": "disabled"})
    proc.wait()
    assert killed_at is not None and killed_at < 16, "the run finished before it could be killed"
    assert main(args) == 0
    assert deterministic(read_metrics(run / "metrics.jsonl")) == deterministic(read_metrics(ref / "metrics.jsonl"))
    for sub in ("model/model.safetensors", "adapter/adapter_model.safetensors"):
        a, b = load_file(run / sub), load_file(ref / sub)
        assert all(torch.equal(a[k], b[k]) for k in a), sub


@pytest.mark.parametrize("method", ["grpo", "ppo"])
def test_micro_batches_and_checkpointing_give_the_whole_batch_gradients(tiny_model_dir, tmp_path, method):
    whole, row_w, _ = _step(tiny_model_dir, tmp_path / "whole", [f"method={method}", "ppo.epochs=1"])
    micro, row_m, _ = _step(tiny_model_dir, tmp_path / "micro", [f"method={method}", "ppo.epochs=1",
                                                                 "train.micro_batch_size=4",
                                                                 "train.gradient_checkpointing=true"])
    assert sum(g.abs().sum().item() for g in whole) > 1e-6
    for a, b in zip(whole, micro):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
    assert row_m["loss"] == pytest.approx(row_w["loss"], rel=1e-5, abs=1e-6)  # ~0 at ratio 1: rounding


def test_ppo_critic_with_adapters(tiny_model_dir, tmp_path):
    """A separate critic: its own copy of the base with its own adapters and the value head
    train; its base stays frozen. With the shared trunk the head reads the policy's trunk."""
    _, row, t = _step(tiny_model_dir, tmp_path / "sep", ["method=ppo", "critic.shared_trunk=false"])
    names = [n for n, p in t.critic.named_parameters() if p.requires_grad]
    assert any("lora_" in n for n in names) and any(n.startswith("head.") for n in names)
    assert all("lora_" in n or n.startswith("head.") for n in names)
    assert row["cost/critic_optim_mb"] < row["cost/critic_param_mb"] / 2
    _, row, t = _step(tiny_model_dir, tmp_path / "shared", ["method=ppo", "critic.shared_trunk=true"])
    assert row["cost/critic_param_mb"] < 0.01 and row["value_loss"] > 0


def test_cost_json_sees_the_smaller_model_state(tiny_model_dir, capsys):
    from grpo_research.cli.cost import main as cost_main

    base = ["--json", "--steps", "2", f"model.name_or_path={tiny_model_dir}", "train.threads=1",
            "rollout.prompts_per_step=2", "algo.group_size=4", "rollout.max_new_tokens=8", "train.eval_size=1"]
    assert cost_main(base) == 0
    full = json.loads(capsys.readouterr().out)
    # rank 2 on this hidden-32 model: adapters of about the relative size rank 8 has on the default tiny
    # model (hidden 128); rank 8 here would be half the size of the layers it adapts
    assert cost_main([*base, "model.lora_rank=2"]) == 0
    lora = json.loads(capsys.readouterr().out)
    for m in ("grpo", "ppo"):
        print(m, lora[m]["model_state_mb"], full[m]["model_state_mb"])
        assert lora[m]["model_state_mb"] <= 0.5 * full[m]["model_state_mb"], m


@pytest.mark.parametrize("override, message", [
    ("algo.ref_reset_every=5", "'algo.ref_reset_every' with model.lora_rank > 0"),
    ("rollout.backend=vllm", "needs rollout.backend=hf"),
    ("model.lora_targets=[]", "'model.lora_targets'"),
])
def test_what_lora_cannot_do_is_refused_in_one_line(override, message, capsys):
    assert main(["config", "model.lora_rank=4", override]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
