"""Benchmark loaders and graders: small fixtures written here, and the real files when present."""
from __future__ import annotations

import gzip
import json
import os
import random
from pathlib import Path

import pytest

import grpo_research.tasks.benchmarks as B
import grpo_research.tasks.code as code_mod
from grpo_research.evaluation.score import score_predictions
from grpo_research.sandbox import SandboxResult
from grpo_research.tasks.base import get_task
from grpo_research.tasks.code_benchmarks import extract_code


def real_benchmarks() -> Path | None:
    env = os.environ.get("GRPO_RESEARCH_BENCHMARKS")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
    return path if path.is_dir() else None


REAL = real_benchmarks()
needs_real = pytest.mark.skipif(REAL is None, reason="real benchmark files (shared/benchmarks) not present")
WORKERS = 4  # sandbox runs wait on process start-up more than on CPU: 4 workers beat 2 on 2 cores


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("GRPO_RESEARCH_BENCHMARKS", raising=False)


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


GSM = [
    {"question": "Tom has 3 apples and buys 4 more. How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
    {"question": "A car costs $1,200 and a bike $300. Total?", "answer": "1200+300=1500\n#### 1,500"},
    {"question": "It is 5 degrees and drops 8. Temperature?", "answer": "5-8=-3\n#### -3"},
]
MATH = [
    {"problem": "What is 1/2 + 1/4?", "solution": "It is $\\boxed{\\frac{3}{4}}$.", "answer": "\\frac{3}{4}",
     "subject": "Algebra", "level": 1, "unique_id": "test/algebra/1.json"},
    {"problem": "Solve x+1=3.", "solution": "$\\boxed{2}$", "answer": "2", "subject": "Algebra", "level": 1,
     "unique_id": "test/algebra/2.json"},
]
HUMANEVAL = [
    {"task_id": "HumanEval/0", "prompt": "def add(a, b):\n    \"\"\"Add a and b.\"\"\"\n",
     "canonical_solution": "    return a + b\n", "entry_point": "add",
     "test": "\n\ndef check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"},
    {"task_id": "HumanEval/1", "prompt": "def spin(n):\n    \"\"\"Return n.\"\"\"\n",
     "canonical_solution": "    return n\n", "entry_point": "spin",
     "test": "\n\ndef check(candidate):\n    assert candidate(4) == 4\n"},
]


def mbpp_record(task_id: int, setup: str = "") -> dict:
    return {"task_id": task_id, "text": f"Write a function to add {task_id}.",
            "code": f"def add_{task_id}(x):\r\n    return x + {task_id}",
            "test_list": [f"assert add_{task_id}(1) == {1 + task_id}", f"assert add_{task_id}(0) == {task_id}"],
            "test_setup_code": setup, "challenge_test_list": []}


# ---------------------------------------------------------------- loading


def test_every_file_format_gives_the_same_records(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    jsonl = write_jsonl(tmp_path / "a.jsonl", GSM)
    gz = tmp_path / "a.jsonl.gz"
    gz.write_bytes(gzip.compress(jsonl.read_bytes()))
    array = tmp_path / "a.json"
    array.write_text(json.dumps(GSM))
    lines_json = tmp_path / "lines.json"  # JSON lines under a .json name (datasets' to_json)
    lines_json.write_text(jsonl.read_text())
    parquet = tmp_path / "a.parquet"
    pq.write_table(pa.Table.from_pylist(GSM), parquet)
    expected = [p.to_dict() for p in get_task("gsm8k", data_path=jsonl).heldout_problems()]
    for path in (gz, array, lines_json, parquet, str(jsonl)):
        assert [p.to_dict() for p in get_task("gsm8k", data_path=path).heldout_problems()] == expected, path
    assert [r for _, r in B.read_records(parquet)] == GSM


def test_malformed_record_names_file_line_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(GSM[0]) + "\n\n" + json.dumps({"question": "no answer"}) + "\n")
    with pytest.raises(B.DataError) as e:
        get_task("gsm8k", data_path=path)
    msg = str(e.value)
    assert str(path) in msg and "line 3" in msg and "'answer'" in msg and "\n" not in msg


def test_malformed_json_and_wrong_types(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(GSM[0]) + "\n{not json\n")
    with pytest.raises(B.DataError, match=r"bad\.jsonl, line 2: invalid JSON"):
        get_task("gsm8k", data_path=path)
    write_jsonl(path, [{"question": 3, "answer": "#### 3"}])
    with pytest.raises(B.DataError, match=r"line 1: field 'question' must be str"):
        get_task("gsm8k", data_path=path)
    write_jsonl(path, [{"question": "q", "answer": "no final answer"}])
    with pytest.raises(B.DataError, match=r"line 1: field 'answer' has no '#### <number>'"):
        get_task("gsm8k", data_path=path)
    array = tmp_path / "bad.json"
    array.write_text(json.dumps([HUMANEVAL[0], {"task_id": "x", "prompt": "p", "test": "t"}]))
    with pytest.raises(B.DataError, match=r"bad\.json, record 2: missing field 'entry_point'"):
        get_task("humaneval", data_path=array)


def test_missing_file_folder_and_env(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError):
        get_task("gsm8k", data_path=tmp_path / "nope.jsonl")
    with pytest.raises(FileNotFoundError, match="test.jsonl"):
        get_task("gsm8k", data_path=tmp_path)  # a folder without test.jsonl
    (tmp_path / "gsm8k").mkdir()
    write_jsonl(tmp_path / "gsm8k" / "test.jsonl", GSM)
    assert len(get_task("gsm8k", data_path=tmp_path / "gsm8k").heldout_problems()) == 3
    monkeypatch.setenv("GRPO_RESEARCH_BENCHMARKS", str(tmp_path))
    assert len(get_task("gsm8k").heldout_problems()) == 3  # no data_path: the env folder, never the hub


def test_hub_names_go_through_datasets_load_dataset(tmp_path, monkeypatch):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(GSM), tmp_path / "test.parquet")
    pq.write_table(pa.Table.from_pylist(GSM[:1]), tmp_path / "train.parquet")
    real = datasets.load_dataset
    calls = []

    def fake(name, config=None, split=None, **kw):  # a local parquet instead of the hub
        calls.append((name, config, split))
        return real("parquet", data_files=str(tmp_path / f"{split}.parquet"), split="train",
                    cache_dir=str(tmp_path / "cache"))

    monkeypatch.setattr(datasets, "load_dataset", fake)
    task = get_task("gsm8k")  # default: the hub name
    assert calls == [("openai/gsm8k", "main", "test")]
    assert [p.answer for p in task.heldout_problems()] == ["7", "1500", "-3"]
    train = task.train_problems(random.Random(0), 2)
    assert calls[-1] == ("openai/gsm8k", "main", "train") and all(p.id == "train/0" for p in train)

    def broken(*a, **k):
        raise ConnectionError("no network\nat all")

    monkeypatch.setattr(datasets, "load_dataset", broken)
    with pytest.raises(B.DataError, match="cannot load dataset 'HuggingFaceH4/MATH-500'") as e:
        get_task("math500")
    assert "\n" not in str(e.value)


