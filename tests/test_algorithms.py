"""Hand-computed checks of the pure GRPO tensor functions."""
import math

import pytest
import torch

from grpo_research.algorithms import (
    aggregate_loss,
    clip_fraction,
    clipped_surrogate,
    group_relative_advantages,
    kl_estimate,
)

S2 = math.sqrt(2.0)


def test_worked_example_of_the_method():
    # rewards [2, 1, 3, 2]: mean 2, population std sqrt(0.5) -> [0, -sqrt2, sqrt2, 0]
    adv = group_relative_advantages(torch.tensor([2.0, 1.0, 3.0, 2.0]), 4, eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([0.0, -S2, S2, 0.0]))


def test_default_eps_is_tiny_and_unbiased_std_uses_g_minus_1():
    adv = group_relative_advantages(torch.tensor([2.0, 1.0, 3.0, 2.0]), 4)
    torch.testing.assert_close(adv, torch.tensor([0.0, -S2, S2, 0.0]), atol=1e-5, rtol=1e-5)
    # unbiased std of [2,1,3,2] = sqrt(2/3): advantages +-1/sqrt(2/3) = +-sqrt(1.5)
    adv_u = group_relative_advantages(torch.tensor([2.0, 1.0, 3.0, 2.0]), 4, std="unbiased", eps=0.0)
    torch.testing.assert_close(adv_u, torch.tensor([0.0, -math.sqrt(1.5), math.sqrt(1.5), 0.0]))


def test_constant_group_gives_exact_zeros_never_nan():
    for eps in (0.0, 1e-6):
        adv = group_relative_advantages(torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 0.0]), 3, eps=eps)
        assert torch.isfinite(adv).all()
        assert adv[:3].tolist() == [0.0, 0.0, 0.0]
        # second group [0, 1, 0]: mean 1/3, pop std sqrt(2)/3
        torch.testing.assert_close(adv[3:], torch.tensor([-1 / S2, S2, -1 / S2]), atol=1e-5, rtol=1e-5)


def test_groups_are_normalised_independently():
    adv = group_relative_advantages(torch.tensor([0.0, 2.0, 10.0, 30.0]), 2, eps=0.0)
    assert adv.tolist() == [-1.0, 1.0, -1.0, 1.0]


def test_batch_scale_and_none_scale():
    r = torch.tensor([0.0, 2.0, 10.0, 30.0])
    # centred: [-1, 1, -10, 10]; batch population std of r: mean 10.5, var = (110.25+72.25+0.25+380.25)/4
    batch_std = math.sqrt((10.5**2 + 8.5**2 + 0.5**2 + 19.5**2) / 4)
    adv_b = group_relative_advantages(r, 2, scale="batch", eps=0.0)
    torch.testing.assert_close(adv_b, torch.tensor([-1.0, 1.0, -10.0, 10.0]) / batch_std)
    adv_n = group_relative_advantages(r, 2, scale="none")
    assert adv_n.tolist() == [-1.0, 1.0, -10.0, 10.0]


def test_bad_shapes_and_options_are_rejected():
    with pytest.raises(ValueError):
        group_relative_advantages(torch.zeros(5), 2)
    with pytest.raises(ValueError):
        group_relative_advantages(torch.zeros(4), 2, scale="groups")
    with pytest.raises(ValueError):
        kl_estimate(torch.zeros(1), torch.zeros(1), "k4")


def test_kl_estimators_on_known_values():
    logp = torch.tensor([[math.log(0.5), math.log(0.25)]])
    ref = torch.tensor([[math.log(0.25), math.log(0.5)]])
    # k1 = logp - ref = [ln2, -ln2]
    torch.testing.assert_close(kl_estimate(logp, ref, "k1"), torch.tensor([[math.log(2), -math.log(2)]]))
    # k2 = 0.5 ln2^2 for both
    torch.testing.assert_close(kl_estimate(logp, ref, "k2"), torch.full((1, 2), 0.5 * math.log(2) ** 2))
    # k3 = ratio - ln(ratio) - 1 with ratio = ref/p: [0.5, 2] -> [0.5 + ln2 - 1, 2 - ln2 - 1]
    k3 = kl_estimate(logp, ref, "k3")
    torch.testing.assert_close(k3, torch.tensor([[math.log(2) - 0.5, 1 - math.log(2)]]))
    assert (k3 >= 0).all()
    assert kl_estimate(logp, logp, "k3").abs().max() == 0


def test_clipped_surrogate_active_and_inactive():
    eps_low, eps_high = 0.2, 0.3
    old = torch.zeros(4, 1)
    ratios = torch.tensor([[1.5], [0.5], [1.1], [0.5]])
    logp = torch.log(ratios)
    adv = torch.tensor([1.0, -1.0, 1.0, 1.0])
    loss = clipped_surrogate(logp, old, adv, eps_low, eps_high)
    # A>0, r=1.5 > 1.3: clipped -> -1.3 ; A<0, r=0.5 < 0.8: clipped -> -(0.8 * -1) = 0.8
    # A>0, r=1.1 inside: -1.1 ; A>0, r=0.5 below range: min(0.5, 0.8) = 0.5 -> -0.5 (unclipped active)
    torch.testing.assert_close(loss, torch.tensor([[-1.3], [0.8], [-1.1], [-0.5]]))
    mask = torch.ones(4, 1)
    # clipped term active (zero gradient) only in the first two rows
    assert clip_fraction(logp, old, adv, mask, eps_low, eps_high).item() == pytest.approx(0.5)
    # gradient flows only where the unclipped term is active
    lp = logp.clone().requires_grad_(True)
    clipped_surrogate(lp, old, adv, eps_low, eps_high).sum().backward()
    assert lp.grad[0].item() == 0 and lp.grad[1].item() == 0
    torch.testing.assert_close(lp.grad[2:], torch.tensor([[-1.1], [-0.5]]))


def test_clipped_surrogate_negative_advantage_large_ratio_not_clipped():
    # A<0 and r=2 > 1+eps: the unclipped term -r*A = 2 is the pessimistic one (kept, gradient flows)
    loss = clipped_surrogate(torch.log(torch.tensor([[2.0]])), torch.zeros(1, 1), torch.tensor([-1.0]), 0.2, 0.2)
    torch.testing.assert_close(loss, torch.tensor([[2.0]]))


def test_loss_aggregations():
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    # sequence: mean(2, 4) = 3 ; token: 10 / 4 = 2.5 ; constant: 10 / (2 * 3) ; constant with max_len 5: 10 / 10
    assert aggregate_loss(per_token, mask, "sequence").item() == pytest.approx(3.0)
    assert aggregate_loss(per_token, mask, "token").item() == pytest.approx(2.5)
    assert aggregate_loss(per_token, mask, "constant").item() == pytest.approx(10 / 6)
    assert aggregate_loss(per_token, mask, "constant", max_len=5).item() == pytest.approx(1.0)
    with pytest.raises(ValueError):
        aggregate_loss(per_token, mask, "mean")


def test_masked_tokens_do_not_contribute():
    per_token = torch.tensor([[1.0, 1000.0]])
    assert aggregate_loss(per_token, torch.tensor([[1, 0]]), "token").item() == 1.0
