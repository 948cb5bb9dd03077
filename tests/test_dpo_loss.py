"""grpo_research.algorithms.dpo_loss (arXiv 2305.18290 eq. 7; IPO arXiv 2310.12036) on pairs whose
log-ratios are computed by hand."""
import math

import pytest
import torch

from grpo_research.algorithms import DPO_LOSSES, dpo_implicit_rewards, dpo_loss

# two pairs: policy chosen/rejected, reference chosen/rejected sequence log-probs
PC, PR, RC, RR = (torch.tensor(v) for v in ([-1.0, -4.0], [-3.0, -2.0], [-2.0, -3.0], [-2.0, -3.0]))
# h = (pc - rc) - (pr - rr): pair 0: (1) - (-1) = 2; pair 1: (-1) - (1) = -2


def test_the_papers_loss_by_hand():
    out = dpo_loss(PC, PR, RC, RR, 0.5)  # positional: the four log-probs, then beta
    # -log sigmoid(0.5 * 2) = log(1 + e^-1); -log sigmoid(-1) = log(1 + e)
    assert out.shape == (2,)
    assert out.tolist() == pytest.approx([math.log(1 + math.exp(-1)), math.log(1 + math.e)], rel=1e-6)


def test_label_smoothing_and_ipo_by_hand():
    eps = 0.1
    out = dpo_loss(PC, PR, RC, RR, 0.5, label_smoothing=eps)
    a, b = math.log(1 + math.exp(-1)), math.log(1 + math.e)  # -log sig(1), -log sig(-1)
    assert out.tolist() == pytest.approx([(1 - eps) * a + eps * b, (1 - eps) * b + eps * a], rel=1e-6)
    ipo = dpo_loss(PC, PR, RC, RR, 0.5, loss_type="ipo")  # (h - 1/(2 beta))^2 = (h - 1)^2
    assert ipo.tolist() == pytest.approx([1.0, 9.0])
    assert set(DPO_LOSSES) == {"sigmoid", "ipo"}


def test_the_gradient_raises_the_chosen_and_lowers_the_rejected():
    pc, pr = PC.clone().requires_grad_(), PR.clone().requires_grad_()
    dpo_loss(pc, pr, RC, RR, 0.5).sum().backward()
    # d/dpc of -log sig(beta h) = -beta sig(-beta h): pair 0: -0.5 sig(-1)
    assert pc.grad[0].item() == pytest.approx(-0.5 / (1 + math.e), rel=1e-6)
    assert (pc.grad < 0).all() and (pr.grad > 0).all() and torch.allclose(pc.grad, -pr.grad)


def test_implicit_rewards_and_bad_input():
    assert dpo_implicit_rewards(PC, RC, 0.5).tolist() == [0.5, -0.5]
    with pytest.raises(ValueError, match="1-D tensors of the same length"):
        dpo_loss(PC[:1], PR, RC, RR, 0.5)
    with pytest.raises(ValueError, match="beta must be > 0"):
        dpo_loss(PC, PR, RC, RR, 0.0)
    with pytest.raises(ValueError, match="label_smoothing must be in"):
        dpo_loss(PC, PR, RC, RR, 0.5, label_smoothing=0.5)
    with pytest.raises(ValueError, match="does not apply"):
        dpo_loss(PC, PR, RC, RR, 0.5, label_smoothing=0.1, loss_type="ipo")
    with pytest.raises(ValueError, match="loss_type must be one of"):
        dpo_loss(PC, PR, RC, RR, 0.5, loss_type="hinge")


def test_preference_pairs_by_hand():
    from grpo_research.algorithms import preference_pairs

    # G = 4: group 0 has correct rows 0, 2 and incorrect 1, 3 (row 3 masked); group 1 all wrong;
    # group 2: correct 8, 9, 10, incorrect 11
    correct = torch.tensor([1, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 0], dtype=torch.bool)
    valid = torch.tensor([1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1], dtype=torch.bool)
    chosen, rejected = preference_pairs(correct, valid, 4)
    assert chosen.tolist() == [0, 8] and rejected.tolist() == [1, 11]
    none_c, none_r = preference_pairs(torch.zeros(4, dtype=torch.bool), torch.ones(4, dtype=torch.bool), 4)
    assert none_c.tolist() == [] and none_r.tolist() == []
    with pytest.raises(ValueError, match="multiple of group_size=4"):
        preference_pairs(torch.zeros(6, dtype=torch.bool), torch.ones(6, dtype=torch.bool), 4)
