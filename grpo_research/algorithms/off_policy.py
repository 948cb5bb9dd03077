"""Off-policy correction for a sampler that is not the trainer (`algo.is_correction`).

A rollout engine (vLLM, or a lower-precision copy of the policy) samples from mu, which differs
from the trainer's pi_old on the same weights (other kernels, dtype, a stale copy). The GRPO
surrogate's ratio pi_theta / pi_old then corrects nothing for that gap: the gradient estimate
is the on-policy one's only when mu = pi_old. The correction weighs each token's policy-gradient
term (the clipped surrogate; not the KL term) by a function of the sampler-to-trainer ratio
rho = pi_old / mu, detached (`is_weights`):

- `none`: weight 1 (the uncorrected estimator);
- `tis` (truncated importance sampling): w = min(rho, C), C = `algo.is_cap`;
- `mis` (masked importance sampling): w = rho where rho <= C, else 0 (the token or sequence
  is dropped from the gradient).

`algo.is_level`: `token` (rho_t per token) or `sequence` (rho = prod_t rho_t of the row, the
same weight on every token of it). Without truncation (C = inf) the sequence-level weight makes
the estimator's expectation under mu exactly the on-policy gradient, and truncated at C it
stays closer to it than no correction; the token-level weight reweighs each token's own
conditional only (the prefix and the later tokens stay the sampler's), so it is biased even
without a cap: on the enumerated instance of tests/test_off_policy.py (every completion of a
tiny policy) it lands farther from the on-policy gradient than no correction (0.031 against
0.015). The token level is what the frameworks ship for its lower variance; this harness
measures, it does not assume, which one helps.

Sources: truncated IS for the rollout-training mismatch as proposed by Yao et al. 2025 ("Your
Efficient RL Framework Secretly Brings You Off-Policy RL Training", a blog post; no arXiv id
checked), and masked IS at token and sequence level as in "When Speed Kills Stability:
Demystifying RL Collapse from the Training-Inference Mismatch" (Liu et al. 2025, a blog post;
no arXiv id checked); the four modes (token/sequence x truncate/mask) and the default cap of 2
as in ms-swift's `rollout_importance_sampling_mode`.

Departures: only an upper cap (no lower threshold on rho); masked tokens stay in the loss's
normaliser (`loss_agg` divides by the same count with or without the correction), so masking
scales the gradient down rather than renormalising it.
"""
from __future__ import annotations

from typing import Callable

import torch

from grpo_research.registry import Registry

# (rho (B, T), cap) -> weight (B, T)
IS_CORRECTIONS: Registry[Callable[[torch.Tensor, float], torch.Tensor]] = Registry("importance-sampling correction")
IS_CORRECTIONS.register("none", lambda rho, cap: torch.ones_like(rho))
IS_CORRECTIONS.register("tis", lambda rho, cap: torch.clamp(rho, max=cap))
IS_CORRECTIONS.register("mis", lambda rho, cap: torch.where(rho <= cap, rho, torch.zeros_like(rho)))
IS_LEVELS = ("token", "sequence")


@torch.no_grad()
def sampler_ratio(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor,
                  level: str) -> torch.Tensor:
    """rho = pi_old / mu of each token (`token`) or of its whole row (`sequence`, the product over
    the row's valid tokens, broadcast to them): (B, T), 1 where `mask` is 0. `sampler_logp` must
    be finite on every valid token (ValueError otherwise)."""
    if level not in IS_LEVELS:
        raise ValueError(f"unknown is_level {level!r}; known: {', '.join(IS_LEVELS)}")
    valid = mask.bool()
    if not torch.isfinite(sampler_logp[valid]).all():
        raise ValueError("the sampler's log-probs are missing (NaN or inf) on some sampled tokens")
    log_rho = torch.where(valid, trainer_logp.detach() - sampler_logp.to(trainer_logp.dtype),
                          torch.zeros_like(trainer_logp))  # (B, T)
    if level == "sequence":
        log_rho = log_rho.sum(dim=1, keepdim=True).expand_as(log_rho)  # (B, T)
    return torch.where(valid, torch.exp(log_rho), torch.ones_like(log_rho))  # (B, T)


@torch.no_grad()
def is_weights(trainer_logp: torch.Tensor, sampler_logp: torch.Tensor, mask: torch.Tensor, correction: str,
               level: str, cap: float) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(w (B, T) detached, stats): the correction's weight of each token's policy-gradient term,
    and `is/ratio_mean`, `is/ratio_max` (of rho over valid tokens), `is/capped_frac` (share of
    valid tokens whose rho exceeds the cap: truncated by tis, dropped by mis)."""
    rho = sampler_ratio(trainer_logp, sampler_logp, mask, level)  # (B, T)
    w = IS_CORRECTIONS.lookup(correction)(rho, cap)  # (B, T)
    valid = mask.bool()
    n = valid.sum().clamp(min=1)
    stats = {"is/ratio_mean": rho[valid].sum() / n,
             "is/ratio_max": rho[valid].max() if valid.any() else torch.ones(()),
             "is/capped_frac": (rho[valid] > cap).sum() / n}
    return torch.where(valid, w, torch.zeros_like(w)), stats
