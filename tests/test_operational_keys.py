"""Operational keys (grpo_research/rundir.py OPERATIONAL_KEYS) do not change a run's identity
(issue 32): a run dir resumes when only they changed, e.g. `train.lock_wait` for a requeued job;
any key that changes the numbers is still refused. `train.checkpoint_every` and
`train.samples_every` are checked to leave the numbers unchanged."""
import pytest
import yaml

from grpo_research.cli import main
from grpo_research.config import RunConfig, load_config
from grpo_research.errors import UsageError
from grpo_research.rundir import OPERATIONAL_KEYS, _flatten, check_run_dir, is_operational, write_config
from grpo_research.tracking import read_metrics
from tests.helpers import deterministic, fast_run
from tests.wandb_history import metrics_as_wandb, wandb_history

BASE = ["train.steps=7"]
# each operational key, changed away from BASE's value
OPERATIONAL = ["train.lock_wait=600", "train.threads=3", "train.checkpoint_every=5", "train.samples_every=2",
               "tracking.progress=false", "tracking.wandb=disabled", "tracking.project=elsewhere",
               "tracking.group=g2", "tracking.tags=[requeued]"]
IDENTITY = ["train.steps=8", "seed=1", "optim.lr=1e-4", "train.eval_every=3", "train.eval_size=50",
            "train.micro_batch_size=8", "train.shared_prefix=false", "model.cache_dir=/elsewhere", "algo.beta=0.0"]


def _run(tmp_path, cfg):
    run = tmp_path / "run"
    write_config(run, cfg)
    return run


def test_every_listed_key_is_a_config_key_and_every_case_is_listed():
    fields = set(_flatten(RunConfig().to_dict()))
    sections = {k.split(".")[0] + "." for k in fields}
    for key in OPERATIONAL_KEYS:
        assert key in fields or key in sections, key
    assert {o.split("=")[0] for o in OPERATIONAL} == {k for k in fields if is_operational(k)}
    assert not [o for o in IDENTITY if is_operational(o.split("=")[0])]


@pytest.mark.parametrize("override", OPERATIONAL)
def test_a_changed_operational_key_resumes_and_config_yaml_takes_it(override, tmp_path):
    run = _run(tmp_path, load_config(None, BASE))
    cfg = load_config(None, [*BASE, override])
    key = override.split("=")[0]
    changed = check_run_dir(run, cfg)  # no error
    assert [c.split(":")[0] for c in changed] == [key]
    write_config(run, cfg)
    section, name = key.split(".")
    assert yaml.safe_load((run / "config.yaml").read_text())[section][name] == getattr(getattr(cfg, section), name)


@pytest.mark.parametrize("override", IDENTITY)
def test_a_changed_key_that_changes_the_numbers_is_still_refused(override, tmp_path):
    run = _run(tmp_path, load_config(None, BASE))
    before = (run / "config.yaml").read_text()
    with pytest.raises(UsageError, match=rf"already holds a different config \({override.split('=')[0]}: "):
        check_run_dir(run, load_config(None, [*BASE, override, "train.lock_wait=5"]))
    assert (run / "config.yaml").read_text() == before


def test_checkpoint_and_sample_intervals_leave_the_numbers_unchanged_and_a_rerun_may_change_them(
        tiny_model_dir, tmp_path, monkeypatch, capsys):
    """The same run with checkpoints and sample tables at every step and at none but the last
    gives the same metrics and model; rerun with every operational key changed, the finished run
    resumes (nothing retrained) and, now logged to W&B offline, W&B is sent every row it lacked."""
    import torch

    args = [f"model.name_or_path={tiny_model_dir}",
            *fast_run("reward.weights={overlong: 1.0}", "optim.lr=1e-2", "train.steps=4", "train.eval_every=2")]
    ref, run = tmp_path / "ref", tmp_path / "run"
    assert main(["train", "--run-dir", str(ref), *args, "train.checkpoint_every=100", "train.samples_every=100"]) == 0
    assert main(["train", "--run-dir", str(run), *args, "train.checkpoint_every=1", "train.samples_every=1"]) == 0
    assert deterministic(read_metrics(run / "metrics.jsonl")) == deterministic(read_metrics(ref / "metrics.jsonl"))
    a = torch.load(run / "checkpoint" / "state.pt", weights_only=False)["policy"]
    b = torch.load(ref / "checkpoint" / "state.pt", weights_only=False)["policy"]
    assert all(torch.equal(a[k], b[k]) for k in a)

    rows = (run / "metrics.jsonl").read_text()
    monkeypatch.setenv("WANDB_MODE", "offline")
    capsys.readouterr()
    assert main(["train", "--run-dir", str(run), *args, "train.checkpoint_every=3", "train.samples_every=2",
                 "train.lock_wait=30", "train.threads=2", "tracking.wandb=offline", "tracking.group=requeued"]) == 0
    err = capsys.readouterr().err
    assert "resuming with operational keys changed (tracking.group: '' -> 'requeued'; " in err
    assert (run / "metrics.jsonl").read_text() == rows  # nothing retrained
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["train"]["lock_wait"] == 30 and saved["tracking"]["wandb"] == "offline"
    assert wandb_history(run) == metrics_as_wandb(run)  # steps 0-4, every key, as metrics.jsonl has them
    assert main(["train", "--run-dir", str(run), *args, "seed=1"]) == 2  # still refused