# ---------------------------------------------------------------- GSM8K


@pytest.mark.parametrize("completion, extracted, formatted", [
    ("so 7 in total.\n#### 7", "7", True),
    ("####7", "7", True),
    ("#### $1,500.", "1500", True),
    ("#### -3", "-3", True),
    ("#### $-3", "-3", True),
    ("The answer is 1,500.", "1500", False),
    ("costs $1500.00 in all", "1500.00", False),
    ("first 12, then 30, finally 7.", "7", False),
    ("#### 7\nand later 99", "7", True),
    ("no digits here", None, False),
])
def test_gsm8k_extraction(completion, extracted, formatted):
    assert B.extract_gsm8k(completion) == (extracted, formatted)


def test_gsm8k_grading_and_ids(tmp_path):
    task = get_task("gsm8k", data_path=write_jsonl(tmp_path / "t.jsonl", GSM))
    p = task.heldout_problems()
    assert [x.id for x in p] == ["0", "1", "2"] and p[1].answer == "1500"
    assert "Tom has 3 apples" in p[0].prompt and "####" in p[0].prompt
    assert task.grade(p[1], "#### 1,500.00").correct
    assert task.grade(p[1], "It is $1,500").correct
    assert task.grade(p[2], "The temperature is -3 degrees").correct
    g = task.grade(p[0], "#### 8")
    assert (g.correct, g.outcome, g.extracted, g.formatted) == (False, "wrong_answer", "8", True)
    assert task.grade(p[0], "seven").outcome == "no_answer"
    assert task.grade(p[0], "#### 7", finished=False).correct  # no EOS does not fail a benchmark answer
    assert task.check_format(p[0], "#### 7") and not task.check_format(p[0], "7")
    assert [g.correct for g in task.grade_many(p, ["#### 7", "#### 1", "-3"], [True] * 3)] == [True, False, True]


