"""The method registry (config key `method`), torch-free: what each method is, which trainer
runs it, the config values that define it (its preset), and whether it trains data-parallel.

Config reads this registry (allowed values, presets, data-parallel checks); the trainer class
is imported only when a run starts (`trainer_class`). A method's preset is layered
defaults < preset < YAML file < command line, so a study can still override any of its values.

To add a variant, register it here with the config values that define it (and, when it needs
a new advantage estimator, surrogate or aggregation, register that function in
grpo_research/algorithms); the methods table in docs/methods.md is generated from this registry
(`python scripts/update_readme_tables.py`).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

from grpo_research.registry import Registry


@dataclass(frozen=True)
class Method:
    name: str
    trainer: str  # "module:Class", a subclass of grpo_research.trainers.base.Trainer
    doc: str  # one line for the methods table (docs/methods.md); cite the paper by arXiv id
    preset: dict[str, Any] = field(default_factory=dict)
    # the trainer shards the step's prompts over torchrun processes and reaches what one process
    # reaches (config settings that look across groups are refused separately)
    data_parallel: bool = False


METHODS: Registry[Method] = Registry("method")

GRPO_TRAINER = "grpo_research.trainers.grpo:GRPOTrainer"
# the trainers of verified own samples, which take `algo.sampler_sync_every` (offline, online, iterative)
RFT_TRAINER = "grpo_research.trainers.rft:RFTTrainer"
DPO_TRAINER = "grpo_research.trainers.dpo:DPOTrainer"
SAMPLE_SOURCE_TRAINERS = (RFT_TRAINER, DPO_TRAINER)


def register_method(name: str, trainer: str, doc: str, preset: dict[str, Any] | None = None,
                    data_parallel: bool = False) -> Method:
    return METHODS.register(name, Method(name, trainer, doc, preset or {}, data_parallel))


def trainer_class(name: str):
    """The trainer class of method `name` (imports its module)."""
    module, _, cls = METHODS.lookup(name).trainer.partition(":")
    return getattr(importlib.import_module(module), cls)


def methods_table() -> str:
    """The Markdown table of every method (kept in docs/methods.md)."""
    rows = ["| method | what it is | preset | data-parallel |", "|---|---|---|---|"]
    for m in METHODS.values():
        preset = ", ".join(f"`{k}={_flow(v)}`" for k, v in _flatten(m.preset)) or "-"
        rows.append(f"| `{m.name}` | {m.doc} | {preset} | {'yes' if m.data_parallel else 'no'} |")
    return "\n".join(rows)


def _flatten(d: dict, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict) and k != "weights":
            out += _flatten(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


def _flow(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


# ---------------------------------------------------------------- the methods
register_method(
    "grpo", GRPO_TRAINER, data_parallel=True,
    doc="GRPO, DeepSeekMath (arXiv 2402.03300): group std scaling, sequence aggregation, k3 KL to the reference.",
)
register_method(
    "dr_grpo", GRPO_TRAINER, data_parallel=True,
    preset={"algo": {"adv_scale": "none", "loss_agg": "constant"}},
    doc="Dr. GRPO (arXiv 2503.20783): no std scaling, constant normaliser (batch x max_new_tokens).",
)
register_method(
    "dapo", GRPO_TRAINER, data_parallel=True,
    preset={
        "algo": {"loss_agg": "token", "clip_eps": 0.2, "clip_eps_high": 0.28, "dynamic_sampling": True,
                 "overlong_filter": True, "beta": 0.0},
        "reward": {"weights": {"correct": 1.0, "format": 0.2, "overlong": 1.0}},
    },
    doc="DAPO (arXiv 2503.14476): token aggregation, clip-higher 0.28, dynamic sampling, overlong filtering "
        "and the soft overlong penalty (max_len = rollout.max_new_tokens unless set), no KL term.",
)
register_method(
    "gspo", GRPO_TRAINER, data_parallel=True,
    preset={"algo": {"importance": "sequence", "clip_eps": 3e-4, "clip_eps_high": 4e-4, "loss_agg": "sequence"}},
    doc="GSPO (arXiv 2507.18071): sequence-level, length-normalised importance ratio clipped at 3e-4/4e-4.",
)
register_method(
    "rloo", GRPO_TRAINER, data_parallel=True,
    preset={"algo": {"advantage": "rloo", "loss_agg": "token"}},
    doc="RLOO (Ahmadian et al. 2024, arXiv 2402.14740): leave-one-out baseline, no std scaling.",
)
register_method(
    "reinforce_pp", GRPO_TRAINER, data_parallel=True,
    preset={"algo": {"advantage": "reinforce_pp", "loss_agg": "token"}},
    doc="REINFORCE++ (Hu 2025, arXiv 2501.03262): advantages normalised with the global batch mean and std.",
)
register_method(
    "nsr", GRPO_TRAINER, data_parallel=True,
    preset={"algo": {"advantage": "negative_only"}},
    doc="NSR, negative sample reinforcement (Zhu et al. 2025, arXiv 2506.01347): GRPO trained on its "
        "below-group-mean completions only, A = min(A_group, 0).",
)
register_method(
    "ppo", "grpo_research.trainers.ppo:PPOTrainer",
    doc="PPO with a critic (separate value model, or `critic.shared_trunk`), GAE (`ppo.lam`, `ppo.gamma`), "
        "clipped value loss, entropy bonus, KL in the reward (or `ppo.kl_in_loss`); arXiv 1707.06347, 2203.02155.",
)
register_method(
    "sft_control", "grpo_research.trainers.sft_control:SFTControlTrainer",
    preset={"algo": {"beta": 0.0}, "optim": {"lr": 1e-3, "beta2": 0.98}},
    doc="Control: continued supervised training on the reference solutions, at equal samples (not RL).",
)
register_method(
    "rft", RFT_TRAINER,
    preset={"algo": {"beta": 0.0, "sampler_sync_every": 0}},
    doc="Rejection-sampling fine-tuning, DeepSeekMath (arXiv 2402.03300) section 5.2: supervised loss on the "
        "base model's correct samples (offline: drawn from the frozen base model, each used once).",
)
register_method(
    "online_rft", RFT_TRAINER,
    preset={"algo": {"beta": 0.0, "sampler_sync_every": 1}},
    doc="Online RFT, DeepSeekMath (arXiv 2402.03300) section 5.2: the supervised loss on the current policy's "
        "correct samples, every step.",
)
register_method(
    "dpo", DPO_TRAINER,
    preset={"algo": {"beta": 0.0, "sampler_sync_every": 0}},
    doc="DPO (arXiv 2305.18290) on pairs of a correct and an incorrect sample of one prompt from the frozen base "
        "model (offline); `dpo.beta`, `dpo.loss_type`, `dpo.label_smoothing`.",
)
register_method(
    "online_dpo", DPO_TRAINER,
    preset={"algo": {"beta": 0.0, "sampler_sync_every": 1}},
    doc="Online DPO (Guo et al., arXiv 2402.04792): DPO on pairs from the current policy's samples, every step "
        "(`algo.sampler_sync_every=N`: iterative, pairs from a copy refreshed every N steps).",
)
