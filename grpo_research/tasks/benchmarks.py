"""Benchmark tasks: `gsm8k`, `math500`, `humaneval`, `mbpp`, `mbpp_sanitized`.

Data comes from a local file given as `data_path` (.jsonl, .jsonl.gz, .json array, .parquet,
or a folder holding the benchmark's usual file name), or from a Hugging Face dataset name
loaded with `datasets.load_dataset` (the default when no `data_path` is given; with the
environment variable GRPO_RESEARCH_BENCHMARKS set, `$GRPO_RESEARCH_BENCHMARKS/<benchmark>`
is used instead, so offline runs never reach the hub). A malformed record raises
`DataError` naming the file, the 1-based line (or record) and the field.

Graders, and where they depart from the official ones:

- gsm8k (openai/grade-school-math `dataset.py`): the first number after `####`, else the
  last number in the completion; commas, `$` and a trailing period are dropped and the
  value is compared numerically (Decimal) with the number after `####` in the gold answer.
  Official: exact string after `#### ` only, no fallback.
- math500 (MATH, Hendrycks et al.): the last `\\boxed{}` (or `\\fbox{}`) of the completion
  is judged against the gold `answer` with math_verify (`parse` + `verify`; the gold is
  parsed as `$\\boxed{answer}$`, or as given if that yields nothing). If math_verify finds
  nothing to compare, identical strings (whitespace ignored) still count as equal.
- humaneval (openai/human-eval): runs `prompt + completion + "\\n" + test + "\\n" +
  "check(entry_point)\\n"` in the sandbox.
- mbpp (google-research mbpp, test split = task ids 11-510): runs `completion + "\\n" +
  test_setup_code + "\\n" + "\\n".join(test_list)`; `challenge_test_list` is not run.
  The setup code goes *after* the completion: the only two records that have any (367,
  927) build trees with the `Node` class the solution defines, so setup-first fails even
  the reference code. mbpp_sanitized (its records with task ids 11-510): `test_imports +
  completion + test_list`. A file holding no task id in 11-510 is evaluated whole.
  Departure: when an MBPP completion holds a Markdown code fence, the first fenced block
  is used as the code (chat models wrap code in fences; gold code never has one).

`finished=False` (generation hit the length limit without EOS) does not by itself fail a
benchmark answer: external predictions carry no EOS, and the official graders ignore it.

Problem ids: gsm8k uses the record's 0-based index in the file ("0", "1", ...) unless the
record carries `task_id` or `id`. math500 uses `unique_id` (e.g. "test/precalculus/807.json",
stable across subsets and reorderings) and also accepts the 0-based index: every problem
lists the extra ids it answers to in `meta["aliases"]` (the `score` CLI honours them).
humaneval uses `task_id` ("HumanEval/0"); mbpp uses the task id as a string ("11").
Blank lines in a JSONL file are not records and do not advance the index.

Constructor options: `data_path`, `hub` and `config` (the dataset name and configuration used
when no local file is given), gsm8k's `train_path`, and for code benchmarks `timeout_s`
(per program) and `workers` (parallel sandbox processes). A missing local file raises
FileNotFoundError.

Training problems: gsm8k and mbpp have train splits (gsm8k `train.jsonl` beside the test
file or `train_path`; the hub's "train" split; mbpp task ids 601-974 in the same file).
Otherwise `train_problems` samples from the evaluation records, with a warning.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import threading
import warnings
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from grpo_research.sandbox import SandboxLimits
from grpo_research.tasks.base import Grade, Problem, register_task
from grpo_research.tasks.code import SandboxGradedTask, compiles


class DataError(ValueError):
    """A benchmark record is malformed; the message names the file, line and field."""


# ---------------------------------------------------------------- loading

Record = tuple[str, dict[str, Any]]  # (where, e.g. "data/test.jsonl, line 3"; the record)
_SUFFIXES = (".jsonl", ".json", ".gz", ".parquet")


def _read_json_lines(lines, label: str) -> list[Record]:
    records = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{label}, line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{where}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        records.append((where, obj))
    return records


def read_records(path: str | os.PathLike) -> list[Record]:
    """All records of a local .jsonl, .jsonl.gz, .json (array, or JSON lines) or .parquet file."""
    path = Path(path)
    label = str(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except FileNotFoundError:
            raise
        except Exception as e:  # noqa: BLE001  (pyarrow's errors for a corrupt file)
            raise DataError(f"{label}: cannot read parquet ({' '.join(str(e).split())})") from None
        return [(f"{label}, record {i}", row) for i, row in enumerate(rows, 1)]
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError, EOFError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise DataError(f"{label}: cannot read ({e})") from None
    inner = Path(path.stem) if path.suffix == ".gz" else path
    if inner.suffix == ".json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = None  # not one JSON document: read it as JSON lines below
        if isinstance(obj, list):
            for i, rec in enumerate(obj, 1):
                if not isinstance(rec, dict):
                    raise DataError(f"{label}, record {i}: expected a JSON object, got {type(rec).__name__}")
            return [(f"{label}, record {i}", rec) for i, rec in enumerate(obj, 1)]
        if isinstance(obj, dict):
            return [(f"{label}, line 1", obj)]
    return _read_json_lines(text.split("\n"), label)  # not splitlines(): U+2028 may sit inside a string


def load_hub(name: str, config: str | None, split: str) -> list[Record]:
    """Records of a Hugging Face dataset split (network or the local `datasets` cache)."""
    import datasets

    try:
        ds = datasets.load_dataset(name, config, split=split)
    except Exception as e:  # noqa: BLE001  (datasets raises many kinds; report them in one line)
        msg = " ".join(str(e).split())
        raise DataError(f"cannot load dataset {name!r} (config {config!r}, split {split!r}): {msg}") from None
    return [(f"{name} [{split}], record {i}", dict(row)) for i, row in enumerate(ds, 1)]


def _looks_like_path(data: str) -> bool:
    return data.startswith(("/", ".", "~")) or data.endswith(_SUFFIXES) or data.count("/") > 1 or "\\" in data


def resolve_source(data: str | os.PathLike | None, *, subdir: str, filename: str, hub: str) -> Path | str:
    """A local file (Path) or a hub dataset name (str) for `data` (file, folder, hub name or None).

    None means `$GRPO_RESEARCH_BENCHMARKS/<subdir>` when that variable is set, else `hub`.
    """
    if data is None:
        env = os.environ.get("GRPO_RESEARCH_BENCHMARKS")
        data = Path(env) / subdir if env else hub
    path = Path(data).expanduser()
    if path.is_dir():
        path = path / filename
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (looked for {filename} in {data})")
    if path.is_file():
        return path
    if isinstance(data, Path) or _looks_like_path(str(data)):
        raise FileNotFoundError(f"{data}: no such file")
    return str(data)


def load_source(source: Path | str, config: str | None, split: str) -> list[Record]:
    """Records of a resolved source: a local file, or `split` of a hub dataset."""
    return read_records(source) if isinstance(source, Path) else load_hub(source, config, split)


def field(where: str, rec: dict, name: str, kind: type | tuple[type, ...] = str, default: Any = ...) -> Any:
    """rec[name], checked; a missing or mistyped field raises DataError naming file, line and field."""
    value = rec.get(name)
    if value is None:
        if default is not ...:
            return default
        raise DataError(f"{where}: missing field {name!r}")
    if not isinstance(value, kind) or isinstance(value, bool):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataError(f"{where}: field {name!r} must be {expected}, got {type(value).__name__}")
    return value


class _Benchmark:
    """Shared split handling: evaluation problems, and a train pool sampled with the trainer's rng."""

    name: str
    _problems: list[Problem]
    _train_pool: list[Problem] | None = None

    def heldout_problems(self, n: int | None = None) -> list[Problem]:
        return list(self._problems if n is None else self._problems[:n])

    def _load_train(self) -> list[Problem] | None:
        return None  # benchmarks with a train split override this

    def train_problems(self, rng, n: int) -> list[Problem]:
        if self._train_pool is None:
            pool = self._load_train()
            if pool is None:
                warnings.warn(f"{self.name}: no train split given; training problems are sampled from the evaluation records",
                              stacklevel=2)
                pool = self._problems
            self._train_pool = pool
        if not self._train_pool:
            raise ValueError(f"{self.name}: no training problems")
        return [rng.choice(self._train_pool) for _ in range(n)]


