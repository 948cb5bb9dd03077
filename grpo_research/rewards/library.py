"""Reward terms beyond the task's own grader.

- `code_tests`: share of a code problem's unit tests passed (`mode="fraction"`: one sandbox
  program per assert in `meta["test_list"]`, so one failing or hanging assert cannot hide
  the others; problems without a test list, e.g. HumanEval's single `check`, are graded
  whole), or all-or-nothing (`mode="all"`, the task's own grader).
- `json_schema`: 1 when the completion parses as JSON and validates (jsonschema) against
  the problem's `meta["schema"]`, else the `schema` option. One enclosing Markdown fence is
  accepted (grpo_research/tasks/json_check.py, shared with the json_schema task's grader);
  a completion that did not end with EOS scores 0.
- `tool_call`: 1 when the completion is a JSON tool call `{"name": ..., "arguments": {...}}`
  naming a known tool, with arguments valid against that tool's parameter schema. Tools
  come from `meta["tools"]`, else the `tools` option (same parsing; 0 without EOS). Whether
  it is the call the request asked for is the tool_call task's grader (reward term `correct`).
- `overlong`: DAPO's soft overlong punishment (Yu et al. 2025, eq. 13): 0 up to
  `max_len - cache`, then linear down to -1 at `max_len`, and -1 beyond. Length is counted in
  characters, by a supplied `length_fn`, or in tokens of a `tokenizer` checkpoint.
- `random`: the random-reward control of "Spurious Rewards" (arXiv 2506.10947): 1 with
  probability `p`, else 0, whatever the completion says (set `p` to the base model's mean
  correctness; weight `correct` 0 to keep logging the true correctness beside it).
- `reward_model`: the score of an `AutoModelForSequenceClassification` checkpoint on
  `prompt + completion` (or the chat template of the pair, with `chat_template=True`).

A term returns None (masked) only for infrastructure failures (sandbox errors).
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any, Callable

from grpo_research.rewards.base import register_reward
from grpo_research.tasks.json_check import Validators, check_json, check_tool_call, normalise_tools
from grpo_research.tasks.base import Problem, Task

Values = list[float | None]


def _check_lengths(problems: list, completions: list, finished: list) -> None:
    if not (len(problems) == len(completions) == len(finished)):
        raise ValueError("problems, completions and finished must have the same length")


# ---------------------------------------------------------------- code_tests


@register_reward("code_tests")
def code_tests_reward(task: Task, mode: str = "fraction", timeout_s: float | None = None, workers: int | None = None):
    """Fraction of unit tests passed (`mode="fraction"`) or 1/0 for all passed (`mode="all"`)."""
    if mode not in ("fraction", "all"):
        raise ValueError(f"code_tests: mode must be 'fraction' or 'all'; got {mode!r}")
    if getattr(task, "kind", None) != "code":
        raise ValueError(f"code_tests: task {getattr(task, 'name', task)!r} is not a code task")
    from dataclasses import replace

    from grpo_research.sandbox import SandboxLimits, run_programs

    limits = getattr(task, "limits", None) or SandboxLimits()
    if timeout_s is not None:
        limits = replace(limits, timeout_s=timeout_s, cpu_s=max(1, int(timeout_s)))
    workers = workers if workers is not None else getattr(task, "workers", None)

    def whole(problems: list[Problem], completions: list[str], finished: list[bool]) -> Values:
        grades = task.grade_many(problems, completions, finished)
        return [None if g.masked else float(g.correct) for g in grades]

    def term(problems: list[Problem], completions: list[str], finished: list[bool]) -> Values:
        _check_lengths(problems, completions, finished)
        if mode == "all" or not hasattr(task, "program"):
            return whole(problems, completions, finished)
        values: Values = [None] * len(problems)
        programs: list[str] = []
        owners: list[int] = []
        rest: list[int] = []
        for i, (p, c, f) in enumerate(zip(problems, completions, finished)):
            tests = p.meta.get("test_list")
            if getattr(task, "requires_eos", False) and not f:
                values[i] = 0.0
            elif tests:
                programs += [task.program(p, c, [t]) for t in tests]
                owners += [i] * len(tests)
            else:
                rest.append(i)
        results = run_programs(programs, limits, workers)
        by_owner: dict[int, list[str]] = {}
        for i, r in zip(owners, results):
            by_owner.setdefault(i, []).append(r.outcome)
        for i, outcomes in by_owner.items():
            values[i] = None if "sandbox_error" in outcomes else outcomes.count("passed") / len(outcomes)
        if rest:
            for i, v in zip(rest, whole([problems[i] for i in rest], [completions[i] for i in rest],
                                        [finished[i] for i in rest])):
                values[i] = v
        return values

    return term


# ---------------------------------------------------------------- JSON
# Parsing and validation live in grpo_research/tasks/json_check.py, shared with the
# json_schema and tool_call tasks' graders (one code path).


@register_reward("json_schema")
def json_schema_reward(task: Task | None = None, schema: dict | None = None, parse_credit: float = 0.0):
    """1.0 for JSON valid against the schema; `parse_credit` for JSON that fails it; 0.0 otherwise
    (also for a completion that did not end with EOS)."""
    validators = Validators()
    if schema is not None:
        validators(schema)  # a bad schema in config fails at build time

    def term(problems: list[Problem], completions: list[str], finished: list[bool]) -> Values:
        _check_lengths(problems, completions, finished)
        out: Values = []
        for p, c, f in zip(problems, completions, finished):
            s = p.meta.get("schema", schema)
            if s is None:
                raise ValueError(f"json_schema: no schema for problem {p.id!r} (set meta['schema'] or option schema)")
            verdict = check_json(c, s, validators)[0] if f else "unfinished"
            out.append({"valid": 1.0, "invalid": float(parse_credit)}.get(verdict, 0.0))
        return out

    return term


@register_reward("tool_call")
def tool_call_reward(task: Task | None = None, tools: Any = None, name_credit: float = 0.0):
    """1.0 for a call of a known tool with schema-valid arguments; `name_credit` for a known
    name with invalid arguments; 0.0 otherwise (also for a completion that did not end with
    EOS). `arguments` may be an object or a JSON string."""
    validators = Validators()
    default_tools = normalise_tools(tools) if tools is not None else None
    for schema in (default_tools or {}).values():
        validators(schema)

    def term(problems: list[Problem], completions: list[str], finished: list[bool]) -> Values:
        _check_lengths(problems, completions, finished)
        out: Values = []
        for p, c, f in zip(problems, completions, finished):
            known = normalise_tools(p.meta["tools"]) if "tools" in p.meta else default_tools
            if known is None:
                raise ValueError(f"tool_call: no tools for problem {p.id!r} (set meta['tools'] or option tools)")
            verdict = check_tool_call(c, known, validators)[0] if f else "unfinished"
            out.append({"valid": 1.0, "invalid_arguments": float(name_credit)}.get(verdict, 0.0))
        return out

    return term


# ---------------------------------------------------------------- overlong (DAPO)


def overlong_penalty(length: int, max_len: int, cache: int) -> float:
    """DAPO soft overlong punishment: 0 if L <= max_len - cache; (max_len - cache - L)/cache up to max_len; -1 beyond."""
    if length <= max_len - cache:
        return 0.0
    if length <= max_len:
        return (max_len - cache - length) / cache
    return -1.0


@register_reward("overlong")
def overlong_reward(task: Task | None = None, max_len: int | None = None, cache: int | None = None,
                    length_fn: Callable[[str], int] | None = None, tokenizer: str | None = None):
    """Soft overlong penalty on the completion length (characters, `length_fn`, or `tokenizer` tokens)."""
    if max_len is None or cache is None:
        raise ValueError("overlong: options max_len and cache are required")
    if not 0 < cache <= max_len:
        raise ValueError(f"overlong: need 0 < cache <= max_len; got cache={cache}, max_len={max_len}")
    if length_fn is not None and tokenizer is not None:
        raise ValueError("overlong: give length_fn or tokenizer, not both")
    if tokenizer is not None:
        from transformers import AutoTokenizer

        from grpo_research.model_source import hub_load

        with hub_load(tokenizer):
            tok = AutoTokenizer.from_pretrained(tokenizer)

        def length_fn(text: str) -> int:
            return len(tok(text, add_special_tokens=False)["input_ids"])

    measure = length_fn or len

    def term(problems: list[Problem], completions: list[str], finished: list[bool]) -> Values:
        _check_lengths(problems, completions, finished)
        return [overlong_penalty(measure(c), max_len, cache) for c in completions]

    return term


# ---------------------------------------------------------------- random


@register_reward("random")
def random_reward(task: Task | None = None, p: float = 0.5, seed: int = 0):
    """1.0 with probability `p`, else 0.0, independent of whether the completion is right.

    Each value is a hash of (`seed`, the problem id, the completion, how many times that
    completion of that problem came earlier in the same call), mapped to [0, 1): reproducible
    and unchanged by a resume, with no generator state to checkpoint; copies of a completion
    in one group get their own draws. Departure from a fresh coin per sample: a completion that
    comes back in a later step gets the same value as before (a fixed random labelling of
    (problem, completion) pairs); it still carries no information about correctness.

    In a run the trainer gives `seed` the run's seed unless set, and `p: base` becomes the base
    model's mean correctness (its sampled completions' `correct` score on 128 training problems
    x G, measured before training; summary.json `random_reward_p`): the coin then pays as often
    as the true reward did at the start, the control "Spurious Rewards" describes."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise ValueError(f"random: option p must be a number in [0, 1], got {p!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"random: option seed must be an integer, got {seed!r}")

    def term(problems: list[Problem], completions: list[str], finished: list[bool]) -> Values:
        _check_lengths(problems, completions, finished)
        seen: Counter = Counter()
        out: Values = []
        for prob, c in zip(problems, completions):
            k = seen[(prob.id, c)]
            seen[(prob.id, c)] += 1
            digest = hashlib.blake2b(json.dumps([seed, prob.id, c, k]).encode(), digest_size=8).digest()
            out.append(1.0 if int.from_bytes(digest, "big") / 2**64 < p else 0.0)
        return out

    return term


