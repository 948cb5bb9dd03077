"""Off-policy correction (grpo_research/algorithms/off_policy.py), checked exactly: a policy over
a 3-token vocabulary (0 = EOS) whose completions have at most 2 tokens, so that every one of the
7 completions can be enumerated. The on-policy gradient of E_pi[R] is computed by autograd on
the exact expectation; each estimator's expectation under a sampler mu != pi is the sum over
completions of mu(y) x the gradient of the trainer's loss (`policy_loss`) on y."""
import math
from types import SimpleNamespace

import pytest
import torch

from grpo_research.algorithms import policy_loss
from grpo_research.algorithms.off_policy import IS_CORRECTIONS, is_weights, sampler_ratio

EOS, V = 0, 3
COMPLETIONS = [(0,)] + [(a, b) for a in (1, 2) for b in range(V)]  # every completion: 7
REWARD = {(0,): 0.2, (1, 0): 1.0, (1, 1): -0.5, (1, 2): 0.3, (2, 0): -1.0, (2, 1): 0.8, (2, 2): 0.1}
ALGO = SimpleNamespace(importance="token", clip_eps=0.2, clip_eps_high=None, beta=0.0, kl_estimator="k3",
                       loss_agg="constant")


def _logits(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1 + V, V, generator=g, dtype=torch.float64)  # row 0: first token; row a: after a


def _token_logps(logits, y):
    """log-probs (1, 2) of y's tokens (0-padded) and its mask (1, 2)."""
    lp = torch.log_softmax(logits, dim=-1)
    values = [lp[0, y[0]]] + ([lp[y[0], y[1]]] if len(y) == 2 else [])
    logp = torch.stack(values + [torch.zeros((), dtype=lp.dtype)] * (2 - len(values))).unsqueeze(0)
    mask = torch.tensor([[1.0] * len(y) + [0.0] * (2 - len(y))], dtype=lp.dtype)
    return logp, mask


def _prob(logits, y):
    logp, mask = _token_logps(logits, y)
    return torch.exp((logp * mask).sum())


def _on_policy_gradient(theta):
    theta = theta.clone().requires_grad_(True)
    objective = sum(_prob(theta, y) * REWARD[y] for y in COMPLETIONS)
    (grad,) = torch.autograd.grad(objective, theta)
    return grad


def _expected_estimate(theta, mu, correction, level, cap):
    """E_{y ~ mu}[-max_len x grad of policy_loss(y)] with the correction's weights: the ascent
    direction the trainer follows, in expectation over what the sampler draws."""
    total = torch.zeros_like(theta)
    for y in COMPLETIONS:
        th = theta.clone().requires_grad_(True)
        logp, mask = _token_logps(th, y)
        sampler_logp, _ = _token_logps(mu, y)
        w = None
        if correction is not None:
            w, _ = is_weights(logp.detach(), sampler_logp, mask, correction, level, cap)
        loss, _ = policy_loss(logp, logp.detach(), None, torch.tensor([REWARD[y]], dtype=th.dtype), mask, ALGO,
                              max_len=2, is_weight=w)
        (grad,) = torch.autograd.grad(-2 * loss, th)  # constant aggregation: sum / (1 x max_len 2)
        total += _prob(mu, y).detach() * grad
    return total


@pytest.fixture(scope="module")
def setting():
    theta = _logits(0)
    mu = theta + 0.8 * _logits(1)  # a sampler that differs from the trainer
    assert abs(sum(_prob(mu, y).item() for y in COMPLETIONS) - 1) < 1e-12  # the enumeration is complete
    return theta, mu, _on_policy_gradient(theta)


def _distance(a, b):
    return (a - b).norm().item()


def test_without_correction_the_expectation_is_not_the_on_policy_gradient(setting):
    theta, mu, target = setting
    plain = _expected_estimate(theta, mu, None, "token", math.inf)
    none = _expected_estimate(theta, mu, "none", "token", math.inf)
    assert torch.allclose(plain, none, atol=1e-14)  # `none` is the uncorrected estimator
    assert _distance(plain, target) > 0.05 * target.norm().item()
    # and the same estimator on-policy (mu = pi) is unbiased: the enumeration itself is right
    assert torch.allclose(_expected_estimate(theta, theta, None, "token", math.inf), target, atol=1e-12)


@pytest.mark.parametrize("correction", ["tis", "mis"])
def test_sequence_level_correction_without_truncation_is_exactly_on_policy(setting, correction):
    theta, mu, target = setting
    assert torch.allclose(_expected_estimate(theta, mu, correction, "sequence", math.inf), target, atol=1e-12)


@pytest.mark.parametrize("scale", [0.8, 0.2])
def test_truncated_sequence_correction_is_closer_than_none(setting, scale):
    """With the cap at 2 (some sequences' rho above it at scale 0.8) the truncated weights are
    biased, and still closer to the on-policy gradient than no correction."""
    theta, _, target = setting
    mu = theta + scale * _logits(1)
    plain = _distance(_expected_estimate(theta, mu, None, "sequence", 2.0), target)
    corrected = _distance(_expected_estimate(theta, mu, "tis", "sequence", 2.0), target)
    print(f"tis sequence cap 2, sampler scale {scale}: |E[g] - g*| {corrected:.5f} against {plain:.5f} uncorrected")
    assert corrected < plain


def test_token_level_correction_is_biased_even_without_a_cap(setting):
    """rho_t reweighs token t's own conditional only: its later tokens and its prefix stay the
    sampler's, so the expectation is not the on-policy gradient (on this instance it is farther
    from it than no correction: 0.031 against 0.015; module docstring)."""
    theta, mu, target = setting
    token = _expected_estimate(theta, mu, "tis", "token", math.inf)
    assert _distance(token, target) > 1e-3
    assert not torch.allclose(token, _expected_estimate(theta, mu, "tis", "sequence", math.inf))


