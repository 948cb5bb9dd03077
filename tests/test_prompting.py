"""Prompt formats (grpo_research/tasks/prompting.py, issue 14): raw or chat, a system prompt,
k-shot examples, the end-of-turn token as EOS, graders that see the task's own problem, and the
prompt recorded in the run dir and in evaluation files. On a tiny random Llama with a BPE
tokenizer and a ChatML template (tests/helpers.build_chat_model)."""
import dataclasses
import json
import random

import pytest
from transformers import AutoTokenizer

from grpo_research.cli import main
from grpo_research.config import TaskConfig, load_config
from grpo_research.errors import ConfigError
from grpo_research.tasks import build_task, get_task
from grpo_research.tasks.prompting import describe, end_of_turn_token, pose
from tests.helpers import fast_run


def _tok(d):
    return AutoTokenizer.from_pretrained(d)


def test_raw_without_examples_leaves_the_task_unchanged(tiny_model_dir, chat_model_dir):
    task = build_task(TaskConfig())
    assert pose(task, TaskConfig(), _tok(tiny_model_dir)) is task  # auto: the char tokenizer has no template
    assert pose(task, TaskConfig(prompt_format="raw"), _tok(chat_model_dir)) is task


def test_chat_poses_the_problem_as_a_user_turn_and_grades_the_task_problem(chat_model_dir):
    tok = _tok(chat_model_dir)
    assert tok.eos_token == "<|endoftext|>" and end_of_turn_token(tok) == "<|im_end|>"
    task = build_task(TaskConfig())
    posed = pose(task, TaskConfig(system_prompt="Be brief."), tok)  # auto -> chat
    p, raw = posed.heldout_problems(1)[0], task.heldout_problems(1)[0]
    assert p.prompt == (f"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n{raw.prompt}<|im_end|>\n"
                        "<|im_start|>assistant\n")
    assert p.meta["question"] == raw.prompt and p.answer == raw.answer
    assert tok.eos_token == "<|im_end|>"  # the end of an assistant turn ends generation
    assert posed.grade(p, raw.solution).correct and not posed.grade(p, "nonsense").correct
    rng_a, rng_b = random.Random(3), random.Random(3)
    assert [q.meta["question"] for q in posed.train_problems(rng_a, 4)] == [q.prompt for q in task.train_problems(rng_b, 4)]
    d = describe(posed, tok)
    assert d["format"] == "chat" and d["eos_token"] == "<|im_end|>" and d["example"] == p.prompt


def test_k_shot_examples_come_from_the_training_split(chat_model_dir):
    tok = _tok(chat_model_dir)
    task = build_task(TaskConfig())
    raw = pose(task, TaskConfig(prompt_format="raw", few_shot=2), tok)
    shots = task.train_problems(random.Random(1234), 2)
    q = raw.heldout_problems(1)[0]
    assert q.prompt == f"{shots[0].prompt}{shots[0].solution}\n\n{shots[1].prompt}{shots[1].solution}\n\n" \
                       f"{task.heldout_problems(1)[0].prompt}"
    chat = pose(task, TaskConfig(prompt_format="chat", few_shot=1), tok).heldout_problems(1)[0]
    assert chat.prompt.startswith(f"<|im_start|>user\n{shots[0].prompt}<|im_end|>\n<|im_start|>assistant\n"
                                  f"{shots[0].solution}<|im_end|>\n<|im_start|>user\n")
    assert raw.description["shot_ids"] == [s.id for s in shots]


def test_prompt_formats_that_cannot_work_are_refused(tiny_model_dir, chat_model_dir, tmp_path):
    task = build_task(TaskConfig())
    with pytest.raises(ConfigError, match="has no chat template"):
        pose(task, TaskConfig(prompt_format="chat"), _tok(tiny_model_dir))
    with pytest.raises(ConfigError, match="task.system_prompt is given but the prompt format is raw"):
        pose(task, TaskConfig(prompt_format="raw", system_prompt="x"), _tok(chat_model_dir))
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps({"question": f"{i}+1?", "answer": f"#### {i + 1}"}) + "\n" for i in range(3)))
    with pytest.warns(UserWarning), pytest.raises(ConfigError, match="its examples would come from the evaluation set"):
        pose(get_task("gsm8k", data_path=str(data)), TaskConfig(few_shot=1), _tok(chat_model_dir))
    with pytest.raises(ConfigError, match="'task.few_shot' = 17 must be in"):
        load_config(None, ["task.few_shot=17"])


