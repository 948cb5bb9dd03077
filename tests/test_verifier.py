"""The two-process verifier (`sandbox.TestProgram`): what crosses between the completion and
the tests, and how each kind of failure is reported."""
from __future__ import annotations

import pytest

from grpo_research.sandbox import SandboxLimits, TestProgram, available_isolation, run_programs, run_tests

LIM = SandboxLimits(timeout_s=10.0, cpu_s=5)


def grade(solution: str, tests: str, prelude: str = "", entry_point: str | None = None):
    return run_tests(TestProgram(solution, tests, prelude, entry_point), LIM)


def test_plain_values_cross_and_are_compared_in_the_tester():
    sol = "def f(x):\n    return {'a': [x, (x, 2.5)], 'b': {1, 2}, 'c': b'z', 'd': None, 'e': 1j}\n"
    ok = "assert f(1) == {'a': [1, (1, 2.5)], 'b': {1, 2}, 'c': b'z', 'd': None, 'e': 1j}\n"
    assert grade(sol, ok).outcome == "passed"
    assert grade(sol, "assert f(1) == {'a': [1, (1, 2.5)]}\n").outcome == "failed"


def test_subclasses_of_builtin_types_arrive_as_their_base_type():
    sol = ("import collections\nclass S(str):\n    def __eq__(s, o): return True\n    __hash__ = str.__hash__\n"
           "P = collections.namedtuple('P', 'x y')\n"
           "def f():\n    return [S('a'), P(1, 2), collections.OrderedDict(k=1), collections.Counter('aab')]\n")
    assert grade(sol, "assert f() == ['a', (1, 2), {'k': 1}, {'a': 2, 'b': 1}]\n").outcome == "passed"
    assert grade(sol, "assert f()[0] == 'b'\n").outcome == "failed"  # S('a') is 'a' here
    assert grade(sol, "assert type(f()[1]) is tuple and type(f()[0]) is str\n").outcome == "passed"


def test_other_objects_stay_in_the_completion_as_references():
    """MBPP's class tasks: construct, pass back, read attributes, set them, call methods."""
    sol = ("class Node:\n    def __init__(self, v):\n        self.v, self.left = v, None\n"
           "    def total(self):\n        return self.v + (self.left.total() if self.left else 0)\n"
           "def depth(n):\n    return 1 + (depth(n.left) if n.left else 0)\n")
    prelude = "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(3)\n"
    tests = ("assert depth(root) == 3 and root.total() == 6 and root.left.v == 2\n"
             "assert root == root and root != Node(1) and str(root).startswith('<')\n")
    assert grade(sol, tests, prelude).outcome == "passed"
    # a reference is never equal to a value, whatever its __eq__ says
    liar = "class A:\n    def __eq__(s, o): return True\ndef f():\n    return A()\n"
    assert grade(liar, "assert f() == 3\n").outcome == "failed"
    assert grade(liar, "assert not (f() == f())\n").outcome == "passed"  # two references, two objects


def test_iterators_len_and_bool_are_forwarded():
    sol = "def f(n):\n    return map(lambda v: v * 2, range(n))\ndef g():\n    return []\n"
    assert grade(sol, "assert list(f(3)) == [0, 2, 4] and sorted(f(2)) == [0, 2]\n").outcome == "passed"
    assert grade(sol, "assert f(3) == [0, 2, 4]\n").outcome == "failed"  # a map is not a list
    assert grade(sol, "assert not g() and len(g()) == 0\n").outcome == "passed"


def test_in_place_changes_of_arguments_are_copied_back():
    sol = "def sort_in_place(xs):\n    xs.sort()\ndef add_key(d):\n    d['k'] = 1\n"
    tests = "xs = [3, 1, 2]\nsort_in_place(xs)\nassert xs == [1, 2, 3]\nd = {}\nadd_key(d)\nassert d == {'k': 1}\n"
    assert grade(sol, tests).outcome == "passed"


def test_exceptions_come_back_as_builtin_types_or_remote_error():
    sol = ("class MyError(Exception):\n    pass\ndef f(x):\n    if x == 0:\n        raise ValueError('zero')\n"
           "    if x == 1:\n        raise MyError('mine')\n    raise StopIteration\n")
    tests = ("try:\n    f(0)\nexcept ValueError as e:\n    assert str(e) == 'zero'\nelse:\n    raise AssertionError\n"
             "try:\n    f(1)\nexcept ValueError:\n    raise AssertionError\nexcept Exception as e:\n"
             "    assert type(e).__name__ == 'RemoteError' and 'MyError' in str(e)\n"
             "try:\n    list(map(f, [2]))\nexcept StopIteration:\n    raise AssertionError('never a StopIteration')\n"
             "except Exception:\n    pass\n")
    assert grade(sol, tests).outcome == "passed"


def test_the_tests_use_their_own_standard_library_modules():
    sol = "import math\nmath.isclose = lambda *a, **k: True\ndef f():\n    return 1.0\n"
    assert grade(sol, "assert not math.isclose(f(), 2.0)\n").outcome == "passed"


def test_the_completion_must_compile_and_run_on_its_own():
    tests = "def check(candidate):\n    assert candidate() == 1\ncheck(f)\n"
    dangling = "def f():\n    return 1\n@lambda g: None\n"
    res = grade(dangling, tests, entry_point="f")
    assert res.outcome == "failed" and "SyntaxError" in res.detail
    res = grade("raise KeyError('x')\ndef f():\n    return 1\n", tests, entry_point="f")
    assert res.outcome == "failed" and "KeyError" in res.detail
    assert grade("def f():\n    return 1\n", tests, entry_point="f").outcome == "passed"


def test_the_entry_point_is_the_completion_s_even_when_the_prelude_defines_it():
    prelude = 'def f():\n    """stub"""\n'
    assert grade("def f():\n    return 1\n", "assert f() == 1\n", prelude, "f").outcome == "passed"
    assert grade("def f():\n    return 2\n", "assert f() == 1\n", prelude, "f").outcome == "failed"


def test_limits_and_deaths_of_the_completion_are_not_passes():
    tests = "assert f() == 1\n"
    res = run_tests(TestProgram("def f():\n    while True:\n        pass\n", tests),
                    SandboxLimits(timeout_s=10.0, cpu_s=1))
    assert res.outcome == "timeout", res
    res = grade("def f():\n    x = bytearray(1 << 34)\n", tests)
    assert res.outcome == "memory", res
    res = grade("import os, signal\ndef f():\n    os.kill(os.getpid(), signal.SIGSEGV)\n", tests)
    assert res.outcome == "crashed", res


def test_a_broken_tester_set_up_is_a_sandbox_error_not_a_failure():
    res = grade("def f():\n    return 1\n", "assert f( == 1\n")  # the tests themselves do not parse
    assert res.outcome == "sandbox_error"


def test_run_programs_mixes_programs_and_test_programs():
    if available_isolation() == "none":
        pytest.skip("needs an isolating sandbox")
    out = run_programs(["print('x')", TestProgram("def f():\n    return 1\n", "assert f() == 1\n")], LIM, 2)
    assert [r.outcome for r in out] == ["passed", "passed"] and out[0].stdout == "x\n"
