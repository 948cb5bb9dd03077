"""GRPO variants: hand-computed advantage and surrogate values, presets, and each method
running by `method` alone."""
import math

import pytest
import torch
import yaml

from grpo_research.algorithms import (
    ADVANTAGES,
    batch_normalized_advantages,
    rloo_advantages,
    sequence_clipped_surrogate,
)
from grpo_research.cli import main
from grpo_research.config import load_config
from grpo_research.rollout import RolloutBatch, select_and_concat
from grpo_research.tracking import read_metrics
from grpo_research.methods import GRPO_TRAINER, METHODS
from tests.helpers import fast_run

# every method the GRPO trainer runs, from the registry (a new variant is tested without an edit here)
VARIANTS = [m for m, spec in METHODS.items() if spec.trainer == GRPO_TRAINER]


def test_rloo_hand_computed():
    # group [1, 0, 0, 1]: A_0 = 1 - (0+0+1)/3 = 2/3 ; A_1 = 0 - 2/3 = -2/3
    adv = rloo_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0, 3.0, 3.0, 3.0, 3.0]), 4)
    torch.testing.assert_close(adv, torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3, 0.0, 0.0, 0.0, 0.0]))
    with pytest.raises(ValueError):
        rloo_advantages(torch.zeros(3), 2)


def test_reinforce_pp_uses_the_batch_not_the_group():
    # batch [0, 2, 10, 30]: mean 10.5, population std sqrt((10.5^2 + 8.5^2 + 0.5^2 + 19.5^2) / 4)
    std = math.sqrt((10.5**2 + 8.5**2 + 0.5**2 + 19.5**2) / 4)
    adv = batch_normalized_advantages(torch.tensor([0.0, 2.0, 10.0, 30.0]), eps=0.0)
    torch.testing.assert_close(adv, torch.tensor([-10.5, -8.5, -0.5, 19.5]) / std)
    assert batch_normalized_advantages(torch.ones(4)).tolist() == [0.0] * 4


def test_gspo_sequence_ratio_is_length_normalised_and_clipped():
    # seq 0: token log-ratios [ln 2, 0] over 2 valid tokens -> s = exp(ln2 / 2) = sqrt 2
    # seq 1: one valid token with log-ratio ln 0.5 -> s = 0.5 (third token masked out)
    logp = torch.tensor([[math.log(2.0), 0.0, 0.0], [math.log(0.5), 5.0, 5.0]])
    old = torch.zeros(2, 3)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    adv = torch.tensor([1.0, 1.0])
    loss = sequence_clipped_surrogate(logp, old, adv, mask, 0.2, 0.2)
    # seq 0: A > 0, s = 1.414 > 1.2 -> clipped: -1.2 ; seq 1: A > 0, s = 0.5 -> min(0.5, 0.8) = 0.5 -> -0.5
    torch.testing.assert_close(loss, torch.tensor([[-1.2] * 3, [-0.5] * 3]))
    lp = logp.clone().requires_grad_(True)
    sequence_clipped_surrogate(lp, old, adv, mask, 0.2, 0.2)[:, 0].sum().backward()
    # gradient of -s A for seq 1 w.r.t. its one valid token: -s * 1/|y| = -0.5 ; none for the clipped seq
    torch.testing.assert_close(lp.grad, torch.tensor([[0.0, 0.0, 0.0], [-0.5, 0.0, 0.0]]))


def test_advantage_registry_follows_config():
    a = load_config(None, ["method=dr_grpo"]).algo
    r = torch.tensor([2.0, 1.0, 3.0, 2.0])
    assert ADVANTAGES[a.advantage](r, load_config(None, ["method=dr_grpo", "algo.group_size=4"]).algo).tolist() == [
        0.0, -1.0, 1.0, 0.0]


def test_every_variant_is_registered_with_a_cited_doc():
    assert {"grpo", "dr_grpo", "dapo", "gspo", "rloo", "reinforce_pp", "nsr"} <= set(VARIANTS)
    for m in VARIANTS:
        assert m in METHODS and "arXiv" in METHODS[m].doc


def test_presets_are_layered_under_file_and_command_line(tmp_path):
    cfg = load_config(None, ["method=dapo"])
    assert (cfg.algo.loss_agg, cfg.algo.clip_eps_high, cfg.algo.dynamic_sampling, cfg.algo.overlong_filter) == (
        "token", 0.28, True, True)
    assert "overlong" in cfg.reward.weights
    assert load_config(None, ["method=dapo", "algo.clip_eps_high=0.3"]).algo.clip_eps_high == 0.3
    f = tmp_path / "c.yaml"
    f.write_text("method: gspo\nalgo:\n  loss_agg: token\n")
    g = load_config(f)
    assert g.algo.importance == "sequence" and g.algo.clip_eps == 3e-4 and g.algo.loss_agg == "token"
    d = load_config(None, ["method=dr_grpo"]).algo
    assert (d.adv_scale, d.loss_agg) == ("none", "constant")
    assert load_config(None, []).algo.adv_scale == "group"


