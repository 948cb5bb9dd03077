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
