"""GSM8K and MATH answers: Unicode minus signs and full-width digits are read as what they mean,
fractions are compared as numbers (issue 32: `#### −18` was graded correct against 18)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grpo_research.evaluation.metrics import answer_key
from grpo_research.tasks import get_task
from grpo_research.tasks.math_benchmarks import extract_gsm8k, normalise_math_text, number_value, numbers_equal


@pytest.fixture(scope="module")
def gsm(tmp_path_factory):
    """gsm8k with three problems whose gold answers are 18, -18 and 3.6."""
    path = tmp_path_factory.mktemp("gsm") / "test.jsonl"
    golds = ["18", "-18", "3.6"]
    path.write_text("".join(json.dumps({"question": f"q{i}", "answer": f"so\n#### {g}"}) + "\n"
                            for i, g in enumerate(golds)))
    task = get_task("gsm8k", data_path=path)
    return task, dict(zip(golds, task.heldout_problems()))


@pytest.mark.parametrize("completion, gold, correct", [
    ("#### \u221218", "18", False),  # U+2212 MINUS SIGN: -18, not 18
    ("#### \u221218", "-18", True),
    ("#### \u201318", "-18", True),  # en dash typeset as a minus
    ("#### \uff0d18", "-18", True),  # full-width hyphen-minus
    ("The temperature falls to \u221218.", "18", False),  # the fallback (no ####) reads the sign too
    ("The temperature falls to \u221218.", "-18", True),
    ("#### \uff11\uff18", "18", True),  # full-width digits
    ("#### \u0661\u0668", "18", True),  # Arabic-Indic digits
    ("#### 18/5", "3.6", True),  # a fraction is its value
    ("#### 18/5", "18", False),
    ("#### \\frac{18}{5}", "3.6", True),
    ("#### \\frac{18}{5}", "18", False),
    ("#### -\\dfrac{18}{5}", "3.6", False),
    ("#### $18 / 5", "3.6", True),
    ("so 18\u20445 in all", "3.6", True),  # U+2044 FRACTION SLASH, no ####
    ("#### 18", "18", True),
    ("#### 1,8", "18", False),  # not a thousands group: 1 (then ",8")
])
def test_gsm8k_signs_digits_and_fractions(gsm, completion, gold, correct):
    task, problems = gsm
    assert task.grade(problems[gold], completion).correct is correct, (completion, gold)


def test_gsm8k_extraction_and_format_see_the_normalised_text():
    assert extract_gsm8k("#### \u221218") == ("-18", True)  # formatted: the #### is followed by a number
    assert extract_gsm8k("#### \uff11\uff18") == ("18", True)
    assert extract_gsm8k("#### 18/5 apples") == ("18/5", True)
    assert extract_gsm8k("#### \\tfrac{-18}{5}") == ("-18/5", True)
    assert extract_gsm8k("It costs \u201418 dollars") == ("18", False)  # an em dash is punctuation, not a sign
    # no ####: the last \boxed{} before the last number (Qwen2.5-Coder-0.5B on GSM8K test 23, 78)
    assert extract_gsm8k("shorter by \\(\\boxed{88}\\) cm after burning from 1:00 PM to 5:00 PM.") == ("88", False)
    assert extract_gsm8k("\\boxed{3} first, then \\boxed{\\$27} for 18 flowers") == ("27", False)
    assert extract_gsm8k("the answer \\boxed{} is 12") == ("12", False)  # an empty box: the last number
    assert extract_gsm8k("#### 5, not \\boxed{6}") == ("5", True)  # #### first
    assert normalise_math_text("\u2212\uff13\uff0e5 \u0968") == "-3.5 2"  # Devanagari two


def test_number_values():
    assert number_value("18/5") == number_value("3.6") and number_value("-18/5") == -number_value("3.6")
    assert numbers_equal("1500", "1500.00") and not numbers_equal("18/5", "18")
    assert number_value("1/0") is None and number_value("1/2/3") is None and number_value("abc") is None
    assert number_value("1e99999") is None  # would expand to a 100,000-digit integer


def test_majority_ballots_pool_equal_fractions():
    assert answer_key("18/5") == answer_key("3.6") == "3.6"
    assert answer_key("2/6") == answer_key("1/3") == "1/3"
    assert answer_key("-10/2") == answer_key("-5") == "-5"
    assert answer_key("1/0") == "1/0"  # not a number: its text


@pytest.fixture(scope="module")
def math500(tmp_path_factory):
    path = tmp_path_factory.mktemp("math") / "test.jsonl"
    golds = ["18", "-18", "\\frac{18}{5}"]
    path.write_text("".join(json.dumps({"problem": f"p{i}", "answer": g, "unique_id": f"test/x/{i}.json"}) + "\n"
                            for i, g in enumerate(golds)))
    task = get_task("math500", data_path=path)
    return task, dict(zip(golds, task.heldout_problems()))


@pytest.mark.parametrize("completion, gold, correct", [
    ("\\boxed{\u221218}", "18", False),
    ("\\boxed{\u221218}", "-18", True),
    ("\\boxed{\u201318}", "-18", True),
    ("\\boxed{\uff11\uff18}", "18", True),
    ("\\boxed{\uff11\uff18}", "-18", False),
    ("\\boxed{18/5}", "\\frac{18}{5}", True),
    ("\\boxed{3.6}", "\\frac{18}{5}", True),
    ("\\boxed{\\frac{18}{5}}", "\\frac{18}{5}", True),
    ("\\boxed{18/5}", "18", False),
    ("\\boxed{\\frac{18}{5}}", "18", False),
    ("so the answer is \u221218", "-18", True),  # no \boxed: math-verify's own extraction, of the normalised text
])
def test_math500_signs_digits_and_fractions(math500, completion, gold, correct):
    task, problems = math500
    assert task.grade(problems[gold], completion).correct is correct, (completion, gold)


def _real() -> Path | None:
    env = os.environ.get("GRPO_RESEARCH_BENCHMARKS")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
    return path if (path / "gsm8k" / "test.jsonl").is_file() else None


@pytest.mark.skipif(_real() is None, reason="real benchmark files (shared/benchmarks) not present")
def test_real_gsm8k_gold_answers_still_grade_correct_and_their_negation_wrong():
    # (tests/test_benchmarks.py grades MATH-500's 500 gold answers against themselves through math-verify)
    task = get_task("gsm8k", data_path=_real() / "gsm8k" / "test.jsonl")
    problems = task.heldout_problems()
    assert all(task.grade(p, p.solution).correct for p in problems)
    assert all(task.grade(p, "#### " + p.answer.replace("-", "\u2212")).correct for p in problems)
    nonzero = [p for p in problems if number_value(p.answer) != 0]
    flipped = [p.answer[1:] if p.answer.startswith("-") else "\u2212" + p.answer for p in nonzero]
    assert not any(task.grade(p, "#### " + f).correct for p, f in zip(nonzero, flipped))
