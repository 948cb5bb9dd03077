"""Pure tensor functions of DPO: the per-pair preference loss on sequence log-probs, its
registered variants (`DPO_LOSSES`), and the implicit rewards.

Paper: Rafailov et al., "Direct Preference Optimization: Your Language Model is Secretly a
Reward Model", arXiv 2305.18290: with h = (log pi(y_c) - log ref(y_c)) - (log pi(y_r) -
log ref(y_r)) for a chosen y_c and a rejected y_r of one prompt, the loss is
-log sigmoid(beta * h) (its eq. 7), and beta * (log pi(y) - log ref(y)) is the implicit reward.

Variants, each a keyword option rather than a hidden default:
- `label_smoothing=eps` (the "conservative DPO" of a 2023 note by Mitchell, in the form TRL
  uses): (1 - eps) * -log sigmoid(beta h) + eps * -log sigmoid(-beta h), for labels that are
  wrong with probability eps; eps = 0 is the paper's loss.
- `loss_type="ipo"`: Azar et al., "A General Theoretical Paradigm to Understand Learning from
  Human Preferences", arXiv 2310.12036: (h - 1 / (2 beta))^2, with beta playing the role of
  its tau. Label smoothing does not apply to it (refused).

Departures: the log-probs are sums over each completion's tokens (the paper's sequence
log-likelihood); no length normalisation (IPO's paper leaves it open; TRL's IPO averages over
tokens: pass per-token means yourself for that).
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from grpo_research.registry import Registry

# (h = the chosen-minus-rejected log-ratio difference (P,), beta, label_smoothing) -> per-pair loss (P,)
DPO_LOSSES: Registry[Callable[[torch.Tensor, float, float], torch.Tensor]] = Registry("dpo loss")


@DPO_LOSSES.register("sigmoid")
def _sigmoid(h: torch.Tensor, beta: float, label_smoothing: float) -> torch.Tensor:
    return -(1 - label_smoothing) * F.logsigmoid(beta * h) - label_smoothing * F.logsigmoid(-beta * h)


@DPO_LOSSES.register("ipo")
def _ipo(h: torch.Tensor, beta: float, label_smoothing: float) -> torch.Tensor:
    if label_smoothing:
        raise ValueError("label_smoothing does not apply to loss_type='ipo'")
    return (h - 1 / (2 * beta)) ** 2


def dpo_loss(
    policy_chosen_logp: torch.Tensor,
    policy_rejected_logp: torch.Tensor,
    ref_chosen_logp: torch.Tensor,
    ref_rejected_logp: torch.Tensor,
    beta: float,
    *,
    label_smoothing: float = 0.0,
    loss_type: str = "sigmoid",
) -> torch.Tensor:
    """Per-pair DPO losses (P,) from sequence log-probs (each 1-D, one entry per pair): with no
    option, -log sigmoid(beta * ((pi_c - ref_c) - (pi_r - ref_r))); see the module docstring
    for `label_smoothing` and `loss_type` ("sigmoid", "ipo")."""
    tensors = (policy_chosen_logp, policy_rejected_logp, ref_chosen_logp, ref_rejected_logp)
    if any(t.dim() != 1 for t in tensors) or len({t.shape[0] for t in tensors}) != 1:
        raise ValueError("dpo_loss takes four 1-D tensors of the same length (one sequence log-prob per pair), got "
                         f"shapes {[tuple(t.shape) for t in tensors]}")
    if not beta > 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    if not 0 <= label_smoothing < 0.5:
        raise ValueError(f"label_smoothing must be in [0, 0.5), got {label_smoothing}")
    if loss_type not in DPO_LOSSES:
        raise ValueError(f"loss_type must be one of {DPO_LOSSES.choices()}, got {loss_type!r}")
    h = (policy_chosen_logp - ref_chosen_logp) - (policy_rejected_logp - ref_rejected_logp)  # (P,)
    return DPO_LOSSES[loss_type](h, beta, label_smoothing)  # (P,)


def dpo_implicit_rewards(policy_logp: torch.Tensor, ref_logp: torch.Tensor, beta: float) -> torch.Tensor:
    """beta * (log pi(y) - log ref(y)) per sequence (the paper's implicit reward)."""
    return beta * (policy_logp - ref_logp)


def preference_pairs(correct: torch.Tensor, valid: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Preference pairs from verified samples: (chosen rows (P,), rejected rows (P,)).

    `correct` (N,) and `valid` (N,) are booleans over a rollout batch laid out in groups of
    `group_size` completions of one prompt (rows g*G .. g*G+G-1). Within each group the valid
    correct rows and the valid incorrect rows are paired in row order: the i-th correct with the
    i-th incorrect, min(#correct, #incorrect) disjoint pairs per group (the samples are i.i.d.,
    so row order is already random). A group whose valid samples are all right or all wrong
    gives no pair. Pairs are listed group by group."""
    if correct.shape != valid.shape or correct.dim() != 1 or correct.shape[0] % group_size:
        raise ValueError(f"correct and valid must be 1-D of one length, a multiple of group_size={group_size}; "
                         f"got {tuple(correct.shape)} and {tuple(valid.shape)}")
    chosen, rejected = [], []
    for g in range(correct.shape[0] // group_size):
        rows = range(g * group_size, (g + 1) * group_size)
        good = [i for i in rows if valid[i] and correct[i]]
        bad = [i for i in rows if valid[i] and not correct[i]]
        chosen += good[: len(bad)]
        rejected += bad[: len(good)]
    return torch.tensor(chosen, dtype=torch.long), torch.tensor(rejected, dtype=torch.long)
