"""LoRA adapters on the policy (and PPO's critic) through peft: `model.lora_rank` > 0.

LoRA (Hu et al. 2021, arXiv 2106.09685): each targeted linear layer W gains a trainable
low-rank update (alpha / r) B A, B initialised to 0, so training starts at the base model; W
stays frozen. What changes in a run:

- the policy is `peft.get_peft_model(model, LoraConfig(r, alpha, dropout, target_modules))`; its
  optimizer, gradient clipping and data-parallel all-reduce cover the trainable parameters only
  (the update engine's `policy` group is the adapters);
- the reference policy (KL term, DPO) is the same model with its adapters disabled
  (`AdaptersOff`): no second copy of the weights. `algo.ref_reset_every` is refused with LoRA (a
  reset would have to move the frozen base);
- PPO's critic: with `critic.shared_trunk=true` its value head reads the policy's adapted trunk
  (nothing more held); otherwise the critic is its own copy of the base with its own adapters
  plus the value head, so PPO holds the frozen base twice and trains adapters and a head, as a
  separate-critic PPO with LoRA does (the GRPO-vs-PPO memory comparison then shows the critic's
  copy, not a full critic's optimizer state);
- checkpoints hold the whole state dict (frozen base included), so resume is exact; the final
  model is saved as the adapters (`<run dir>/adapter/`, peft format) and merged into the base
  (`<run dir>/model/`, a plain HF checkpoint that `grpo-research eval` loads).

Departures: no adapter-only checkpoints (the frozen base is written at every checkpoint); no
vLLM backend with LoRA (refused).
"""
from __future__ import annotations

from pathlib import Path

import torch


def _peft():
    try:
        import peft
    except ImportError:  # pragma: no cover - the dev and lora extras install it
        from grpo_research.errors import ConfigError

        raise ConfigError("model.lora_rank > 0 needs peft: pip install -e '.[lora]'") from None
    return peft


def lora_config(m):
    """The peft LoraConfig of the `model` config section."""
    peft = _peft()
    return peft.LoraConfig(r=m.lora_rank, lora_alpha=m.lora_alpha, lora_dropout=m.lora_dropout,
                           target_modules=m.lora_targets, bias="none")


def add_adapters(model: torch.nn.Module, m) -> torch.nn.Module:
    """`model` with fresh LoRA adapters (only they train)."""
    return _peft().get_peft_model(model, lora_config(m))


def is_adapted(model) -> bool:
    """Whether `model` is a peft model (without importing peft, which a run without adapters
    never loads: it is slow to import)."""
    import sys

    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def trainable(model: torch.nn.Module) -> list[torch.nn.Parameter]:
    """The parameters an optimizer updates: all of them without adapters, the adapters (and
    heads) with them."""
    return [p for p in model.parameters() if p.requires_grad]


def body(policy) -> torch.nn.Module:
    """The transformer trunk of a causal LM (hidden states, no LM head), adapters active when
    the policy has them."""
    return policy.get_base_model().base_model if is_adapted(policy) else policy.base_model


class AdaptersOff:
    """The reference policy of a LoRA run: calls the policy with its adapters disabled.
    Quacks like the frozen model the trainers call (`__call__`, `config`, `parameters`)."""

    def __init__(self, policy):
        self.policy = policy

    def __call__(self, *args, **kwargs):
        was_training = self.policy.training
        self.policy.eval()  # a frozen model's forward: no dropout
        try:
            with self.policy.disable_adapter():
                return self.policy(*args, **kwargs)
        finally:
            self.policy.train(was_training)

    @property
    def config(self):
        return self.policy.config

    @property
    def training(self) -> bool:
        return self.policy.training

    def get_base_model(self):  # what the decode loop inspects for the forward's arguments
        return self.policy.get_base_model()

    def parameters(self):
        return self.policy.parameters()

    def eval(self):  # the reference is always in eval mode when called
        return self

    def train(self, mode: bool = True):
        return self

    def state_dict(self):  # nothing of its own to checkpoint
        return {}


def reference(policy, model_path, m, device):
    """The frozen reference policy: `AdaptersOff(policy)` when the policy has adapters, else a
    second copy of the checkpoint at `model_path` (dtype `m.dtype`), frozen, on `device`."""
    if is_adapted(policy):
        return AdaptersOff(policy)
    from grpo_research.models import load_causal_lm

    ref, _ = load_causal_lm(model_path, m.dtype)
    return ref.to(device).eval().requires_grad_(False)


def save_final(policy, tokenizer, run_dir: Path, save_model) -> None:
    """The final model to `run_dir/model` with `save_model(model, tokenizer, dir)` (the
    trainer's atomic save); with adapters, they go to `run_dir/adapter` and the model is a
    merged copy (the policy itself keeps its adapters)."""
    import copy

    if not is_adapted(policy):
        save_model(policy, tokenizer, run_dir / "model")
        return
    save_model(policy, tokenizer, run_dir / "adapter")  # a peft model saves its adapters only
    save_model(copy.deepcopy(policy).merge_and_unload(), tokenizer, run_dir / "model")
