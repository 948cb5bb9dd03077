"""Pure tensor functions of GRPO: group-relative advantages, KL estimators (registered), the
token-level clipped surrogate and its clip fraction, the masked mean.

Paper: Shao et al., "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open
Language Models", arXiv 2402.03300, section 4.1 (GRPO, eq. 3 and the outcome-supervision
advantage A_i = (r_i - mean(r)) / std(r)); KL estimator k3 from Schulman, "Approximating KL
divergence" (2020), as used by eq. 4.

Departures from the paper, each a named option rather than a hidden default:
- `std="population"` (1/G) is the default, which is exactly the formula; the paper does not
  say which estimator it used (TRL uses the unbiased one: `std="unbiased"`).
- `eps` is added to the std so that a group of equal rewards gives zeros; we then force those
  rows to exactly 0.
- `scale="batch"` and `scale="none"` (Dr. GRPO, arXiv 2503.20783) are variants, not the paper's.
"""
from __future__ import annotations

from typing import Callable

import torch

from grpo_research.registry import Registry


def group_relative_advantages(
    rewards: torch.Tensor, group_size: int, scale: str = "group", std: str = "population", eps: float = 1e-6
) -> torch.Tensor:
    """A_i = (r_i - mean_g) / (std_g + eps); `rewards` is 1-D, ordered group after group.

    scale: "group" divides by each group's std, "batch" by the whole batch's std, "none" only
    centres (Dr. GRPO). std: "population" (1/G) or "unbiased" (1/(G-1)).
    A group whose rewards are all equal gives exactly zeros.
    """
    if rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(f"rewards must be 1-D with a multiple of group_size={group_size} entries, got {tuple(rewards.shape)}")
    if scale not in ("group", "batch", "none"):
        raise ValueError(f"scale must be group, batch or none, got {scale!r}")
    if std not in ("population", "unbiased"):
        raise ValueError(f"std must be population or unbiased, got {std!r}")
    correction = 0 if std == "population" else 1
    r = rewards.float().view(-1, group_size)  # (n_groups, G)
    mean = r.mean(dim=1, keepdim=True)  # (n_groups, 1)
    centred = r - mean  # (n_groups, G)
    if scale == "group":
        adv = centred / (r.std(dim=1, keepdim=True, correction=correction) + eps)  # (n_groups, G)
    elif scale == "batch":
        adv = centred / (r.flatten().std(correction=correction) + eps)  # (n_groups, G)
    else:
        adv = centred  # (n_groups, G)
    constant = (r == r[:, :1]).all(dim=1, keepdim=True)  # (n_groups, 1): all rewards equal
    adv = torch.where(constant, torch.zeros_like(adv), adv)  # exact zeros, never NaN
    return adv.flatten()  # (n_groups * G,)


KL_ESTIMATORS: Registry[Callable[[torch.Tensor], torch.Tensor]] = Registry("KL estimator")


@KL_ESTIMATORS.register("k1")
def _k1(log_ratio: torch.Tensor) -> torch.Tensor:
    return -log_ratio  # logp - ref_logp


@KL_ESTIMATORS.register("k2")
def _k2(log_ratio: torch.Tensor) -> torch.Tensor:
    return 0.5 * log_ratio**2


@KL_ESTIMATORS.register("k3")
def _k3(log_ratio: torch.Tensor) -> torch.Tensor:
    return torch.exp(log_ratio) - log_ratio - 1


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from samples of pi (Schulman 2020), a registered
    estimator (config `algo.kl_estimator`):
    k1 = logp - ref_logp; k2 = 0.5 (logp - ref_logp)^2; k3 = exp(ref_logp - logp) - (ref_logp - logp) - 1.
    """
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"estimator must be one of {KL_ESTIMATORS.choices()}, got {estimator!r}")
    log_ratio = ref_logp - logp  # (B, T)
    return KL_ESTIMATORS[estimator](log_ratio)  # (B, T)


def upper_clip(clip_eps: float, clip_eps_high: float | None) -> float:
    """eps_high of the ratio clip [1 - clip_eps, 1 + eps_high]: `clip_eps_high` (DAPO's
    clip-higher), or `clip_eps` when it is None (symmetric, PPO/GRPO)."""
    return clip_eps if clip_eps_high is None else clip_eps_high


def clipped_surrogate(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, eps_low: float, eps_high: float
) -> torch.Tensor:
    """Per-token loss -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A), r = exp(logp - old_logp).

    logp, old_logp: (B, T); advantages: (B,) broadcast over tokens, or (B, T) per token.
    """
    ratio = torch.exp(logp - old_logp)  # (B, T)
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages  # (B, 1) or (B, T)
    unclipped = ratio * adv  # (B, T)
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv  # (B, T)
    return -torch.minimum(unclipped, clipped)  # (B, T)


def clip_fraction(
    logp: torch.Tensor, old_logp: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, eps_low: float, eps_high: float
) -> torch.Tensor:
    """Share of valid tokens where the clipped term is the active one (gradient zeroed)."""
    ratio = torch.exp(logp - old_logp)  # (B, T)
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages  # (B, 1) or (B, T)
    active = ((ratio < 1 - eps_low) & (adv < 0)) | ((ratio > 1 + eps_high) & (adv > 0))  # (B, T)
    return (active.float() * mask).sum() / mask.sum().clamp(min=1)  # ()


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x over the entries where mask is 1 (0 when there are none)."""
    return (x * mask).sum() / mask.sum().clamp(min=1)
