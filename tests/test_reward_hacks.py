"""The reward-hack corpus (tests/reward_hacks.py) scores 0 in every grading path: `score`,
each code task's `grade`, and the `code_tests` reward term; honest solutions score 1."""
from __future__ import annotations

import gzip
import json

import pytest

from grpo_research.evaluation.score import score_predictions
from grpo_research.rewards.library import code_tests_reward
from grpo_research.sandbox import SandboxLimits, available_isolation
from grpo_research.tasks.base import get_task

from tests.reward_hacks import ATTACKS, RAW_ATTACKS

SLOW = {"sleep_past_deadline"}  # costs a timeout: graded on one path only
LIMITS = SandboxLimits(timeout_s=2.0, cpu_s=2, memory_mb=512)

HUMANEVAL = [{
    "task_id": "HumanEval/0",
    "prompt": 'import math\n\ndef twice(x):\n    """Return 2 * x."""\n',
    "canonical_solution": "    return 2 * x\n",
    "entry_point": "twice",
    "test": "def check(candidate):\n    assert candidate(3) == 6\n    assert abs(candidate(0.5) - 1.0) < 1e-9\n",
}]
MBPP = [{
    "task_id": 11, "text": "Write a function to return the area of a circle of radius r.",
    "code": "import math\ndef circle_area(r):\n    return math.pi * r * r",
    # the tests use `math` without importing it: in the original harness it is the completion's
    "test_list": ["assert math.isclose(circle_area(1), 3.141592653589793)",
                  "assert circle_area(2) == 4 * math.pi"],
    "test_setup_code": "", "challenge_test_list": [],
}]
SANITIZED = [{
    "task_id": 11, "prompt": "Write a function to return the area of a circle of radius r.",
    "code": "def circle_area(r):\n    return math.pi * r * r",
    "test_imports": ["import math"],
    "test_list": ["assert math.isclose(circle_area(1), 3.141592653589793)",
                  "assert circle_area(2) == 4 * math.pi"],
}]


@pytest.fixture(scope="module")
def tasks(tmp_path_factory):
    d = tmp_path_factory.mktemp("hack-data")
    with gzip.open(d / "HumanEval.jsonl.gz", "wt") as f:
        f.write("\n".join(json.dumps(r) for r in HUMANEVAL) + "\n")
    (d / "mbpp.jsonl").write_text("\n".join(json.dumps(r) for r in MBPP) + "\n")
    (d / "sanitized-mbpp.json").write_text(json.dumps(SANITIZED))
    out = {
        "humaneval": get_task("humaneval", data_path=str(d / "HumanEval.jsonl.gz"), workers=2),
        "mbpp": get_task("mbpp", data_path=str(d / "mbpp.jsonl"), workers=2),
        "mbpp_sanitized": get_task("mbpp_sanitized", data_path=str(d / "sanitized-mbpp.json"), workers=2),
        "code": get_task("code", levels=[1], n_tests=2, workers=2),
    }
    for task in out.values():
        task.limits = LIMITS
    return out


def _problem(task):
    return task.heldout_problems(1)[0]


def _completions(name: str, problem) -> tuple[list[str], list[str]]:
    """(labels, completions) of every attack in the form `name`'s completions take."""
    labels, comps = [], []
    for label, payload in ATTACKS.items():
        code = payload.replace("NAME", problem.entry_point)
        if name == "humaneval":
            comps.append("```python\n" + code + "\n```")
        elif name == "code":
            comps.append("    pass\n" + code)
        else:
            comps.append(code)
        labels.append(label)
    for label, raw in RAW_ATTACKS.items():
        if name in ("humaneval", "code"):
            comps.append(raw)
        else:
            comps.append(f"def {problem.entry_point}(*a, **k):\n" + raw)
        labels.append(label)
    return labels, comps


def test_the_corpus_is_large_enough():
    assert len(ATTACKS) + len(RAW_ATTACKS) >= 20


@pytest.mark.parametrize("name", ["humaneval", "mbpp", "mbpp_sanitized", "code"])
def test_every_attack_scores_zero_in_grade_and_code_tests(tasks, name):
    if available_isolation() == "none":
        pytest.skip("the corpus needs an isolating sandbox (bwrap or unshare)")
    task, problem = tasks[name], _problem(tasks[name])
    labels, comps = _completions(name, problem)
    keep = [i for i, lab in enumerate(labels) if lab not in SLOW or name == "humaneval"]
    labels, comps = [labels[i] for i in keep], [comps[i] for i in keep]
    honest = problem.solution  # in the same batch: the grader still passes what is right
    grades = task.grade_many([problem] * (len(comps) + 1), comps + [honest], [True] * (len(comps) + 1))
    assert grades[-1].correct, grades[-1]
    passed = [lab for lab, g in zip(labels, grades) if g.correct or g.masked]
    assert not passed, f"{name}: graded as passing (or masked): {passed}"
    fast = [i for i, lab in enumerate(labels) if lab not in SLOW]
    labels, comps = [labels[i] for i in fast], [comps[i] for i in fast]
    reward = code_tests_reward(task, mode="fraction")
    values = reward([problem] * (len(comps) + 1), comps + [honest], [True] * (len(comps) + 1))
    assert values[-1] == 1.0
    paid = [lab for lab, v in zip(labels, values) if v != 0.0]
    assert not paid, f"{name}: code_tests paid a reward to {paid}"


def test_score_reports_zero_for_the_corpus(tasks):
    if available_isolation() == "none":
        pytest.skip("the corpus needs an isolating sandbox (bwrap or unshare)")
    task = tasks["humaneval"]
    problem = _problem(task)
    labels, comps = _completions("humaneval", problem)
    comps = [c for lab, c in zip(labels, comps) if lab not in SLOW]
    preds = [{"task_id": problem.id, "completion": c} for c in comps]
    summary, rows = score_predictions(task, preds)
    assert summary["pass@1"] == 0.0 and not any(r["passed"] for r in rows)
    summary, _ = score_predictions(task, [{"task_id": problem.id, "completion": problem.solution}])
    assert summary["pass@1"] == 1.0
