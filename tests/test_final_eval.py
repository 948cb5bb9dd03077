"""The trainer's last held-out evaluation as an evaluation file, and `eval --reuse-final-eval`
(grpo_research/evaluation/final.py): the copy equals a fresh evaluation of the saved model,
and anything that differs from the run's own evaluation generates instead."""
import json

import pytest
import torch

from grpo_research.cli import main
from grpo_research.evaluation.final import final_eval_path
from grpo_research.evaluation.score import predictions_path, samples_path
from tests.helpers import fast_run

# fields that say when and how a file was made, not what it measured
PROVENANCE = {"generate_s", "elapsed_s", "evaluated_by", "reused_from"}


@pytest.fixture(scope="module")
def run_dir(tiny_model_dir, tmp_path_factory):
    run = tmp_path_factory.mktemp("final_eval") / "run"
    assert main(["train", "--run-dir", str(run), f"model.name_or_path={tiny_model_dir}",
                 *fast_run("train.steps=3", "train.eval_every=2", "train.eval_size=24")]) == 0
    return run


def _eval(run, out, *extra):
    return main(["eval", "--checkpoint", str(run), "--benchmark", "arith", "--out", str(out), "--threads", "1",
                 *extra])


def _lines(path):
    return path.read_text().splitlines()


def test_the_trainer_writes_its_last_evaluation_as_an_eval_file(run_dir):
    record = json.loads(final_eval_path(run_dir).read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert record["evaluated_by"] == {"trainer_step": 3}  # the last step, not step 2's evaluation
    assert record["benchmark"] == "arith" and record["n_problems"] == record["n_predictions"] == 24
    assert record["pass@1"] == summary["final_accuracy"]
    assert record["decoding"] == {"greedy": True, "samples": 1, "temperature": None, "seed": None,
                                  "max_new_tokens": 10}
    assert len(_lines(predictions_path(final_eval_path(run_dir)))) == 24
    assert len(_lines(samples_path(final_eval_path(run_dir)))) == 24


def test_reuse_equals_a_fresh_evaluation_of_the_saved_model(run_dir, tmp_path, capsys):
    fresh, reused = tmp_path / "fresh.json", tmp_path / "reused.json"
    assert _eval(run_dir, fresh, "--n", "24") == 0
    assert _eval(run_dir, reused, "--n", "24", "--reuse-final-eval") == 0
    out = capsys.readouterr()
    assert "the run's own final evaluation at step 3" in out.out and "not reusing" not in out.err
    a, b = json.loads(fresh.read_text()), json.loads(reused.read_text())
    assert b["reused_from"] == str(final_eval_path(run_dir))
    assert {k: v for k, v in a.items() if k not in PROVENANCE} == {k: v for k, v in b.items() if k not in PROVENANCE}
    assert _lines(predictions_path(fresh)) == _lines(predictions_path(reused))
    assert _lines(samples_path(fresh)) == _lines(samples_path(reused))


@pytest.mark.parametrize("extra, why", [
    (["--n", "12"], "--n 12 is not the run's train.eval_size 24"),
    (["--n", "24", "--max-new-tokens", "6"], "--max-new-tokens 6 differs"),
    (["--n", "24", "--samples", "2", "--temperature", "1.0"], "--samples 2 is not greedy"),
])
def test_another_evaluation_is_generated_and_says_why(run_dir, tmp_path, capsys, extra, why):
    out = tmp_path / "o.json"
    assert _eval(run_dir, out, *extra, "--reuse-final-eval") == 0
    assert f"not reusing the run's final evaluation: {why}; generating" in capsys.readouterr().err
    s = json.loads(out.read_text())
    assert "reused_from" not in s and "generate_s" in s


def test_a_record_of_another_step_is_not_reused(run_dir, tmp_path, capsys):
    run = tmp_path / "copy"
    import shutil

    shutil.copytree(run_dir, run)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "steps": 5}))  # as if training had gone on
    assert _eval(run, tmp_path / "o.json", "--n", "24", "--reuse-final-eval") == 0
    assert "the record is of step 3, the run ended at 5" in capsys.readouterr().err
    shutil.rmtree(run / "final_eval")
    assert _eval(run, tmp_path / "p.json", "--n", "24", "--reuse-final-eval") == 0
    assert "the run wrote no final_eval/heldout.json" in capsys.readouterr().err


def test_a_reused_evaluation_does_not_import_torch(run_dir, tmp_path):
    """The copy is the point: a reused evaluation must not pay for torch (~1.3 s of the ~2.4 s
    job before the config was read as plain YAML)."""
    import subprocess
    import sys

    code = ("import sys; from grpo_research.cli import main; "
            f"rc = main(['eval', '--checkpoint', {str(run_dir)!r}, '--benchmark', 'arith', '--n', '24', "
            f"'--out', {str(tmp_path / 'o.json')!r}, '--reuse-final-eval']); "
            "print(rc, 'torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split()[-3:] == ["0", "False", "False"], out.stdout + out.stderr
    assert json.loads((tmp_path / "o.json").read_text())["reused_from"] == str(final_eval_path(run_dir))


def test_summary_records_where_the_run_ran(run_dir):
    from grpo_research.provenance import code_version, cpu_model

    env = json.loads((run_dir / "summary.json").read_text())["environment"]
    assert env["cpu"] == cpu_model() and env["torch"] == torch.__version__ and env["accelerator"] == "none"
    assert env["code"] == code_version()
