"""Data-parallel training under torchrun (config `train.launcher=torchrun`).

`grpo-research train ... train.launcher=torchrun` relaunches itself under torchrun
(grpo_research/trainers/launcher.py). Configs that cannot shard exactly are refused before
anything starts (`config_checks.data_parallel_problem`: one line, exit 2). Each worker (WORLD_SIZE > 1) runs the ordinary
trainer with a `DataParallel` context:

- process group: gloo on CPU, NCCL when the model trains on CUDA (each process on cuda:LOCAL_RANK);
- data: every rank draws the step's problems from the same data RNG and keeps its contiguous
  share (`shard`); with `rollout.sampler=counter` a row's sample depends only on its global row
  id, so the ranks together draw exactly what one process draws (with the default `torch`
  sampler each rank mixes its rank into the step seed: draws from the same distribution, but
  not the one-process samples);
- advantages: each group lives on the rank that sampled it (group-local estimators only);
- loss: scaled (`loss_scale`) so that the sum over ranks is the one-process loss for every
  `algo.loss_agg` (token: divided by the global number of valid tokens, one scalar all-reduce);
- gradients: summed over ranks after backward in flat buckets (`all_reduce_grads`), so clipping
  and AdamW see the global gradient and the ranks' parameters stay identical (no DDP wrapper);
- metrics: global values (per-row quantities gathered by one zero-padded all-reduce per step);
- output: rank 0 alone writes metrics.jsonl, checkpoints, samples/, W&B, the model and
  summary.json; every rank reads the checkpoint to resume; held-out evaluation is split over
  the ranks and its correct answers summed;
- SIGTERM: the launcher forwards it to the workers; they agree on stopping with an all-reduce
  after each step, rank 0 checkpoints, all exit 75.

With one process (`DataParallel()`, world 1) every method returns at once: no collective, no copy.
"""
from __future__ import annotations

import os
from typing import Any, Iterable

import torch

BUCKET_ELEMENTS = 1 << 25  # gradient elements per all-reduce (128 MiB in float32)


def shard_bounds(n: int, rank: int, world: int) -> tuple[int, int]:
    """[lo, hi) of rank's contiguous share of n items (sizes differ by at most one)."""
    return n * rank // world, n * (rank + 1) // world


def shard_loss_scale(mode: str, world: int, local_count: float, global_count: float) -> float:
    """The factor f with sum over ranks of f x aggregate_loss(local rows, mode) = aggregate_loss(all rows, mode),
    every rank holding the same number of rows. By the aggregation's registered normaliser: rows
    (sequence: mean over rows; constant: sum / (rows x max_len)) -> 1 / world; tokens (token: sum /
    valid tokens) -> local valid tokens / global valid tokens (each clamped at 1 as `aggregate_loss` does)."""
    from grpo_research.algorithms import AGGREGATIONS

    normaliser = AGGREGATIONS.lookup(mode).normaliser
    if normaliser == "rows":
        return 1.0 / world
    if normaliser == "tokens":
        return max(local_count, 1.0) / max(global_count, 1.0)
    raise ValueError(f"aggregation {mode!r} has an unknown normaliser {normaliser!r}")


