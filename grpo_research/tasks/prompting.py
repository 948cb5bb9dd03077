"""How a problem is posed to the model: raw text or a chat turn, with a system prompt and k-shot
examples (config `task.prompt_format`, `task.system_prompt`, `task.few_shot`).

`pose(task, cfg.task, tokenizer)` returns the task whose problems carry the text given to the
model in `Problem.prompt` (the rollout backends, the sample tables, the supervised control and
the context check all read it there) and the task's own prompt in `meta["question"]`. Its
graders see the problem as the task made it: a HumanEval program is still the task's prompt
plus the completion. Training and evaluation call it alike, so a model is evaluated on the
prompts it was trained on.

- `raw`: the task's prompt; k-shot examples go before it as `prompt + solution` blocks.
- `chat`: `tokenizer.apply_chat_template` of [system], (user: example prompt, assistant: its
  solution) x k, user: the prompt, with the generation prompt. A task may give a chat wording
  of its prompt (`Problem.meta["chat_prompt"]`, e.g. GSM8K's without "Question:"/"Answer:").
  The template's end-of-turn token becomes the tokenizer's EOS (`use_end_of_turn_as_eos`), so a finished answer ends
  generation and counts as finished.
- `auto`: chat when the tokenizer has a chat template, else raw.

Raw with no examples returns the task unchanged (the offline default: nothing is wrapped).
"""
from __future__ import annotations

import dataclasses
import random
from typing import Any

from grpo_research.errors import ConfigError
from grpo_research.tasks.base import Grade, Problem, Task

SHOT_SEED = 1234  # which training problems are the k-shot examples: fixed, the same for every run


def resolve_format(prompt_format: str, tokenizer) -> str:
    """`raw` or `chat` for `task.prompt_format` (auto: chat when the tokenizer has a template)."""
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if prompt_format == "auto":
        return "chat" if has_template else "raw"
    if prompt_format == "chat" and not has_template:
        raise ConfigError("task.prompt_format=chat: the model's tokenizer has no chat template "
                          "(use task.prompt_format=raw)")
    return prompt_format


def end_of_turn_token(tokenizer) -> str | None:
    """The special token that closes an assistant turn in the chat template (e.g. `<|im_end|>`),
    found by rendering a one-word reply; None when no special token follows the reply."""
    marker = "PING4711"
    text = tokenizer.apply_chat_template([{"role": "user", "content": "x"}, {"role": "assistant", "content": marker}],
                                         tokenize=False)
    rest = text[text.rfind(marker) + len(marker):]
    specials = sorted(set(tokenizer.all_special_tokens) | set(getattr(tokenizer, "added_tokens_encoder", {})),
                      key=len, reverse=True)
    rest = rest.lstrip()
    return next((t for t in specials if t and rest.startswith(t)), None)


def use_end_of_turn_as_eos(tokenizer) -> str | None:
    """Make the chat template's end-of-turn token the tokenizer's EOS (generation stops there and
    a completion ending with it is finished); returns the token (None: the template has none)."""
    token = end_of_turn_token(tokenizer)
    if token is not None and token != tokenizer.eos_token:
        tokenizer.eos_token = token
    return token


