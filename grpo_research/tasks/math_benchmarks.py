"""The math benchmarks `gsm8k` and `math500`, their answer extraction (`extract_gsm8k`,
`last_boxed`) and graders (see `grpo_research.tasks.benchmarks` for how they depart from the
official ones).

Both graders read the completion (and the gold answer) through `normalise_math_text` first:
the minus sign U+2212 and the dashes typeset as one (hyphen U+2010/U+2011, figure dash U+2012,
en dash U+2013, small and full-width hyphen-minus, heavy minus) become `-`, full-width
characters (`１８`, `＄`) and the decimal digits of every script become ASCII, and the fraction
and division slashes become `/`; the em dash is left alone (it is punctuation in prose). So
`#### −18` reads as -18, never as 18. GSM8K numbers may be fractions, `18/5` or `\\frac{18}{5}`
(also `\\dfrac`, `\\tfrac`), compared as numbers: `18/5` equals 3.6 and not 18.
"""
from __future__ import annotations

import os
import re
import threading
import unicodedata
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from grpo_research.tasks.base import Grade, Problem, register_task
from grpo_research.tasks.loading import (Benchmark, DataError, Record, check_unique_ids, field, load_source,
                                         resolve_source, source_label)

# what a model or a data file writes for a minus sign; the em dash (U+2014) is prose punctuation
MINUS_SIGNS = "\u2212\u2010\u2011\u2012\u2013\ufe63\uff0d\u2796\u02d7"
_TRANSLATION = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}  # full-width ASCII -> ASCII
_TRANSLATION.update({ord(c): ord("-") for c in MINUS_SIGNS})
_TRANSLATION.update({0x2044: ord("/"), 0x2215: ord("/"), 0x3000: ord(" ")})  # fraction, division slash; wide space


def normalise_math_text(text: str) -> str:
    """`text` with minus-like dashes as `-`, full-width characters and every script's decimal
    digits as ASCII, fraction and division slashes as `/` (see the module docstring)."""
    text = text.translate(_TRANSLATION)
    if text.isascii():
        return text
    return "".join(chr(48 + unicodedata.decimal(c)) if not c.isascii() and unicodedata.decimal(c, None) is not None
                   else c for c in text)


# A number: optional minus (before or after "$"), thousands groups or plain digits, decimals;
# optionally a fraction: `18/5`, `\frac{18}{5}` (ASCII digits only: the text is normalised first).
_PLAIN = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
_NUMBER = (rf"(?P<s1>-?)(?:\$\s?)?(?P<s2>-?)(?:\\[dt]?frac\{{\s*(?P<fs>-?)\s*(?P<fn>{_PLAIN})\s*\}}"
           rf"\{{\s*(?P<fd>{_PLAIN})\s*\}}|(?P<n>{_PLAIN})(?:\s*/\s*(?P<d>{_PLAIN}))?)")
_NUMBER_RE = re.compile(_NUMBER, re.ASCII)
_HASH_RE = re.compile(r"####\s*" + _NUMBER, re.ASCII)


def _number(match: re.Match) -> str:
    """The matched number as `-?N` or `-?N/D` (commas dropped)."""
    negative = bool(match.group("s1") or match.group("s2")) != bool(match.group("fs"))
    num, den = (match.group("fn"), match.group("fd")) if match.group("fn") else (match.group("n"), match.group("d"))
    return ("-" if negative else "") + num.replace(",", "") + (f"/{den.replace(',', '')}" if den else "")


def extract_gsm8k(text: str) -> tuple[str | None, bool]:
    """(answer, formatted): the number after `####` (formatted=True), else the first number of
    the last `\\boxed{}` (what instruct models write instead, then often go on: "\\boxed{88}
    centimeters shorter after burning from 1:00 PM to 5:00 PM."), else the last number, of the
    normalised text (`normalise_math_text`); a fraction reads as `N/D`."""
    text = normalise_math_text(text)
    m = _HASH_RE.search(text)
    if m:
        return _number(m), True
    boxed = last_boxed(text)
    in_box = _NUMBER_RE.search(boxed) if boxed else None
    if in_box:
        return _number(in_box), False
    numbers = list(_NUMBER_RE.finditer(text))
    return (_number(numbers[-1]) if numbers else None), False


def number_value(text: str) -> Fraction | None:
    """The exact value of `N`, `-N`, `N/D` (decimals allowed; commas not), else None (also for a
    zero denominator and for exponents beyond +-1000, which would expand to huge integers)."""
    parts = text.strip().split("/")
    if len(parts) > 2:
        return None
    try:
        values = [Decimal(part.strip()) for part in parts]
    except InvalidOperation:
        return None
    if any(not v.is_finite() or abs(v.as_tuple().exponent) > 1000 for v in values):
        return None
    if len(values) == 2 and values[1] == 0:
        return None
    value = Fraction(values[0])
    return value / Fraction(values[1]) if len(values) == 2 else value


def numbers_equal(a: str, b: str) -> bool:
    """Whether two numbers (`number_value`: `18/5` and `3.6` are one number) are equal."""
    x, y = number_value(a), number_value(b)
    return x is not None and y is not None and x == y


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
            gold = _HASH_RE.search(normalise_math_text(answer))
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
        return _HASH_RE.search(normalise_math_text(completion)) is not None


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
            text = normalise_math_text(answer)
            self._gold_cache[answer] = parse(f"$\\boxed{{{text}}}$", parsing_timeout=t) or parse(text, parsing_timeout=t)
        return self._gold_cache[answer]

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        from math_verify import parse, verify

        t = _math_verify_timeout()
        completion = normalise_math_text(completion)
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
            ok = "".join(boxed.split()) == "".join(normalise_math_text(problem.answer or "").split())
        return Grade(correct=ok, outcome="passed" if ok else "wrong_answer", formatted=True, extracted=boxed)

    def check_format(self, problem: Problem, completion: str) -> bool:
        return last_boxed(normalise_math_text(completion)) is not None
