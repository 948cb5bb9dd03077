"""The one code path that reads structured output: JSON parsing, schema validation, tool calls.

Used by the reward terms `json_schema` and `tool_call` (grpo_research/rewards/library.py) and
by the tasks `json_schema` and `tool_call` (grpo_research/tasks/structured.py), so a
completion is never judged valid by the reward and invalid by the task's grader, or back.

What counts as a JSON answer (`json_text`): the completion with surrounding whitespace
removed; or, when the whole completion is one Markdown fenced block (a line opening with
three backticks and an optional language tag such as `json`, the closing fence at the very
end), the text inside that block. Chat models wrap JSON in such a fence, so one enclosing
fence is accepted; text before or after the JSON (or the fence) makes it unparseable, as
does a truncated document. The parsed value may be any JSON value; the callers say what
they need (a schema, an object with `name` and `arguments`).
"""
from __future__ import annotations

import json
from typing import Any

NOT_JSON = object()  # what `parse_json` returns for text that is not one JSON document


def json_text(completion: str) -> str:
    """The completion without surrounding whitespace and without one enclosing Markdown fence."""
    text = completion.strip()
    if text.startswith("```") and text.endswith("```") and "\n" in text:
        text = text[text.index("\n") + 1: -3].strip()
    return text


def parse_json(completion: str) -> Any:
    """The JSON value of the completion (see `json_text`), or `NOT_JSON`."""
    try:
        return json.loads(json_text(completion))
    except json.JSONDecodeError:
        return NOT_JSON


class Validators:
    """jsonschema validators, built once per distinct schema (the schema is checked when built:
    a bad schema raises jsonschema.SchemaError)."""

    def __init__(self):
        self._cache: dict[str, Any] = {}

    def __call__(self, schema: dict) -> Any:
        import jsonschema

        key = json.dumps(schema, sort_keys=True)
        if key not in self._cache:
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            self._cache[key] = cls(schema)
        return self._cache[key]


def check_json(completion: str, schema: dict, validators: Validators) -> tuple[str, Any]:
    """(verdict, value): `no_json` (value None) when the completion is not one JSON document,
    `invalid` when it does not validate against `schema`, else `valid`."""
    value = parse_json(completion)
    if value is NOT_JSON:
        return "no_json", None
    return ("valid" if validators(schema).is_valid(value) else "invalid"), value


def normalise_tools(tools: Any) -> dict[str, dict]:
    """{name: parameters schema} from OpenAI-style `[{"type": "function", "function": {...}}]`,
    plain `[{"name", "parameters"}]`, or an already-normalised `{name: schema}`."""
    if isinstance(tools, dict):
        return {str(k): v for k, v in tools.items()}
    out = {}
    for t in tools or []:
        spec = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise ValueError(f"tool_call: a tool needs a 'name': {t!r}")
        out[spec["name"]] = spec.get("parameters") or {"type": "object"}
    return out


def check_tool_call(completion: str, tools: dict[str, dict], validators: Validators) -> tuple[str, str | None, Any]:
    """(verdict, tool name, arguments) of a completion that should be one tool call
    `{"name": ..., "arguments": {...}}` (`arguments` may also be a JSON string holding the
    object, as OpenAI's API sends it) against `tools` ({name: parameters schema}).

    Verdicts: `no_json`; `not_a_call` (JSON, but no string `name`); `unknown_tool` (a name not
    in `tools`); `invalid_arguments` (a known tool, arguments missing, not an object, or not
    valid against its schema); `valid`."""
    call = parse_json(completion)
    if call is NOT_JSON:
        return "no_json", None, None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str):
        return "not_a_call", None, None
    name = call["name"]
    if name not in tools:
        return "unknown_tool", name, None
    args = call.get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return "invalid_arguments", name, None
    if not isinstance(args, dict):
        return "invalid_arguments", name, None
    return ("valid" if validators(tools[name]).is_valid(args) else "invalid_arguments"), name, args
