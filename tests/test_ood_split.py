"""The out-of-distribution held-out split (issue 15): arith option ood_level, evaluated by the
trainer beside the in-distribution split (`eval/accuracy_ood`) and shown beside it in reports."""
import json
import random

import pytest

from grpo_research.analysis.aggregate import TRAINER_HELDOUT, TRAINER_OOD, final_table, run_scores
from grpo_research.analysis.load import load_study_runs
from grpo_research.cli import main
from grpo_research.config import load_config
from grpo_research.errors import ConfigError
from grpo_research.tasks import get_task
from tests.helpers import fast_run


def test_the_ood_split_has_operands_longer_than_any_trained_on():
    task = get_task("arith", ood_level=4)
    ood = task.ood_problems(300)
    assert len(ood) == 300 and len({p.prompt for p in ood}) == 300
    assert all(1000 <= p.meta["a"] <= 9999 and 1000 <= p.meta["b"] <= 9999 for p in ood)
    assert ood[0].prompt == f"{ood[0].meta['a']}+{ood[0].meta['b']}=" and ood[0].answer == str(ood[0].meta["a"] + ood[0].meta["b"])
    assert task.ood_problems(300) == ood and task.ood_problems(10) == ood[:10]  # fixed
    train = task.train_problems(random.Random(0), 2000)
    assert max(max(p.meta["a"], p.meta["b"]) for p in train) < 1000  # never trained on
    assert get_task("arith").ood_problems(5) == []  # without the option: no OOD split


@pytest.mark.parametrize("value", [3, 2, 7, "4", True])
def test_an_ood_level_that_is_not_out_of_distribution_is_refused(value, tmp_path, capsys):
    with pytest.raises(ValueError, match="ood_level must be an integer above every training level"):
        get_task("arith", ood_level=value)
    run = tmp_path / "run"
    assert main(["train", "--run-dir", str(run), f"task.options={{ood_level: {json.dumps(value)}}}",
                 "tracking.wandb=disabled"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: task (arith): arith option ood_level must be"), err
    assert not run.exists()


def test_the_trainer_evaluates_ood_beside_the_heldout_split_and_reports_show_it(tiny_model_dir, tmp_path):
    runs = tmp_path / "runs"
    for seed in (1, 2):
        assert main(["train", "--run-dir", str(runs / f"grpo-seed{seed}"), f"model.name_or_path={tiny_model_dir}",
                     *fast_run(), "train.steps=2", "train.eval_every=2", f"seed={seed}",
                     "task.options={ood_level: 4}"]) == 0
    rows = [json.loads(l) for l in (runs / "grpo-seed1" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/accuracy" in r]
    assert [r["step"] for r in evals] == [0, 2] and all(0 <= r["eval/accuracy_ood"] <= 1 for r in evals)
    summary = json.loads((runs / "grpo-seed1" / "summary.json").read_text())
    assert summary["final_accuracy_ood"] == evals[-1]["eval/accuracy_ood"]
    loaded = load_study_runs(runs)
    assert run_scores(loaded[0])[TRAINER_OOD] == summary["final_accuracy_ood"]
    final = final_table(loaded)
    assert list(dict.fromkeys(final["benchmark"])) == [TRAINER_HELDOUT, TRAINER_OOD]
    # a run without the option has no OOD key anywhere
    plain = tmp_path / "plain"
    assert main(["train", "--run-dir", str(plain), f"model.name_or_path={tiny_model_dir}", *fast_run(),
                 "train.steps=1"]) == 0
    assert not any("eval/accuracy_ood" in l for l in (plain / "metrics.jsonl").read_text().splitlines())
    assert "final_accuracy_ood" not in json.loads((plain / "summary.json").read_text())
