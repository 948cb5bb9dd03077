"""The backend factory: `rollout_backend(name, ...)` returns the generate function of config
`rollout.backend` (`hf`: `grpo_research.rollout.hf.generate`; `vllm`: a colocated engine)."""
from __future__ import annotations

import torch

from grpo_research.errors import ConfigError
from grpo_research.rollout.hf import generate


def rollout_backend(name: str, model_path=None, *, seed: int = 0, **options):
    """The generate function of backend `name` (config `rollout.backend`), with
    `generate`'s signature: `hf` is `generate`; `vllm` builds a colocated engine on
    `model_path` (options: see `vllm_backend.VLLMRollout`) and returns its `generate`."""
    if name == "hf":
        return generate
    if name == "vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
            raise ConfigError("rollout.backend=vllm needs a CUDA device and vLLM (extra `gpu`, in its own "
                               "environment: see docs/real-models-and-gpus.md); use rollout.backend=hf on this machine")
        from grpo_research.rollout.vllm_backend import VLLMRollout

        return VLLMRollout(model_path, seed=seed, **options).generate
    raise ValueError(f"unknown rollout backend {name!r}; known: hf, vllm")