# ---------------------------------------------------------------- math benchmarks

# A number: optional minus (before or after "$"), thousands groups or plain digits, decimals.
_NUMBER = r"(-?)(?:\$\s?)?(-?)(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
_NUMBER_RE = re.compile(_NUMBER)
_HASH_RE = re.compile(r"####\s*" + _NUMBER)


def _number(match: re.Match) -> str:
    sign = "-" if (match.group(1) or match.group(2)) else ""
    return sign + match.group(3).replace(",", "")


def extract_gsm8k(text: str) -> tuple[str | None, bool]:
    """(answer, formatted): the number after `####` (formatted=True), else the last number."""
    m = _HASH_RE.search(text)
    if m:
        return _number(m), True
    numbers = list(_NUMBER_RE.finditer(text))
    return (_number(numbers[-1]) if numbers else None), False


def numbers_equal(a: str, b: str) -> bool:
    try:
        return Decimal(a) == Decimal(b)
    except InvalidOperation:
        return False


class _MathBenchmark(_Benchmark):
    kind = "math"

    def grade_many(self, problems: list[Problem], completions: list[str], finished: list[bool]) -> list[Grade]:
        if not (len(problems) == len(completions) == len(finished)):
            raise ValueError("problems, completions and finished must have the same length")
        return [self.grade(p, c, f) for p, c, f in zip(problems, completions, finished)]


