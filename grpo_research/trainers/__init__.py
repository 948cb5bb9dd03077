"""Trainers: one loop (`base.Trainer`: rollout, evaluation, checkpoints, resume, signals,
metrics, cost, data parallelism) and each method's step on it, as sibling classes: the GRPO
family (`grpo.GRPOTrainer`), PPO (`ppo.PPOTrainer`) and the supervised control
(`sft_control.SFTControlTrainer`). Which method runs which trainer, with which preset, is the
registry in grpo_research/methods.py."""
from __future__ import annotations

from grpo_research.methods import trainer_class


def build_trainer(cfg, run_dir, model_path):
    """The trainer of `cfg.method`, ready to `train()` into `run_dir` from `model_path`."""
    return trainer_class(cfg.method)(cfg, run_dir, model_path)
