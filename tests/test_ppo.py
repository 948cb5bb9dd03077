"""PPO: the pure functions against hand-computed values and a plain loop (GAE), CLI smoke runs
of `method=ppo` (policy and critic change, the extra metrics exist, critic warm-up, shared
trunk), kill-and-resume equality, and `grpo-research cost --json`."""
import json
import math
import os
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grpo_research.algorithms.ppo import (
    clipped_value_loss,
    explained_variance,
    gae,
    kl_penalized_rewards,
    masked_mean_std,
    token_entropy,
    value_clip_fraction,
    whiten,
)
from grpo_research.cli import main
from grpo_research.tracking import read_metrics
from tests.helpers import deterministic, fast_run, kill_after_step

EXE = str(Path(sys.executable).with_name("grpo-research"))
# As in test_train_cli.py: an untrained model's completion lengths vary, so the length-shaped
# reward has variance.
FAST = fast_run(
    "train.eval_size=40", "reward.weights={overlong: 1.0, format: 0.2}",
    "reward.options={overlong: {max_len: 10, cache: 9}}", "optim.lr=1e-2", "method=ppo", "ppo.minibatch_size=4",
    "critic.lr=1e-2",
)
PPO_KEYS = ["value_loss", "explained_variance", "value_mean", "return_mean", "adv_mean", "adv_std"]
GRPO_KEYS = ["step", "samples", "tokens", "reward_mean", "reward_std", "frac_zero_std", "kl", "clip_frac",
             "entropy", "completion_len", "truncated_frac", "lr", "grad_norm", "step_s", "rollout_s", "update_s",
             "peak_mem_mb", "cost/model_state_mb", "cost/critic_param_mb", "cost/mfu"]


# ---------------------------------------------------------------- GAE
def gae_loop(rewards, values, mask, gamma, lam):
    """Plain Python GAE, one row at a time, over the row's valid prefix."""
    adv, ret = [], []
    for r, v, m in zip(rewards, values, mask):
        n = int(sum(m))
        a_row = [0.0] * len(r)
        last = 0.0
        for t in reversed(range(n)):
            next_v = v[t + 1] if t + 1 < n else 0.0
            delta = r[t] + gamma * next_v - v[t]
            last = delta + gamma * lam * last
            a_row[t] = last
        adv.append(a_row)
        ret.append([a_row[t] + v[t] if t < n else 0.0 for t in range(len(r))])
    return torch.tensor(adv), torch.tensor(ret)


@pytest.mark.parametrize("B, T", [(1, 1), (3, 5), (6, 12)])
@pytest.mark.parametrize("gamma", [1.0, 0.9])
@pytest.mark.parametrize("lam", [0.95, 1.0])
def test_gae_matches_a_plain_loop_on_random_inputs(B, T, gamma, lam):
    g = torch.Generator().manual_seed(B * 100 + T)
    rewards = torch.randn(B, T, generator=g, dtype=torch.float64)
    values = torch.randn(B, T, generator=g, dtype=torch.float64)
    lengths = torch.randint(0, T + 1, (B,), generator=g)
    lengths[0] = T  # one full row
    mask = (torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)).double()  # (B, T) prefix masks
    adv, ret = gae(rewards, values, mask, gamma, lam)
    adv_ref, ret_ref = gae_loop(rewards.tolist(), values.tolist(), mask.tolist(), gamma, lam)
    torch.testing.assert_close(adv, adv_ref.double())
    torch.testing.assert_close(ret, ret_ref.double())
    assert (adv[mask == 0] == 0).all() and (ret[mask == 0] == 0).all()