def test_gsm8k_train_split_beside_test_file(tmp_path):
    test = write_jsonl(tmp_path / "test.jsonl", GSM)
    task = get_task("gsm8k", data_path=test)
    with pytest.warns(UserWarning, match="no train split"):
        assert task.train_problems(random.Random(0), 2)[0].id in {"0", "1", "2"}
    write_jsonl(tmp_path / "train.jsonl", GSM[:2])
    task = get_task("gsm8k", data_path=test)
    a, b = task.train_problems(random.Random(1), 5), task.train_problems(random.Random(1), 5)
    assert a == b and {p.id for p in a} <= {"train/0", "train/1"}


# ---------------------------------------------------------------- MATH-500


def test_last_boxed():
    assert B.last_boxed("a \\boxed{1} then \\boxed{\\frac{1}{2}} end") == "\\frac{1}{2}"
    assert B.last_boxed("\\boxed{\\{1, 2\\}}") == "\\{1, 2\\}"
    assert B.last_boxed("so \\boxed 5$.") == "5"
    assert B.last_boxed("\\fbox{x}") == "x"
    assert B.last_boxed("\\boxed{unclosed") is None and B.last_boxed("none") is None


def test_math500_grading_and_ids(tmp_path):
    task = get_task("math500", data_path=write_jsonl(tmp_path / "m.jsonl", MATH))
    p = task.heldout_problems()
    assert [x.id for x in p] == ["test/algebra/1.json", "test/algebra/2.json"]
    assert p[0].meta["aliases"] == ["0"] and "\\boxed{}" in p[0].prompt
    assert task.grade(p[0], "so $\\boxed{\\frac34}$").correct
    assert task.grade(p[0], "so $\\boxed{0.75}$").correct
    assert task.grade(p[0], "first \\boxed{1}, finally \\boxed{3/4}").correct
    g = task.grade(p[0], "\\boxed{\\frac{3}{4}} no, \\boxed{1}")
    assert (g.correct, g.outcome, g.extracted) == (False, "wrong_answer", "1")
    g = task.grade(p[1], "x = 2")  # no \boxed{}: math-verify's reading of the final answer, not formatted
    assert g.correct and not g.formatted
    assert task.grade(p[1], "I cannot tell.").outcome == "no_answer"
    assert task.grade(p[1], "\\boxed{2}", finished=False).correct
    no_answer_field = [{k: v for k, v in r.items() if k != "answer"} for r in MATH]  # original MATH layout
    task2 = get_task("math500", data_path=write_jsonl(tmp_path / "m2.jsonl", no_answer_field))
    assert [x.answer for x in task2.heldout_problems()] == ["\\frac{3}{4}", "2"]


def test_math500_text_answers_fall_back_to_string_equality(tmp_path):
    rec = dict(MATH[1], answer="\\text{Evelyn}")
    task = get_task("math500", data_path=write_jsonl(tmp_path / "m.jsonl", [rec]))
    p = task.heldout_problems()[0]
    assert task.grade(p, "\\boxed{\\text{Evelyn}}").correct
    assert not task.grade(p, "\\boxed{\\text{Bob}}").correct


# ---------------------------------------------------------------- code benchmarks


def test_humaneval_grading_in_the_sandbox(tmp_path):
    gz = tmp_path / "HumanEval.jsonl.gz"
    gz.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in HUMANEVAL).encode()))
    task = get_task("humaneval", data_path=tmp_path, timeout_s=2)
    p = task.heldout_problems()
    assert p[0].prompt == HUMANEVAL[0]["prompt"] and p[0].entry_point == "add"
    prog = task.program(p[0], "    return a + b\n")
    assert prog.solution == HUMANEVAL[0]["prompt"] + "    return a + b\n"  # run on its own, first
    assert prog.tests == HUMANEVAL[0]["test"] + "\n" + "check(add)\n" and prog.entry_point == "add"
    assert prog.prelude == HUMANEVAL[0]["prompt"]  # the prompt's helpers, trusted, with the tests
    grades = task.grade_many([p[0], p[0], p[1], p[1]],
                             ["    return a + b\n", "    return a - b\n", "    while True:\n        pass\n", "    return n\n"],
                             [True, True, True, False])
    assert [(g.correct, g.outcome) for g in grades] == [
        (True, "passed"), (False, "failed"), (False, "timeout"), (True, "passed")]
    assert task.check_format(p[0], "    return a\n") and not task.check_format(p[0], "    return (\n")


