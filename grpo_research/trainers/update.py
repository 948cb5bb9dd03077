"""The update engine: every optimizer step of every trainer (and of the base-model build) is
one call of `update`, the only place that calls `optimizer.step` and `clip_grad_norm_`
(tests/test_update.py checks the source tree for it).

    out = update(loss_fn, parts, scales, groups, max_norm=..., dp=...)

- `loss_fn(part)` computes one micro-batch: `Loss(loss, stats, aux)`, the micro-batch's loss
  (a 0-d tensor with gradient), statistics to weight like the loss (0-d tensors, e.g. PPO's
  value loss), and anything the trainer wants back (`aux`, e.g. the detached log-probs);
- `parts` are the micro-batches (slices from `micro_batches`, or whatever `loss_fn` takes) and
  `scales` their factors: sum over parts of scale x loss(part) is the whole batch's loss
  (`micro_batch_scales` derives them from the aggregation's registered normaliser; a
  data-parallel share multiplies in);
- the engine zeroes every group's gradients, backpropagates each finite micro-batch loss x its
  scale (gradients accumulate), sums the loss and the gradients over data-parallel processes
  (nothing at world 1), and then either skips the update (a non-finite loss anywhere: gradients
  zeroed, parameters untouched, `finite` False) or, for each stepped group, clips its gradient
  norm at `max_norm` (<= 0: no clipping, the norm is still measured), steps its optimizer and
  its schedule.

A group (`OptimGroup`) is one optimizer with the parameters it owns and its schedule (None:
no schedule): the policy; PPO's critic with its own lr and warm-up; later a LoRA subset.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import torch


@dataclass
class OptimGroup:
    """An optimizer, the parameters it steps (clipped together) and its lr schedule."""

    params: list[torch.nn.Parameter]
    opt: torch.optim.Optimizer
    sched: Any = None  # a torch lr scheduler, or None

    def lr(self) -> float:
        return self.sched.get_last_lr()[0] if self.sched is not None else self.opt.param_groups[0]["lr"]


@dataclass
class Loss:
    """What `loss_fn` returns for one micro-batch."""

    loss: torch.Tensor  # () with gradient
    stats: dict[str, torch.Tensor] = field(default_factory=dict)  # () each, weighted like the loss
    aux: Any = None  # handed back untouched, one per micro-batch


@dataclass
class Update:
    """The result of one update."""

    loss: torch.Tensor  # () the whole batch's loss (detached; summed over processes)
    stats: dict[str, torch.Tensor]  # each statistic weighted by the micro-batch scales
    aux: list  # loss_fn's aux, one per micro-batch, in order
    finite: bool  # False: the update was skipped
    lr: dict[str, float]  # each group's lr for this update (before its schedule stepped)
    grad_norm: dict[str, torch.Tensor]  # each stepped group's norm before clipping (absent when skipped)


def micro_batches(n: int, size: int) -> list[slice]:
    """Slices of `size` rows over a batch of `n` (one slice when size is 0 or >= n)."""
    size = size or n
    return [slice(i, min(i + size, n)) for i in range(0, n, size)] or [slice(0, 0)]


def micro_batch_scales(parts: Sequence[slice], mask: torch.Tensor, loss_agg: str, share: float = 1.0) -> list[float]:
    """Each micro-batch's factor for a loss aggregated as `loss_agg` over the (N, T) `mask`:
    rows / N or valid tokens / all valid tokens by the aggregation's normaliser
    (`algorithms.micro_batch_scale`), times `share` (this process's data-parallel share)."""
    from grpo_research.algorithms import micro_batch_scale

    n, tokens = mask.shape[0], float(mask.sum())
    return [share * micro_batch_scale(loss_agg, len(range(n)[s]), n, float(mask[s].sum()), tokens) for s in parts]


def update(loss_fn: Callable[[Any], Loss], parts: Sequence, scales: Sequence[float],
           groups: dict[str, OptimGroup], *, max_norm: float, dp=None, step: Sequence[str] | None = None) -> Update:
    """One optimizer step of `step` (default: every group) on the micro-batches `parts` (see the
    module docstring)."""
    if len(parts) != len(scales):
        raise ValueError(f"{len(parts)} micro-batches but {len(scales)} scales")
    for g in groups.values():
        g.opt.zero_grad(set_to_none=True)
    loss, stats, aux = None, {}, []
    for part, scale in zip(parts, scales):
        out = loss_fn(part)
        if torch.isfinite(out.loss):
            (out.loss * scale).backward()
        loss = out.loss.detach() * scale if loss is None else loss + out.loss.detach() * scale
        for k, v in out.stats.items():
            stats[k] = v.detach() * scale if k not in stats else stats[k] + v.detach() * scale
        aux.append(out.aux)
    if dp is not None:  # gradients and the loss summed over data-parallel processes
        loss = dp.all_reduce_grads([p for g in groups.values() for p in g.params], loss)
    stepped = list(groups) if step is None else list(step)
    lr = {name: groups[name].lr() for name in groups}
    if not torch.isfinite(loss):  # skip the update; the parameters stay as they were
        for g in groups.values():
            g.opt.zero_grad(set_to_none=True)
        return Update(loss, stats, aux, False, lr, {})
    norms = {}
    limit = max_norm if max_norm > 0 else float("inf")
    for name in stepped:
        g = groups[name]
        norms[name] = torch.nn.utils.clip_grad_norm_(g.params, limit)
        g.opt.step()
        if g.sched is not None:
            g.sched.step()
    return Update(loss, stats, aux, True, lr, norms)