class PosedTask:
    """A task whose problems are posed in a prompt format; everything else is the task's."""

    def __init__(self, task: Task, render, description: dict[str, Any]):
        self.task, self._render, self.description = task, render, description
        self.name, self.kind = task.name, task.kind

    def __getattr__(self, name: str) -> Any:  # limits, workers, ... of the task
        return getattr(self.task, name)

    def _pose(self, p: Problem) -> Problem:
        return dataclasses.replace(p, prompt=self._render(user_text(p, self.description["format"])),
                                   meta={**p.meta, "question": p.prompt})

    @staticmethod
    def _unpose(p: Problem) -> Problem:
        if "question" not in p.meta:
            return p
        meta = {k: v for k, v in p.meta.items() if k != "question"}
        return dataclasses.replace(p, prompt=p.meta["question"], meta=meta)

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        return [self._pose(p) for p in self.task.train_problems(rng, n)]

    def heldout_problems(self, n: int | None = None) -> list[Problem]:
        return [self._pose(p) for p in self.task.heldout_problems(n)]

    def ood_problems(self, n: int | None = None) -> list[Problem]:
        """The task's out-of-distribution split, posed alike ([] when the task has none)."""
        ood = getattr(self.task, "ood_problems", None)
        return [] if ood is None else [self._pose(p) for p in ood(n)]

    def grade(self, problem: Problem, completion: str, finished: bool = True) -> Grade:
        return self.task.grade(self._unpose(problem), completion, finished)

    def check_format(self, problem: Problem, completion: str) -> bool:
        return self.task.check_format(self._unpose(problem), completion)

    def grade_many(self, problems: list[Problem], completions: list[str], finished: list[bool]) -> list[Grade]:
        return self.task.grade_many([self._unpose(p) for p in problems], completions, finished)


def user_text(p: Problem, fmt: str) -> str:
    """The text the model is given for `p`: in chat, the task's chat wording where it has one
    (`meta["chat_prompt"]`: the question and the answer format without a completion prompt's
    scaffolding such as a trailing "Answer:"), else its prompt."""
    return p.meta.get("chat_prompt", p.prompt) if fmt == "chat" else p.prompt


def _examples(task: Task, k: int) -> list[Problem]:
    if k == 0:
        return []
    try:
        shots = task.train_problems(random.Random(SHOT_SEED), k)
    except (NotImplementedError, ValueError, RuntimeError) as e:
        raise ConfigError(f"task.few_shot={k}: task {task.name!r} has no training problems to show ({e})") from None
    if any(not p.solution for p in shots):
        raise ConfigError(f"task.few_shot={k}: task {task.name!r} gives no solutions to show")
    heldout = {p.id for p in task.heldout_problems()}
    if any(p.id in heldout for p in shots):
        raise ConfigError(f"task.few_shot={k}: task {task.name!r} has no training split apart from its held-out "
                          "problems; its examples would come from the evaluation set")
    return shots


def pose(task: Task, t, tokenizer) -> Task:
    """`task` posed as config section `t` (TaskConfig) says, for `tokenizer`; see the module
    docstring. The returned task's `description` (absent on an unchanged task) records it."""
    fmt = resolve_format(t.prompt_format, tokenizer)
    if fmt == "raw" and t.system_prompt:
        raise ConfigError("task.system_prompt is given but the prompt format is raw (set task.prompt_format=chat)")
    shots = _examples(task, t.few_shot)
    if fmt == "raw" and not shots:
        return task
    description: dict[str, Any] = {"format": fmt, "system_prompt": t.system_prompt, "few_shot": len(shots),
                                   "shot_ids": [p.id for p in shots]}
    if fmt == "raw":
        prefix = "".join(f"{p.prompt}{p.solution}\n\n" for p in shots)
        return PosedTask(task, lambda prompt: prefix + prompt, description)
    description["eos_token"] = use_end_of_turn_as_eos(tokenizer) or tokenizer.eos_token
    head = [{"role": "system", "content": t.system_prompt}] if t.system_prompt else []
    for p in shots:
        head += [{"role": "user", "content": user_text(p, "chat")}, {"role": "assistant", "content": p.solution}]

    def render(prompt: str) -> str:
        return tokenizer.apply_chat_template(head + [{"role": "user", "content": prompt}], tokenize=False,
                                             add_generation_prompt=True)

    return PosedTask(task, render, description)


def describe(task: Task, tokenizer) -> dict[str, Any]:
    """What a run or an evaluation records of its prompts: the format, system prompt, examples,
    EOS token and the first held-out prompt exactly as the model sees it."""
    d = dict(getattr(task, "description", None) or {"format": "raw", "system_prompt": "", "few_shot": 0,
                                                       "shot_ids": []})
    d.setdefault("eos_token", tokenizer.eos_token)
    first = task.heldout_problems(1)
    d["example"] = first[0].prompt if first else None
    return d
