"""maj@k (majority voting, grpo_research/evaluation/metrics.py) against hand-computed examples,
and its place in `score_predictions`' summary (arith and gsm8k; absent for code tasks)."""
from __future__ import annotations

import json

import pytest

from grpo_research.evaluation import aggregate_maj_at_k, answer_key, maj_at_k, maj_ks, majority_correct
from grpo_research.evaluation import score as S
from grpo_research.evaluation.metrics import wilson_ci95


def test_answer_key_pools_spellings_of_one_number_only():
    assert answer_key("007") == answer_key("7") == answer_key("7.0") == answer_key("+7") == answer_key(" 7 ") == "7"
    assert answer_key("-0") == answer_key("0.00") == "0"
    assert answer_key("350") == "350" and answer_key("3.50") == "3.5" and answer_key("-12") == "-12"
    assert answer_key("\\frac{1}{2}") == "\\frac{1}{2}" and answer_key("x + 1") == "x+1"
    assert answer_key("9e99999") == "9e99999"  # an exponent is text, never expanded
    assert answer_key(None) is None


def test_majority_vote_ties_unfinished_and_no_answer():
    # 2 votes for 5 (wrong), 1 for 7 (right): the majority is wrong
    assert majority_correct([("5", False), ("7", True), ("5", False)]) is False
    # a tie goes to the answer seen first
    assert majority_correct([("7", True), ("5", False)]) is True
    assert majority_correct([("5", False), ("7", True)]) is False
    assert majority_correct([("5", False), ("7", True), ("7", True), ("5", False)]) is False
    # non-voting samples (None: unfinished or no answer) neither count nor break ties
    assert majority_correct([(None, False), (None, False), ("7", True)]) is True
    assert majority_correct([(None, False), (None, True)]) is False  # no vote at all: wrong
    assert majority_correct([]) is False
    # the answer is correct when any sample with it was graded correct
    assert majority_correct([("7", False), ("7", True)]) is True


def test_maj_at_k_averages_disjoint_blocks_of_consecutive_samples():
    v = [("7", True), ("5", False), ("5", False), ("5", False), ("7", True), ("7", True), ("9", False)]
    assert maj_at_k(v, 1) == pytest.approx(3 / 7)  # the share of samples that vote correctly
    # blocks [7,5] (tie: 7 first, right), [5,5] wrong, [7,7] right; the 7th sample left out
    assert maj_at_k(v, 2) == pytest.approx(2 / 3)
    assert maj_at_k(v, 3) == pytest.approx(1 / 2)  # [7,5,5] -> 5 wrong; [5,7,7] -> 7 right; 7th left out
    assert maj_at_k(v, 6) == pytest.approx(1.0)  # 7 and 5 three votes each: 7 seen first, right
    assert maj_at_k(v, 7) == pytest.approx(1.0)  # one block of all 7: 7 and 5 tie again (9 alone)
    for bad in (0, 8):
        with pytest.raises(ValueError):
            maj_at_k(v, bad)


def test_maj_ks_powers_of_two_and_the_smallest_count():
    assert maj_ks(64) == [1, 2, 4, 8, 16, 32, 64]
    assert maj_ks(10) == [1, 2, 4, 8, 10]
    assert maj_ks(1) == [1] and maj_ks(3) == [1, 2, 3] and maj_ks(0) == []


def test_aggregate_maj_at_k_means_over_problems_with_the_pass_at_k_interval():
    a = [("7", True), ("5", False), ("7", True), ("7", True)]  # maj@1 3/4, maj@2 1 (tie 7 first), maj@4 1
    # b: maj@1 1/4; maj@2: [1, -] -> 1 wrong, [2, 1] tie -> 2 first, right: 1/2; maj@4: 1 twice, wrong
    b = [("1", False), (None, False), ("2", True), ("1", False)]
    agg = aggregate_maj_at_k([a, b], [1, 2, 4])
    assert agg["1"]["value"] == pytest.approx(0.5) and agg["2"]["value"] == pytest.approx(0.75)
    assert agg["4"]["value"] == pytest.approx(0.5) and agg["4"]["n_tasks"] == 2
    assert agg["4"]["ci95"] == pytest.approx(list(wilson_ci95(1, 2)))  # every value 0 or 1: Wilson
    lo, hi = agg["1"]["ci95"]
    assert 0 <= lo < 0.5 < hi <= 1


