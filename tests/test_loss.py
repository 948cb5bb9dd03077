"""`policy_loss` and `loss_mask` against hand-computed values: surrogate, clip-higher,
beta x KL, the three aggregations and the overlong mask."""
import math
from types import SimpleNamespace

import pytest
import torch

from grpo_research.algorithms import AGGREGATIONS, loss_mask, policy_loss
from grpo_research.config import load_config

LN = math.log
K3 = 0.5 - LN(0.5) - 1  # k3 at log(ref/pi) = ln 0.5: e^x - x - 1 = 0.19315


def algo(**kw):
    base = dict(importance="token", clip_eps=0.2, clip_eps_high=None, beta=0.1, kl_estimator="k3", loss_agg="token")
    return SimpleNamespace(**{**base, **kw})


def example():
    logp = torch.tensor([[LN(0.5), LN(0.25)], [LN(0.5), 0.0]], requires_grad=True)  # (2, 2)
    ref = torch.tensor([[LN(0.25), LN(0.25)], [LN(0.5), LN(0.5)]])  # log(ref/pi): row 0 [ln .5, 0], row 1 [0, ...]
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])  # row 1's second token is not in the loss
    return logp, ref, adv, mask


@pytest.mark.parametrize("agg, expected", [
    # per-token loss at ratio 1: -A + beta k3 -> [[-1 + 0.1 K3, -1], [1, (masked)]]
    ("sequence", ((-1 + 0.1 * K3 - 1) / 2 + 1) / 2),
    ("token", (-1 + 0.1 * K3 - 1 + 1) / 3),
    ("constant", (-1 + 0.1 * K3 - 1 + 1) / (2 * 4)),  # max_len 4
])
def test_policy_loss_hand_computed(agg, expected):
    logp, ref, adv, mask = example()
    loss, stats = policy_loss(logp, logp.detach(), ref, adv, mask, algo(loss_agg=agg), max_len=4)
    assert loss.item() == pytest.approx(expected, abs=1e-6)
    assert stats["kl"].item() == pytest.approx(K3 / 3, abs=1e-6)  # mean over the 3 valid tokens
    assert stats["clip_frac"].item() == 0.0  # ratio 1: nothing clipped


def test_beta_enters_the_loss():
    logp, ref, adv, mask = example()
    with_kl, _ = policy_loss(logp, logp.detach(), ref, adv, mask, algo(beta=0.1), max_len=4)
    without, _ = policy_loss(logp, logp.detach(), ref, adv, mask, algo(beta=0.0), max_len=4)
    no_ref, stats = policy_loss(logp, logp.detach(), None, adv, mask, algo(beta=0.1), max_len=4)
    assert (with_kl - without).item() == pytest.approx(0.1 * K3 / 3, abs=1e-7)
    assert no_ref.item() == without.item() and stats["kl"].item() == 0.0


def test_gradient_of_the_token_surrogate():
    logp, _, adv, mask = example()
    loss, _ = policy_loss(logp, logp.detach(), None, adv, mask, algo(beta=0.0), max_len=4)
    loss.backward()
    # d/dlogp of -A r / 3 at r = 1 is -A / 3 on valid tokens, 0 on the masked one
    torch.testing.assert_close(logp.grad, torch.tensor([[-1 / 3, -1 / 3], [1 / 3, 0.0]]))


def test_clip_higher_moves_only_the_upper_bound():
    logp = torch.tensor([[LN(1.25)], [LN(0.75)]])  # ratios 1.25 (A > 0) and 0.75 (A < 0) against old = 0
    old = torch.zeros(2, 1)
    adv = torch.tensor([1.0, -1.0])
    mask = torch.ones(2, 1)
    sym, s_stats = policy_loss(logp, old, None, adv, mask, algo(clip_eps=0.2, loss_agg="token"), max_len=1)
    high, h_stats = policy_loss(logp, old, None, adv, mask, algo(clip_eps=0.2, clip_eps_high=0.28, loss_agg="token"),
                                max_len=1)
    # symmetric: row 0 clipped at 1.2 -> -1.2; row 1 clipped at 0.8 -> -min(-0.75, -0.8) = 0.8
    assert sym.item() == pytest.approx((-1.2 + 0.8) / 2, abs=1e-6) and s_stats["clip_frac"].item() == 1.0
    # clip-higher 0.28: row 0 unclipped (1.25 < 1.28) -> -1.25; row 1 still clipped
    assert high.item() == pytest.approx((-1.25 + 0.8) / 2, abs=1e-6) and h_stats["clip_frac"].item() == 0.5


def test_loss_mask_drops_masked_and_with_the_overlong_filter_truncated_completions():
    cm = torch.tensor([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    keep = torch.tensor([1.0, 1.0, 0.0])  # row 2 masked by a reward term (sandbox error)
    finished = torch.tensor([1.0, 0.0, 1.0])  # row 1 truncated
    assert loss_mask(cm, keep, finished, False).tolist() == [[1, 1, 0], [1, 1, 1], [0, 0, 0]]
    assert loss_mask(cm, keep, finished, True).tolist() == [[1, 1, 0], [0, 0, 0], [0, 0, 0]]


def test_config_choices_come_from_the_registries():
    assert set(AGGREGATIONS) == {"sequence", "token", "constant"}
    from grpo_research.algorithms import ADVANTAGES, register_advantage

    @register_advantage("_test_only_zero")
    def zero(rewards, a):
        return torch.zeros_like(rewards)

    try:
        assert load_config(None, ["algo.advantage=_test_only_zero"]).algo.advantage == "_test_only_zero"
    finally:
        del ADVANTAGES["_test_only_zero"]


def test_upper_clip_defaults_to_the_lower_one():
    from grpo_research.algorithms import upper_clip

    assert upper_clip(0.2, None) == 0.2  # symmetric (PPO, GRPO)
    assert upper_clip(0.2, 0.28) == 0.28  # DAPO's clip-higher
