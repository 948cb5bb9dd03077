"""The policy loss of the GRPO family as one pure function: importance-ratio surrogate
(registered: token or sequence ratio), clip-higher, beta x KL to the reference, the loss mask
(masked completions, DAPO's overlong filter) and the aggregation (registered: sequence,
token, constant).

Papers: GRPO, Shao et al. 2024 (DeepSeekMath, arXiv 2402.03300), section 4.1, eq. 3: the
clipped surrogate plus beta x KL (k3), averaged over each sequence's tokens, then over
sequences (`loss_agg=sequence`). DAPO (Yu et al. 2025, arXiv 2503.14476): clip-higher
(`clip_eps_high`), token-level aggregation (`token`), overlong filtering. Dr. GRPO (Liu et al.
2025, arXiv 2503.20783): a constant normaliser (`constant`: sum / (batch x max_len)). GSPO
(Zheng et al. 2025, arXiv 2507.18071): the sequence-level, length-normalised ratio
s_i = exp(mean_t(logp - old_logp)) clipped at [1 - eps_low, 1 + eps_high]; its per-sequence
loss -min(s_i A_i, clip(s_i) A_i) is broadcast to the sequence's tokens so that
`loss_agg=sequence` gives GSPO's 1/G sum over sequences.

Departures: the KL term is added per token before aggregation (as eq. 3 writes it), also for
GSPO, whose paper has no KL term (use beta = 0 there to match it). Completions a reward term
masks (sandbox errors) are removed from the loss, not scored 0.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from grpo_research.algorithms.core import clip_fraction, clipped_surrogate, kl_estimate, masked_mean, upper_clip
from grpo_research.registry import Registry


# ---------------------------------------------------------------- surrogates (algo.importance)
@dataclass(frozen=True)
class Surrogate:
    # (logp, old_logp, advantages (B,), mask, eps_low, eps_high) -> per-token loss (B, T)
    loss: Callable[..., torch.Tensor]
    # same arguments -> share of the clipped (gradient-free) units: tokens or sequences
    clip_fraction: Callable[..., torch.Tensor]
    unit: str  # what clip_fraction is a share of: "token" or "sequence"


SURROGATES: Registry[Surrogate] = Registry("importance ratio")


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
    """Share of sequences whose clipped ratio is the active term."""
    mask = mask.to(logp.dtype)  # (B, T)
    s = torch.exp(((logp - old_logp) * mask).sum(1) / mask.sum(1).clamp(min=1))  # (B,)
    active = ((s < 1 - eps_low) & (advantages < 0)) | ((s > 1 + eps_high) & (advantages > 0))  # (B,)
    return active.float().mean()  # ()


SURROGATES.register("token", Surrogate(
    loss=lambda lp, old, adv, mask, lo, hi: clipped_surrogate(lp, old, adv, lo, hi),
    clip_fraction=clip_fraction, unit="token"))
SURROGATES.register("sequence", Surrogate(
    loss=sequence_clipped_surrogate, clip_fraction=sequence_clip_fraction, unit="sequence"))


# ---------------------------------------------------------------- aggregations (algo.loss_agg)
@dataclass(frozen=True)
class Aggregation:
    reduce: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]  # (masked loss, mask, max_len) -> ()
    # what the sum is divided by: "rows" (a mean over rows, or rows x a constant) or "tokens" (the
    # batch's valid tokens: data-parallel training divides by the global count)
    normaliser: str


AGGREGATIONS: Registry[Aggregation] = Registry("loss aggregation")


def register_aggregation(name: str, normaliser: str):
    """Decorator: register `reduce(masked (B, T), mask (B, T), max_len) -> ()` as `algo.loss_agg=name`."""

    def deco(fn):
        AGGREGATIONS.register(name, Aggregation(fn, normaliser))
        return fn

    return deco


@register_aggregation("sequence", normaliser="rows")
def sequence_mean(masked: torch.Tensor, mask: torch.Tensor, max_len: int) -> torch.Tensor:
    per_seq = masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1)  # (B,)
    return per_seq.mean()  # ()


@register_aggregation("token", normaliser="tokens")
def token_mean(masked: torch.Tensor, mask: torch.Tensor, max_len: int) -> torch.Tensor:
    return masked.sum() / mask.sum().clamp(min=1)  # ()


@register_aggregation("constant", normaliser="rows")
def constant_normaliser(masked: torch.Tensor, mask: torch.Tensor, max_len: int) -> torch.Tensor:
    return masked.sum() / (masked.shape[0] * max_len)  # ()


def aggregate_loss(per_token: torch.Tensor, mask: torch.Tensor, mode: str, max_len: int | None = None) -> torch.Tensor:
    """Reduce a (B, T) per-token loss to a scalar over the tokens where `mask` is 1.

    sequence: mean over each sequence's tokens, then over sequences (original GRPO);
    token: sum over all tokens / number of tokens (DAPO);
    constant: sum / (B x max_len) with max_len defaulting to T (Dr. GRPO).
    """
    if mode not in AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {AGGREGATIONS.choices()}, got {mode!r}")
    mask = mask.to(per_token.dtype)  # (B, T)
    masked = per_token * mask  # (B, T)
    return AGGREGATIONS[mode].reduce(masked, mask, max_len or per_token.shape[1])  # ()


# ---------------------------------------------------------------- the loss
def loss_mask(completion_mask: torch.Tensor, keep: torch.Tensor, finished: torch.Tensor,
              overlong_filter: bool) -> torch.Tensor:
    """(N, T) float mask of the tokens that enter the loss: a completion's own tokens, for the
    completions a reward term did not mask (`keep` (N,)), and with `overlong_filter` (DAPO) only
    those that ended with EOS (`finished` (N,))."""
    valid = keep.float()  # (N,)
    if overlong_filter:
        valid = valid * finished.float()  # (N,) DAPO: drop truncated completions
    return completion_mask.float() * valid.unsqueeze(1)  # (N, T)


def policy_loss(
    logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor | None, advantages: torch.Tensor,
    mask: torch.Tensor, algo, max_len: int, is_weight: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(loss (), stats) of the GRPO family.

    logp: (N, T) log-probs of the sampled tokens under the policy being trained (with gradient);
    old_logp: (N, T) under the policy that sampled them (logp.detach() when mu = 1); ref_logp:
    (N, T) under the reference, or None (no KL term); advantages: (N,); mask: (N, T) from
    `loss_mask`; algo: the `algo` config (importance, clip_eps, clip_eps_high, beta,
    kl_estimator, loss_agg); max_len: the `constant` aggregation's length (rollout.max_new_tokens);
    is_weight: (N, T) detached weights of the surrogate term for a sampler that is not the
    trainer (algorithms/off_policy.py `is_weights`), or None. stats: `policy_loss_stats` of the
    same tensors."""
    eps_high = upper_clip(algo.clip_eps, algo.clip_eps_high)
    surrogate = SURROGATES.lookup(algo.importance)
    per_token = surrogate.loss(logp, old_logp, advantages, mask, algo.clip_eps, eps_high)  # (N, T)
    if is_weight is not None:
        per_token = per_token * is_weight  # (N, T) the sampler-to-trainer correction, not on the KL term
    kl = None
    if ref_logp is not None:
        kl = kl_estimate(logp, ref_logp, algo.kl_estimator)  # (N, T)
        per_token = per_token + algo.beta * kl  # (N, T)
    loss = aggregate_loss(per_token, mask, algo.loss_agg, max_len=max_len)  # ()
    return loss, policy_loss_stats(logp, old_logp, ref_logp, advantages, mask, algo)


