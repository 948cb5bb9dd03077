"""The structured-output tasks `json_schema` and `tool_call` (grpo_research/tasks/json_task.py,
tool_task.py, structured.py) and their shared checker (tasks/json_check.py).

Covered: draws are a function of the seed; held-out and training prompts never meet; every
reference solution grades correct; hand-written completions (valid, schema-invalid,
wrong value, wrong tool, extra or missing arguments, truncated JSON, trailing text, one
Markdown fence accepted, two not, unfinished = no EOS) get the outcome the docstrings
promise; the reward terms `json_schema`/`tool_call`/`correct`/`format` agree with
`task.grade`; bad options give one config line; a short GRPO run on each task writes metrics.
"""
from __future__ import annotations

import json
import random

import pytest

from grpo_research.config import load_config
from grpo_research.errors import ConfigError
from grpo_research.rewards import build_reward
from grpo_research.rewards.library import json_schema_reward, tool_call_reward
from grpo_research.tasks import build_task, get_task
from grpo_research.tasks.structured import compact, is_heldout, same_value

TASKS = ["json_schema", "tool_call"]


@pytest.fixture(scope="module", params=TASKS)
def task(request):
    return get_task(request.param)


# ---------------------------------------------------------------- draws and splits


@pytest.mark.parametrize("name", TASKS)
def test_draws_are_a_function_of_the_seed(name):
    t = get_task(name)
    a = t.train_problems(random.Random(7), 50)
    b = get_task(name).train_problems(random.Random(7), 50)
    c = t.train_problems(random.Random(8), 50)
    assert [p.prompt for p in a] == [p.prompt for p in b]
    assert [p.solution for p in a] == [p.solution for p in b]
    assert [p.prompt for p in a] != [p.prompt for p in c]
    assert [p.prompt for p in t.heldout_problems(30)] == [p.prompt for p in get_task(name).heldout_problems(30)]


@pytest.mark.parametrize("name", TASKS)
@pytest.mark.parametrize("level", [1, 2, 3])
def test_levels_are_drawn_as_asked(name, level):
    t = get_task(name, levels=[level], level_weights=[1.0], eval_level=level)
    assert {p.meta["level"] for p in t.train_problems(random.Random(0), 40)} == {level}


def test_splits_are_disjoint(task):
    held = task.heldout_problems(300)
    assert len({p.prompt for p in held}) == 300 and all(is_heldout(p.prompt) for p in held)
    assert {p.meta["level"] for p in held} == {3}
    train = task.train_problems(random.Random(0), 3000)
    assert not any(is_heldout(p.prompt) for p in train)
    assert not {p.prompt for p in train} & {p.prompt for p in task.heldout_problems()}
    assert any(is_heldout(task.draw(random.Random(i), 3, "x", 0).prompt) for i in range(200))  # the filter bites


def test_reference_solutions_grade_correct(task):
    problems = task.train_problems(random.Random(3), 400) + task.heldout_problems(400)
    grades = task.grade_many(problems, [p.solution for p in problems], [True] * len(problems))
    assert all(g.correct and g.outcome == "passed" and g.formatted for g in grades)
    assert all(p.prompt.isascii() and p.solution.isascii() for p in problems)  # the char vocabulary covers them


def test_prompts_fit_the_tiny_model_context(task):
    """configs/defaults.yaml gives the tiny-toolcall base 320 characters of context and 80 new
    tokens (json_schema needs 96): the longest prompt plus the budget must fit."""
    budget = {"json_schema": 96, "tool_call": 80}[task.name]
    problems = task.train_problems(random.Random(0), 3000) + task.heldout_problems()
    assert max(len(p.prompt) for p in problems) + budget <= 320
    assert max(len(p.solution) for p in problems) + 1 <= budget  # the solution and EOS


