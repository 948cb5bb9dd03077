"""The code benchmarks `humaneval`, `mbpp` and `mbpp_sanitized`, graded by running their tests
in the sandbox (see `grpo_research.tasks.benchmarks` for the programs they run)."""
from __future__ import annotations

import os
import re

from grpo_research.sandbox import SandboxLimits, TestProgram
from grpo_research.tasks.base import Problem, register_task
from grpo_research.tasks.code import SandboxGradedTask, compiles, trusted_prelude
from grpo_research.tasks.loading import Benchmark, DataError, Record, field, load_source, resolve_source


class CodeBenchmark(SandboxGradedTask, Benchmark):
    """Sandbox limits shared by the code benchmarks: `timeout_s` (CPU seconds per program), `workers`."""

    def __init__(self, timeout_s: float | None = None, workers: int | None = None):
        # `timeout_s` is the CPU-time budget of a program; the wall clock allows three times that,
        # so that a loaded machine does not turn slow but correct programs into timeouts (MBPP
        # task 123's reference solution needs 5 s of CPU; with a 10 s wall limit it timed out
        # while other jobs shared the 2 cores).
        cpu = 10 if timeout_s is None else max(1, int(timeout_s))
        self.limits = SandboxLimits(timeout_s=3.0 * cpu, cpu_s=cpu)
        self.workers = workers


@register_task("humaneval")
class HumanEval(CodeBenchmark):
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

    def program(self, problem: Problem, completion: str, tests: list[str] | None = None) -> TestProgram:
        body = problem.tests if tests is None else "\n".join(tests) + "\n"
        return TestProgram(solution=self.solution_code(problem, completion), tests=body,
                           prelude=trusted_prelude(problem.prompt), entry_point=problem.entry_point)

    @staticmethod
    def solution_code(problem: Problem, completion: str) -> str:
        """The prompt continued by the completion (a base model writes the body). A chat model
        answers in a Markdown fence (or writes the code and then closes a fence it never
        opened): code that defines the entry point is the whole function, run after the prompt
        (its imports and helpers; its stub is redefined); any other fenced block continues the
        prompt."""
        if "```" not in completion:
            return problem.prompt + completion
        code = extract_code(completion, problem.entry_point)
        if _defines(code, problem.entry_point):
            return problem.prompt + "\n    pass\n\n" + code
        return problem.prompt + code

    def check_format(self, problem: Problem, completion: str) -> bool:
        return compiles(self.solution_code(problem, completion))


_FENCE_RE = re.compile(r"```[^\n`]*\n(.*?)(?:```|\Z)", re.S)


def _defines(code: str, name: str | None) -> bool:
    return bool(name) and re.search(rf"^def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def extract_code(completion: str, entry_point: str | None = None) -> str:
    """The code of `completion`: the text before its first fence when that text defines
    `entry_point` (code written straight into the reply, then a closing fence and prose), else
    its first Markdown-fenced block, else the completion itself. A block the token limit cut
    (no closing fence) that does not compile is cut back to its longest prefix of whole lines
    that does: the function followed by a cut-off usage example (`print(f([1, 2,`) is the
    function (Qwen2.5-Coder-0.5B-Instruct on HumanEval/87 and /94 at 512 new tokens). Its own
    top-level asserts are dropped (`drop_own_asserts`)."""
    first = completion.find("```")
    if first > 0 and _defines(completion[:first], entry_point):
        return drop_own_asserts(completion[:first])
    m = _FENCE_RE.search(completion)
    if not m:
        return completion
    code = m.group(1)
    if m.end() == len(completion) and not completion.endswith("```") and not compiles(code):
        lines = code.split("\n")
        code = next(("\n".join(lines[:k]) + "\n" for k in range(len(lines) - 1, 0, -1)
                     if compiles("\n".join(lines[:k]))), code)
    return drop_own_asserts(code)


def drop_own_asserts(code: str) -> str:
    """`code` without its top-level `assert` statements: the checks a chat model writes under
    its function (often of its own misreading of the task) are not the benchmark's tests, and
    one failing at import would fail a correct function (Qwen2.5-Coder-0.5B-Instruct on MBPP 44:
    a correct `text_match_string`, then `assert text_match_string(" python") == 'Found a
    match!'`). Only asserts go, so nothing that computes the answer is removed; code that does
    not parse is returned as it is."""
    import ast

    if not compiles(code):
        return code
    drop = set()
    for node in ast.parse(code).body:
        if isinstance(node, ast.Assert):
            drop.update(range(node.lineno - 1, node.end_lineno))
    if not drop:
        return code
    return "\n".join(line for i, line in enumerate(code.split("\n")) if i not in drop)


def _entry_point(code: str, tests: list[str]) -> str | None:
    names = re.findall(r"^def\s+(\w+)", code, re.M)
    return next((n for n in names if any(re.search(rf"\b{n}\s*\(", t) for t in tests)), None)


class _MBPPBase(CodeBenchmark):
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

    def program(self, problem: Problem, completion: str, tests: list[str] | None = None) -> TestProgram:
        tests = problem.meta["test_list"] if tests is None else tests
        code, setup = extract_code(completion, problem.entry_point), problem.meta["test_setup"]
        # the set-up runs with the tests; sanitized MBPP's imports also precede the code, as in
        # the original harness (solutions may rely on them)
        solution = setup + "\n" + code if self.SETUP_FIRST and setup else code
        return TestProgram(solution=solution, tests="\n".join(tests) + "\n", prelude=setup,
                           entry_point=problem.entry_point)

    def check_format(self, problem: Problem, completion: str) -> bool:
        code = extract_code(completion, problem.entry_point)
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