def test_gae_hand_computed():
    # row 0, gamma 1, lambda 0.5: deltas [0.1, 0.1, 0.3]; A = [0.1 + .5 * .25, 0.1 + .5 * .3, 0.3]
    # row 1 (length 2; the third entries must be ignored): deltas [0, 0.5]; A = [0.25, 0.5]
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 9.0]])
    values = torch.tensor([[0.5, 0.6, 0.7], [0.5, 0.5, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    adv, ret = gae(rewards, values, mask, gamma=1.0, lam=0.5)
    torch.testing.assert_close(adv, torch.tensor([[0.225, 0.25, 0.3], [0.25, 0.5, 0.0]]))
    torch.testing.assert_close(ret, torch.tensor([[0.725, 0.85, 1.0], [0.75, 1.0, 0.0]]))
    # gamma 0.9, lambda 1 on row [0.2, 1.0] with values [0.4, 0.5]:
    # delta_1 = 1 - 0.5 = 0.5; delta_0 = 0.2 + 0.9 * 0.5 - 0.4 = 0.25; A_0 = 0.25 + 0.9 * 0.5 = 0.7
    adv, ret = gae(torch.tensor([[0.2, 1.0]]), torch.tensor([[0.4, 0.5]]), torch.ones(1, 2), gamma=0.9, lam=1.0)
    torch.testing.assert_close(adv, torch.tensor([[0.7, 0.5]]))
    torch.testing.assert_close(ret, torch.tensor([[1.1, 1.0]]))  # discounted Monte Carlo returns


def test_gae_lambda_one_gives_monte_carlo_returns_whatever_the_values():
    rewards = torch.tensor([[0.0, -0.1, 1.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    for values in (torch.zeros(1, 4), torch.tensor([[3.0, -2.0, 0.5, 7.0]])):
        _, ret = gae(rewards, values, mask, gamma=1.0, lam=1.0)
        torch.testing.assert_close(ret, torch.tensor([[0.9, 0.9, 1.0, 0.0]]))


def test_gae_rejects_mismatched_shapes():
    with pytest.raises(ValueError):
        gae(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3))


# ---------------------------------------------------------------- rewards, value loss, whitening
def test_kl_penalized_rewards_put_the_score_on_the_last_valid_token():
    scores = torch.tensor([1.0, 0.5, 2.0])
    logp = torch.tensor([[-1.0, -1.0, -1.0], [-2.0, -2.0, -2.0], [-1.0, -1.0, -1.0]])
    ref = torch.tensor([[-1.5, -1.0, -0.5], [-2.0, -3.0, 0.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0], [0, 0, 0]])
    # k1 = logp - ref = [[.5, 0, -.5], [0, 1, -2], ...]; r = -0.1 k1 (+ score at the end); row 2 fully masked
    r = kl_penalized_rewards(scores, logp, ref, mask, beta=0.1, estimator="k1")
    torch.testing.assert_close(r, torch.tensor([[-0.05, 0.0, 1.05], [0.0, 0.4, 0.0], [0.0, 0.0, 0.0]]))
    r0 = kl_penalized_rewards(scores, logp, None, mask, beta=0.1)  # no reference: the score alone
    torch.testing.assert_close(r0, torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.5, 0.0], [0.0, 0.0, 0.0]]))
    # k3 = exp(ref - logp) - (ref - logp) - 1 is >= 0: the penalty never adds reward
    r3 = kl_penalized_rewards(torch.zeros(3), logp, ref, torch.ones(3, 3), beta=1.0, estimator="k3")
    assert (r3 <= 0).all()


def test_clipped_value_loss_on_hand_values():
    values = torch.tensor([[1.0, 0.0, 0.5]])
    old = torch.tensor([[0.5, 0.5, 0.5]])
    returns = torch.tensor([[2.0, 1.0, 0.0]])
    # clip 0.2: clipped predictions [0.7, 0.3, 0.5]; squared errors unclipped [1, 1, 0.25], clipped [1.69, 0.49, 0.25]
    loss = clipped_value_loss(values, old, returns, clip=0.2)
    torch.testing.assert_close(loss, torch.tensor([[0.845, 0.5, 0.125]]))
    torch.testing.assert_close(clipped_value_loss(values, old, returns, clip=None), torch.tensor([[0.5, 0.5, 0.125]]))
    frac = value_clip_fraction(values, old, returns, torch.ones(1, 3), clip=0.2)
    torch.testing.assert_close(frac, torch.tensor(1 / 3))
    # the pessimistic max keeps the gradient only where the unclipped error is the larger one
    v = values.clone().requires_grad_(True)
    clipped_value_loss(v, old, returns, clip=0.2).sum().backward()
    torch.testing.assert_close(v.grad, torch.tensor([[0.0, -1.0, 0.5]]))


def test_whitening_uses_valid_tokens_only():
    x = torch.tensor([[1.0, 2.0, 3.0, 100.0], [2.0, -50.0, -50.0, -50.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 0, 0, 0]])
    # valid entries [1, 2, 3, 2]: mean 2, population std sqrt(0.5)
    mean, std = masked_mean_std(x, mask)
    assert mean.item() == 2.0 and math.isclose(std.item(), math.sqrt(0.5), rel_tol=1e-6)
    w = whiten(x, mask, eps=0.0)
    s = math.sqrt(2.0)
    torch.testing.assert_close(w, torch.tensor([[-s, 0.0, s, 0.0], [0.0, 0.0, 0.0, 0.0]]))
    mean_w, std_w = masked_mean_std(w, mask)
    assert abs(mean_w.item()) < 1e-6 and math.isclose(std_w.item(), 1.0, rel_tol=1e-6)


def test_explained_variance():
    returns = torch.tensor([[1.0, 2.0, 3.0, 4.0, 99.0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    ev = lambda v: explained_variance(torch.tensor([v]), returns, mask).item()  # noqa: E731
    assert ev([1.0, 2.0, 3.0, 4.0, -7.0]) == 1.0  # perfect (the masked entry is ignored)
    assert ev([2.5, 2.5, 2.5, 2.5, 0.0]) == 0.0  # a constant is no better than the mean
    # errors [-1, 1, -1, 1]: Var = 1; Var[R] = 1.25 -> 1 - 1 / 1.25 = 0.2
    assert math.isclose(ev([2.0, 1.0, 4.0, 3.0, 0.0]), 0.2, rel_tol=1e-6)
    assert math.isnan(explained_variance(torch.zeros(1, 3), torch.ones(1, 3), torch.ones(1, 3)).item())


def test_token_entropy_of_uniform_and_of_a_point_mass():
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]]])
    torch.testing.assert_close(token_entropy(logits), torch.tensor([[math.log(4.0), 0.0]]), atol=1e-6, rtol=0)


# ---------------------------------------------------------------- CLI smoke runs
def _train_args(model_dir, run_dir, *extra):
    return ["train", "--run-dir", str(run_dir), f"model.name_or_path={model_dir}", *FAST, *extra]


def _critic_state(run):
    return torch.load(run / "checkpoint/state.pt", weights_only=False)["critic"]


def test_ppo_smoke_run_changes_policy_and_critic(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    assert main(_train_args(tiny_model_dir, run, "train.steps=4", "train.eval_every=2", "train.samples_every=2")) == 0
    rows = read_metrics(run / "metrics.jsonl")
    train_rows = [r for r in rows if "reward_mean" in r]
    assert [r["step"] for r in train_rows] == [1, 2, 3, 4]
    assert [r["step"] for r in rows if "eval/accuracy" in r] == [0, 2, 4]
    assert [r["samples"] for r in train_rows] == [8, 16, 24, 32]  # prompts_per_step x group_size, as GRPO
    for r in train_rows:
        assert not set(PPO_KEYS + GRPO_KEYS) - set(r), set(PPO_KEYS + GRPO_KEYS) - set(r)
    assert train_rows[0]["reward_std"] > 0
    assert train_rows[0]["value_mean"] == 0.0  # zero-initialised value head
    assert all(r["value_loss"] > 0 and r["grad_norm"] > 0 and r["critic_grad_norm"] > 0 for r in train_rows)
    assert train_rows[-1]["value_mean"] != 0.0
    assert train_rows[0]["cost/critic_param_mb"] > 0
    assert (run / "samples/step_000002.jsonl").exists()
    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(run / "model/model.safetensors")
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert len(changed) > len(before) // 2
    critic = _critic_state(run)
    trunk_changed = [k for k in before if k.startswith("model.") and not torch.equal(before[k], critic["trunk." + k[6:]])]
    assert len(trunk_changed) > len([k for k in before if k.startswith("model.")]) // 2
    assert critic["head.proj.weight"].abs().sum() > 0


def test_critic_warmup_leaves_the_policy_unchanged(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    assert main(_train_args(tiny_model_dir, run, "train.steps=2", "critic.warmup_steps=2")) == 0
    rows = [r for r in read_metrics(run / "metrics.jsonl") if "reward_mean" in r]
    assert all(r["critic_only"] and r["grad_norm"] == 0.0 and r["value_loss"] > 0 for r in rows)
    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(run / "model/model.safetensors")
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert _critic_state(run)["head.proj.weight"].abs().sum() > 0


def test_shared_trunk_and_kl_in_loss(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    assert main(_train_args(tiny_model_dir, run, "train.steps=2", "critic.shared_trunk=true", "ppo.kl_in_loss=true",
                            "ppo.ent_coef=0.01", "ppo.value_clip=null")) == 0
    rows = [r for r in read_metrics(run / "metrics.jsonl") if "reward_mean" in r]
    assert all(r["value_loss"] > 0 and r["grad_norm"] > 0 for r in rows)
    assert rows[-1]["kl"] > 0 and rows[-1]["value_clip_frac"] == 0.0
    # the critic is a head only: its state is tiny next to the policy's
    assert rows[0]["cost/critic_param_mb"] < rows[0]["cost/policy_param_mb"] / 100
    assert set(_critic_state(run)) == {"proj.weight", "proj.bias"}
    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(run / "model/model.safetensors")
    assert sum(not torch.equal(before[k], after[k]) for k in before) > len(before) // 2


_strip = deterministic


def test_ppo_kill_and_resume_matches_uninterrupted_run(tiny_model_dir, tmp_path):
    common = ["train.steps=30", "train.eval_every=10", "train.checkpoint_every=5", "train.eval_size=20"]
    ref_run = tmp_path / "ref"
    assert main(_train_args(tiny_model_dir, ref_run, *common)) == 0
    run = tmp_path / "killed"
    args = _train_args(tiny_model_dir, run, *common)
    env = {**os.environ, "WANDB_MODE": "disabled"}
    metrics = run / "metrics.jsonl"
    proc, killed_at = kill_after_step([EXE, *args], metrics, 12, env)
    proc.wait()
    assert killed_at is not None and killed_at < 30, "the run finished before it could be killed"
    assert not (run / "summary.json").exists()
    assert main(args) == 0  # same command: resumes from the step-10 (or later) checkpoint
    assert _strip(read_metrics(metrics)) == _strip(read_metrics(ref_run / "metrics.jsonl"))
    a, b = load_file(run / "model/model.safetensors"), load_file(ref_run / "model/model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    ca, cb = _critic_state(run), _critic_state(ref_run)
    assert all(torch.equal(ca[k], cb[k]) for k in ca)


# ---------------------------------------------------------------- grpo-research cost
def test_cost_json_grpo_holds_at_most_0_6_of_ppo_model_state(tiny_model_dir, capsys):
    from grpo_research.cli.cost import main as cost_main

    rc = cost_main(["--json", "--steps", "2", f"model.name_or_path={tiny_model_dir}", "train.threads=1",
                    "rollout.prompts_per_step=2", "algo.group_size=4", "rollout.max_new_tokens=8",
                    "train.eval_size=1"])
    out = capsys.readouterr().out
    assert rc == 0
    res = json.loads(out)
    assert set(res) == {"grpo", "ppo"}
    for m in res.values():
        assert {"model_state_mb", "peak_mem_mb", "step_s"} <= set(m) and m["step_s"] > 0 and m["peak_mem_mb"] > 0
    assert res["grpo"]["model_state_mb"] <= 0.6 * res["ppo"]["model_state_mb"]
    assert set(res["ppo"]["models_mb"]) == {"policy", "reference", "critic"}
    assert "critic" not in res["grpo"]["models_mb"]
    assert res["grpo"]["samples_per_step"] == res["ppo"]["samples_per_step"] == 8


def test_cost_reports_a_step_the_memory_estimate_refuses_as_its_result(tiny_model_dir, tmp_path, monkeypatch):
    """A refused method's entry is the one-line refusal with its estimate (the 0.5B model's full
    PPO on 24 GB), not a failure of the whole comparison."""
    import grpo_research.trainers.cost as cost
    from grpo_research.cli.cost import _table, _worker, method_configs

    cfgs = method_configs(None, [f"model.name_or_path={tiny_model_dir}", "train.threads=1", "train.eval_size=1"], 2)
    (tmp_path / "ppo.yaml").write_text(cfgs["ppo"].dump())
    (tmp_path / "run").mkdir()
    monkeypatch.setattr(cost, "memory_limit_bytes", lambda device: 2**20)  # a 1 MiB machine
    assert _worker(str(tmp_path / "ppo.yaml"), tiny_model_dir, str(tmp_path / "run"), str(tmp_path / "out.json")) == 0
    res = json.loads((tmp_path / "out.json").read_text())
    assert set(res) == {"refused"} and res["refused"].startswith("a training step needs about")
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
    table = _table({"grpo": {"refused": "x"}, "ppo": res})
    assert table.splitlines() == ["grpo: refused: x", f"ppo: refused: {res['refused']}"]


@pytest.mark.parametrize("argv, needle", [
    (["algo.bta=1"], "unknown key 'algo.bta'"),
    (["--steps", "1"], "--steps must be >= 2"),
    (["--bogus"], "unrecognized arguments"),
    (["ppo.lam=2"], "'ppo.lam' = 2.0 must be in [0, 1]"),
])
def test_cost_bad_input_is_one_line_and_exit_2(argv, needle, capsys):
    from grpo_research.cli.cost import main as cost_main

    assert cost_main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.startswith("error: ") and err.count("\n") == 1


# ---------------------------------------------------------------- the fast paths keep the update
def _one_ppo_step(model_dir, tmp_path, name, *extra):
    from grpo_research.config import load_config
    from grpo_research.trainers import build_trainer

    args = [a for a in FAST if not a.startswith("ppo.minibatch_size")]
    cfg = load_config(None, [*args, f"model.name_or_path={model_dir}", "train.steps=1", "ppo.minibatch_size=8",
                             "ppo.ent_coef=0.01", *extra])
    trainer = build_trainer(cfg, tmp_path / name, model_dir)
    trainer.start = [{k: v.clone() for k, v in m.state_dict().items()} for m in (trainer.policy, trainer.critic)]
    calls = []
    hook = trainer.policy.register_forward_pre_hook(
        lambda mod, args, kw: calls.append(tuple(kw["input_ids"].shape)) if mod.training else None, with_kwargs=True)
    try:
        row = trainer.train_step()
    finally:
        hook.remove()
    return row, trainer, calls


@pytest.mark.parametrize("shared_trunk, fast_args", [
    (False, []), (True, []),
    (False, ["train.shared_prefix=false"]),  # reuse alone: minibatch rows in shuffled order, not rollout order
])
def test_shared_prefix_and_reused_first_forward_keep_ppo_s_update(tiny_model_dir, tmp_path, shared_trunk, fast_args):
    """One PPO step (2 epochs x one minibatch of all 8 completions, groups of 4 with one prompt
    each): computing each prompt once and taking the old log-probs and values from the first
    epoch's forward give the update of the plain passes, up to float rounding; and they do
    run fewer, smaller policy forwards."""
    trunk = [f"critic.shared_trunk={str(shared_trunk).lower()}"]
    plain = _one_ppo_step(tiny_model_dir, tmp_path, "plain", *trunk, "train.shared_prefix=false",
                          "ppo.reuse_first_forward=false")
    fast = _one_ppo_step(tiny_model_dir, tmp_path, "fast", *trunk, *fast_args)
    (row_a, tr_a, calls_a), (row_b, tr_b, calls_b) = plain, fast
    for key in ("loss", "pg_loss", "value_loss", "kl", "entropy", "value_mean", "return_mean", "clip_frac"):
        assert row_b[key] == pytest.approx(row_a[key], rel=1e-4, abs=1e-6), key
    # AdamW moves each coordinate by about lr whatever its gradient's size, so float rounding in a
    # near-zero gradient can move single coordinates visibly: compare the whole update instead
    for i, (model_a, model_b) in enumerate(((tr_a.policy, tr_b.policy), (tr_a.critic, tr_b.critic))):
        sa, sb, start = model_a.state_dict(), model_b.state_dict(), tr_a.start[i]
        da = torch.cat([(sa[k] - start[k]).flatten() for k in sa])
        db = torch.cat([(sb[k] - start[k]).flatten() for k in sa])
        assert da.norm() > 0.01  # the step did move it: not a comparison of two no-ops
        assert (db - da).norm() / da.norm() < 1e-3, ((db - da).norm() / da.norm()).item()
    if not shared_trunk and not fast_args:  # the policy's own forwards (with a shared trunk its base model runs instead)
        # plain: old log-probs, then one full forward per epoch; fast: per epoch a prompt forward
        # on 2 rows (one per group) and a completion forward on 8, old log-probs from epoch 1's
        assert [c[0] for c in calls_a] == [8, 8, 8], calls_a
        assert [c[0] for c in calls_b] == [2, 8, 2, 8], calls_b
    # the step's model FLOPs (per second x the step's seconds): the fast paths count fewer
    assert row_b["cost/model_flops_per_s"] * row_b["step_s"] < row_a["cost/model_flops_per_s"] * row_a["step_s"]