def test_train_and_eval_pose_alike_and_record_the_prompt(chat_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    args = ["train", "--run-dir", str(run), f"model.name_or_path={chat_model_dir}",
            *fast_run("train.steps=1", "rollout.max_new_tokens=4", "task.system_prompt=Add.", "train.samples_every=1")]
    assert main(args) == 0, capsys.readouterr().err
    prompt = json.loads((run / "prompt.json").read_text())
    assert prompt["format"] == "chat" and prompt["system_prompt"] == "Add." and prompt["eos_token"] == "<|im_end|>"
    assert prompt["example"].startswith("<|im_start|>system\nAdd.<|im_end|>\n<|im_start|>user\n")
    samples = [json.loads(line) for line in (run / "samples" / "step_000001.jsonl").read_text().splitlines()]
    assert len(samples) == 8 and all(s["prompt"] == prompt["example"] or s["prompt"].startswith(
        "<|im_start|>system\nAdd.") for s in samples)
    out = tmp_path / "eval.json"
    assert main(["eval", "--checkpoint", str(run), "--benchmark", "arith", "--n", "3", "--max-new-tokens", "4",
                 "--out", str(out)]) == 0, capsys.readouterr().err
    summary = json.loads(out.read_text())
    assert summary["prompt"]["format"] == "chat" and summary["prompt"]["example"] == prompt["example"]
    assert main(["eval", "--checkpoint", str(run), "--benchmark", "arith", "--n", "3", "--max-new-tokens", "4",
                 "--prompt-format", "raw", "--system-prompt", "", "--out", str(tmp_path / "raw.json")]) == 0
    assert json.loads((tmp_path / "raw.json").read_text())["prompt"]["format"] == "raw"


# ---------------------------------------------------------------- graders accept what chat models write
HUMANEVAL = {"task_id": "HumanEval/0", "entry_point": "add",
             "prompt": "import math\n\n\ndef add(a, b):\n    \"\"\"Sum of a and b.\"\"\"\n",
             "canonical_solution": "    return a + b\n", "test": "def check(f):\n    assert f(2, 3) == 5\n"}


@pytest.mark.parametrize("completion, correct", [
    ("    return a + b\n", True),  # a base model continues the body
    ("Here you go:\n```python\ndef add(a, b):\n    return math.fsum([a, b])\n```\nDone.", True),  # the whole function
    ("```python\n    return a + b\n```", True),  # a fenced body
    ("```python\ndef add(a, b):\n    return a - b\n```", False),
    # code written straight into the reply, then a fence it never opened and prose (SmolLM2 does this)
    ("import math\n\ndef add(a, b):\n    return a + b\n\nprint(add(1, 2))\n```\n\nIn this code, `add` sums.", True),
    ("def add(a, b):\n    return a * b\n```\nThis multiplies.", False),
    ("Use `+`:\n```python\ndef add(a, b):\n    return a + b\n```", True),  # prose before a fence: the fenced block
])
def test_humaneval_reads_fenced_code(tmp_path, completion, correct):
    data = tmp_path / "HumanEval.jsonl"
    data.write_text(json.dumps(HUMANEVAL) + "\n")
    task = get_task("humaneval", data_path=str(data))
    p = task.heldout_problems()[0]
    grade = task.grade_many([p], [completion], [True])[0]
    assert grade.correct is correct, grade
    posed = pose(task, TaskConfig(prompt_format="raw", few_shot=0), None)  # raw: the task itself
    assert posed is task


def test_math500_without_boxed_is_graded_by_its_final_answer(tmp_path):
    pytest.importorskip("math_verify")
    data = tmp_path / "test.jsonl"
    data.write_text(json.dumps({"problem": "Half of 1?", "answer": "\\frac{1}{2}", "unique_id": "u1"}) + "\n")
    task = get_task("math500", data_path=str(data))
    p = task.heldout_problems()[0]
    g = task.grade(p, "So the answer is $\\frac{1}{2}$.")
    assert g.correct and not g.formatted
    assert task.grade(p, "The answer is \\boxed{\\frac12}").formatted
    assert not task.grade(p, "So the answer is $3$.").correct
    assert task.grade(p, "I do not know").outcome == "no_answer"


def test_gsm8k_without_hashes_is_graded_by_its_last_number(tmp_path):
    data = tmp_path / "gsm8k.jsonl"
    data.write_text(json.dumps({"question": "2+2?", "answer": "#### 4"}) + "\n")
    task = get_task("gsm8k", data_path=str(data))
    p = task.heldout_problems()[0]
    g = task.grade(p, "2 + 2 = **4**.")
    assert g.correct and not g.formatted and task.grade(p, "#### 4").formatted


def test_pose_needs_no_tokenizer_for_raw():
    task = build_task(TaskConfig())
    assert pose(task, dataclasses.replace(TaskConfig(), prompt_format="raw"), None) is task


def test_gsm8k_in_chat_drops_the_completion_scaffolding(chat_model_dir, tmp_path):
    """A chat turn carries the task's chat wording (no "Question:" / trailing "Answer:"); raw keeps
    the completion prompt; grading sees the task's own problem either way; k-shot examples too."""
    data = tmp_path / "gsm8k"
    data.mkdir()
    rec = [{"question": f"What is {i} + 2?", "answer": f"{i} + 2 = {i + 2}\n#### {i + 2}"} for i in range(3)]
    for name in ("test.jsonl", "train.jsonl"):
        (data / name).write_text("".join(json.dumps(r) + "\n" for r in rec))
    task = get_task("gsm8k", data_path=str(data / "test.jsonl"))
    tok = _tok(chat_model_dir)
    raw = task.heldout_problems(1)[0]
    assert raw.prompt.startswith("Question: What is 0 + 2?") and raw.prompt.endswith("Answer:")
    chat = pose(task, TaskConfig(prompt_format="chat"), tok)
    p = chat.heldout_problems(1)[0]
    assert p.prompt == ("<|im_start|>user\nWhat is 0 + 2?\nSolve the problem step by step, then give the final "
                        "answer as '#### <number>'.<|im_end|>\n<|im_start|>assistant\n")
    assert p.meta["question"] == raw.prompt and chat.grade(p, "#### 2").correct
    shot = pose(task, TaskConfig(prompt_format="chat", few_shot=1), tok).heldout_problems(1)[0]
    assert shot.prompt.startswith("<|im_start|>user\nWhat is ") and "Answer:" not in shot.prompt
