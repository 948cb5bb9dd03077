"""What the structured-output tasks (`json_schema`, `tool_call`) share: the compact schema
notation of their prompts, the held-out split, level sampling and the format check.

Compact notation (`compact`), short enough for the tiny model's 256-character context:
`str`, `num`, `bool`, `int`, `int[0..99]` (bounds), `a|b|c` (an enum), `[str]1..3` (an array
of 1 to 3 items), `{key:T,opt?:T}` (an object; `?` marks an optional key; no other keys are
allowed: every object schema of these tasks has `additionalProperties: false`). The problem
carries the JSON schema itself in `meta` (`schema`, or `tools` for tool calls): graders and
reward terms validate against that, never against the notation.

Splits: a prompt is held out when a fixed hash of its text falls in 1 of 20 buckets
(`is_heldout`); training draws skip those prompts at every level, so training never poses a
held-out problem (the prompt determines the answer). The held-out split is a fixed list of
distinct level-`eval_level` prompts drawn with a fixed seed: at most `MAX_HELDOUT` (10,000),
and it ends where the level's space of prompts runs out, that is where `HELDOUT_STALL`
(50,000) draws in a row bring no new held-out prompt (tool_call level 1 holds 41). A request
for more raises `TooFewProblems` with the number found (beyond `MAX_HELDOUT` at once, without
drawing); `heldout_problems()` gives the first `DEFAULT_HELDOUT` (1,000) or all of a smaller split.
"""
from __future__ import annotations

import hashlib
import random
from typing import Any

from grpo_research.tasks.base import Grade, Problem, TooFewProblems
from grpo_research.tasks.json_check import Validators, parse_json

HELDOUT_SEED = 20250611
HELDOUT_BUCKETS = 20  # 1 prompt in 20 is reserved for evaluation
DEFAULT_HELDOUT = 1000  # held-out problems when `heldout_problems(None)` (fewer where the split is smaller)
MAX_HELDOUT = 10_000  # the most a held-out split holds (each costs ~20 draws at levels 2-3; 10,000 take ~15 s)
HELDOUT_STALL = 50_000  # draws in a row without a new held-out prompt that end the split (its space is exhausted)


def is_heldout(prompt: str) -> bool:
    """About 1 prompt in 20 is reserved for evaluation (a hash of its text, the same in every process)."""
    digest = hashlib.blake2b(prompt.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % HELDOUT_BUCKETS == 0


def compact(schema: dict) -> str:
    """The compact notation of a JSON schema (only the constructs these tasks generate)."""
    if "enum" in schema:
        return "|".join(str(v) for v in schema["enum"])
    t = schema["type"]
    if t == "object":
        required = set(schema.get("required", []))
        return "{" + ",".join(f"{k}{'' if k in required else '?'}:{compact(s)}"
                              for k, s in schema["properties"].items()) + "}"
    if t == "array":
        return f"[{compact(schema['items'])}]{schema['minItems']}..{schema['maxItems']}"
    if t == "integer" and "minimum" in schema:
        return f"int[{schema['minimum']}..{schema['maximum']}]"
    return {"string": "str", "integer": "int", "number": "num", "boolean": "bool"}[t]


def obj(properties: dict[str, dict], required: list[str]) -> dict:
    """An object schema that allows no other keys."""
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def check_levels(name: str, levels, level_weights, eval_level) -> None:
    """ValueError (one line) for levels outside 1-3, mismatched weights or a bad eval level."""
    if not levels or any(isinstance(x, bool) or x not in (1, 2, 3) for x in levels):
        raise ValueError(f"{name}: levels must be a non-empty list of 1, 2, 3, got {list(levels)!r}")
    if len(levels) != len(level_weights):
        raise ValueError(f"{name}: levels and level_weights must have the same length")
    if any(isinstance(w, bool) or not isinstance(w, (int, float)) or w < 0 for w in level_weights) \
            or sum(level_weights) <= 0:
        raise ValueError(f"{name}: level_weights must be non-negative numbers with a positive sum")
    if isinstance(eval_level, bool) or eval_level not in (1, 2, 3):
        raise ValueError(f"{name}: eval_level must be 1, 2 or 3, got {eval_level!r}")


class StructuredTask:
    """Level sampling, splits and the format check; a subclass draws one problem (`draw`) and
    grades it (`grade`)."""

    name = "structured"
    kind = "structured"

    def __init__(self, levels=(1, 2, 3), level_weights=(0.15, 0.25, 0.6), eval_level: int = 3):
        check_levels(self.name, levels, level_weights, eval_level)
        self.levels = list(levels)
        self.level_weights = list(level_weights)
        self.eval_level = eval_level
        self._heldout: list[Problem] | None = None
        self._heldout_complete = False  # the split ran out: `_heldout` is all of it
        self._validators = Validators()  # jsonschema validators of the grader, one per distinct schema

    def draw(self, rng: random.Random, level: int, split: str, index: int) -> Problem:
        """One problem of `level` drawn with `rng`."""
        raise NotImplementedError

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        out: list[Problem] = []
        while len(out) < n:
            level = rng.choices(self.levels, weights=self.level_weights)[0]
            p = self.draw(rng, level, "train", len(out))
            if not is_heldout(p.prompt):
                out.append(p)
        return out

    def heldout_problems(self, n: int | None = None) -> list[Problem]:
        """The first `n` problems of the held-out split (`DEFAULT_HELDOUT`, or all of a smaller
        split, when None); more than the split holds raises TooFewProblems."""
        split = f"{self.name} (eval_level {self.eval_level})"
        wanted = DEFAULT_HELDOUT if n is None else n
        if wanted > MAX_HELDOUT:
            raise TooFewProblems(split, MAX_HELDOUT, wanted, note="the most a structured task's split holds",
                                noun="distinct held-out problems")
        if not self._heldout_complete and (self._heldout is None or len(self._heldout) < wanted):
            rng = random.Random(HELDOUT_SEED + self.eval_level)
            seen: set[str] = set()
            problems: list[Problem] = []
            misses = 0
            while len(problems) < wanted:
                p = self.draw(rng, self.eval_level, "heldout", len(problems))
                if is_heldout(p.prompt) and p.prompt not in seen:
                    seen.add(p.prompt)
                    problems.append(p)
                    misses = 0
                else:
                    misses += 1
                    if misses >= HELDOUT_STALL:  # the level's space of prompts is exhausted
                        self._heldout_complete = True
                        break
            self._heldout = problems
        assert self._heldout is not None
        if n is not None and n > len(self._heldout):
            raise TooFewProblems(split, len(self._heldout), n, note="its level's prompts are exhausted",
                                noun="distinct held-out problems")
        return self._heldout[:wanted]

    def check_format(self, problem: Problem, completion: str) -> bool:
        """The completion is one JSON object (optionally in one Markdown fence)."""
        return isinstance(parse_json(completion), dict)

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        raise NotImplementedError

    def grade_many(self, problems, completions, finished) -> list[Grade]:
        return [self.grade(p, c, f) for p, c, f in zip(problems, completions, finished)]


def same_value(a: Any, b: Any) -> bool:
    """JSON values equal, with booleans never equal to numbers (Python has True == 1)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return a == b
