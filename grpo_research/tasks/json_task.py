"""Synthetic JSON-schema task (`task.name=json_schema`): fill a schema with the values a
request gives in words.

    schema: {name:str,age:int[0..99]}
    request: name Ada, age 36
    json:                                   ->  {"name":"Ada","age":36}

The schema is shown in the compact notation of grpo_research/tasks/structured.py; the JSON
schema itself is `meta["schema"]` and the requested object `meta["target"]`.

Levels: 1, two required fields (strings and integers), named in schema order as `key value`;
2, three required fields with at least one enum or boolean, one more optional field that the
request gives half of the time, phrases varied (`36 years old`, `a vip`) and shuffled;
3, a plain field, an enum/boolean/number field and either a nested object (`addr`) or an
array with bounds (`tags`, 1-3 items), plus an optional field, phrases varied and shuffled.

Grading (`grade`, one code path with the `json_schema` reward term: `json_check.check_json`):
correct when generation ended with EOS, the completion is one JSON document (one enclosing
Markdown fence allowed, nothing before or after it), it validates against the schema, and it
equals the requested object: the same keys (an optional key the request did not give must be
left out) and the same values (numbers compare by value, 3 == 3.0; booleans are not numbers;
strings exactly, case included). Outcomes: unfinished, no_json, invalid (JSON that breaks the
schema), wrong_value (valid, other values), passed. Formatted (the `format` reward term):
the completion is one JSON object. Departure from schema-only checks: a schema-valid object
with the wrong values is not correct here (the `json_schema` reward term alone would pay it).

Prompts are ASCII, so the tiny model's character vocabulary (printable ASCII) covers them.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Callable

from grpo_research.tasks.base import Grade, Problem, register_task
from grpo_research.tasks.json_check import check_json
from grpo_research.tasks.structured import StructuredTask, compact, obj, same_value

NAMES = ["Ada", "Bob", "Cy", "Dee", "Eve", "Finn", "Gus", "Hal", "Ivy", "Jo", "Kim", "Lee", "Max", "Ned", "Ola",
         "Pat", "Rex", "Sam", "Tia", "Uma", "Val", "Wes", "Zoe", "Ian"]
CITIES = ["Oslo", "Rome", "Lima", "Kyiv", "Doha", "Riga", "Baku", "Bern", "Cork", "Nice", "Pune", "Kobe", "Ulm",
          "Graz", "Lyon", "Bonn", "Faro", "Turin", "Porto", "Quito"]
TAGS = ["new", "hot", "eco", "top", "old", "big", "fun"]


@dataclass(frozen=True)
class Field:
    """A key of a generated schema: its schema, how a value is drawn, how a request says it."""

    key: str
    schema: dict
    draw: Callable[[random.Random], Any]
    phrases: tuple[Callable[[Any], str], ...]  # the first is the plain `key value` form of level 1


def _int(lo: int, hi: int) -> dict:
    return {"type": "integer", "minimum": lo, "maximum": hi}


def _enum(*values: str) -> dict:
    return {"type": "string", "enum": list(values)}


def _yes(word: str, no: str) -> Callable[[bool], str]:
    return lambda v: word if v else no


PLAIN = [  # level 1 and the scalar fields of every level
    Field("name", {"type": "string"}, lambda r: r.choice(NAMES), (lambda v: f"name {v}", lambda v: f"named {v}")),
    Field("city", {"type": "string"}, lambda r: r.choice(CITIES), (lambda v: f"city {v}", lambda v: f"from {v}")),
    Field("age", _int(0, 99), lambda r: r.randrange(100), (lambda v: f"age {v}", lambda v: f"{v} years old")),
    Field("qty", _int(1, 50), lambda r: r.randint(1, 50), (lambda v: f"qty {v}", lambda v: f"{v} units")),
    Field("score", _int(0, 100), lambda r: r.randint(0, 100), (lambda v: f"score {v}", lambda v: f"scored {v}")),
]
CHOICE = [  # enums, booleans, numbers: from level 2
    Field("role", _enum("admin", "user", "guest"), lambda r: r.choice(["admin", "user", "guest"]),
          (lambda v: f"role {v}", lambda v: f"as {v}")),
    Field("color", _enum("red", "green", "blue"), lambda r: r.choice(["red", "green", "blue"]),
          (lambda v: f"color {v}", lambda v: f"in {v}")),
    Field("size", _enum("S", "M", "L"), lambda r: r.choice("SML"), (lambda v: f"size {v}", lambda v: f"size {v}")),
    Field("active", {"type": "boolean"}, lambda r: r.random() < 0.5,
          (_yes("active yes", "active no"), _yes("active", "inactive"))),
    Field("vip", {"type": "boolean"}, lambda r: r.random() < 0.5, (_yes("vip yes", "vip no"), _yes("a vip", "not vip"))),
    Field("price", {"type": "number"}, lambda r: r.randint(1, 99) + r.choice([0, 0.5]),
          (lambda v: f"price {v}", lambda v: f"costs {v}")),
]
NESTED = [  # level 3
    Field("tags", {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
          lambda r: r.sample(TAGS, r.randint(1, 3)),
          (lambda v: "tags " + " ".join(v), lambda v: "tagged " + " ".join(v))),
    Field("addr", obj({"city": {"type": "string"}, "zip": _int(1000, 9999)}, ["city", "zip"]),
          lambda r: {"city": r.choice(CITIES), "zip": r.randint(1000, 9999)},
          (lambda v: f"address {v['city']} {v['zip']}", lambda v: f"lives in {v['city']}, zip {v['zip']}")),
]


def _pick(rng: random.Random, level: int) -> tuple[list[Field], Field | None]:
    """(required fields, optional field or None) of a schema of `level`."""
    if level == 1:
        return rng.sample(PLAIN, 2), None
    if level == 2:
        fields = [rng.choice(CHOICE)] + rng.sample(PLAIN, 2)
        rng.shuffle(fields)
        rest = [f for f in PLAIN + CHOICE if f not in fields]
        return fields, rng.choice(rest)
    fields = [rng.choice(PLAIN), rng.choice(CHOICE), rng.choice(NESTED)]
    rng.shuffle(fields)
    rest = [f for f in PLAIN + CHOICE if f not in fields]
    return fields, rng.choice(rest)


def make_problem(rng: random.Random, level: int, split: str, index: int) -> Problem:
    fields, optional = _pick(rng, level)
    schema = obj({f.key: f.schema for f in fields + ([optional] if optional else [])}, [f.key for f in fields])
    given = fields + ([optional] if optional and rng.random() < 0.5 else [])
    target = {f.key: f.draw(rng) for f in given}
    if level == 1:
        words = [f.phrases[0](target[f.key]) for f in given]
    else:
        words = [rng.choice(f.phrases)(target[f.key]) for f in given]
        rng.shuffle(words)
    request = ", ".join(words)
    ordered = {k: target[k] for k in schema["properties"] if k in target}  # the solution in schema order
    notation = compact(schema)
    return Problem(
        id=f"json_schema/{split}/{index}",
        prompt=f"schema: {notation}\nrequest: {request}\njson:",
        solution=json.dumps(ordered, separators=(",", ":")),
        meta={"schema": schema, "target": ordered, "level": level,
              "chat_prompt": ("Reply with only a JSON object valid against this JSON schema, holding the values of "
                              f"the request.\nSchema: {json.dumps(schema)}\nRequest: {request}")},
    )


@register_task("json_schema")
class JsonSchemaTask(StructuredTask):
    name = "json_schema"

    def draw(self, rng: random.Random, level: int, split: str, index: int) -> Problem:
        return make_problem(rng, level, split, index)

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        verdict, value = check_json(completion, problem.meta["schema"], self._validators)
        formatted = isinstance(value, dict)
        extracted = None if verdict == "no_json" else json.dumps(value, separators=(",", ":"))
        if not finished:
            return Grade(False, "unfinished", formatted=formatted, extracted=extracted)
        if verdict != "valid":
            return Grade(False, verdict, formatted=formatted, extracted=extracted)
        correct = same_value(value, problem.meta["target"])
        return Grade(correct, "passed" if correct else "wrong_value", formatted=formatted, extracted=extracted)