def _batch(prompt_len, completions, pad=0):
    n, T = len(completions), max(len(c) for c in completions)
    ids = torch.full((n, prompt_len + T), pad)
    cm = torch.zeros(n, T, dtype=torch.long)
    for i, c in enumerate(completions):
        ids[i, :prompt_len] = 7
        ids[i, prompt_len : prompt_len + len(c)] = torch.tensor(c)
        cm[i, : len(c)] = 1
    attn = torch.cat([torch.ones(n, prompt_len, dtype=torch.long), cm], 1)
    return RolloutBatch(problems=[None] * n, input_ids=ids, attention_mask=attn, completion_mask=cm,
                        prompt_len=prompt_len, completions=[str(c) for c in completions], finished=[True] * n,
                        completion_tokens=int(cm.sum()))


def test_select_and_concat_repads_prompts_and_completions():
    a = _batch(2, [[1, 2, 3], [4]])
    b = _batch(3, [[5, 6]])
    out = select_and_concat([a, b], [[1], [0]], pad_id=0)
    assert out.prompt_len == 3 and out.completion_mask.shape == (2, 3)
    assert out.input_ids.tolist() == [[0, 7, 7, 4, 0, 0], [7, 7, 7, 5, 6, 0]]
    assert out.attention_mask.tolist() == [[0, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 0]]
    assert out.completions == ["[4]", "[5, 6]"] and out.completion_tokens == 3


FAST = fast_run("optim.lr=1e-2", "train.steps=2", "train.eval_every=2")


@pytest.mark.parametrize("method", VARIANTS)
def test_each_variant_runs_by_method_alone(tiny_model_dir, tmp_path, method):
    run = tmp_path / method
    # the overlong term gives an untrained model's groups non-zero advantages (lengths vary)
    extra = [] if method == "dapo" else ["reward.weights={overlong: 1.0}"]
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", f"method={method}",
                 *FAST, *extra]) == 0
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["method"] == method
    rows = [r for r in read_metrics(run / "metrics.jsonl") if "reward_mean" in r]
    assert len(rows) == 2 and all("cost/model_state_mb" in r for r in rows)
    if method == "dapo":
        assert saved["algo"]["dynamic_sampling"] is True
        # every generated completion is counted, dropped groups included
        assert all(r["samples"] >= 8 * r["step"] for r in rows)
        assert rows[-1]["samples"] == sum(8 * r["rollout_rounds"] for r in rows)
        for r in rows:  # groups generated = groups trained (at most 2) + groups dropped
            assert 2 * r["rollout_rounds"] >= r["dropped_groups"]
        # the zero-variance share before the filter: every such group was generated, then dropped
        zero = [r["frac_zero_std_generated"] * 2 * r["rollout_rounds"] for r in rows]
        assert all(z == round(z) and z <= r["dropped_groups"] for z, r in zip(zero, rows))
        assert any(z > 0 for z in zero)  # an untrained model's groups under the default reward: equal rewards
    else:  # no filter: the share before it is the share in the update
        assert all(r["frac_zero_std_generated"] == r["frac_zero_std"] for r in rows)
    assert all(r["completion_len_std"] >= 0 for r in rows)


def test_reference_reset_copies_the_policy(tiny_model_dir, tmp_path):
    from grpo_research.trainers.grpo import GRPOTrainer

    cfg = load_config(None, [f"model.name_or_path={tiny_model_dir}", *FAST, "algo.ref_reset_every=1",
                             "reward.weights={overlong: 1.0}", "train.steps=3"])
    run = tmp_path / "r"
    run.mkdir()
    (run / "metrics.jsonl").write_text("")
    t = GRPOTrainer(cfg, run, tiny_model_dir)
    t.train_step()
    differs = any(not torch.equal(p, q) for p, q in zip(t.policy.parameters(), t.ref.parameters()))
    assert differs  # the update moved the policy away from the reference
    before = {k: v.clone() for k, v in t.policy.state_dict().items()}
    t.train_step()  # step 1 % 1 == 0: the reference is reset to the policy before the rollout
    assert all(torch.equal(v, before[k]) for k, v in t.ref.state_dict().items())
    assert t.state()["reference"] is not None  # checkpointed, since it is no longer the base model