def test_compact_notation():
    from grpo_research.tasks.structured import obj

    schema = obj({"a": {"type": "string"}, "n": {"type": "integer", "minimum": 1, "maximum": 7},
                  "t": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
                  "c": {"type": "string", "enum": ["x", "y"]}, "o": obj({"b": {"type": "boolean"}}, ["b"])},
                 ["a", "n", "t"])
    assert compact(schema) == "{a:str,n:int[1..7],t:[str]1..3,c?:x|y,o?:{b:bool}}"


def test_same_value_keeps_booleans_apart_from_numbers():
    assert same_value({"a": 3, "b": [1, "x"]}, {"b": [1.0, "x"], "a": 3.0})
    assert not same_value({"a": True}, {"a": 1}) and not same_value([1], [1, 1]) and not same_value({"a": 1}, {})


# ---------------------------------------------------------------- hand-written json_schema cases

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 99},
                         "vip": {"type": "boolean"}}}


def _json_problem():
    from grpo_research.tasks.base import Problem

    return Problem(id="j", prompt="schema: {name:str,age:int[0..99],vip?:bool}\nrequest: name Ada, age 36\njson:",
                   solution='{"name":"Ada","age":36}', meta={"schema": SCHEMA, "target": {"name": "Ada", "age": 36}})


JSON_CASES = [  # (completion, finished, outcome, formatted)
    ('{"name":"Ada","age":36}', True, "passed", True),
    ('  {"age": 36, "name": "Ada"}\n', True, "passed", True),  # key order and whitespace do not matter
    ('{"name":"Ada","age":36.0}', True, "passed", True),  # 36.0 is an integer to JSON schema
    ('```json\n{"name":"Ada","age":36}\n```', True, "passed", True),  # one enclosing fence is accepted
    ('```\n{"name":"Ada","age":36}\n```', True, "passed", True),
    ('{"name":"Ada","age":36}', False, "unfinished", True),  # no EOS: not correct
    ('{"name":"Ada","age":37}', True, "wrong_value", True),  # schema-valid, wrong value
    ('{"name":"ada","age":36}', True, "wrong_value", True),  # strings compare exactly
    ('{"name":"Ada","age":36,"vip":false}', True, "wrong_value", True),  # an optional key nobody asked for
    ('{"name":"Ada"}', True, "invalid", True),  # a required key missing
    ('{"name":"Ada","age":"36"}', True, "invalid", True),  # wrong type
    ('{"name":"Ada","age":136}', True, "invalid", True),  # out of bounds
    ('{"name":"Ada","age":36,"x":1}', True, "invalid", True),  # no other keys
    ('["Ada",36]', True, "invalid", False),
    ('{"name":"Ada","age":3', True, "no_json", False),  # truncated
    ('{"name":"Ada","age":36} thanks', True, "no_json", False),  # trailing text
    ('Here: {"name":"Ada","age":36}', True, "no_json", False),  # leading text
    ('```json\n{"name":"Ada","age":36}\n```\n```json\n{}\n```', True, "no_json", False),  # two fenced blocks
    ('```json\n{"name":"Ada","age":36}', True, "no_json", False),  # an unclosed fence
    ("", True, "no_json", False),
]


@pytest.mark.parametrize("completion,finished,outcome,formatted", JSON_CASES)
def test_json_schema_grading_cases(completion, finished, outcome, formatted):
    t = get_task("json_schema")
    g = t.grade(_json_problem(), completion, finished)
    assert (g.outcome, g.correct, g.formatted) == (outcome, outcome == "passed", formatted)
    assert t.check_format(_json_problem(), completion) == formatted


# ---------------------------------------------------------------- hand-written tool_call cases

