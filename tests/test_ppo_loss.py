"""`ppo_loss` (grpo_research/algorithms/ppo.py) against hand-computed values."""
from __future__ import annotations

import math

import pytest
import torch

from grpo_research.algorithms.ppo import ppo_loss

# one completion of 2 tokens: ratios 1.5 and 0.5, advantages 1, clip 0.2
OLD = torch.zeros(1, 2)
ADV = torch.ones(1, 2)
VALUES, OLD_VALUES, RETURNS = torch.tensor([[0.5, 1.0]]), torch.zeros(1, 2), torch.ones(1, 2)
ENTROPY = torch.tensor([[1.0, 2.0]])
MASK = torch.ones(1, 2)


def _logp():
    return torch.tensor([[math.log(1.5), math.log(0.5)]], requires_grad=True)


def test_every_term_hand_computed():
    # pg: token 1 min(1.5, 1.2) = 1.2, token 2 min(0.5, 0.8) = 0.5 -> -(1.2 + 0.5) / 2 = -0.85
    # value (clip 0.2 around old 0): 0.5 max((0.5-1)^2, (0.2-1)^2) = 0.32 and 0.5 max(0, 0.64) = 0.32 -> 0.32
    # entropy bonus: 0.1 x mean(1, 2) = 0.15; KL (k1 = logp - ref, ref 0): 0.1 x ln(0.75) / 2
    loss, stats = ppo_loss(_logp(), OLD, ADV, VALUES, OLD_VALUES, RETURNS, MASK, clip_eps=0.2, value_clip=0.2,
                           vf_coef=0.5, entropy=ENTROPY, ent_coef=0.1, ref_logp=torch.zeros(1, 2), beta=0.1,
                           kl_estimator="k1", loss_agg="token")
    assert stats["pg_loss"].item() == pytest.approx(-0.85)
    assert stats["value_loss"].item() == pytest.approx(0.32)
    assert loss.item() == pytest.approx(-0.85 + 0.5 * 0.32 - 0.15 + 0.1 * math.log(0.75) / 2)


def test_clipped_tokens_carry_no_policy_gradient():
    # d loss / d logp: token 1 is clipped (ratio 1.5 > 1.2, A > 0): 0; token 2: -ratio x A / 2 = -0.25
    logp = _logp()
    loss, _ = ppo_loss(logp, OLD, ADV, VALUES, OLD_VALUES, RETURNS, MASK, clip_eps=0.2, vf_coef=0.0)
    loss.backward()
    assert logp.grad.tolist()[0] == pytest.approx([0.0, -0.25])


def test_clip_high_and_the_mask():
    # clip_eps_high 0.6: token 1's ratio 1.5 is inside [0.8, 1.6]: -1.5; token 2 masked out
    mask = torch.tensor([[1.0, 0.0]])
    loss, stats = ppo_loss(_logp(), OLD, ADV, VALUES, OLD_VALUES, RETURNS, mask, clip_eps=0.2, clip_eps_high=0.6,
                           vf_coef=0.0)
    assert stats["pg_loss"].item() == pytest.approx(-1.5) and loss.item() == pytest.approx(-1.5)
    # no value clip: 0.5 (0.5 - 1)^2 = 0.125 on the one valid token
    assert stats["value_loss"].item() == pytest.approx(0.125)


def test_critic_only_is_the_value_term_alone():
    loss, stats = ppo_loss(None, OLD, ADV, VALUES, OLD_VALUES, RETURNS, MASK, clip_eps=0.2, value_clip=0.2,
                           vf_coef=0.5, ent_coef=0.1, entropy=ENTROPY, ref_logp=torch.zeros(1, 2), beta=0.1)
    assert loss.item() == pytest.approx(0.16) and "pg_loss" not in stats


def test_sequence_aggregation_weights_rows_equally():
    # row 1 as above (pg -0.85 over 2 tokens), row 2 one valid token at ratio 1 with A = -1 (loss +1):
    # sequence: mean(-0.85, 1.0) = 0.075; token: (-1.7 + 1.0) / 3
    logp = torch.tensor([[math.log(1.5), math.log(0.5)], [0.0, 0.0]])
    adv = torch.tensor([[1.0, 1.0], [-1.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    z = torch.zeros(2, 2)
    seq, _ = ppo_loss(logp, z, adv, z, z, z, mask, clip_eps=0.2, vf_coef=0.0, loss_agg="sequence")
    tok, _ = ppo_loss(logp, z, adv, z, z, z, mask, clip_eps=0.2, vf_coef=0.0, loss_agg="token")
    assert seq.item() == pytest.approx(0.075) and tok.item() == pytest.approx(-0.7 / 3)


def test_entropy_bonus_needs_the_entropy():
    with pytest.raises(ValueError, match="needs the token entropy"):
        ppo_loss(_logp(), OLD, ADV, VALUES, OLD_VALUES, RETURNS, MASK, clip_eps=0.2, ent_coef=0.1)