def test_score_predictions_reports_maj_at_k_for_arith():
    """arith: `007` and `7` are one answer; an unfinished sample does not vote."""
    from grpo_research.tasks.base import get_task

    import grpo_research.tasks  # noqa: F401  (registers arith)

    task = get_task("arith")
    p0, p1 = task.heldout_problems(2)
    s0, s1 = int(p0.answer), int(p1.answer)
    wrong0, wrong1 = s0 + 1, s1 + 1
    preds = [  # p0: right (padded), wrong, wrong, right -> maj@4: tie, right seen first
        {"task_id": p0.id, "completion": f"#### {s0:03d}"}, {"task_id": p0.id, "completion": f"#### {wrong0}"},
        {"task_id": p0.id, "completion": f"#### {wrong0}"}, {"task_id": p0.id, "completion": f"#### {s0}"},
        # p1: wrong x2 unfinished (no vote), right, no answer -> maj@4: right alone
        {"task_id": p1.id, "completion": f"#### {wrong1}", "finished": False},
        {"task_id": p1.id, "completion": f"#### {wrong1}", "finished": False},
        {"task_id": p1.id, "completion": f"#### {s1}"}, {"task_id": p1.id, "completion": "no idea"},
    ]
    summary, _ = S.score_predictions(task, preds)
    maj = summary["maj@k"]
    assert set(maj) == {"1", "2", "4"}
    assert maj["1"]["value"] == pytest.approx((2 / 4 + 1 / 4) / 2)
    # p0: [right, wrong] tie -> right, [wrong, right] tie -> wrong: 1/2; p1: [-, -] 0, [right, -] 1: 1/2
    assert maj["2"]["value"] == pytest.approx(0.5)
    assert maj["4"]["value"] == pytest.approx(1.0) and maj["4"]["n_tasks"] == 2
    assert summary["pass@k"]["4"]["value"] == 1.0


def test_score_predictions_maj_at_k_on_gsm8k_and_not_on_code(tmp_path):
    from grpo_research.tasks.base import get_task

    S._register_tasks()
    data = tmp_path / "gsm.jsonl"
    data.write_text("".join(json.dumps({"question": f"{i}+{i}?", "answer": f"#### {2 * i}"}) + "\n"
                            for i in range(2)))
    task = get_task("gsm8k", data_path=data)
    preds = [{"task_id": "1", "completion": c} for c in ("so 2.0", "#### 3", "#### 3", "2")]
    preds += [{"task_id": "0", "completion": c} for c in ("#### 0", "#### 1", "#### 0")]  # 3 samples: k up to 3
    summary, _ = S.score_predictions(task, preds)
    assert set(summary["maj@k"]) == {"1", "2", "3"}
    # task 1: [2.0, 3] tie -> 2.0 (graded right), [3, 2] tie -> 3 wrong: 1/2; task 0: one block [0, 1] -> 0 right
    assert summary["maj@k"]["2"]["value"] == pytest.approx(0.75)
    # task 1, k=3: [2.0, 3, 3] -> 3 wrong; task 0: [0, 1, 0] -> 0 right
    assert summary["maj@k"]["3"]["value"] == pytest.approx(0.5)
    code = get_task("humaneval", data_path=_humaneval(tmp_path))
    summary, _ = S.score_predictions(code, [{"task_id": "HumanEval/0", "completion": "    return 1\n"}])
    assert "maj@k" not in summary and summary["pass@1"] == 1.0


def _humaneval(tmp_path):
    path = tmp_path / "he.jsonl"
    path.write_text(json.dumps({"task_id": "HumanEval/0", "prompt": "def f():\n", "entry_point": "f",
                                "canonical_solution": "    return 1\n",
                                "test": "def check(candidate):\n    assert candidate() == 1\n"}) + "\n")
    return path
