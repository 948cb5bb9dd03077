"""grpo_research.algorithms.rft_loss (DeepSeekMath arXiv 2402.03300 section 5.2: the supervised
loss on accepted samples) on log-probs whose token mean is computed by hand."""
import pytest
import torch

from grpo_research.algorithms import rft_loss

LOGP = torch.tensor([[-1.0, -2.0, -3.0], [-0.5, -0.5, 0.0], [-4.0, -4.0, -4.0]])
MASK = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])


def test_token_mean_over_the_accepted_completions_by_hand():
    loss, tokens = rft_loss(LOGP, MASK, torch.tensor([1.0, 1.0, 0.0]))
    # accepted tokens: 1, 2 (row 0, its third is padding) and 0.5, 0.5, 0 (row 1): 4 / 5
    assert tokens.item() == 5 and loss.item() == pytest.approx(4.0 / 5)


def test_micro_batch_shares_sum_to_the_whole_loss_and_nothing_accepted_is_zero():
    acc = torch.tensor([1.0, 1.0, 1.0])
    whole, n = rft_loss(LOGP, MASK, acc)
    parts = [rft_loss(LOGP[s], MASK[s], acc[s]) for s in (slice(0, 1), slice(1, 3))]
    assert sum(l * t for l, t in parts) / n == pytest.approx(whole.item())
    logp = LOGP.clone().requires_grad_()
    zero, none = rft_loss(logp, MASK, torch.zeros(3))
    zero.backward()
    assert none.item() == 0 and zero.item() == 0 and (logp.grad == 0).all()


def test_the_gradient_raises_the_accepted_log_probs_only():
    logp = LOGP.clone().requires_grad_()
    rft_loss(logp, MASK, torch.tensor([0.0, 1.0, 0.0]))[0].backward()
    assert logp.grad[1].tolist() == pytest.approx([-1 / 3] * 3) and (logp.grad[[0, 2]] == 0).all()
