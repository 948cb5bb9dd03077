"""Trainers, registered by `method` name (the config key `method`)."""
from __future__ import annotations

from typing import Callable

METHODS: dict[str, Callable] = {}


def register_method(name: str):
    def deco(obj):
        if name in METHODS:
            raise ValueError(f"method {name!r} registered twice")
        METHODS[name] = obj
        return obj

    return deco


def _grpo(cfg, run_dir, model_path):
    from grpo_research.trainers.grpo import GRPOTrainer

    return GRPOTrainer(cfg, run_dir, model_path)


register_method("grpo")(_grpo)
