"""Pure tensor function of rejection-sampling fine-tuning (RFT): the supervised loss on the
sampled completions a verifier accepted.

Paper: Shao et al., DeepSeekMath (arXiv 2402.03300), section 5.2: RFT samples several outputs
per question from the supervised model and fine-tunes on those with a correct answer; online
RFT does the same on samples of the current policy. In its unified view the gradient
coefficient of a completion is 1 when its answer is correct and 0 otherwise (no baseline, no
ratio, no KL).

Departure: the loss is the token mean over the accepted completions (the same loss as the
supervised control and the base-model stage, so that RFT and the control differ only in where
the data comes from), not the paper's per-completion 1/|o| mean.
"""
from __future__ import annotations

import torch


def rft_loss(logp: torch.Tensor, mask: torch.Tensor, accepted: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean negative log-likelihood over the accepted completions' tokens, how many tokens).

    logp (N, T): log-probs of the completion tokens; mask (N, T): 1 on completion tokens (up to
    and including EOS); accepted (N,): 1 for a completion to imitate. With no accepted token the
    loss is 0 (and carries no gradient through the model). The count lets a caller weight
    micro-batches: sum over micro-batches of loss_i x tokens_i / total tokens = the whole loss."""
    weight = mask * accepted.to(mask.dtype).unsqueeze(1)  # (N, T)
    tokens = weight.sum()  # ()
    loss = -(logp * weight).sum() / tokens.clamp(min=1.0)  # ()
    return loss, tokens
