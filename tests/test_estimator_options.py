"""An advantage estimator declares its own options in its registration: `algo.adv_options.<name>`
is then checked against the chosen estimator, filled in with its defaults, documented from the
registry and passed to the estimator in training, with no field of its own in config.py."""
from __future__ import annotations

import pytest
import torch
import yaml

from grpo_research.algorithms.advantages import ADVANTAGES, group, options_table, register_advantage
from grpo_research.cli import main
from grpo_research.config import load_config
from grpo_research.errors import ConfigError
from grpo_research.registry import Option
from grpo_research.rundir import config_differences
from tests.helpers import fast_run

SEEN: list[float] = []  # the c each call of the test estimator received


@pytest.fixture
def clipped():
    """`_test_clipped`: GRPO's advantages clipped to [-c, c], registered for the test only."""

    @register_advantage("_test_clipped", builds_on="group",
                        options={"c": Option(1.0, "clip bound", lambda c: None if c > 0 else "must be > 0")})
    def _clipped(rewards, algo):
        c = algo.adv_options["c"]
        SEEN.append(c)
        return group(rewards, algo).clamp(-c, c)

    SEEN.clear()
    yield "_test_clipped"
    del ADVANTAGES["_test_clipped"]


def test_defaults_are_filled_in_and_a_set_option_wins(clipped):
    assert load_config(None, [f"algo.advantage={clipped}"]).algo.adv_options == {"c": 1.0}
    algo = load_config(None, [f"algo.advantage={clipped}", "algo.adv_options.c=0.5", "algo.group_size=4"]).algo
    assert algo.adv_options == {"c": 0.5}
    # hand-computed: rewards 0, 0, 0, 1 -> group advantages -1/sqrt(3) x3, sqrt(3); clipped to 0.5
    assert ADVANTAGES[clipped](torch.tensor([0.0, 0.0, 0.0, 1.0]), algo).tolist() == [-0.5, -0.5, -0.5, 0.5]


@pytest.mark.parametrize("override, message", [
    ("algo.adv_options.c=0", "'algo.adv_options.c' = 0 must be > 0"),
    ("algo.adv_options.c=true", "'algo.adv_options.c' = True must be a float"),
    ("algo.adv_options.c=abc", "'algo.adv_options.c' = 'abc' must be a finite number"),
    ("algo.adv_options.d=1", "'algo.adv_options.d' is not an option of advantage estimator '_test_clipped' "
                             "(its options: c)"),
])
def test_a_bad_option_is_refused_in_one_line_naming_it(clipped, override, message):
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"algo.advantage={clipped}", override])
    assert str(e.value) == message


def test_an_option_of_another_estimator_is_refused():
    with pytest.raises(ConfigError, match=r"^'algo.adv_options.c' is not an option of advantage estimator 'group' "
                                          r"\(its options: none\)$"):
        load_config(None, ["algo.adv_options.c=1"])


def test_an_estimator_built_on_another_inherits_its_options(clipped):
    @register_advantage("_test_negative_clipped", builds_on=clipped)
    def _neg(rewards, algo):
        return ADVANTAGES[clipped](rewards, algo).clamp(max=0.0)

    try:
        assert load_config(None, ["algo.advantage=_test_negative_clipped"]).algo.adv_options == {"c": 1.0}
    finally:
        del ADVANTAGES["_test_negative_clipped"]


def test_the_options_table_is_generated_from_the_registry(clipped):
    assert "| `_test_clipped` | `algo.adv_options.c` | `1.0` | clip bound |" in options_table()


def test_training_passes_the_option_and_config_yaml_records_it(clipped, tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}",
                 *fast_run("train.steps=1", "train.eval_every=1"), f"algo.advantage={clipped}",
                 "algo.adv_options.c=0.25"]) == 0
    assert SEEN and set(SEEN) == {0.25}
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["algo"]["adv_options"] == {"c": 0.25}


def test_a_run_dir_written_before_the_options_existed_is_the_same_run():
    cfg = load_config(None, [])
    saved = cfg.to_dict()
    del saved["algo"]["adv_options"]
    assert config_differences(saved, cfg) == []
