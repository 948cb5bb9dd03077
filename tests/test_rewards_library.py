"""Reward terms of grpo_research.rewards.library."""
from __future__ import annotations

import json
import math

import pytest

import grpo_research.rewards.library as L
import grpo_research.sandbox as sandbox
import grpo_research.tasks.code  # noqa: F401  (registers the "code" task)
from grpo_research.rewards.base import REWARDS, build_reward
from grpo_research.sandbox import SandboxResult
from grpo_research.tasks.base import Problem, get_task


def P(pid="p", **meta) -> Problem:
    return Problem(id=pid, prompt="Q: ", meta=meta)


def test_terms_are_registered():
    assert {"code_tests", "json_schema", "tool_call", "overlong", "reward_model"} <= set(REWARDS)


# ---------------------------------------------------------------- code_tests


@pytest.fixture
def code_task():
    return get_task("code", timeout_s=2.0)


def test_code_tests_fraction_and_all(code_task):
    p = Problem(id="t", prompt="def f(x):\n", entry_point="f",
                tests="\n\ndef check(c):\n    assert c(1) == 2\n    assert c(2) == 3\n    assert c(3) == 5\n\ncheck(f)\n",
                meta={"test_list": ["assert f(1) == 2", "assert f(2) == 3", "assert f(3) == 5"]})
    completions = ["    return x + 1\n", "    return x * 0\n", "    return x + 1 if x < 3 else 5\n"]
    fraction = L.code_tests_reward(code_task)([p] * 3, completions, [True] * 3)
    assert fraction == pytest.approx([2 / 3, 0.0, 1.0])
    assert L.code_tests_reward(code_task, mode="all")([p] * 3, completions, [True] * 3) == [0.0, 0.0, 1.0]
    assert L.code_tests_reward(code_task)([p], [completions[2]], [False]) == [0.0]  # the code task needs EOS


def test_code_tests_masks_sandbox_errors(code_task, monkeypatch):
    def broken(codes, limits=None, workers=None):
        return [SandboxResult("sandbox_error", None, "", "", 0.0, "none", "x") for _ in codes]

    monkeypatch.setattr(sandbox, "run_programs", broken)
    p = code_task.heldout_problems(1)[0]
    assert L.code_tests_reward(code_task)([p], [p.solution], [True]) == [None]


def test_code_tests_needs_a_code_task_and_a_known_mode(code_task):
    with pytest.raises(ValueError, match="mode"):
        L.code_tests_reward(code_task, mode="some")
    with pytest.raises(ValueError, match="not a code task"):
        L.code_tests_reward(type("T", (), {"kind": "math", "name": "m"})())


def test_code_tests_through_build_reward(code_task):
    reward = build_reward(code_task, {"code_tests": 1.0, "format": 0.5}, {"code_tests": {"mode": "fraction"}})
    problems = code_task.heldout_problems(2)
    batch = reward(problems, [problems[0].solution, "    return None\n"], [True, True])
    assert batch.total == pytest.approx([1.5, 0.5]) and batch.mask == [True, True]


# ---------------------------------------------------------------- json_schema

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": False}


def test_json_schema_reward():
    term = L.json_schema_reward(schema=SCHEMA, parse_credit=0.25)
    completions = ['{"n": 3}', ' {"n": "3"} ', "not json", '```json\n{"n": 1}\n```', '{"n": 1, "m": 2}']
    assert term([P()] * 5, completions, [True] * 5) == [1.0, 0.25, 0.0, 1.0, 0.25]
    strings = {"type": "array", "items": {"type": "string"}}
    assert term([P(schema=strings)] * 2, ['["a", "b"]', '{"n": 3}'], [True] * 2) == [1.0, 0.25]  # meta wins


def test_json_schema_errors():
    import jsonschema

    with pytest.raises(jsonschema.SchemaError):
        L.json_schema_reward(schema={"type": "no-such-type"})
    with pytest.raises(ValueError, match="no schema"):
        L.json_schema_reward()([P()], ["{}"], [True])


# ---------------------------------------------------------------- tool_call

WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
           "required": ["city"]}
OPENAI_TOOLS = [{"type": "function", "function": {"name": "weather", "description": "forecast", "parameters": WEATHER}},
                {"type": "function", "function": {"name": "now"}}]