def test_mbpp_split_prompt_program_and_fences(tmp_path):
    records = [mbpp_record(i) for i in (5, 11, 12, 510, 511, 601, 700)]
    task = get_task("mbpp", data_path=write_jsonl(tmp_path / "mbpp.jsonl", records))
    p = task.heldout_problems()
    assert [x.id for x in p] == ["11", "12", "510"]
    assert "Write a function to add 11." in p[0].prompt and "assert add_11(1) == 12" in p[0].prompt
    assert p[0].solution == "def add_11(x):\n    return x + 11" and p[0].entry_point == "add_11"
    assert {x.id for x in task.train_problems(random.Random(0), 20)} <= {"601", "700"}
    fenced = "Here you go:\n```python\ndef add_11(x):\n    return x + 11\n```\nDone."
    grades = task.grade_many([p[0]] * 4, [p[0].solution, fenced, "def add_11(x):\n    return x", "pass"], [True] * 4)
    assert [g.correct for g in grades] == [True, True, False, False]
    assert task.check_format(p[0], fenced) and not task.check_format(p[0], "def other(x):\n    return x")
    # code straight in the reply, then a closing fence it never opened and prose
    unopened = "def add_11(x):\n    return x + 11\n```\n\nThis adds 11."
    assert task.grade_many([p[0]], [unopened], [True])[0].correct and task.check_format(p[0], unopened)
    # the token limit cut the usage example after the function, inside an unclosed fence: the function
    cut = "```python\ndef add_11(x):\n    return x + 11\n\nprint(add_11([1, 2,"
    cut_body = "```python\ndef add_11(x):\n    y = x + 11\n    return [y"
    grades = task.grade_many([p[0]] * 2, [cut, cut_body], [False, False])
    assert [g.correct for g in grades] == [True, False]  # a cut body stays wrong
    assert extract_code(cut) == "def add_11(x):\n    return x + 11\n\n"
    # the model's own top-level asserts (here of a misreading) are not the benchmark's tests
    own = "```python\ndef add_11(x):\n    return x + 11\n\nassert add_11(1) == 13\nassert (\n    add_11(0) == 0)\n```"
    assert task.grade_many([p[0]], [own], [True])[0].correct
    assert extract_code(own) == "def add_11(x):\n    return x + 11\n\n"
    inner = "```python\ndef add_11(x):\n    assert x > 100\n    return x + 11\n```"
    assert not task.grade_many([p[0]], [inner], [True])[0].correct  # an assert inside the function stays
    closed = "```python\ndef add_11(x):\n    return x + 11\nprint(add_11([1,\n```"
    assert extract_code(closed).endswith("print(add_11([1,\n")  # a closed block is taken as written


def test_mbpp_setup_code_runs_after_the_completion(tmp_path):
    rec = mbpp_record(11, setup="VALUE = add_11(1)")
    rec["test_list"].append("assert VALUE == 12")
    task = get_task("mbpp", data_path=write_jsonl(tmp_path / "mbpp.jsonl", [rec]))
    p = task.heldout_problems()[0]
    assert task.grade(p, p.solution).correct


def test_mbpp_sanitized_imports_come_first(tmp_path):
    recs = [{"source_file": "x", "task_id": 11, "prompt": "Write a function returning pi.",
             "code": "def pi_():\n    return math.pi", "test_imports": ["import math"],
             "test_list": ["assert pi_() == math.pi"]},
            {"source_file": "x", "task_id": 2, "prompt": "p", "code": "def g():\n    return 1",
             "test_imports": [], "test_list": ["assert g() == 1"]}]
    path = tmp_path / "sanitized-mbpp.json"
    path.write_text(json.dumps(recs))
    task = get_task("mbpp_sanitized", data_path=tmp_path)
    p = task.heldout_problems()
    assert [x.id for x in p] == ["11"]
    prog = task.program(p[0], "CODE")
    assert (prog.solution, prog.prelude, prog.tests) == ("import math\nCODE", "import math", "assert pi_() == math.pi\n")
    assert task.grade(p[0], p[0].solution).correct