# ---------------------------------------------------------------- reward model


@register_reward("reward_model")
def reward_model_reward(task: Task | None = None, path: str | None = None, batch_size: int = 8, device: str = "cpu",
                        dtype: str = "float32", max_length: int | None = None, label: int | None = None,
                        output: str = "logit", chat_template: bool = False):
    """Score of a sequence-classification checkpoint on prompt + completion.

    `label` picks the logit (default: the only one, or the last class); `output="prob"`
    turns it into a probability (sigmoid for one label, softmax otherwise). With
    `max_length`, inputs are truncated from the left so the completion's end is kept.
    """
    if path is None:
        raise ValueError("reward_model: option path is required")
    if output not in ("logit", "prob"):
        raise ValueError(f"reward_model: output must be 'logit' or 'prob'; got {output!r}")
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from grpo_research.model_source import hub_load

    with hub_load(path):
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForSequenceClassification.from_pretrained(path, dtype=getattr(torch, dtype)).to(device).eval()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
    if tok.pad_token is None:
        raise ValueError(f"reward_model: tokenizer at {path} has no pad, eos or unk token to pad with")
    model.config.pad_token_id = tok.pad_token_id
    if max_length is not None:
        tok.truncation_side = "left"
    n_labels = model.config.num_labels
    index = (n_labels - 1) if label is None else label
    if not 0 <= index < n_labels:
        raise ValueError(f"reward_model: label {index} out of range for {n_labels} labels")

    def text(p: Problem, c: str) -> str:
        if chat_template:
            question = p.meta.get("question", p.prompt)  # the task's prompt, not the policy's chat rendering of it
            messages = [{"role": "user", "content": question}, {"role": "assistant", "content": c}]
            return tok.apply_chat_template(messages, tokenize=False)
        return p.prompt + c

    @torch.inference_mode()
    def term(problems: list[Problem], completions: list[str], finished: list[bool]) -> Values:
        _check_lengths(problems, completions, finished)
        out: Values = []
        texts = [text(p, c) for p, c in zip(problems, completions)]
        for start in range(0, len(texts), batch_size):
            batch = tok(texts[start:start + batch_size], return_tensors="pt", padding=True,
                        truncation=max_length is not None, max_length=max_length).to(device)
            logits = model(**batch).logits.float()  # (B, num_labels)
            if output == "prob":
                logits = torch.sigmoid(logits) if n_labels == 1 else torch.softmax(logits, dim=-1)
            out += logits[:, index].tolist()
        return out

    return term
