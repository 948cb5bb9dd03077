"""The synthetic `code` task: deterministic, disjoint splits, short prompts, graded in the sandbox."""
from __future__ import annotations

import random

import pytest

import grpo_research.tasks.code as C
from grpo_research.tasks.base import get_task


def run_in_process(problem, completion: str) -> bool:
    """Trusted check of our own reference solutions (no sandbox needed)."""
    try:
        exec(problem.prompt + completion + "\n" + problem.tests, {})
    except AssertionError:
        return False
    return True


def test_example_problem_format():
    p = C.make_problem("times_plus:3:2", 0, "x")
    assert p.prompt.startswith('def f(x):\n    """Return x times 3 plus 2. f(')
    assert p.prompt.endswith('"""\n') and p.solution == "    return x * 3 + 2\n" and p.entry_point == "f"
    assert p.tests.rstrip().endswith("check(f)") and len(p.meta["test_list"]) >= 4
    assert p.meta["level"] == 2


def test_every_reference_solution_passes_its_tests_and_fits_120_chars():
    task = get_task("code")
    problems = task.heldout_problems() + task.train_problems(random.Random(0), 300)
    for p in problems:
        assert run_in_process(p, p.solution), p
        assert len(p.prompt + p.solution) <= 120, p.prompt + p.solution
        assert task.check_format(p, p.solution)


def test_splits_are_deterministic_and_disjoint():
    task = get_task("code")
    held = task.heldout_problems()
    assert held == get_task("code").heldout_problems()
    assert len(held) > 300 and len({p.meta["spec"] for p in held}) == len(held)
    a = task.train_problems(random.Random(7), 500)
    assert a == task.train_problems(random.Random(7), 500)
    assert a != task.train_problems(random.Random(8), 500)
    held_specs = {p.meta["spec"] for p in held}
    assert not held_specs & {p.meta["spec"] for p in a}
    assert {p.solution for p in held} - {p.solution for p in a}  # held-out solutions never seen in training
    assert {p.meta["level"] for p in a} == {1, 2, 3}
    more = task.heldout_problems(len(held) + 5)  # a second round varies the example, not the spec
    assert more[: len(held)] == held and more[len(held)].meta["spec"] == held[0].meta["spec"]
    assert more[len(held)].prompt != held[0].prompt or more[len(held)].tests != held[0].tests


def test_levels_select_families_and_bad_options_fail():
    easy = get_task("code", levels=[1])
    assert {p.meta["level"] for p in easy.train_problems(random.Random(0), 50)} == {1}
    assert {p.meta["level"] for p in easy.heldout_problems()} == {1}
    with pytest.raises(ValueError):
        get_task("code", levels=[4])
    with pytest.raises(ValueError):
        get_task("code", heldout_percent=0)


def test_sandbox_grading_right_wrong_unfinished_and_malformed():
    task = get_task("code", levels=[1, 3])
    problems = task.heldout_problems(6)
    completions = [p.solution for p in problems]
    grades = task.grade_many(problems, completions, [True] * 6)
    assert all(g.correct and g.outcome == "passed" and g.formatted for g in grades)
    p = problems[0]
    cases = [("    return None\n", True), (p.solution, False), ("    return (\n", True), ("    while True: pass\n", True)]
    small = get_task("code", levels=[1, 3], timeout_s=1.0)
    grades = small.grade_many([p] * 4, [c for c, _ in cases], [f for _, f in cases])
    assert [(g.correct, g.outcome) for g in grades] == [
        (False, "failed"), (False, "unfinished"), (False, "failed"), (False, "timeout")]
    assert not small.check_format(p, "    return (\n") and not small.check_format(p, "x = 1\n")


def test_program_with_a_subset_of_tests():
    task = get_task("code")
    p = task.heldout_problems(1)[0]
    prog = task.program(p, p.solution, p.meta["test_list"][:1])
    assert prog.solution == p.prompt + p.solution and prog.prelude == p.prompt
    assert prog.tests == "\n" + p.meta["test_list"][0] + "\n" and prog.entry_point == "f"
    exec(prog.solution + prog.tests, {})
