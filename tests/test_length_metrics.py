"""completion_len/correct and completion_len/incorrect (issue 15): mean completion lengths of the
completions the `correct` term scored 1 and below 1, in every RL step row."""
import pytest

from grpo_research.config import load_config
from grpo_research.tasks.arith import ArithTask
from grpo_research.tasks.base import Grade
from grpo_research.trainers import build_trainer
from grpo_research.tracking.rows import lengths_by_outcome
from tests.helpers import fast_run


def test_lengths_by_outcome_hand_computed():
    # correct: rows 0 (3 tokens) and 4 (7); incorrect: rows 1 (5), 3 (2) and the partial 0.5 (row 5, 4); row 2 masked
    out = lengths_by_outcome([3, 5, 10, 2, 7, 4], [1.0, 0.0, None, 0.0, 1.0, 0.5])
    assert out == {"completion_len/correct": 5.0, "completion_len/incorrect": pytest.approx(11 / 3)}
    assert lengths_by_outcome([3, 5], [0.0, 0.0]) == {"completion_len/incorrect": 4.0}  # no correct one: absent
    assert lengths_by_outcome([3, 5], None) == {}  # no `correct` term in the reward


@pytest.mark.parametrize("method", ["grpo", "ppo"])
def test_every_rl_step_row_splits_lengths_by_outcome(tiny_model_dir, tmp_path, monkeypatch, method):
    # a grader that calls a completion right when it has an even number of characters, so both classes occur
    monkeypatch.setattr(ArithTask, "grade", lambda self, p, c, finished=True: Grade(len(c) % 2 == 0, "x"))
    cfg = load_config(None, [f"model.name_or_path={tiny_model_dir}", *fast_run("reward.weights={correct: 1.0}"),
                             "rollout.prompts_per_step=4", f"method={method}"])
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("")
    t = build_trainer(cfg, run, tiny_model_dir)
    row = t.train_step()
    batch, _ = t._last_batch
    lengths = batch.completion_mask.sum(dim=1).tolist()
    right = [n for n, c in zip(lengths, batch.completions) if len(c) % 2 == 0]
    wrong = [n for n, c in zip(lengths, batch.completions) if len(c) % 2]
    assert right and wrong, batch.completions  # the test means something only with both classes
    assert row["completion_len/correct"] == pytest.approx(sum(right) / len(right))
    assert row["completion_len/incorrect"] == pytest.approx(sum(wrong) / len(wrong))
    assert row["reward/correct"] == pytest.approx(len(right) / len(lengths))
