"""The random-reward control (reward term `random`, "Spurious Rewards", arXiv 2506.10947): 1 with
probability p whatever the completion says, reproducible, one draw per copy of a completion."""
import math
import random

import pytest

from grpo_research.config import load_config
from grpo_research.errors import ConfigError
from grpo_research.rewards import build_reward
from grpo_research.tasks import get_task


def _batch(n, seed=0):
    task = get_task("arith")
    problems = task.train_problems(random.Random(seed), n)
    return task, problems


def test_the_rate_is_p_and_does_not_depend_on_correctness():
    task, problems = _batch(4000)
    reward = build_reward(task, {"random": 1.0, "correct": 0.0}, {"random": {"p": 0.3}})
    right = [p.solution for p in problems]  # the reference solutions: every one correct
    wrong = ["#### -1" for _ in problems]
    for completions in (right, wrong):
        rb = reward(problems, completions, [True] * len(problems))
        rate = sum(rb.components["random"]) / len(problems)
        assert abs(rate - 0.3) < 4 * math.sqrt(0.3 * 0.7 / len(problems))  # within 4 standard errors
        assert rb.total == rb.components["random"]  # correct has weight 0: the reward is the coin
    assert sum(reward(problems, right, [True] * 4000).components["correct"]) == 4000  # correctness still logged


def test_reproducible_and_one_draw_per_copy():
    task, problems = _batch(1)
    term = build_reward(task, {"random": 1.0}, {"random": {"p": 0.5, "seed": 7}})
    copies = [problems[0]] * 2000
    a = term(copies, ["#### 5"] * 2000, [True] * 2000).components["random"]
    assert a == term(copies, ["#### 5"] * 2000, [True] * 2000).components["random"]  # the same call, the same values
    assert abs(sum(a) / 2000 - 0.5) < 4 * math.sqrt(0.25 / 2000)  # copies of one completion draw apart
    other = build_reward(task, {"random": 1.0}, {"random": {"p": 0.5, "seed": 8}})
    assert other(copies, ["#### 5"] * 2000, [True] * 2000).components["random"] != a  # the seed matters
    assert set(build_reward(task, {"random": 1.0}, {"random": {"p": 0.0}})(copies, ["x"] * 2000, [True] * 2000)
               .components["random"]) == {0.0}


@pytest.mark.parametrize("p", [1.5, -0.1, "half", True])
def test_a_bad_p_is_refused(p):
    task, _ = _batch(1)
    with pytest.raises(ValueError, match="random: option p must be a number in"):
        build_reward(task, {"random": 1.0}, {"random": {"p": p}})


def test_a_random_reward_run_config_loads_and_misspelled_options_are_refused():
    cfg = load_config(None, ["reward.weights={random: 1.0, correct: 0.0}", "reward.options={random: {p: 0.2, seed: 3}}"])
    assert cfg.reward.weights == {"random": 1.0, "correct": 0.0}
    with pytest.raises(ConfigError, match="'reward.options.random.prob' is not an option"):
        load_config(None, ["reward.weights={random: 1.0}", "reward.options={random: {prob: 0.2}}"])


@pytest.mark.parametrize("overrides, needle", [
    (["reward.weights={random: 1.0}", "reward.options={random: {p: 2}}"],
     "error: reward.options.random: option p must be a number in [0, 1], got 2"),
    (["reward.weights={overlong: 1.0}", "reward.options={overlong: {max_len: 4, cache: 9}}"],
     "error: reward.options.overlong: need 0 < cache <= max_len"),
])
def test_a_bad_reward_option_value_is_one_line_and_exit_2(tiny_model_dir, tmp_path, capsys, overrides, needle):
    from grpo_research.cli import main

    run = tmp_path / "run"
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", "tracking.wandb=disabled",
                 *overrides]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [err[0]] and err[0].startswith(needle), err
    assert not run.exists()


def test_format_only_rewards_the_format_and_still_logs_correctness():
    task, problems = _batch(3)
    reward = build_reward(task, {"format": 1.0, "correct": 0.0})
    completions = [problems[0].solution, "#### -1", "no answer"]  # right, formatted but wrong, neither
    rb = reward(problems[:1] * 3, completions, [True] * 3)
    assert rb.components["correct"] == [1.0, 0.0, 0.0]
    assert rb.total == rb.components["format"] == [1.0, 1.0, 0.0]


def test_p_base_is_the_base_models_measured_correctness_and_the_seed_the_runs(tiny_model_dir, tmp_path, monkeypatch):
    """`reward.options={random: {p: base}}`: the trainer measures the base model's mean `correct`
    score of its samples before training, gives it to the coin and records it in summary.json;
    the coin's seed is the run's seed unless set."""
    import json

    import grpo_research.trainers.base as base
    from grpo_research.cli import main
    from grpo_research.rewards import library
    from tests.helpers import fast_run

    seen = {}
    real = library.random_reward

    def spy(task=None, p=0.5, seed=0):
        seen.update(p=p, seed=seed)
        return real(task, p=p, seed=seed)

    from grpo_research.rewards import REWARDS

    monkeypatch.setitem(REWARDS, "random", spy)
    monkeypatch.setattr(base.Trainer, "_base_correctness", lambda self: 0.375)
    run = tmp_path / "run"
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}",
                 *fast_run("reward.weights={random: 1.0}", "reward.options={random: {p: base}}", "train.steps=1",
                           "seed=5")]) == 0
    assert json.loads((run / "summary.json").read_text())["random_reward_p"] == 0.375
    assert seen == {"p": 0.375, "seed": 5}


def test_base_correctness_is_the_mean_correct_score_of_the_base_models_samples(tiny_model_dir, tmp_path):
    """With a stand-in sampler that answers 3 of each prompt's G = 4 samples right, the measured
    p is 3/4, over BASE_P_PROMPTS prompts, and the run's data order is left untouched."""
    from types import SimpleNamespace

    import grpo_research.trainers.base as base
    from grpo_research.trainers import build_trainer
    from tests.helpers import fast_run

    cfg = load_config(None, [f"model.name_or_path={tiny_model_dir}", *fast_run("reward.weights={random: 1.0}")])
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("")
    t = build_trainer(cfg, run, tiny_model_dir)
    asked = []

    def generate(model, tok, problems, G, **kw):
        asked.append(len(problems))
        return SimpleNamespace(problems=[p for p in problems for _ in range(G)],
                               completions=[p.solution if j < 3 else "0" for p in problems for j in range(G)],
                               finished=[True] * (len(problems) * G))

    t.generate = generate
    state = t.data_rng.getstate()
    assert t._base_correctness() == pytest.approx(0.75)
    assert sum(asked) == base.BASE_P_PROMPTS and t.data_rng.getstate() == state