def test_sandbox_error_is_masked_not_wrong(tmp_path, monkeypatch):
    task = get_task("mbpp", data_path=write_jsonl(tmp_path / "mbpp.jsonl", [mbpp_record(11)]))

    def broken(codes, limits=None, workers=None):
        return [SandboxResult("sandbox_error", None, "", "", 0.0, "none", "no sandbox") for _ in codes]

    monkeypatch.setattr(code_mod, "run_programs", broken)
    g = task.grade(task.heldout_problems()[0], "def add_11(x):\n    return x + 11")
    assert g.masked and not g.correct and g.outcome == "sandbox_error"


# ---------------------------------------------------------------- real files: gold answers score 1.0


def _score(task, completions: dict[str, str]) -> dict:
    preds = [{"task_id": tid, "completion": c} for tid, c in completions.items()]
    summary, rows = score_predictions(task, preds)
    assert summary["missing_tasks"] == 0 and summary["sandbox_errors"] == 0
    return summary


@needs_real
def test_real_gsm8k_gold_answers():
    task = get_task("gsm8k", data_path=REAL / "gsm8k" / "test.jsonl")
    problems = task.heldout_problems()
    assert len(problems) == 1319
    with_hash = _score(task, {p.id: p.solution for p in problems})
    assert (with_hash["n_tasks"], with_hash["pass@1"]) == (1319, 1.0)
    number = {p.id: p.solution.split("####")[-1].strip() for p in problems}  # as written, commas included
    without = _score(task, {i: f"The answer is {n}." for i, n in number.items()})
    assert (without["n_tasks"], without["pass@1"]) == (1319, 1.0)
    assert len(task.train_problems(random.Random(0), 3)) == 3  # train.jsonl beside test.jsonl
    assert task._train_pool is not None and len(task._train_pool) == 7473


@needs_real
def test_real_math500_gold_answers():
    task = get_task("math500", data_path=REAL / "math500")
    problems = task.heldout_problems()
    assert len(problems) == 500 and len({p.id for p in problems}) == 500
    summary = _score(task, {p.id: f"Therefore the answer is $\\boxed{{{p.answer}}}$." for p in problems})
    assert (summary["n_tasks"], summary["pass@1"]) == (500, 1.0)


@needs_real
def test_real_humaneval_pass_body_scores_zero():
    # the canonical solutions (164/164) are scored through the CLI in test_score_cli.py
    task = get_task("humaneval", data_path=REAL / "humaneval" / "HumanEval.jsonl.gz", workers=WORKERS)
    problems = task.heldout_problems()
    assert len(problems) == 164 and problems[0].id == "HumanEval/0"
    summary = _score(task, {p.id: "    pass\n" for p in problems})
    assert (summary["n_tasks"], summary["pass@1"]) == (164, 0.0)


@needs_real
def test_real_mbpp_reference_code_and_pass_body():
    task = get_task("mbpp", data_path=REAL / "mbpp", workers=WORKERS)
    problems = task.heldout_problems()
    assert len(problems) == 500 and [problems[0].id, problems[-1].id] == ["11", "510"]
    gold = _score(task, {p.id: p.solution for p in problems})
    assert (gold["n_tasks"], gold["pass@1"]) == (500, 1.0)
    empty = _score(task, {p.id: "pass" for p in problems})
    assert (empty["n_tasks"], empty["pass@1"]) == (500, 0.0)


@needs_real
def test_real_mbpp_sanitized_reference_code_and_pass_body():
    task = get_task("mbpp_sanitized", data_path=REAL / "mbpp" / "sanitized-mbpp.json", workers=WORKERS)
    problems = task.heldout_problems()
    assert len(problems) == 257
    gold = _score(task, {p.id: p.solution for p in problems})
    assert (gold["n_tasks"], gold["pass@1"]) == (257, 1.0)
    empty = _score(task, {p.id: "pass" for p in problems})
    assert (empty["n_tasks"], empty["pass@1"]) == (257, 0.0)
