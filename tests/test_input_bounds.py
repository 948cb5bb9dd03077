"""Requests for more than exists, and data files that hold nothing or one id twice, are one line
naming what is wrong and the number available, at start time: never a hang, a traceback or a
silently shorter set (issue 32). The timeout marks turn a regression into a hang into a failure."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

import grpo_research.tasks.structured as structured
from grpo_research.cli import main
from grpo_research.errors import ConfigError
from grpo_research.tasks import get_task
from grpo_research.tasks.arith import _is_heldout, heldout_size
from grpo_research.tasks.base import TooFewProblems
from grpo_research.tasks.loading import DataError

pytestmark = pytest.mark.timeout(120)


def _jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _gsm(i: int) -> dict:
    return {"question": f"What is {i} + 1?", "answer": f"{i} + 1 = {i + 1}\n#### {i + 1}"}


def _math(i: int) -> dict:
    return {"problem": f"What is {i} + 1?", "answer": str(i + 1), "unique_id": f"test/algebra/{i}.json"}


def _humaneval(i: int) -> dict:
    return {"task_id": f"HumanEval/{i}", "prompt": f"def f{i}(x):\n", "entry_point": f"f{i}",
            "canonical_solution": f"    return x + {i}\n", "test": f"def check(c):\n    assert c(1) == {1 + i}\n"}


def _mbpp(i: int, text: str = "text") -> dict:
    return {"task_id": i, text: f"Write f{i}.", "code": f"def f{i}(x):\n    return x", "test_list": [f"assert f{i}(1) == 1"]}


BENCHMARKS = {  # name: (file name, record maker)
    "gsm8k": ("test.jsonl", _gsm),
    "math500": ("test.jsonl", _math),
    "humaneval": ("he.jsonl", _humaneval),
    "mbpp": ("mbpp.jsonl", lambda i: _mbpp(11 + i)),
    "mbpp_sanitized": ("sanitized.json", lambda i: _mbpp(11 + i, "prompt")),
}


def _benchmark_file(tmp_path: Path, name: str, records: list[dict]) -> Path:
    filename = BENCHMARKS[name][0]
    path = tmp_path / filename
    if filename.endswith(".json"):
        path.write_text(json.dumps(records))
        return path
    return _jsonl(path, records)


@pytest.fixture
def small_stall(monkeypatch):
    """A shorter run of fruitless draws ends a structured split (tool_call level 1's gaps stay below
    5,400 draws, so it still finds all 41 of its held-out prompts)."""
    monkeypatch.setattr(structured, "HELDOUT_STALL", 8000)


# ---------------------------------------------------------------- held-out sizes, task by task


def test_arith_heldout_sizes_are_exact_counts():
    for level in (1, 2):
        hi = 10**level
        assert heldout_size(level) == sum(_is_heldout(a, b) for a in range(hi) for b in range(hi))
    assert (heldout_size(1), heldout_size(2), heldout_size(3)) == (5, 503, 49998)
    task = get_task("arith", eval_level=2)
    every = task.heldout_problems(503)
    assert len({p.prompt for p in every}) == 503  # all of them, each once
    assert task.heldout_problems() == every  # the default (2,000) is capped by the smaller split
    assert get_task("arith", eval_level=2).heldout_problems(10) == every[:10]  # a prefix, whatever was asked first


@pytest.mark.parametrize("options, asked, needle", [
    ({"eval_level": 1}, 6, "arith (eval_level 1) has only 5 held-out problems, asked for 6"),
    ({"eval_level": 2}, 504, "arith (eval_level 2) has only 503 held-out problems, asked for 504"),
    ({"eval_level": 3}, 50000, "arith (eval_level 3) has only 49998 held-out problems, asked for 50000"),
])
def test_arith_refuses_more_heldout_problems_than_its_level_has(options, asked, needle):
    with pytest.raises(TooFewProblems, match=needle.replace("(", r"\(").replace(")", r"\)")) as e:
        get_task("arith", **options).heldout_problems(asked)
    assert isinstance(e.value, ConfigError) and "\n" not in str(e.value)


def test_arith_ood_split_refuses_more_pairs_than_exist():
    task = get_task("arith", levels=[1], level_weights=[1.0], ood_level=2)  # two-digit operands: 90 x 90 pairs
    assert len(task.ood_problems(100)) == 100
    with pytest.raises(TooFewProblems, match=r"ood_level 2\) has only 8100 held-out problems, asked for 8101"):
        task.ood_problems(8101)


def test_tool_call_level_1_split_ends_where_its_prompts_run_out(small_stall):
    task = get_task("tool_call", levels=[1], level_weights=[1], eval_level=1)
    with pytest.raises(TooFewProblems, match=r"tool_call \(eval_level 1\) has only 41 distinct held-out problems"):
        task.heldout_problems(42)
    every = task.heldout_problems(41)
    assert len({p.prompt for p in every}) == 41 and task.heldout_problems() == every
    fresh = get_task("tool_call", levels=[1], level_weights=[1], eval_level=1).heldout_problems(5)
    assert fresh == every[:5]  # the same fixed order, however much was asked first


@pytest.mark.parametrize("name", ["json_schema", "tool_call"])
def test_structured_splits_refuse_beyond_their_cap_without_drawing(name, monkeypatch):
    task = get_task(name)
    monkeypatch.setattr(task, "draw", lambda *a: pytest.fail("drew problems for a request beyond the cap"))
    with pytest.raises(TooFewProblems, match=rf"{name} \(eval_level 3\) has only 10000 distinct held-out problems"
                                             r" \(the most a structured task's split holds\), asked for 50000"):
        task.heldout_problems(50000)


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmarks_refuse_more_problems_than_their_file_holds(name, tmp_path):
    make = BENCHMARKS[name][1]
    task = get_task(name, data_path=_benchmark_file(tmp_path, name, [make(0), make(1)]))
    assert len(task.heldout_problems(2)) == 2
    with pytest.raises(TooFewProblems, match=rf"benchmark {name} has only 2 held-out problems, asked for 3"):
        task.heldout_problems(3)


def test_code_task_split_has_no_end_further_rounds_vary_the_examples():
    task = get_task("code", levels=[1])
    specs = len(task._heldout)
    problems = task.heldout_problems(specs + 3)
    assert len({p.id for p in problems}) == specs + 3
    again = problems[specs:]
    assert [p.meta["spec"] for p in again] == [p.meta["spec"] for p in problems[:3]]
    assert [p.prompt for p in again] != [p.prompt for p in problems[:3]]  # round 2: other examples


# ---------------------------------------------------------------- at start time, in one line


def test_trainer_refuses_train_eval_size_beyond_the_split_before_loading_a_model(tmp_path):
    from grpo_research.config import load_config
    from grpo_research.trainers import build_trainer

    cfg = load_config(None, ["train.eval_size=50000", "train.threads=1"])
    with pytest.raises(TooFewProblems) as e:
        build_trainer(cfg, tmp_path / "run", tmp_path / "no-model-here")  # never loaded: refused first
    assert str(e.value) == "train.eval_size=50000: arith (eval_level 3) has only 49998 held-out problems"
    cfg = load_config(None, ["train.eval_size=9000", "train.threads=1", "task.levels=[1]", "task.level_weights=[1]",
                             "task.options={ood_level: 2}", "task.eval_level=3"])
    with pytest.raises(TooFewProblems, match=r"^train.eval_size=9000: arith's out-of-distribution split \(ood_level 2\)"
                                             r" has only 8100 held-out problems$"):
        build_trainer(cfg, tmp_path / "run", tmp_path / "no-model-here")


@pytest.fixture
def fake_checkpoint(tmp_path) -> Path:
    """A directory that looks like a checkpoint but holds no model: the refusals come first."""
    d = tmp_path / "ckpt"
    d.mkdir()
    (d / "config.json").write_text("{}")
    return d


@pytest.mark.parametrize("benchmark, n, needle", [
    ("arith", 60000, "error: --n 60000: arith (eval_level 3) has only 49998 held-out problems"),
    ("gsm8k", 3, "error: --n 3: benchmark gsm8k has only 2 held-out problems"),
    ("json_schema", 20000, "error: --n 20000: json_schema (eval_level 3) has only 10000 distinct held-out problems"),
])
def test_eval_n_beyond_the_split_is_one_line_before_the_model_loads(benchmark, n, needle, fake_checkpoint, tmp_path,
                                                                    capsys):
    data = ["--data", str(_jsonl(tmp_path / "g.jsonl", [_gsm(0), _gsm(1)]))] if benchmark == "gsm8k" else []
    out = tmp_path / "out" / "e.json"
    rc = main(["eval", "--checkpoint", str(fake_checkpoint), "--benchmark", benchmark, "--n", str(n), "--out", str(out),
               *data])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith(needle), err
    assert not (tmp_path / "out").exists()


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_RESEARCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("GRPO_RESEARCH_BENCHMARKS", raising=False)


def _cut(tmp_path: Path, kind: str) -> Path:
    text = "".join(json.dumps(_gsm(i)) + "\n" for i in range(40))
    if kind == "jsonl":
        path = tmp_path / "cut.jsonl"
        cut = text[: len(text) // 2]
        assert cut.count("\n") == 20 and not cut.endswith("\n")  # stops inside record 21
        path.write_text(cut)
    else:
        path = tmp_path / "cut.jsonl.gz"
        whole = gzip.compress(text.encode())
        path.write_bytes(whole[: len(whole) // 2])  # the gzip stream ends early
    return path


@pytest.mark.parametrize("overrides, needle", [
    (["task.eval_level=2"], "error: train.eval_size=1000: arith (eval_level 2) has only 503 held-out problems"),
    (["train.eval_size=50000"], "error: train.eval_size=50000: arith (eval_level 3) has only 49998 held-out problems"),
    (["task.name=gsm8k", "task.data_path={cut.jsonl}"], "cut.jsonl, line 21: invalid JSON (Unterminated string"),
    (["task.name=gsm8k", "task.data_path={cut.jsonl.gz}"], "cut.jsonl.gz: cannot read (Compressed file ended"),
    (["task.name=gsm8k", "task.data_path={empty.jsonl}"], "empty.jsonl: no records (an empty data file)"),
])
def test_train_with_an_impossible_task_is_one_line_and_leaves_nothing(overrides, needle, tmp_path, empty_cache, capsys):
    (tmp_path / "empty.jsonl").write_text("\n")
    files = {"{cut.jsonl}": _cut(tmp_path, "jsonl"), "{cut.jsonl.gz}": _cut(tmp_path, "gz"),
             "{empty.jsonl}": tmp_path / "empty.jsonl"}
    overrides = [next((o.replace(k, str(v)) for k, v in files.items() if k in o), o) for o in overrides]
    run = tmp_path / "run"
    rc = main(["train", "--run-dir", str(run), "tracking.progress=false", "train.threads=1", *overrides])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and needle in err[0] and "Traceback" not in err[0], err
    assert not run.exists()
    assert not any((tmp_path / "cache").rglob("*.safetensors"))  # refused before a base model was built


# ---------------------------------------------------------------- data files: no records, one id twice


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_an_empty_data_file_is_one_error_naming_it(name, tmp_path):
    path = tmp_path / BENCHMARKS[name][0]
    path.write_text("[]" if path.suffix == ".json" else "\n\n")
    with pytest.raises(DataError) as e:
        get_task(name, data_path=path)
    assert str(e.value) == f"{path}: no records (an empty data file)"


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_a_data_file_with_one_id_twice_is_one_error_naming_it_and_both_records(name, tmp_path):
    make = BENCHMARKS[name][1]
    if name == "gsm8k":
        records = [dict(_gsm(i), task_id="q7") for i in range(3)]
    elif name == "math500":
        records = [_math(0), _math(1), dict(_math(2), unique_id=_math(0)["unique_id"])]
    else:
        records = [make(0), make(1), make(0)]
    path = _benchmark_file(tmp_path, name, records)
    with pytest.raises(DataError) as e:
        get_task(name, data_path=path)
    msg = str(e.value)
    where = "record" if path.suffix == ".json" else "line"
    first = 1
    assert msg.startswith(f"{path}: duplicate ") and f"({where} {first} and {where} {2 if name == 'gsm8k' else 3})" \
        in msg and "\n" not in msg, msg


def test_gsm8k_ids_that_collide_with_an_index_are_refused(tmp_path):
    path = _jsonl(tmp_path / "g.jsonl", [dict(_gsm(0), task_id="2"), _gsm(1), _gsm(2)])  # record 3's id is its index, 2
    with pytest.raises(DataError, match=r"g\.jsonl: line 1 and line 3 both have the problem id '2'"):
        get_task("gsm8k", data_path=path)


def test_mbpp_ids_are_one_id_as_number_or_text(tmp_path):
    path = _jsonl(tmp_path / "mbpp.jsonl", [_mbpp(11), dict(_mbpp(12), task_id="11")])
    with pytest.raises(DataError, match=r"mbpp\.jsonl: duplicate task_id '11' \(line 1 and line 2\)"):
        get_task("mbpp", data_path=path)


@pytest.mark.parametrize("records, needle", [
    ([dict(_gsm(i), task_id="q7") for i in range(3)], "duplicate task_id 'q7' (line 1 and line 2)"),
    ([], "no records (an empty data file)"),
])
def test_score_refuses_such_a_data_file_in_one_line_and_writes_nothing(records, needle, tmp_path, capsys):
    data = _jsonl(tmp_path / "data.jsonl", records)
    preds = _jsonl(tmp_path / "p.jsonl", [{"task_id": "q7", "completion": "#### 1"}] * 3)
    out = tmp_path / "out" / "s.json"
    rc = main(["score", "--benchmark", "gsm8k", "--data", str(data), "--predictions", str(preds), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"error: {data}: {needle}"), err
    assert not (tmp_path / "out").exists()


def test_a_train_pool_repeats_the_same_fixed_problems_in_every_run():
    """arith's train_pool (one-shot RLVR): every run draws from the same N problems, whatever its seed."""
    import random

    from grpo_research.tasks import get_task

    one = get_task("arith", train_pool=1)
    a = one.train_problems(random.Random(1), 8)
    b = one.train_problems(random.Random(2), 8)
    assert len({p.prompt for p in a + b}) == 1 and a[0].answer == str(a[0].meta["a"] + a[0].meta["b"])
    three = get_task("arith", train_pool=3).train_problems(random.Random(0), 200)
    assert len({p.prompt for p in three}) == 3
    full = get_task("arith").train_problems(random.Random(0), 200)
    assert len({p.prompt for p in full}) > 100  # without the option: the whole training distribution
    with pytest.raises(ValueError, match="train_pool must be a positive integer"):
        get_task("arith", train_pool=0)
