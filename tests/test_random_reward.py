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
