"""Synthetic tool-call task (`task.name=tool_call`): call the right tool of a short list with
the arguments a user request gives.

    tools: timer(minutes:int[1..120],label?:str); air(city:str)
    user: timer 5 min for tea
    call:                 ->  {"name":"timer","arguments":{"minutes":5,"label":"tea"}}

Tools (their parameter schemas are `meta["tools"]`, shown in the compact notation of
grpo_research/tasks/structured.py; every argument object allows no other keys): weather(city,
days?), air(city), convert(value, from, to), event(title, day, hour?), timer(minutes, label?),
alarm(hour, minute?), translate(text, lang). The requested call is `meta["target"]`.

Levels: 1, one tool (the one to call), only its required arguments, the plain phrasing;
2, two tools (one distractor), an optional argument given half of the time, phrasings varied;
3, three tools in random order: the target, its look-alike where it has one (weather/air,
timer/alarm, event/alarm, convert/translate) and a random third, optional arguments as at 2.
Level 1 is a small space (about 1,050 distinct prompts, of which 41 are held out): a request
for more of `eval_level` 1 raises TooFewProblems, a ValueError (level 1 is meant for training draws).

Grading (`grade`, one code path with the `tool_call` reward term: `json_check.check_tool_call`):
correct when generation ended with EOS, the completion is one JSON document (one enclosing
Markdown fence allowed, nothing before or after it) of the form `{"name": ..., "arguments":
{...}}` (`arguments` may be a JSON string holding the object, as OpenAI's API sends it), the
name is the requested tool, the arguments validate against its schema, and they equal the
requested arguments: a missing optional argument the user gave, or one the user did not give,
is wrong. Outcomes: unfinished, no_json, not_a_call, unknown_tool, invalid_arguments,
wrong_tool (a valid call of another listed tool), wrong_value, passed. Formatted (the `format`
reward term): the completion is one JSON object. The `tool_call` reward term alone pays any
valid call of a listed tool (wrong_tool and wrong_value included); the task's grader is the
reward term `correct`.

Prompts are ASCII, so the tiny model's character vocabulary (printable ASCII) covers them.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Callable

from grpo_research.tasks.base import Grade, Problem, register_task
from grpo_research.tasks.json_check import check_tool_call
from grpo_research.tasks.json_task import CITIES
from grpo_research.tasks.structured import StructuredTask, compact, obj, same_value

DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
TITLES = ["gym", "lunch", "call", "dentist", "demo", "yoga", "class"]
LABELS = ["tea", "eggs", "pasta", "nap", "rice"]
WORDS = ["hello", "thanks", "cat", "water", "bread", "sun"]
UNITS = {"km": "mi", "mi": "km", "kg": "lb", "lb": "kg"}
STR = {"type": "string"}


def _int(lo: int, hi: int) -> dict:
    return {"type": "integer", "minimum": lo, "maximum": hi}


def _enum(values) -> dict:
    return {"type": "string", "enum": list(values)}


@dataclass(frozen=True)
class Tool:
    """A tool: its parameter schema, how the required and the optional arguments are drawn, and
    the phrasings of a request without and with the optional argument (the first of each is
    the plain one of level 1)."""

    name: str
    parameters: dict
    draw: Callable[[random.Random], dict]  # the required arguments
    draw_optional: Callable[[random.Random], dict] | None  # the optional argument
    say: tuple[Callable[[dict], str], ...]
    say_optional: tuple[Callable[[dict], str], ...] = ()


def _value(rng: random.Random) -> int | float:
    return rng.randint(1, 99) + rng.choice([0, 0.5])


def _convert(rng: random.Random) -> dict:
    unit = rng.choice(list(UNITS))
    return {"value": _value(rng), "from": unit, "to": UNITS[unit]}


TOOLS = {t.name: t for t in [
    Tool("weather", obj({"city": STR, "days": _int(1, 7)}, ["city"]),
         lambda r: {"city": r.choice(CITIES)}, lambda r: {"days": r.randint(1, 7)},
         (lambda a: f"weather in {a['city']}", lambda a: f"forecast for {a['city']}"),
         (lambda a: f"weather in {a['city']} for {a['days']} days", lambda a: f"{a['days']}-day forecast for {a['city']}")),
    Tool("air", obj({"city": STR}, ["city"]), lambda r: {"city": r.choice(CITIES)}, None,
         (lambda a: f"air quality in {a['city']}", lambda a: f"is the air clean in {a['city']}")),
    Tool("convert", obj({"value": {"type": "number"}, "from": _enum(UNITS), "to": _enum(UNITS)}, ["value", "from", "to"]),
         _convert, None,
         (lambda a: f"convert {a['value']} {a['from']} to {a['to']}", lambda a: f"{a['value']} {a['from']} in {a['to']}")),
    Tool("event", obj({"title": STR, "day": _enum(DAYS), "hour": _int(0, 23)}, ["title", "day"]),
         lambda r: {"title": r.choice(TITLES), "day": r.choice(DAYS)}, lambda r: {"hour": r.randint(0, 23)},
         (lambda a: f"add {a['title']} on {a['day']}", lambda a: f"book {a['title']} {a['day']}"),
         (lambda a: f"add {a['title']} on {a['day']} at {a['hour']}h", lambda a: f"book {a['title']} {a['day']} {a['hour']}h")),
    Tool("timer", obj({"minutes": _int(1, 120), "label": STR}, ["minutes"]),
         lambda r: {"minutes": r.randint(1, 120)}, lambda r: {"label": r.choice(LABELS)},
         (lambda a: f"timer {a['minutes']} min", lambda a: f"set a {a['minutes']} minute timer"),
         (lambda a: f"timer {a['minutes']} min for {a['label']}", lambda a: f"{a['label']} timer, {a['minutes']} min")),
    Tool("alarm", obj({"hour": _int(0, 23), "minute": _int(0, 59)}, ["hour"]),
         lambda r: {"hour": r.randint(0, 23)}, lambda r: {"minute": r.randint(1, 59)},
         (lambda a: f"alarm at {a['hour']}", lambda a: f"wake me at {a['hour']}"),
         (lambda a: f"alarm at {a['hour']}:{a['minute']:02d}", lambda a: f"wake me at {a['hour']}:{a['minute']:02d}")),
    Tool("translate", obj({"text": STR, "lang": _enum(["fr", "de", "es", "it"])}, ["text", "lang"]),
         lambda r: {"text": r.choice(WORDS), "lang": r.choice(["fr", "de", "es", "it"])}, None,
         (lambda a: f"translate {a['text']} to {a['lang']}", lambda a: f"{a['text']} in {a['lang']}")),
]}
LOOKALIKE = {"weather": "air", "air": "weather", "timer": "alarm", "alarm": "timer", "event": "alarm",
             "convert": "translate", "translate": "convert"}


def signature(tool: Tool) -> str:
    """`name(arg:T,opt?:T)` in the compact notation."""
    return f"{tool.name}({compact(tool.parameters)[1:-1]})"


def make_problem(rng: random.Random, level: int, split: str, index: int) -> Problem:
    tool = TOOLS[rng.choice(sorted(TOOLS))]
    args = tool.draw(rng)
    with_optional = level > 1 and tool.draw_optional is not None and rng.random() < 0.5
    if with_optional:
        args.update(tool.draw_optional(rng))
    phrases = tool.say_optional if with_optional else tool.say
    request = phrases[0](args) if level == 1 else rng.choice(phrases)(args)
    listed = [tool.name]
    if level == 2:
        listed.append(rng.choice([n for n in sorted(TOOLS) if n != tool.name]))
    elif level == 3:
        listed.append(LOOKALIKE[tool.name])
        listed.append(rng.choice([n for n in sorted(TOOLS) if n not in listed]))
    rng.shuffle(listed)
    tools = {n: TOOLS[n].parameters for n in listed}
    ordered = {k: args[k] for k in tool.parameters["properties"] if k in args}  # schema order
    target = {"name": tool.name, "arguments": ordered}
    shown = "; ".join(signature(TOOLS[n]) for n in listed)
    return Problem(
        id=f"tool_call/{split}/{index}",
        prompt=f"tools: {shown}\nuser: {request}\ncall:",
        solution=json.dumps(target, separators=(",", ":")),
        meta={"tools": tools, "target": target, "level": level,
              "chat_prompt": ("Call one of these tools (the JSON schema of each tool's arguments follows its name). "
                              'Reply with only the call as JSON: {"name": <tool>, "arguments": {...}}.\n'
                              f"Tools: {json.dumps(tools)}\nRequest: {request}")},
    )


@register_task("tool_call")
class ToolCallTask(StructuredTask):
    name = "tool_call"

    def draw(self, rng: random.Random, level: int, split: str, index: int) -> Problem:
        return make_problem(rng, level, split, index)

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        verdict, name, args = check_tool_call(completion, problem.meta["tools"], self._validators)
        formatted = self.check_format(problem, completion)
        extracted = _show(name, args)
        if not finished:
            return Grade(False, "unfinished", formatted=formatted, extracted=extracted)
        if verdict != "valid":
            return Grade(False, verdict, formatted=formatted, extracted=extracted)
        target = problem.meta["target"]
        if name != target["name"]:
            return Grade(False, "wrong_tool", formatted=formatted, extracted=extracted)
        correct = same_value(args, target["arguments"])
        return Grade(correct, "passed" if correct else "wrong_value", formatted=formatted, extracted=extracted)


def _show(name: str | None, args: Any) -> str | None:
    """The call as read, for logging."""
    return None if name is None else json.dumps({"name": name, "arguments": args}, separators=(",", ":"))
