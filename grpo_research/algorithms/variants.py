"""Registered advantage estimators and importance-ratio surrogates of the GRPO variants.

- `group`: GRPO (Shao et al. 2024, arXiv 2402.03300), see `core.group_relative_advantages`;
  `scale="none"` is Dr. GRPO (Liu et al. 2025, arXiv 2503.20783).
- `rloo`: REINFORCE Leave-One-Out (Kool et al. 2019; Ahmadian et al. 2024, arXiv 2402.14740):
  A_i = r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean_g). No std scaling.
- `reinforce_pp`: REINFORCE++ (Hu 2025, arXiv 2501.03262): A = (r - mean_batch) / std_batch,
  normalised over the whole batch rather than per group.
- importance `token`: PPO's per-token ratio (`core.clipped_surrogate`).
- importance `sequence`: GSPO (Zheng et al. 2025, arXiv 2507.18071):
  s_i = exp(mean_t(logp - old_logp)) over the sequence's valid tokens, clipped at
  [1 - eps_low, 1 + eps_high]; the per-sequence loss -min(s_i A_i, clip(s_i) A_i) is
  broadcast to its tokens so that `loss_agg="sequence"` gives GSPO's 1/G sum over sequences.

Departures: REINFORCE++ in its paper puts a per-token KL penalty in the reward; here the KL
term stays in the loss as in GRPO (beta, `algo.kl_estimator`), so the variants differ only
in the advantage. DAPO's dynamic sampling, overlong filtering and overlong penalty live in the
trainer and the reward library (`overlong` term).
"""
from __future__ import annotations

from typing import Callable

import torch

from grpo_research.algorithms.core import clipped_surrogate, group_relative_advantages


def rloo_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """A_i = r_i - mean of the other G-1 rewards of its group; `rewards` 1-D, group after group."""
    if group_size < 2 or rewards.numel() % group_size:
        raise ValueError(f"rewards must hold whole groups of size >= 2, got {rewards.numel()} for G={group_size}")
    r = rewards.float().view(-1, group_size)  # (n_groups, G)
    others = (r.sum(dim=1, keepdim=True) - r) / (group_size - 1)  # (n_groups, G)
    return (r - others).flatten()  # (N,)


def batch_normalized_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """REINFORCE++: (r - mean_batch) / (std_batch + eps), population std; all-equal -> zeros."""
    r = rewards.float()  # (N,)
    centred = r - r.mean()  # (N,)
    if bool((r == r[0]).all()):
        return torch.zeros_like(r)
    return centred / (r.std(correction=0) + eps)  # (N,)


def sequence_clipped_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor,
    eps_low: float, eps_high: float,
) -> torch.Tensor:
    """GSPO per-sequence clipped loss, broadcast over each sequence's tokens: (B, T)."""
    mask = mask.to(logp.dtype)  # (B, T)
    log_ratio = ((logp - old_logp) * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)  # (B,)
    s = torch.exp(log_ratio)  # (B,)
    per_seq = -torch.minimum(s * advantages, torch.clamp(s, 1 - eps_low, 1 + eps_high) * advantages)  # (B,)
    return per_seq.unsqueeze(1).expand_as(logp)  # (B, T)


def sequence_clip_fraction(logp, old_logp, advantages, mask, eps_low, eps_high) -> torch.Tensor:
    mask = mask.to(logp.dtype)
    s = torch.exp(((logp - old_logp) * mask).sum(1) / mask.sum(1).clamp(min=1))  # (B,)
    active = ((s < 1 - eps_low) & (advantages < 0)) | ((s > 1 + eps_high) & (advantages > 0))  # (B,)
    return active.float().mean()


# name -> f(rewards (N,), algo config) -> advantages (N,)
ADVANTAGES: dict[str, Callable] = {
    "group": lambda r, a: group_relative_advantages(r, a.group_size, a.adv_scale, a.adv_std),
    "rloo": lambda r, a: rloo_advantages(r, a.group_size),
    "reinforce_pp": lambda r, a: batch_normalized_advantages(r),
}

# name -> f(logp, old_logp, advantages (N,), mask, eps_low, eps_high) -> per-token loss (N, T)
SURROGATES: dict[str, Callable] = {
    "token": lambda lp, old, adv, mask, lo, hi: clipped_surrogate(lp, old, adv, lo, hi),
    "sequence": sequence_clipped_surrogate,
}