def test_tool_call_reward():
    term = L.tool_call_reward(tools=OPENAI_TOOLS, name_credit=0.5)
    completions = [
        '{"name": "weather", "arguments": {"city": "Oslo", "days": 2}}',
        json.dumps({"name": "weather", "arguments": json.dumps({"city": "Oslo"})}),  # arguments as a JSON string
        '{"name": "weather", "arguments": {"days": 0}}',  # invalid arguments
        '{"name": "rain", "arguments": {}}',  # unknown tool
        '{"name": "now", "arguments": {}}',
        "call weather(Oslo)",
        '{"name": "weather"}',
    ]
    assert term([P()] * 7, completions, [True] * 7) == [1.0, 1.0, 0.5, 0.0, 1.0, 0.0, 0.5]


def test_tool_call_tools_from_meta_and_formats():
    assert L.normalise_tools([{"name": "a", "parameters": WEATHER}]) == {"a": WEATHER}
    assert L.normalise_tools({"a": WEATHER}) == {"a": WEATHER}
    term = L.tool_call_reward()
    p = P(tools=[{"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "number"}}}}])
    assert term([p, p], ['{"name": "add", "arguments": {"a": 1}}', '{"name": "add", "arguments": {"a": "x"}}'],
                [True, True]) == [1.0, 0.0]
    with pytest.raises(ValueError, match="no tools"):
        term([P()], ["{}"], [True])
    with pytest.raises(ValueError, match="name"):
        L.tool_call_reward(tools=[{"parameters": {}}])


# ---------------------------------------------------------------- overlong


def test_overlong_penalty_values():
    # DAPO: max_len 20, cache 10 -> 0 up to 10, linear to -1 at 20, -1 beyond
    assert [L.overlong_penalty(n, 20, 10) for n in (0, 10, 11, 15, 20, 21, 99)] == pytest.approx(
        [0.0, 0.0, -0.1, -0.5, -1.0, -1.0, -1.0])
    term = L.overlong_reward(max_len=20, cache=10)
    assert term([P()] * 3, ["a" * 5, "a" * 15, "a" * 30], [True, True, False]) == pytest.approx([0.0, -0.5, -1.0])
    words = L.overlong_reward(max_len=4, cache=2, length_fn=lambda s: len(s.split()))
    assert words([P()] * 2, ["a b", "a b c"], [True] * 2) == pytest.approx([0.0, -0.5])


def test_overlong_options_are_checked():
    for kw in ({}, {"max_len": 10}, {"max_len": 10, "cache": 0}, {"max_len": 10, "cache": 11}):
        with pytest.raises(ValueError):
            L.overlong_reward(**kw)


# ---------------------------------------------------------------- reward_model


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory):
    """A randomly initialised one-layer Llama classifier and a character tokenizer, saved locally."""
    import string

    import torch
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForSequenceClassification, PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("rm")
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for ch in string.printable:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                            unk_token="<unk>").save_pretrained(path)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                         num_labels=1, pad_token_id=0)
    LlamaForSequenceClassification(config).save_pretrained(path)
    return path


def test_reward_model_scores_prompt_plus_completion(tiny_rm):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    term = L.reward_model_reward(path=str(tiny_rm), batch_size=3)
    problems = [P("a"), P("b"), P("c"), P("d")]
    completions = ["4", "a much longer answer, with padding needed", "x = 2\n", ""]
    scores = term(problems, completions, [True] * 4)
    assert len(scores) == 4 and all(math.isfinite(s) for s in scores)
    assert len(set(scores)) > 1
    alone = [term([p], [c], [True])[0] for p, c in zip(problems, completions)]
    assert scores == pytest.approx(alone, abs=1e-5)  # padding in a batch changes nothing
    tok = AutoTokenizer.from_pretrained(tiny_rm)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_rm, dtype=torch.float32).eval()
    with torch.no_grad():
        direct = model(**tok(["Q: 4"], return_tensors="pt")).logits[0, 0].item()
    assert scores[0] == pytest.approx(direct, abs=1e-5)
    probs = L.reward_model_reward(path=str(tiny_rm), output="prob")(problems, completions, [True] * 4)
    assert probs == pytest.approx([1 / (1 + math.exp(-s)) for s in scores], abs=1e-5)


def test_reward_model_truncates_from_the_left_and_checks_options(tiny_rm):
    term = L.reward_model_reward(path=str(tiny_rm), max_length=8)
    long = term([P()], ["z" * 100 + "tail"], [True])[0]
    assert long == pytest.approx(term([Problem(id="x", prompt="")], ["zzzztail"], [True])[0], abs=1e-5)
    with pytest.raises(ValueError, match="path"):
        L.reward_model_reward()
    with pytest.raises(ValueError, match="label"):
        L.reward_model_reward(path=str(tiny_rm), label=3)
