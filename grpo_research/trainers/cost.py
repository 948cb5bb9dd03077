"""Cost accounting: what a method holds in memory and what it computes, per step.

Every trainer logs these under `cost/` each step:

| key | meaning |
|---|---|
| cost/<model>_param_mb, cost/<model>_grad_mb, cost/<model>_optim_mb | bytes of parameters, gradients and optimizer state of each model (policy, reference, critic), in MiB |
| cost/model_state_mb | their sum over every model the method holds |
| cost/peak_mem_mb | peak process memory: high-water RSS on CPU, `torch.cuda.max_memory_allocated` on GPU |
| cost/rollout_s, cost/update_s | seconds spent generating and updating in the step |
| cost/gen_tokens_per_s | generated tokens per second of rollout time |
| cost/samples_per_s | completions per second of step time |
| cost/model_flops_per_s | model FLOPs of the step (2 N per token of every forward, 6 N per trained token, over every model that runs) per second of step time |
| cost/mfu | model_flops_per_s / (the peak matmul FLOP/s measured by this process at start x the data-parallel processes) |

Under data parallelism (train.launcher=torchrun) samples, tokens and FLOPs are the step's totals
over all processes; memory and seconds are rank 0's.
"""
from __future__ import annotations

import time

import torch

from grpo_research.errors import ConfigError
from grpo_research.trainers.common import peak_mem_mb

MIB = 2**20