class DataParallel:
    """This process's place among the training processes. World 1: nothing is communicated."""

    def __init__(self, rank: int = 0, world: int = 1, device: torch.device | None = None):
        self.rank, self.world = rank, world
        self.device = device or torch.device("cpu")  # where collective buffers live
        self.active = world > 1
        self.main = rank == 0

    def shard(self, n: int) -> tuple[int, int]:
        return shard_bounds(n, self.rank, self.world)

    # ------------------------------------------------------------ collectives (no-ops at world 1)
    def all_reduce(self, t: torch.Tensor) -> torch.Tensor:
        """Sum `t` over the ranks (in place when it already lives on the collective device)."""
        if not self.active:
            return t
        import torch.distributed as dist

        buf = t.to(self.device)
        dist.all_reduce(buf)
        return buf

    def sum_values(self, values: list[float]) -> list[float]:
        if not self.active:
            return list(values)
        return self.all_reduce(torch.tensor(values, dtype=torch.float64, device=self.device)).tolist()

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on any (e.g. one rank got SIGTERM)."""
        if not self.active:
            return flag
        return self.sum_values([float(flag)])[0] > 0

    def barrier(self) -> None:
        if self.active:
            import torch.distributed as dist

            dist.barrier()

    def gather_objects(self, obj: Any) -> list | None:
        """Rank 0: the list of every rank's `obj` in rank order; other ranks: None."""
        if not self.active:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world if self.main else None
        dist.gather_object(obj, out, dst=0)
        return out

    def gather_step(self, columns: torch.Tensor, scalars: list[float]) -> tuple[torch.Tensor, list[float]]:
        """One all-reduce: (K, n) per-row values of every rank side by side, (K, world x n) in rank
        order (each rank fills its own columns of a zero buffer: exact), and `scalars` summed."""
        if not self.active:
            return columns, list(scalars)
        K, n = columns.shape
        buf = torch.zeros(K * n * self.world + len(scalars), dtype=torch.float64, device=self.device)
        grid = buf[: K * n * self.world].view(K, self.world * n)
        grid[:, self.rank * n : (self.rank + 1) * n] = columns.to(self.device, torch.float64)
        buf[K * n * self.world :] = torch.tensor(scalars, dtype=torch.float64, device=self.device)
        buf = self.all_reduce(buf)
        return buf[: K * n * self.world].view(K, self.world * n).cpu(), buf[K * n * self.world :].tolist()

    def all_reduce_grads(self, params: Iterable[torch.nn.Parameter], extra: torch.Tensor) -> torch.Tensor:
        """Sum every parameter's gradient over the ranks, in flat buckets of at most `BUCKET_ELEMENTS`
        per dtype, and `extra` (a float32 tensor, e.g. the scaled loss) in the same all-reduce;
        returns the summed `extra`. Parameters without a gradient are left alone (the same on every
        rank: one model, one graph)."""
        if not self.active:
            return extra
        import torch.distributed as dist

        shape = extra.shape
        extra = extra.detach().float().reshape(-1).to(self.device)
        by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
        for p in params:
            if p.grad is not None:
                by_dtype.setdefault(p.grad.dtype, []).append(p.grad)
        by_dtype.setdefault(torch.float32, [])  # `extra` travels with the float32 gradients
        summed_extra = extra
        for dtype, grads in by_dtype.items():
            buckets: list[list[torch.Tensor]] = [[]]
            size = 0
            for g in grads:
                if buckets[-1] and size + g.numel() > BUCKET_ELEMENTS:
                    buckets.append([])
                    size = 0
                buckets[-1].append(g)
                size += g.numel()
            for i, bucket in enumerate(buckets):
                tail = [extra] if dtype == torch.float32 and i == len(buckets) - 1 else []
                if not bucket and not tail:
                    continue
                flat = torch.cat([g.reshape(-1) for g in bucket] + tail)  # (numel,)
                dist.all_reduce(flat)
                offset = 0
                for g in bucket:
                    g.copy_(flat[offset : offset + g.numel()].view_as(g))
                    offset += g.numel()
                if tail:
                    summed_extra = flat[offset:]
        return summed_extra.reshape(shape)

    def combine_mean(self, local_mean: float, weighted_sum: float, weight: float) -> float:
        """A mean over every rank from the summed (mean x weight) and weights of `gather_step`;
        at world 1 this process's own mean, unchanged (no rounding)."""
        if not self.active:
            return local_mean
        return weighted_sum / max(weight, 1.0)

    def loss_scale(self, mask: torch.Tensor, mode: str) -> float:
        """`shard_loss_scale` for this rank's (N, T) loss mask; token mode all-reduces the count."""
        if not self.active:
            return 1.0
        local = float(mask.sum())
        total = self.sum_values([local])[0] if mode == "token" else 0.0
        return shard_loss_scale(mode, self.world, local, total)


def setup(device: torch.device) -> tuple[DataParallel, torch.device]:
    """(context, training device) of this process: under torchrun with WORLD_SIZE > 1, joins the
    process group (once; gloo on CPU, NCCL on CUDA with this process on cuda:LOCAL_RANK);
    otherwise world 1 and `device` unchanged."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DataParallel(), device
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    if device.type == "cuda":
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return DataParallel(rank, world, device if device.type == "cuda" else torch.device("cpu")), device


def shutdown() -> None:
    if "WORLD_SIZE" in os.environ:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
