"""Config layering and validation: every bad input is one clear line and exit code 2."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_research.cli import main
from grpo_research.config import ConfigError, RunConfig, key_table, load_config

REQUIRED_KEYS = ["method", "seed", "train.steps", "algo.group_size", "algo.beta", "algo.clip_eps",
                 "algo.clip_eps_high", "rollout.temperature", "optim.lr"]


def test_required_keys_exist_and_are_documented():
    table = key_table()
    for key in REQUIRED_KEYS:
        assert f"| `{key}` |" in table


def test_docs_key_table_is_current():
    reference = (Path(__file__).resolve().parents[1] / "docs" / "config.md").read_text()
    assert key_table() in reference, ("docs/config.md's key table is stale: regenerate with "
                                      "`python scripts/update_readme_tables.py`")


def test_defaults_yaml_cli_layering(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("algo:\n  beta: 0.1\n  group_size: 4\noptim:\n  lr: 1.0e-4\n")
    cfg = load_config(f, ["algo.beta=0.2", "seed=3"])
    assert cfg.algo.beta == 0.2  # CLI beats YAML
    assert cfg.algo.group_size == 4  # YAML beats default
    assert cfg.optim.lr == 1e-4
    assert cfg.seed == 3
    assert cfg.rollout.temperature == RunConfig().rollout.temperature  # default kept
    assert cfg.algo.clip_eps_high is None  # defaults to clip_eps inside the trainer


def test_resolved_config_round_trips():
    cfg = load_config(None, ["algo.clip_eps_high=0.28", "train.steps=7"])
    again = load_config(None, [])
    from grpo_research.config import config_from_dict

    assert config_from_dict(yaml.safe_load(cfg.dump())) == cfg
    assert again != cfg


@pytest.mark.parametrize(
    "override, needle",
    [
        ("algo.bta=0.1", "unknown key 'algo.bta'"),
        ("algo.group_size=1", "'algo.group_size' = 1 must be in [2, 1024]"),
        ("algo.beta=-0.1", "'algo.beta' = -0.1 must be >= 0"),
        ("algo.clip_eps=0", "'algo.clip_eps' = 0.0 must be in (0, 1)"),
        ("algo.clip_eps=1.5", "'algo.clip_eps' = 1.5 must be in (0, 1)"),
        ("algo.clip_eps_high=1", "'algo.clip_eps_high' = 1.0 must be in (0, 1)"),
        ("rollout.temperature=0", "'rollout.temperature' = 0.0 must be > 0"),
        ("optim.lr=0", "'optim.lr' = 0.0 must be > 0"),
        ("optim.lr=-1e-3", "'optim.lr' = -0.001 must be > 0"),
        ("method=ppo_typo", "'method' = 'ppo_typo' must be one of"),
        ("algo.group_size=four", "'algo.group_size' = 'four' has the wrong type"),
        ("train.steps", "must look like key=value"),
    ],
)
def test_bad_overrides_exit_2_with_one_line_and_write_nothing(tmp_path, capsys, override, needle):
    run_dir = tmp_path / "run"
    assert main(["train", "--run-dir", str(run_dir), override]) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert not run_dir.exists()


def test_malformed_yaml_names_file_and_line(tmp_path, capsys):
    f = tmp_path / "bad.yaml"
    f.write_text("algo:\n  beta: 0.1\n  group_size: [4\noptim:\n  lr: 1\n")
    assert main(["train", "--config", str(f), "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"{f}:" in err and "malformed YAML" in err
    line = int(err.split(f"{f}:")[1].split(":")[0])
    assert 3 <= line <= 5
    assert not (tmp_path / "r").exists()


def test_unknown_key_in_yaml_names_the_file(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("rollout:\n  temprature: 0.7\n")
    with pytest.raises(ConfigError, match=r"c.yaml: unknown key 'rollout.temprature'"):
        load_config(f)


def test_missing_config_file(tmp_path, capsys):
    assert main(["train", "--config", str(tmp_path / "nope.yaml"), "--run-dir", str(tmp_path / "r")]) == 2
    assert "cannot read config file" in capsys.readouterr().err


def test_run_dir_with_a_different_config_is_refused(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saved = load_config(None, ["algo.beta=0.1"]).dump()
    (run_dir / "config.yaml").write_text(saved)
    assert main(["train", "--run-dir", str(run_dir), "algo.beta=0.2"]) == 2
    err = capsys.readouterr().err
    assert "already holds a different config" in err and "beta" in err
    assert (run_dir / "config.yaml").read_text() == saved
    assert sorted(p.name for p in run_dir.iterdir()) == ["config.yaml"]


def test_console_script_exit_code_and_no_traceback(tmp_path):
    exe = Path(sys.executable).with_name("grpo-research")
    r = subprocess.run([str(exe), "train", "--run-dir", str(tmp_path / "r"), "algo.beta=-1"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr and r.stderr.strip() == "error: 'algo.beta' = -1.0 must be >= 0"


@pytest.mark.parametrize("overrides, needle", [
    (["task.name=gsm8k", "task.levels=[1]", "task.level_weights=[1.0]"], "'task.levels' = [1] is not an option of task 'gsm8k'"),
    (["task.name=humaneval", "task.eval_level=2"], "'task.eval_level' = 2 is not an option of task 'humaneval'"),
    (["task.data_path=some.jsonl"], "'task.data_path' = 'some.jsonl' is not an option of task 'arith'"),
    (["task.options={nope: 1}"], "'task.options.nope' is not an option of task 'arith'"),
    (["task.options={levels: [1]}"], "'task.options.levels' is not an option of task 'arith'"),
])
def test_task_options_the_task_does_not_take_are_refused(overrides, needle):
    with pytest.raises(ConfigError) as e:
        load_config(None, overrides)
    assert needle in str(e.value)


def test_task_options_the_task_takes_are_passed_on():
    from grpo_research.tasks import build_task

    cfg = load_config(None, ["task.levels=[1]", "task.level_weights=[1.0]", "task.options={withhold_solutions: true}"])
    task = build_task(cfg.task)
    import random

    p = task.train_problems(random.Random(0), 3)
    assert all(x.solution is None for x in p) and all(len(x.prompt) == len("001+002=") for x in p)