@torch.no_grad()
def policy_loss_stats(logp: torch.Tensor, old_logp: torch.Tensor, ref_logp: torch.Tensor | None,
                      advantages: torch.Tensor, mask: torch.Tensor, algo) -> dict[str, torch.Tensor]:
    """The statistics of `policy_loss` (detached 0-d tensors): `kl` (mean of the KL estimate over
    valid tokens; 0 without a reference) and `clip_frac` (share of clipped tokens, or of
    sequences for the sequence ratio)."""
    eps_high = upper_clip(algo.clip_eps, algo.clip_eps_high)
    logp = logp.detach()  # (N, T)
    kl = masked_mean(kl_estimate(logp, ref_logp, algo.kl_estimator), mask) if ref_logp is not None else torch.zeros(())
    clip = SURROGATES.lookup(algo.importance).clip_fraction(logp, old_logp, advantages, mask, algo.clip_eps, eps_high)
    return {"kl": kl, "clip_frac": clip}


def micro_batch_scale(mode: str, rows: int, total_rows: int, tokens: float, total_tokens: float) -> float:
    """The factor f with sum over micro-batches of f x aggregate_loss(micro-batch) =
    aggregate_loss(whole batch): rows / total rows for the row-normalised aggregations
    (sequence, constant), valid tokens / total valid tokens (each clamped at 1, as
    `aggregate_loss` clamps) for `token`. 1.0 exactly for one micro-batch holding the batch."""
    normaliser = AGGREGATIONS.lookup(mode).normaliser
    if normaliser == "rows":
        return rows / total_rows
    if normaliser == "tokens":
        return max(tokens, 1.0) / max(total_tokens, 1.0)
    raise ValueError(f"aggregation {mode!r} has an unknown normaliser {normaliser!r}")
