"""The math benchmarks `gsm8k` and `math500`, their answer extraction (`extract_gsm8k`,
`last_boxed`) and graders (see `grpo_research.tasks.benchmarks` for how they depart from the
official ones)."""
from __future__ import annotations

import os
import re
import threading
from decimal import Decimal, InvalidOperation

from grpo_research.tasks.base import Grade, Problem, register_task
from grpo_research.tasks.loading import (Benchmark, DataError, Record, check_unique_ids, field, load_source,
                                         resolve_source, source_label)


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


class MathBenchmark(Benchmark):
    kind = "math"

    def grade_many(self, problems: list[Problem], completions: list[str], finished: list[bool]) -> list[Grade]:
        if not (len(problems) == len(completions) == len(finished)):
            raise ValueError("problems, completions and finished must have the same length")
        return [self.grade(p, c, f) for p, c, f in zip(problems, completions, finished)]


@register_task("gsm8k")
class GSM8K(MathBenchmark):
    """GSM8K test set (1319 problems); zero-shot prompt asking for `#### <number>`."""

    name = "gsm8k"
    PROMPT = "Question: {question}\nSolve the problem step by step, then give the final answer as '#### <number>'.\nAnswer:"
    # the user turn in chat format: the same request without the completion prompt's scaffolding
    CHAT_PROMPT = "{question}\nSolve the problem step by step, then give the final answer as '#### <number>'."

    def __init__(self, data_path: str | os.PathLike | None = None, train_path: str | os.PathLike | None = None,
                 hub: str = "openai/gsm8k", config: str = "main"):
        self._source = resolve_source(data_path, subdir="gsm8k", filename="test.jsonl", hub=hub)
        self._train_path, self._config = train_path, config
        self._problems = self._to_problems(load_source(self._source, config, "test"), "",
                                           source_label(self._source, "test"))

    def _to_problems(self, records: list[Record], prefix: str, label: str) -> list[Problem]:
        problems, wheres = [], []
        for i, (where, rec) in enumerate(records):
            question = field(where, rec, "question")
            answer = field(where, rec, "answer")
            gold = _HASH_RE.search(answer)
            if gold is None:
                raise DataError(f"{where}: field 'answer' has no '#### <number>'")
            rid = rec.get("task_id", rec.get("id"))
            pid = prefix + (str(rid) if rid is not None else str(i))
            problems.append(Problem(id=pid, prompt=self.PROMPT.format(question=question), answer=_number(gold),
                                    solution=answer, meta={"index": i, "aliases": [str(i)] if rid is not None else [],
                                                           "chat_prompt": self.CHAT_PROMPT.format(question=question)}))
            wheres.append(where)
        return check_unique_ids(problems, wheres, label)

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
        return self._to_problems(load_source(source, self._config, "train"), "train/", source_label(source, "train"))

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
class MATH500(MathBenchmark):
    """MATH-500 (the PRM800K test subset of MATH); zero-shot prompt asking for `\\boxed{}`."""

    name = "math500"
    PROMPT = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."

    def __init__(self, data_path: str | os.PathLike | None = None, hub: str = "HuggingFaceH4/MATH-500",
                 config: str | None = None):
        source = resolve_source(data_path, subdir="math500", filename="test.jsonl", hub=hub)
        records = load_source(source, config, "test")
        self._problems = []
        wheres = []
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
            wheres.append(where)
        check_unique_ids(self._problems, wheres, source_label(source, "test"))
        self._gold_cache: dict[str, list] = {}

    def _gold(self, answer: str) -> list:
        if answer not in self._gold_cache:
            from math_verify import parse

            t = _math_verify_timeout()
            self._gold_cache[answer] = parse(f"$\\boxed{{{answer}}}$", parsing_timeout=t) or parse(answer, parsing_timeout=t)
        return self._gold_cache[answer]

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        from math_verify import parse, verify

        t = _math_verify_timeout()
        boxed = last_boxed(completion)
        if boxed is None:  # no \boxed{}: math-verify's own extraction of the final answer (formatted=False)
            gold = self._gold(problem.answer or "")
            pred = parse(completion, parsing_timeout=t)
            if not pred:
                return Grade(correct=False, outcome="no_answer", formatted=False)
            ok = bool(gold and verify(gold, pred, timeout_seconds=t))
            return Grade(correct=ok, outcome="passed" if ok else "wrong_answer", formatted=False,
                         extracted=str(pred[-1]))
        gold = self._gold(problem.answer or "")
        pred = parse(f"$\\boxed{{{boxed}}}$", parsing_timeout=t)
        ok = bool(gold and pred and verify(gold, pred, timeout_seconds=t))
        if not ok:
            ok = "".join(boxed.split()) == "".join((problem.answer or "").split())
        return Grade(correct=ok, outcome="passed" if ok else "wrong_answer", formatted=True, extracted=boxed)

    def check_format(self, problem: Problem, completion: str) -> bool:
        return last_boxed(completion) is not None
