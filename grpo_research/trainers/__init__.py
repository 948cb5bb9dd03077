"""Trainers and named variants, registered by `method` name (the config key `method`).

A method is a trainer factory plus a preset: config values that define the variant
(layered defaults < preset < YAML < command line, so a study can still override any of them).
Each variant's paper is cited in its preset's docstring below and in
`grpo_research/algorithms/variants.py`.
"""
from __future__ import annotations

from typing import Any, Callable

METHODS: dict[str, Callable] = {}
METHOD_PRESETS: dict[str, dict[str, Any]] = {}
METHOD_DOCS: dict[str, str] = {}
DATA_PARALLEL_METHODS: set[str] = set()  # methods that train under train.launcher=torchrun


def register_method(name: str, preset: dict[str, Any] | None = None, doc: str = "", data_parallel: bool = False):
    """`data_parallel`: the trainer shards the step's prompts over torchrun processes
    (grpo_research/trainers/distributed.py) and reaches what one process reaches."""

    def deco(obj):
        if name in METHODS:
            raise ValueError(f"method {name!r} registered twice")
        METHODS[name] = obj
        METHOD_PRESETS[name] = preset or {}
        METHOD_DOCS[name] = doc
        if data_parallel:
            DATA_PARALLEL_METHODS.add(name)
        return obj

    return deco


def _grpo(cfg, run_dir, model_path):
    from grpo_research.trainers.grpo import GRPOTrainer

    return GRPOTrainer(cfg, run_dir, model_path)


register_method("grpo", data_parallel=True,
                doc="GRPO, DeepSeekMath (arXiv 2402.03300): group std scaling, sequence aggregation.")(_grpo)
register_method(
    "dr_grpo",
    data_parallel=True,
    preset={"algo": {"adv_scale": "none", "loss_agg": "constant"}},
    doc="Dr. GRPO (arXiv 2503.20783): no std scaling, constant normaliser (batch x max_new_tokens).",
)(_grpo)
register_method(
    "dapo",
    data_parallel=True,
    preset={
        "algo": {"loss_agg": "token", "clip_eps": 0.2, "clip_eps_high": 0.28, "dynamic_sampling": True,
                 "overlong_filter": True, "beta": 0.0},
        "reward": {"weights": {"correct": 1.0, "format": 0.2, "overlong": 1.0}},
    },
    doc="DAPO (arXiv 2503.14476): token aggregation, clip-higher 0.28, dynamic sampling, overlong filtering "
        "and the soft overlong penalty (max_len = rollout.max_new_tokens unless set), no KL term.",
)(_grpo)
register_method(
    "gspo",
    data_parallel=True,
    preset={"algo": {"importance": "sequence", "clip_eps": 3e-4, "clip_eps_high": 4e-4, "loss_agg": "sequence"}},
    doc="GSPO (arXiv 2507.18071): sequence-level, length-normalised importance ratio clipped at 3e-4/4e-4.",
)(_grpo)
register_method(
    "rloo",
    data_parallel=True,
    preset={"algo": {"advantage": "rloo", "loss_agg": "token"}},
    doc="RLOO (Ahmadian et al. 2024, arXiv 2402.14740): leave-one-out baseline, no std scaling.",
)(_grpo)
register_method(
    "reinforce_pp",
    data_parallel=True,
    preset={"algo": {"advantage": "reinforce_pp", "loss_agg": "token"}},
    doc="REINFORCE++ (Hu 2025, arXiv 2501.03262): advantages normalised with the global batch mean and std.",
)(_grpo)


def _ppo(cfg, run_dir, model_path):
    from grpo_research.trainers.ppo import PPOTrainer

    return PPOTrainer(cfg, run_dir, model_path)


register_method("ppo")(_ppo)


def _sft_control(cfg, run_dir, model_path):
    from grpo_research.trainers.sft_control import SFTControlTrainer

    return SFTControlTrainer(cfg, run_dir, model_path)


register_method(
    "sft_control",
    preset={"algo": {"beta": 0.0}, "optim": {"lr": 1e-3, "beta2": 0.98}},
    doc="Control: continued supervised training on the reference solutions, at equal samples (not RL).",
)(_sft_control)