def tensor_bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def model_state_bytes(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict[str, int]:
    """Bytes of parameters, of gradients (trainable parameters, allocated or about to be) and of
    optimizer state (e.g. AdamW's two moments per trainable parameter)."""
    params = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    optim = 0
    if optimizer is not None:
        for state in optimizer.state.values():
            optim += tensor_bytes(state.values())
        if not optimizer.state:  # before the first step: AdamW will hold two moments per trainable parameter
            optim = 2 * tensor_bytes(trainable) if isinstance(optimizer, torch.optim.AdamW) else 0
    grads = tensor_bytes(trainable) if optimizer is not None else 0
    return {"param": tensor_bytes(params), "grad": grads, "optim": optim}


def measure_peak_matmul_flops(device: torch.device | str = "cpu", size: int = 1024, repeats: int = 5) -> float:
    """Peak matmul FLOP/s of this process on `device`: the best of a few square float32 matmuls."""
    device = torch.device(device)
    a = torch.randn(size, size, device=device)
    b = torch.randn(size, size, device=device)
    torch.mm(a, b)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        torch.mm(a, b)
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best


class CostMeter:
    """Collects the per-step `cost/` metrics of one trainer."""

    def __init__(self, device: torch.device | str = "cpu"):
        self.peak_flops = measure_peak_matmul_flops(device)
        self.models: dict[str, tuple[torch.nn.Module, torch.optim.Optimizer | None]] = {}

    def register(self, name: str, model: torch.nn.Module | None, optimizer: torch.optim.Optimizer | None = None):
        if model is not None:
            self.models[name] = (model, optimizer)

    def step_metrics(self, *, step_s: float, rollout_s: float, update_s: float, samples: int,
                     generated_tokens: int, model_flops: float, devices: int = 1) -> dict[str, float]:
        row: dict[str, float] = {}
        total = 0
        for name, (model, opt) in self.models.items():
            b = model_state_bytes(model, opt)
            for kind, v in b.items():
                row[f"cost/{name}_{kind}_mb"] = v / MIB
            total += sum(b.values())
        flops_per_s = model_flops / step_s if step_s > 0 else 0.0
        row.update({
            "cost/model_state_mb": total / MIB,
            "cost/peak_mem_mb": peak_mem_mb(),
            "cost/rollout_s": rollout_s,
            "cost/update_s": update_s,
            "cost/gen_tokens_per_s": generated_tokens / rollout_s if rollout_s > 0 else 0.0,
            "cost/samples_per_s": samples / step_s if step_s > 0 else 0.0,
            "cost/model_flops_per_s": flops_per_s,
            "cost/mfu": flops_per_s / (self.peak_flops * devices),
        })
        return row


def forward_flops(n_params: int, tokens: int) -> float:
    """2 N per token of a forward pass."""
    return 2.0 * n_params * tokens


def train_flops(n_params: int, tokens: int) -> float:
    """6 N per trained token (forward + backward)."""
    return 6.0 * n_params * tokens


def estimate_step_bytes(*, n_params: int, trained_models: int, frozen_models: int, param_bytes: int,
                        hidden: int, intermediate: int, layers: int, vocab: int, rows: int, seq_len: int,
                        checkpointing: bool, n_trainable: int | None = None) -> dict[str, float]:
    """A rough upper estimate of a training step's memory, in bytes, before anything runs.

    state: parameters of every model, plus gradients and AdamW's two moments (float32) of the
    `n_trainable` parameters of each trained model (all `n_params` by default; the adapters with
    LoRA); activations of one micro-batch of `rows` sequences of `seq_len` tokens kept
    for backward: per token and layer about 10 x hidden + 3 x intermediate values (attention
    projections and scores' outputs, MLP), only the layer inputs under activation checkpointing
    (plus one layer recomputed), and the float32 logits three times (logits, softmax, gradient).
    Measured against the real thing only on the offline models; it is meant to catch a step that
    cannot possibly fit, not to size one tightly."""
    n_trainable = n_params if n_trainable is None else n_trainable
    state = n_params * param_bytes * (trained_models + frozen_models) + trained_models * n_trainable * (param_bytes + 8)
    tokens = rows * seq_len
    per_layer = (10 * hidden + 3 * intermediate) * param_bytes
    if checkpointing:
        act = tokens * (layers * hidden * param_bytes + per_layer)
    else:
        act = tokens * layers * per_layer
    logits = tokens * vocab * 4 * 3
    return {"state": float(state), "activations": float(act + logits), "total": float(state + act + logits)}


def memory_limit_bytes(device) -> float:
    """What the step may use: the GPU's memory on CUDA, the machine's physical memory on CPU."""
    if getattr(device, "type", str(device)) == "cuda":
        return float(torch.cuda.get_device_properties(device).total_memory)
    import psutil

    return float(psutil.virtual_memory().total)


class StepTooLarge(ConfigError):
    """The up-front estimate of a training step exceeds the device's memory (`check_step_memory`)."""


def check_step_memory(policy, cfg, seq_len: int, frozen_models: int, device) -> dict[str, float] | None:
    """The up-front estimate (`estimate_step_bytes`) of a training step of `policy` on
    micro-batches of `train.micro_batch_size` rows of `seq_len` tokens, with `frozen_models`
    frozen copies beside it; the trained models are the policy and, for PPO with its own critic
    network (not `critic.shared_trunk`), a critic of the policy's size, each training as many
    parameters as the policy does (its adapters with LoRA); raises StepTooLarge (a ConfigError),
    one line, when it exceeds the device's memory (`memory_limit_bytes`). None for a model whose
    config gives no hidden size."""

    c, t = policy.config, cfg.train
    hidden = getattr(c, "hidden_size", None)
    if hidden is None:
        return None
    rows = cfg.rollout.prompts_per_step * cfg.algo.group_size
    mb = min(t.micro_batch_size or rows, rows)
    est = estimate_step_bytes(
        n_params=sum(p.numel() for p in policy.parameters()),
        n_trainable=sum(p.numel() for p in policy.parameters() if p.requires_grad),
        trained_models=1 + (cfg.method == "ppo" and not cfg.critic.shared_trunk),
        frozen_models=frozen_models, param_bytes=next(policy.parameters()).element_size(),
        hidden=hidden, intermediate=getattr(c, "intermediate_size", 4 * hidden),
        layers=getattr(c, "num_hidden_layers", 1), vocab=getattr(c, "vocab_size", 1), rows=mb,
        seq_len=seq_len, checkpointing=t.gradient_checkpointing)
    limit = memory_limit_bytes(device)
    if est["total"] > limit:
        gb = 2**30
        raise StepTooLarge(
            f"a training step needs about {est['total'] / gb:.1f} GiB (model state {est['state'] / gb:.1f}, "
            f"activations of {mb} completions x {seq_len} tokens {est['activations'] / gb:.1f}), more than the "
            f"{limit / gb:.0f} GiB here; lower train.micro_batch_size or set train.gradient_checkpointing=true")
    return est
