"""Pure tensor functions of PPO with a learned critic: KL-shaped per-token rewards,
generalised advantage estimation, masked whitening, the clipped value loss and explained
variance. The clipped policy term is `clipped_surrogate` (algorithms.core) with per-token
advantages.

`ppo_loss` assembles one (micro-)batch's loss from them: the clipped surrogate, the value
loss, the entropy bonus and (optionally) a KL term in the loss, each aggregated as the
aggregation says (`algorithms.loss.aggregate_loss`).

Papers: Schulman et al., "Proximal Policy Optimization Algorithms", arXiv 1707.06347 (clipped
surrogate, eq. 7; value loss and entropy bonus, eq. 9); Schulman et al., "High-Dimensional
Continuous Control Using Generalized Advantage Estimation", arXiv 1506.02438 (GAE, eq. 16);
Ouyang et al., "Training language models to follow instructions with human feedback"
(InstructGPT), arXiv 2203.02155, eq. 2 (per-token KL penalty in the reward); Shao et al.,
DeepSeekMath, arXiv 2402.03300, section 4.1 eq. 2 (r_t = r_phi(q, o_<=t) - beta log
pi/pi_ref, the score on the last token).

Conventions: every (B, T) tensor is over completion tokens; `mask` is 1 on a row's valid
completion tokens, a prefix of the row (all zeros for a completion removed from the loss).
values[b, t] estimates the return from the state before completion token t is emitted; the
state after a row's last valid token is terminal (value 0, no bootstrapping).

Departures from the papers, each a named option or stated here:
- Truncated completions (no EOS by `max_new_tokens`) are treated as terminal, as the episode
  really ends there; no bootstrapping from the critic.
- `whiten` uses the population std (1/n) over the batch's valid tokens plus `eps`
  (OpenAI baselines' whitening uses the same; TRL uses the unbiased variance).
- `clipped_value_loss` with `clip=None` is the unclipped 0.5 (V - R)^2 (PPO eq. 9); with a
  clip it is the pessimistic max of clipped and unclipped errors (OpenAI baselines ppo2),
  which the PPO paper does not describe.
- `explained_variance` is NaN when the returns have zero variance (undefined), as in cleanrl.
"""
from __future__ import annotations

import torch

from grpo_research.algorithms.core import clipped_surrogate, kl_estimate, upper_clip
from grpo_research.algorithms.loss import aggregate_loss


def kl_penalized_rewards(
    scores: torch.Tensor, logp: torch.Tensor, ref_logp: torch.Tensor | None, mask: torch.Tensor, beta: float,
    estimator: str = "k1",
) -> torch.Tensor:
    """Per-token rewards r_t = -beta * KL_t (+ the sequence score on the last valid token).

    scores: (B,) verifier score per completion; logp, ref_logp: (B, T) log-probs of the sampled
    tokens under the rollout policy and the reference (ref_logp None or beta 0: no penalty);
    mask: (B, T) prefix mask. Returns (B, T), zero on invalid tokens; a row with an all-zero
    mask gets no score.
    """
    mask = mask.to(logp.dtype)  # (B, T)
    rewards = torch.zeros_like(logp)  # (B, T)
    if ref_logp is not None and beta != 0:
        rewards = rewards - beta * kl_estimate(logp, ref_logp, estimator)  # (B, T)
    lengths = mask.sum(dim=1).long()  # (B,)
    last = (lengths - 1).clamp(min=0)  # (B,): index of each row's last valid token
    has_tokens = (lengths > 0).to(logp.dtype)  # (B,)
    bonus = torch.zeros_like(logp)  # (B, T)
    bonus.scatter_(1, last.unsqueeze(1), (scores.to(logp.dtype) * has_tokens).unsqueeze(1))  # (B, T)
    return (rewards + bonus) * mask  # (B, T)


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0, lam: float = 0.95
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over completion tokens.

    delta_t = r_t + gamma V_{t+1} - V_t, with V_{t+1} = 0 after a row's last valid token;
    A_t = delta_t + gamma lam A_{t+1}; returns R_t = A_t + V_t. rewards, values, mask: (B, T),
    mask 1 on a prefix of each row. Returns (advantages, returns), both (B, T) and 0 where
    mask is 0. Computed without gradient (values are treated as constants).
    """
    if not (rewards.shape == values.shape == mask.shape) or rewards.dim() != 2:
        raise ValueError(f"rewards, values and mask must share one (B, T) shape, got "
                         f"{tuple(rewards.shape)}, {tuple(values.shape)}, {tuple(mask.shape)}")
    with torch.no_grad():
        mask = mask.to(values.dtype)  # (B, T)
        r = rewards.to(values.dtype) * mask  # (B, T)
        v = values * mask  # (B, T)
        B, T = v.shape
        next_mask = torch.cat([mask[:, 1:], mask.new_zeros(B, 1)], dim=1)  # (B, T): is t+1 valid
        next_v = torch.cat([v[:, 1:], v.new_zeros(B, 1)], dim=1) * next_mask  # (B, T): V_{t+1}, 0 at the end
        deltas = r + gamma * next_v - v  # (B, T)
        adv = torch.zeros_like(v)  # (B, T)
        running = v.new_zeros(B)  # (B,): A_{t+1}
        for t in reversed(range(T)):
            running = deltas[:, t] + gamma * lam * next_mask[:, t] * running  # (B,)
            adv[:, t] = running
        adv = adv * mask  # (B, T)
        returns = (adv + v) * mask  # (B, T)
    return adv, returns


def masked_mean_std(x: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and population std of x over the entries where mask is 1 (0-d tensors)."""
    mask = mask.to(x.dtype)  # (B, T)
    n = mask.sum().clamp(min=1)  # ()
    mean = (x * mask).sum() / n  # ()
    var = (((x - mean) * mask) ** 2).sum() / n  # ()
    return mean, var.sqrt()


def whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / (std + eps) over the valid entries of the whole batch; 0 where mask is 0."""
    mean, std = masked_mean_std(x, mask)  # (), ()
    return (x - mean) / (std + eps) * mask.to(x.dtype)  # (B, T)


def clipped_value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip: float | None
) -> torch.Tensor:
    """Per-token value loss 0.5 max((V - R)^2, (clip(V, V_old - c, V_old + c) - R)^2).

    values: (B, T) current critic; old_values: (B, T) the critic at rollout time; returns:
    (B, T) GAE returns. `clip` None gives the plain 0.5 (V - R)^2. Returns (B, T), unmasked.
    """
    unclipped = (values - returns) ** 2  # (B, T)
    if clip is None:
        return 0.5 * unclipped  # (B, T)
    v_clipped = old_values + torch.clamp(values - old_values, -clip, clip)  # (B, T)
    clipped = (v_clipped - returns) ** 2  # (B, T)
    return 0.5 * torch.maximum(unclipped, clipped)  # (B, T)


def value_clip_fraction(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
                        clip: float | None) -> torch.Tensor:
    """Share of valid tokens where the clipped value error is the larger one (gradient zeroed)."""
    if clip is None:
        return values.new_zeros(())
    v_clipped = old_values + torch.clamp(values - old_values, -clip, clip)  # (B, T)
    active = ((v_clipped - returns) ** 2 > (values - returns) ** 2).to(values.dtype)  # (B, T)
    mask = mask.to(values.dtype)  # (B, T)
    return (active * mask).sum() / mask.sum().clamp(min=1)  # ()


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """1 - Var[R - V] / Var[R] over valid tokens (1: perfect critic, 0: no better than a
    constant, < 0: worse); NaN when Var[R] is 0."""
    _, std_r = masked_mean_std(returns, mask)  # ()
    _, std_err = masked_mean_std(returns - values, mask)  # ()
    var_r = std_r**2  # ()
    if var_r.item() == 0.0:
        return torch.tensor(float("nan"))
    return 1.0 - std_err**2 / var_r  # ()


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy (B, T) of the categorical distribution given by logits (B, T, V), in nats,
    differentiable (for the entropy bonus)."""
    logp_all = torch.log_softmax(logits, dim=-1)  # (B, T, V)
    return -(logp_all.exp() * logp_all).sum(dim=-1)  # (B, T)


def ppo_loss(
    logp: torch.Tensor | None, old_logp: torch.Tensor, advantages: torch.Tensor, values: torch.Tensor,
    old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, *, clip_eps: float,
    clip_eps_high: float | None = None, value_clip: float | None = None, vf_coef: float = 1.0,
    entropy: torch.Tensor | None = None, ent_coef: float = 0.0, ref_logp: torch.Tensor | None = None,
    beta: float = 0.0, kl_estimator: str = "k3", loss_agg: str = "token", max_len: int | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(loss (), {"value_loss": (), "pg_loss": ()}) of PPO on one batch of completions:

        loss = pg + vf_coef x value - ent_coef x entropy + beta x KL(pi || pi_ref)

    each term aggregated over `mask` as `loss_agg` says. pg: the clipped surrogate (PPO eq. 7)
    of the per-token `advantages` (already whitened when the caller whitens them), ratio
    exp(logp - old_logp) clipped at [1 - clip_eps, 1 + clip_eps_high] (clip_eps_high None: clip_eps);
    value: `clipped_value_loss(values, old_values, returns, value_clip)`; the entropy bonus when
    ent_coef > 0 (`entropy` (B, T) with gradient); the KL term when `ref_logp` is given and
    beta > 0 (PPO with the KL in the loss; with the KL in the reward pass ref_logp None).

    `logp` None (a critic-only update, critic warm-up): the loss is vf_coef x value alone and
    `pg_loss` is absent. Every (B, T) tensor is over completion tokens."""
    agg = lambda x: aggregate_loss(x, mask, loss_agg, max_len=max_len)  # noqa: E731
    value = agg(clipped_value_loss(values, old_values, returns, value_clip))  # ()
    loss = vf_coef * value  # ()
    stats = {"value_loss": value}
    if logp is None:
        return loss, stats
    eps_high = upper_clip(clip_eps, clip_eps_high)
    pg = agg(clipped_surrogate(logp, old_logp, advantages, clip_eps, eps_high))  # ()
    loss = loss + pg
    if ent_coef > 0:
        if entropy is None:
            raise ValueError("ppo_loss: ent_coef > 0 needs the token entropy")
        loss = loss - ent_coef * agg(entropy)
    if ref_logp is not None and beta > 0:
        loss = loss + beta * agg(kl_estimate(logp, ref_logp, kl_estimator))
    stats["pg_loss"] = pg
    return loss, stats


__all__ = [
    "clipped_value_loss",
    "explained_variance",
    "gae",
    "kl_penalized_rewards",
    "masked_mean_std",
    "ppo_loss",
    "token_entropy",
    "value_clip_fraction",
    "whiten",
]
