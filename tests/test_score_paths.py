"""`score` checks its outputs before grading and fails loudly when nothing could be graded (issue 13)."""
import json

import pytest

from grpo_research.cli.score import main as score_main

GSM = [{"question": "What is 1 + 1?", "answer": "1 + 1 = 2\n#### 2"}, {"question": "2 + 3?", "answer": "#### 5"}]


@pytest.fixture
def files(tmp_path):
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in GSM))
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"task_id": "0", "completion": "#### 2"}) + "\n")
    return data, preds


def _score(data, preds, out, *extra):
    return score_main(["--benchmark", "gsm8k", "--data", str(data), "--predictions", str(preds), "--out", str(out),
                       *extra])


def test_out_equal_to_data_is_refused_and_the_data_kept(files, tmp_path, capsys):
    data, preds = files
    before = data.read_text()
    assert _score(data, preds, data) == 2
    assert "is the input" in capsys.readouterr().err and data.read_text() == before
    (tmp_path / "link.json").symlink_to(data)
    assert _score(data, preds, tmp_path / "link.json") == 2 and data.read_text() == before


@pytest.mark.parametrize("out, needle", [("adir", "is a directory"), ("new/", "names a directory"),
                                         ("afile/out.json", "is a file, not a directory")])
def test_unwritable_outputs_fail_before_grading(files, tmp_path, capsys, out, needle):
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("")
    data, preds = files
    assert _score(data, preds, str(tmp_path / out) + ("/" if out.endswith("/") else "")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


@pytest.mark.parametrize("timeout", ["1e9", "inf", "nan", "0"])
def test_absurd_timeouts_are_one_line(files, tmp_path, capsys, timeout):
    data, preds = files
    assert _score(data, preds, tmp_path / "o.json", "--timeout", timeout) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--timeout" in err[0]


def test_a_run_where_every_prediction_is_an_infrastructure_failure_fails(files, tmp_path, capsys, monkeypatch):
    import grpo_research.evaluation.score as score
    from grpo_research.tasks.base import Grade

    real = score.score_predictions

    def broken(task, predictions, labels):
        task.grade_many = lambda problems, completions, finished: [
            Grade(correct=False, outcome="sandbox_error", formatted=False, masked=True) for _ in problems]
        return real(task, predictions, labels)

    monkeypatch.setattr(score, "score_predictions", broken)
    data, preds = files
    assert _score(data, preds, tmp_path / "o.json") == 1
    assert "hit sandbox errors" in capsys.readouterr().err


# ---------------------------------------------------------------- `eval`: the same promises
from grpo_research.cli.eval import main as eval_main  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A random char Llama whose context (192) fits a GSM8K prompt plus a few tokens."""
    from grpo_research.models import build_char_tokenizer, build_tiny_model

    d = tmp_path_factory.mktemp("eval_model")
    tok = build_char_tokenizer()
    build_tiny_model(len(tok), hidden_size=16, num_layers=1, num_heads=2, intermediate_size=32,
                     max_position_embeddings=192, seed=0).save_pretrained(d)
    tok.save_pretrained(d)
    return d


def _eval(model_dir, out, *extra, data=None):
    data_args = ["--data", str(data)] if data else []
    return eval_main(["--checkpoint", str(model_dir), "--benchmark", "gsm8k", *data_args, "--out", str(out),
                      "--n", "2", "--max-new-tokens", "4", *extra])


@pytest.mark.parametrize("extra, needle", [
    (["--samples", "2", "--temperature", "0"], "temperature 0 is greedy: use --samples 1"),
    (["--samples", "2"], "must be a finite number above 0, got None"),
    (["--samples", "2", "--temperature", "nan"], "must be a finite number above 0, got nan"),
    (["--temperature", "0.7"], "--temperature applies only with --samples > 1"),
    (["--seed", str(2 ** 64)], "--seed must be in [0, 2**63)"),
    (["--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
    (["--max-new-tokens", "1000"], "exceeds the model's context of 192 tokens"),
    (["--threads", "-1"], "--threads must be 0"),
])
def test_eval_refuses_options_that_cannot_mean_what_they_say(files, model_dir, tmp_path, capsys, extra, needle):
    data, _ = files
    assert _eval(model_dir, tmp_path / "o.json", *extra, data=data) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not list(tmp_path.glob("o.*"))


def test_eval_never_writes_over_its_inputs_and_checks_outputs_first(files, model_dir, tmp_path, capsys):
    data, _ = files
    before = data.read_text()
    weights = model_dir / "model.safetensors"
    stamp = weights.stat().st_mtime_ns
    for out, needle in ((data, "is the input"), (weights, "is the input"), (model_dir, "is a directory"),
                        (tmp_path / "new/", "names a directory")):
        assert _eval(model_dir, str(out) + ("/" if str(out).endswith("new") else ""), data=data) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    # OUT.samples.jsonl or OUT.predictions.jsonl landing on an input is refused too
    twin = tmp_path / "d.predictions.jsonl"
    twin.write_text(before)
    assert _eval(model_dir, tmp_path / "d.json", data=twin) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--out (its .predictions.jsonl)" in err[0] and twin.read_text() == before, err
    assert data.read_text() == before and weights.stat().st_mtime_ns == stamp
    assert _eval(model_dir, tmp_path / "ok.json", data=data) == 0
    summary = json.loads((tmp_path / "ok.json").read_text())
    assert summary["n_problems"] == 2 and (tmp_path / "ok.predictions.jsonl").exists()


def test_eval_fails_when_every_prediction_is_an_infrastructure_failure(files, model_dir, tmp_path, capsys,
                                                                        monkeypatch):
    import grpo_research.evaluation.score as score
    from grpo_research.tasks.base import Grade

    real = score.score_predictions

    def broken(task, predictions, labels=None):
        task.grade_many = lambda problems, completions, finished: [
            Grade(correct=False, outcome="sandbox_error", formatted=False, masked=True) for _ in problems]
        return real(task, predictions, labels)

    monkeypatch.setattr(score, "score_predictions", broken)
    data, _ = files
    assert _eval(model_dir, tmp_path / "o.json", data=data) == 1
    assert "all 2 graded predictions hit sandbox errors" in capsys.readouterr().err


def test_eval_of_a_run_dir_rewrites_its_own_eval_files_but_never_the_model(files, model_dir, tmp_path, capsys):
    """The pipeline evaluates runs/<study>/<run>/ into its eval/: a rerun replaces those files;
    the model's files stay inputs."""
    import shutil

    data, _ = files
    run = tmp_path / "run"
    shutil.copytree(model_dir, run / "model")
    out = run / "eval" / "gsm8k.json"
    assert _eval(run, out, data=data) == 0 and _eval(run, out, data=data) == 0, capsys.readouterr().err
    assert _eval(run, run / "model" / "config.json", data=data) == 2
    assert "is the input" in capsys.readouterr().err