@register_task("gsm8k")
class GSM8K(_MathBenchmark):
    """GSM8K test set (1319 problems); zero-shot prompt asking for `#### <number>`."""

    name = "gsm8k"
    PROMPT = "Question: {question}\nSolve the problem step by step, then give the final answer as '#### <number>'.\nAnswer:"

    def __init__(self, data_path: str | os.PathLike | None = None, train_path: str | os.PathLike | None = None,
                 hub: str = "openai/gsm8k", config: str = "main"):
        self._source = resolve_source(data_path, subdir="gsm8k", filename="test.jsonl", hub=hub)
        self._train_path, self._config = train_path, config
        self._problems = self._to_problems(load_source(self._source, config, "test"), "")

    def _to_problems(self, records: list[Record], prefix: str) -> list[Problem]:
        problems = []
        for i, (where, rec) in enumerate(records):
            question = field(where, rec, "question")
            answer = field(where, rec, "answer")
            gold = _HASH_RE.search(answer)
            if gold is None:
                raise DataError(f"{where}: field 'answer' has no '#### <number>'")
            rid = rec.get("task_id", rec.get("id"))
            pid = prefix + (str(rid) if rid is not None else str(i))
            problems.append(Problem(id=pid, prompt=self.PROMPT.format(question=question), answer=_number(gold),
                                    solution=answer, meta={"index": i, "aliases": [str(i)] if rid is not None else []}))
        return problems

    def _load_train(self) -> list[Problem] | None:
        """`train_path`; else the hub's train split; else `train.jsonl` beside the test file."""
        if self._train_path is not None:
            source = resolve_source(self._train_path, subdir="gsm8k", filename="train.jsonl", hub="")
        elif isinstance(self._source, str):
            source = self._source
        else:
            source = self._source.parent / "train.jsonl"
            if not source.is_file() or source.resolve() == self._source.resolve():
                return None
        return self._to_problems(load_source(source, self._config, "train"), "train/")

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        extracted, formatted = extract_gsm8k(completion)
        if extracted is None:
            return Grade(correct=False, outcome="no_answer", formatted=False)
        ok = numbers_equal(extracted, problem.answer or "")
        return Grade(correct=ok, outcome="passed" if ok else "wrong_answer", formatted=formatted, extracted=extracted)

    def check_format(self, problem: Problem, completion: str) -> bool:
        return _HASH_RE.search(completion) is not None


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}` / `\\fbox{...}` (or `\\boxed x`), as MATH's `last_boxed_only_string`."""
    idx = text.rfind("\\boxed")
    name = "\\boxed"
    if idx < 0:
        idx, name = text.rfind("\\fbox"), "\\fbox"
        if idx < 0:
            return None
    rest = text[idx + len(name):]
    if rest.startswith(" "):  # "\boxed 5": up to the next "$" or whitespace
        return rest.strip().split("$")[0].split()[0] if rest.strip() else None
    if not rest.startswith("{"):
        return None
    depth = 0
    for i, ch in enumerate(rest):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return rest[1:i]
    return None


def _math_verify_timeout() -> int | None:
    # math_verify's timeouts use signal.alarm, which only works in the main thread.
    return 5 if threading.current_thread() is threading.main_thread() else None


@register_task("math500")
class MATH500(_MathBenchmark):
    """MATH-500 (the PRM800K test subset of MATH); zero-shot prompt asking for `\\boxed{}`."""

    name = "math500"
    PROMPT = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."

    def __init__(self, data_path: str | os.PathLike | None = None, hub: str = "HuggingFaceH4/MATH-500",
                 config: str | None = None):
        source = resolve_source(data_path, subdir="math500", filename="test.jsonl", hub=hub)
        records = load_source(source, config, "test")
        self._problems = []
        for i, (where, rec) in enumerate(records):
            problem = field(where, rec, "problem")
            answer = field(where, rec, "answer", (str, int, float), default=None)
            if answer is None:  # original MATH records carry only the solution
                answer = last_boxed(field(where, rec, "solution"))
                if answer is None:
                    raise DataError(f"{where}: missing field 'answer' (and no \\boxed{{}} in 'solution')")
            uid = rec.get("unique_id")
            meta = {"index": i, "aliases": [str(i)] if uid is not None else [],
                    "subject": rec.get("subject"), "level": rec.get("level")}
            self._problems.append(Problem(id=str(uid) if uid is not None else str(i),
                                          prompt=self.PROMPT.format(problem=problem), answer=str(answer),
                                          solution=rec.get("solution"), meta=meta))
        self._gold_cache: dict[str, list] = {}

    def _gold(self, answer: str) -> list:
        if answer not in self._gold_cache:
            from math_verify import parse

            t = _math_verify_timeout()
            self._gold_cache[answer] = parse(f"$\\boxed{{{answer}}}$", parsing_timeout=t) or parse(answer, parsing_timeout=t)
        return self._gold_cache[answer]

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        boxed = last_boxed(completion)
        if boxed is None:
            return Grade(correct=False, outcome="no_answer", formatted=False)
        from math_verify import parse, verify

        t = _math_verify_timeout()
        gold = self._gold(problem.answer or "")
        pred = parse(f"$\\boxed{{{boxed}}}$", parsing_timeout=t)
        ok = bool(gold and pred and verify(gold, pred, timeout_seconds=t))
        if not ok:
            ok = "".join(boxed.split()) == "".join((problem.answer or "").split())
        return Grade(correct=ok, outcome="passed" if ok else "wrong_answer", formatted=True, extracted=boxed)

    def check_format(self, problem: Problem, completion: str) -> bool:
        return last_boxed(completion) is not None


# ---------------------------------------------------------------- code benchmarks


class _CodeBenchmark(SandboxGradedTask, _Benchmark):
    def __init__(self, timeout_s: float | None = None, workers: int | None = None):
        # `timeout_s` is the CPU-time budget of a program; the wall clock allows three times that,
        # so that a loaded machine does not turn slow but correct programs into timeouts (MBPP
        # task 123's reference solution needs 5 s of CPU; with a 10 s wall limit it timed out
        # while other jobs shared the 2 cores).
        cpu = 10 if timeout_s is None else max(1, int(timeout_s))
        self.limits = SandboxLimits(timeout_s=3.0 * cpu, cpu_s=cpu)
        self.workers = workers


@register_task("humaneval")
class HumanEval(_CodeBenchmark):
    """HumanEval (164 problems); the prompt is the record's `prompt` unchanged."""

    name = "humaneval"

    def __init__(self, data_path: str | os.PathLike | None = None, hub: str = "openai/openai_humaneval",
                 config: str | None = None, timeout_s: float | None = None, workers: int | None = None,
                 ):
        super().__init__(timeout_s, workers)
        source = resolve_source(data_path, subdir="humaneval", filename="HumanEval.jsonl.gz", hub=hub)
        records = load_source(source, config, "test")
        self._problems = []
        for where, rec in records:
            entry_point = field(where, rec, "entry_point")
            self._problems.append(Problem(
                id=str(field(where, rec, "task_id", (str, int))), prompt=field(where, rec, "prompt"),
                solution=field(where, rec, "canonical_solution", default=None),
                tests=field(where, rec, "test") + "\n" + f"check({entry_point})\n", entry_point=entry_point,
            ))

    def program(self, problem: Problem, completion: str, tests: list[str] | None = None) -> str:
        body = problem.tests if tests is None else "\n".join(tests) + "\n"
        return problem.prompt + completion + "\n" + body

    def check_format(self, problem: Problem, completion: str) -> bool:
        return compiles(problem.prompt + completion)


_FENCE_RE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)


def extract_code(completion: str) -> str:
    """The first Markdown-fenced block of `completion`, or the completion itself."""
    m = _FENCE_RE.search(completion)
    return m.group(1) if m else completion


def _entry_point(code: str, tests: list[str]) -> str | None:
    names = re.findall(r"^def\s+(\w+)", code, re.M)
    return next((n for n in names if any(re.search(rf"\b{n}\s*\(", t) for t in tests)), None)


class _MBPPBase(_CodeBenchmark):
    TEST_IDS = range(11, 511)
    TRAIN_IDS = range(601, 975)
    SETUP_FIRST = False  # where the setup code goes: before or after the completion
    PROMPT = "You are an expert Python programmer, and here is your task: {text} Your code should pass these tests:\n\n{tests}\n"
    text_field: str
    hub_config: str

    def __init__(self, data_path, hub, config, timeout_s, workers, filename):
        super().__init__(timeout_s, workers)
        self._source = resolve_source(data_path, subdir="mbpp", filename=filename, hub=hub)
        self._config = config
        records = load_source(self._source, config, "test")
        self._all = self._to_problems(records)
        self._problems = [p for p in self._all if p.meta["task_id"] in self.TEST_IDS]
        if not self._problems:  # a file holding other task ids: evaluate on all of it
            self._problems = list(self._all)

    def _setup(self, where: str, rec: dict) -> str:
        raise NotImplementedError

    def _to_problems(self, records: list[Record]) -> list[Problem]:
        problems = []
        for where, rec in records:
            task_id = field(where, rec, "task_id", (int, str))
            if isinstance(task_id, str) and not task_id.strip().isdigit():
                raise DataError(f"{where}: field 'task_id' must be an integer, got {task_id!r}")
            text = field(where, rec, self.text_field)
            code = field(where, rec, "code").replace("\r\n", "\n")
            test_list = field(where, rec, "test_list", list)
            if not all(isinstance(t, str) for t in test_list):
                raise DataError(f"{where}: field 'test_list' must be a list of strings")
            problems.append(Problem(
                id=str(int(task_id)), prompt=self.PROMPT.format(text=text, tests="\n".join(test_list)),
                solution=code, tests="\n".join(test_list), entry_point=_entry_point(code, test_list),
                meta={"task_id": int(task_id), "test_setup": self._setup(where, rec), "test_list": test_list},
            ))
        return problems

    def _load_train(self) -> list[Problem] | None:
        pool = [p for p in self._all if p.meta["task_id"] in self.TRAIN_IDS]
        if pool:
            return pool
        if isinstance(self._source, str):  # a hub dataset: its "train" split
            return self._to_problems(load_source(self._source, self._config, "train"))
        return None

    def program(self, problem: Problem, completion: str, tests: list[str] | None = None) -> str:
        tests = problem.meta["test_list"] if tests is None else tests
        code, setup = extract_code(completion), problem.meta["test_setup"]
        parts = [setup, code] if self.SETUP_FIRST else [code, setup]
        return "\n".join(parts + list(tests)) + "\n"

    def check_format(self, problem: Problem, completion: str) -> bool:
        code = extract_code(completion)
        if not compiles(code):
            return False
        return problem.entry_point is None or re.search(rf"^def\s+{problem.entry_point}\b", code, re.M) is not None


@register_task("mbpp")
class MBPP(_MBPPBase):
    """MBPP full set, test split (task ids 11-510, 500 problems); prompt = text + the three asserts."""

    name = "mbpp"
    text_field = "text"

    def __init__(self, data_path: str | os.PathLike | None = None, hub: str = "google-research-datasets/mbpp",
                 config: str = "full", timeout_s: float | None = None, workers: int | None = None):
        super().__init__(data_path, hub, config, timeout_s, workers, "mbpp.jsonl")

    def _setup(self, where: str, rec: dict) -> str:
        return field(where, rec, "test_setup_code", default="").replace("\r\n", "\n")


@register_task("mbpp_sanitized")
class MBPPSanitized(_MBPPBase):
    """MBPP sanitized set, its test-range records (task ids 11-510: 257 problems)."""

    name = "mbpp_sanitized"
    text_field = "prompt"
    SETUP_FIRST = True

    def __init__(self, data_path: str | os.PathLike | None = None, hub: str = "google-research-datasets/mbpp",
                 config: str = "sanitized", timeout_s: float | None = None, workers: int | None = None):
        super().__init__(data_path, hub, config, timeout_s, workers, "sanitized-mbpp.json")

    def _setup(self, where: str, rec: dict) -> str:
        imports = field(where, rec, "test_imports", list, default=[])
        return "\n".join(imports)