def test_weights_by_hand():
    trainer = torch.log(torch.tensor([[0.5, 0.2, 0.9], [0.3, 0.3, 0.3]]))
    sampler = torch.log(torch.tensor([[0.25, 0.4, 0.1], [0.3, 0.1, 0.6]]))
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])  # the third token of row 0 is padding
    rho = sampler_ratio(trainer, sampler, mask, "token")
    assert torch.allclose(rho, torch.tensor([[2.0, 0.5, 1.0], [1.0, 3.0, 0.5]]))
    seq = sampler_ratio(trainer, sampler, mask, "sequence")
    assert torch.allclose(seq, torch.tensor([[1.0, 1.0, 1.0], [1.5, 1.5, 1.5]]))
    w, stats = is_weights(trainer, sampler, mask, "tis", "token", 2.5)
    assert torch.allclose(w, torch.tensor([[2.0, 0.5, 0.0], [1.0, 2.5, 0.5]]))  # padding weighs 0
    assert stats["is/ratio_mean"].item() == pytest.approx(7.0 / 5) and stats["is/ratio_max"].item() == pytest.approx(3)
    assert stats["is/capped_frac"].item() == pytest.approx(1 / 5)
    w, _ = is_weights(trainer, sampler, mask, "mis", "token", 2.5)
    assert torch.allclose(w, torch.tensor([[2.0, 0.5, 0.0], [1.0, 0.0, 0.5]]))  # rho 3 > 2.5: dropped
    w, _ = is_weights(trainer, sampler, mask, "mis", "sequence", 1.2)
    assert torch.allclose(w, torch.tensor([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]]))  # row 1's rho 1.5 > 1.2
    assert sorted(IS_CORRECTIONS) == ["mis", "none", "tis"]


def test_missing_sampler_log_probs_are_refused():
    lp = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="missing"):
        sampler_ratio(lp, torch.tensor([[0.0, float("nan")]]), torch.ones(1, 2), "token")
    # NaN after EOS (where the sampler wrote none) is fine
    assert sampler_ratio(lp, torch.tensor([[0.0, float("nan")]]), torch.tensor([[1.0, 0.0]]), "token").isfinite().all()


# ---------------------------------------------------------------- the trainer's wiring
def _step(tiny_model_dir, tmp_path, name, correction, shift):
    """One GRPO step whose sampler's log-probs are the trainer's minus `shift` (rho = e^shift on
    every sampled token): a stand-in for a backend that records them (vLLM)."""
    import dataclasses

    from grpo_research.config import load_config
    from grpo_research.rollout import SampledRolloutBatch, generate
    from grpo_research.trainers import common
    from grpo_research.trainers.grpo import GRPOTrainer

    cfg = load_config(None, [f"model.name_or_path={tiny_model_dir}", "rollout.prompts_per_step=2", "algo.group_size=4",
                             "rollout.max_new_tokens=8", "train.eval_size=4", "algo.beta=0", "train.threads=1",
                             "reward.weights={random: 1.0}"])  # coin-flip rewards: nonzero advantages
    cfg.algo.is_correction = correction  # the config check allows it only with rollout.backend=vllm
    run = tmp_path / name
    run.mkdir()
    t = GRPOTrainer(cfg, run, tiny_model_dir)

    def sampling_backend(model, tokenizer, problems, n_per_prompt=1, **kw):
        b = generate(model, tokenizer, problems, n_per_prompt, **kw)
        with torch.no_grad():
            lp, _ = common.token_logprobs(model, b.input_ids, b.attention_mask, b.completion_mask.shape[1],
                                          kw["temperature"])
        lp = torch.where(b.completion_mask.bool(), lp - shift, torch.full_like(lp, float("nan")))
        return SampledRolloutBatch(**{f.name: getattr(b, f.name) for f in dataclasses.fields(b)}, sampler_logprobs=lp)

    t.generate = sampling_backend
    return t.train_step()


def test_the_trainer_weighs_its_surrogate_by_the_correction(tiny_model_dir, tmp_path):
    """rho = 3 on every token: tis (cap 2) doubles the policy gradient of the same batch, mis
    (cap 2) drops every token (no gradient at all), and the ratio's statistics are logged."""
    shift = math.log(3.0)
    plain = _step(tiny_model_dir, tmp_path, "none", "none", shift)
    assert plain["grad_norm"] > 0 and "is/ratio_mean" not in plain
    tis = _step(tiny_model_dir, tmp_path, "tis", "tis", shift)
    assert tis["grad_norm"] == pytest.approx(2 * plain["grad_norm"], rel=1e-5)
    assert tis["is/ratio_mean"] == pytest.approx(3.0, rel=1e-5) and tis["is/ratio_max"] == pytest.approx(3.0, rel=1e-5)
    assert tis["is/capped_frac"] == 1.0
    mis = _step(tiny_model_dir, tmp_path, "mis", "mis", shift)
    assert mis["grad_norm"] == 0.0


def test_the_config_refuses_a_correction_without_sampler_log_probs(capsys):
    from grpo_research.cli import main

    assert main(["config", "algo.is_correction=tis"]) == 2
    assert "only rollout.backend=vllm records" in capsys.readouterr().err
    assert main(["config", "method=ppo", "algo.is_correction=tis", "rollout.backend=vllm"]) == 2
    assert "applies to the GRPO family's loss" in capsys.readouterr().err
