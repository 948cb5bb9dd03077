"""Run dirs of an earlier version (fewer config keys) keep resuming; real differences are refused."""
import pytest
import yaml

from grpo_research.config import load_config
from grpo_research.errors import UsageError
from grpo_research.rundir import check_run_dir, write_config


def _old_run(tmp_path, cfg, drop):
    run = tmp_path / "run"
    write_config(run, cfg)
    data = yaml.safe_load((run / "config.yaml").read_text())
    section, key = drop.split(".")
    del data[section][key]  # written before `drop` existed
    (run / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return run


def test_keys_added_since_at_their_defaults_still_resume(tmp_path):
    cfg = load_config(None, ["train.steps=7"])
    run = _old_run(tmp_path, cfg, "train.micro_batch_size")
    check_run_dir(run, cfg)  # no error
    before = (run / "config.yaml").read_text()
    write_config(run, cfg)
    assert (run / "config.yaml").read_text() == before  # left as written


def test_a_new_key_away_from_its_default_or_a_changed_value_is_refused(tmp_path):
    cfg = load_config(None, ["train.steps=7"])
    run = _old_run(tmp_path, cfg, "train.micro_batch_size")
    with pytest.raises(UsageError, match=r"train.micro_batch_size: \(absent\) -> 8"):
        check_run_dir(run, load_config(None, ["train.steps=7", "train.micro_batch_size=8"]))
    with pytest.raises(UsageError, match=r"train.steps: 7 -> 9"):
        check_run_dir(run, load_config(None, ["train.steps=9"]))
    (run / "config.yaml").write_text("- not\n- a config\n")
    with pytest.raises(UsageError, match="is not a config"):
        check_run_dir(run, cfg)


def test_train_resumes_a_run_dir_of_an_earlier_version(tiny_model_dir, tmp_path):
    from grpo_research.cli import main
    from tests.helpers import fast_run

    run = tmp_path / "run"
    args = ["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", *fast_run("train.steps=2")]
    assert main(args) == 0
    data = yaml.safe_load((run / "config.yaml").read_text())
    del data["train"]["lock_wait"]  # as an earlier version wrote it
    (run / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(args) == 0  # counts as the same run: done, nothing retrained
    assert main([*args, "train.steps=3"]) == 2  # a real difference is still refused


def _as_before_dpo_beta(run, dpo_beta):
    """config.yaml as a version before `dpo.beta` wrote it: DPO's beta in `algo.beta`."""
    data = yaml.safe_load((run / "config.yaml").read_text())
    del data["dpo"]["beta"]
    data["algo"]["beta"] = dpo_beta
    (run / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.mark.parametrize("method", ["dpo", "online_dpo"])
def test_a_dpo_run_dir_whose_algo_beta_was_dpos_beta_is_the_same_run(tmp_path, method):
    cfg = load_config(None, [f"method={method}", "dpo.beta=0.2"])
    run = tmp_path / "run"
    write_config(run, cfg)
    _as_before_dpo_beta(run, 0.2)
    check_run_dir(run, cfg)  # no error: algo.beta 0.2 then is dpo.beta 0.2 now
    with pytest.raises(UsageError, match=r"dpo.beta: 0.2 -> 0.1"):
        check_run_dir(run, load_config(None, [f"method={method}"]))


def test_algo_beta_of_another_method_is_still_the_kl_coefficient(tmp_path):
    cfg = load_config(None, ["method=grpo", "algo.beta=0.1"])
    run = tmp_path / "run"
    write_config(run, cfg)
    data = yaml.safe_load((run / "config.yaml").read_text())
    del data["dpo"]["beta"]
    (run / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    check_run_dir(run, cfg)
    with pytest.raises(UsageError, match=r"algo.beta: 0.1 -> 0.04"):
        check_run_dir(run, load_config(None, ["method=grpo"]))


def test_train_resumes_a_dpo_run_dir_written_before_dpo_beta(tiny_model_dir, tmp_path):
    from grpo_research.cli import main
    from tests.helpers import fast_run

    run = tmp_path / "run"
    args = ["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}", "method=online_dpo",
            *fast_run("train.steps=2")]
    assert main(args) == 0
    _as_before_dpo_beta(run, 0.1)
    assert main(args) == 0  # counts as the same run: done, nothing retrained
    assert main([*args, "dpo.beta=0.3"]) == 2  # a real difference is still refused