TOOLS = {
    "weather": {"type": "object", "additionalProperties": False, "required": ["city"],
                "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 7}}},
    "air": {"type": "object", "additionalProperties": False, "required": ["city"],
            "properties": {"city": {"type": "string"}}},
}


def _tool_problem(args):
    from grpo_research.tasks.base import Problem

    target = {"name": "weather", "arguments": args}
    return Problem(id="t", prompt="tools: ...\nuser: ...\ncall:", solution=json.dumps(target),
                   meta={"tools": TOOLS, "target": target})


def _call(name, args, string=False):
    return json.dumps({"name": name, "arguments": json.dumps(args) if string else args})


TOOL_CASES = [  # (target arguments, completion, finished, outcome)
    ({"city": "Oslo"}, _call("weather", {"city": "Oslo"}), True, "passed"),
    ({"city": "Oslo"}, _call("weather", {"city": "Oslo"}, string=True), True, "passed"),  # OpenAI's string form
    ({"city": "Oslo"}, "```json\n" + _call("weather", {"city": "Oslo"}) + "\n```", True, "passed"),
    ({"city": "Oslo", "days": 3}, _call("weather", {"days": 3, "city": "Oslo"}), True, "passed"),
    ({"city": "Oslo"}, _call("weather", {"city": "Oslo"}), False, "unfinished"),
    ({"city": "Oslo"}, _call("air", {"city": "Oslo"}), True, "wrong_tool"),  # the distractor
    ({"city": "Oslo"}, _call("weather", {"city": "Rome"}), True, "wrong_value"),
    ({"city": "Oslo"}, _call("weather", {"city": "Oslo", "days": 2}), True, "wrong_value"),  # an extra argument
    ({"city": "Oslo", "days": 3}, _call("weather", {"city": "Oslo"}), True, "wrong_value"),  # a missing optional one
    ({"city": "Oslo"}, _call("weather", {"days": 3}), True, "invalid_arguments"),  # a required one missing
    ({"city": "Oslo"}, _call("weather", {"city": "Oslo", "days": 9}), True, "invalid_arguments"),  # out of bounds
    ({"city": "Oslo"}, _call("weather", {"city": "Oslo", "when": "now"}), True, "invalid_arguments"),  # unknown key
    ({"city": "Oslo"}, '{"name":"weather","arguments":"city=Oslo"}', True, "invalid_arguments"),
    ({"city": "Oslo"}, '{"name":"weather"}', True, "invalid_arguments"),
    ({"city": "Oslo"}, _call("rain", {"city": "Oslo"}), True, "unknown_tool"),
    ({"city": "Oslo"}, '{"tool":"weather","arguments":{"city":"Oslo"}}', True, "not_a_call"),
    ({"city": "Oslo"}, '{"name":"weather","arguments":{"city":"Os', True, "no_json"),  # truncated
    ({"city": "Oslo"}, _call("weather", {"city": "Oslo"}) + "\nDone.", True, "no_json"),  # trailing text
    ({"city": "Oslo"}, "weather(city=Oslo)", True, "no_json"),
]


@pytest.mark.parametrize("args,completion,finished,outcome", TOOL_CASES)
def test_tool_call_grading_cases(args, completion, finished, outcome):
    g = get_task("tool_call").grade(_tool_problem(args), completion, finished)
    assert (g.outcome, g.correct) == (outcome, outcome == "passed")


# ---------------------------------------------------------------- one code path: rewards and grade agree


def _completions(task, problems):
    """Per problem: its solution, fenced, unfinished, truncated, with trailing text, and another
    problem's solution (valid JSON of the wrong values, tool or schema)."""
    rows = []
    for i, p in enumerate(problems):
        other = problems[(i + 1) % len(problems)].solution
        for c, f in [(p.solution, True), (f"```json\n{p.solution}\n```", True), (p.solution, False),
                     (p.solution[:-3], True), (p.solution + " ok", True), (other, True)]:
            rows.append((p, c, f))
    return rows


def test_reward_terms_agree_with_grade(task):
    problems = task.heldout_problems(60)
    rows = _completions(task, problems)
    ps, cs, fs = map(list, zip(*rows))
    grades = task.grade_many(ps, cs, fs)
    valid_outcomes = {"json_schema": {"passed", "wrong_value"}, "tool_call": {"passed", "wrong_value", "wrong_tool"}}
    term = (json_schema_reward() if task.name == "json_schema" else tool_call_reward())
    assert term(ps, cs, fs) == [float(g.outcome in valid_outcomes[task.name]) for g in grades]
    reward = build_reward(task, {"correct": 1.0, "format": 0.5})
    batch = reward(ps, cs, fs)
    assert batch.components["correct"] == [float(g.correct) for g in grades]
    assert batch.components["format"] == [float(g.formatted and f) for g, f in zip(grades, fs)]
    outcomes = {g.outcome for g in grades}
    assert {"passed", "unfinished", "no_json"} <= outcomes and outcomes & {"wrong_value", "wrong_tool", "invalid"}


def test_shared_checker_is_what_the_rewards_call(monkeypatch):
    """The reward terms read completions through tasks/json_check.py, not a copy of it."""
    import grpo_research.rewards.library as L

    calls = []
    real = L.check_json
    monkeypatch.setattr(L, "check_json", lambda *a: calls.append(a) or real(*a))
    p = _json_problem()
    assert L.json_schema_reward()([p], [p.solution], [True]) == [1.0] and len(calls) == 1


# ---------------------------------------------------------------- config


@pytest.mark.parametrize("name", TASKS)
def test_bad_option_values_give_one_config_line(name):
    cfg = load_config(None, [f"task.name={name}", "task.levels=[1, 2]", "task.level_weights=[0.5, 0.5]"])
    assert build_task(cfg.task).levels == [1, 2]
    cfg.task.level_weights = [0.5]
    with pytest.raises(ConfigError, match=rf"task \({name}\): .*same length"):
        build_task(cfg.task)
    cfg.task.level_weights = [-1, 2]
    with pytest.raises(ConfigError, match="non-negative"):
        build_task(cfg.task)
    with pytest.raises(ConfigError, match="not an option of task"):
        load_config(None, [f"task.name={name}", "task.options={question: true}"])


def test_too_small_heldout_split_says_so():
    with pytest.raises(ValueError, match="distinct held-out problems"):
        get_task("tool_call", levels=[1], level_weights=[1], eval_level=1).heldout_problems(1000)


# ---------------------------------------------------------------- a short training run


@pytest.fixture(scope="module")
def long_context_model(tmp_path_factory):
    """A small random char Llama with room for these prompts (320 characters)."""
    from grpo_research.models import build_char_tokenizer, build_tiny_model

    d = tmp_path_factory.mktemp("tiny_structured")
    tok = build_char_tokenizer()
    build_tiny_model(len(tok), hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                     max_position_embeddings=320, seed=0).save_pretrained(d)
    tok.save_pretrained(d)
    return d


@pytest.mark.parametrize("name", TASKS)
def test_grpo_smoke_run_writes_metrics(name, long_context_model, tmp_path, fast_overrides):
    from grpo_research.cli import main
    from grpo_research.tracking import read_metrics

    run = tmp_path / "run"
    # the random model is never right: a length-shaped term gives the groups an advantage
    args = ["train", "--run-dir", str(run), f"model.name_or_path={long_context_model}", "method=grpo",
            *fast_overrides(f"task.name={name}", "task.levels=[1]", "task.level_weights=[1.0]", "train.steps=3",
                            "train.eval_every=3", "train.eval_size=4", "train.samples_every=3",
                            "rollout.max_new_tokens=24",
                            "reward.weights={correct: 1.0, format: 0.2, overlong: 1.0}",
                            "reward.options={overlong: {max_len: 24, cache: 20}}", "optim.lr=1e-2")]
    assert main(args) == 0
    rows = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in rows if "reward_mean" in r] == [1, 2, 3]
    assert [r["step"] for r in rows if "eval/accuracy" in r] == [0, 3]
    assert any(r["grad_norm"] > 0 for r in rows if "grad_norm" in r)
    sample = json.loads(next((run / "samples").glob("*.jsonl")).read_text().splitlines()[0])
    assert sample["prompt"].startswith({"json_schema": "schema: ", "tool_call": "tools: "}[name])
