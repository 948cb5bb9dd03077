"""The trainer's last held-out evaluation, kept as an evaluation file, and its reuse by
`grpo-research eval --reuse-final-eval`.

At its last step a run evaluates its final policy greedily on the first `train.eval_size`
held-out problems of its own task (the `eval/accuracy` of its last metrics row). The trainer
writes that evaluation to `<run dir>/final_eval/heldout.json` (+ `.samples.jsonl`,
`.predictions.jsonl`) in exactly the format of `grpo-research eval`, graded by the same
`score_predictions`. A study's benchmark entry that asks for the same thing (greedy, the run's
task, `n` = `train.eval_size`, the run's `rollout.max_new_tokens` and prompts, no other data)
then copies it instead of loading the saved model and generating again: `eval/<entry>.json`
holds the same predictions and numbers either way (tests/test_final_eval.py regenerates and
compares), at a fraction of the cost (each such job was ~9 s of process start, model loading
and generation; the main study has 35 of them, the atlas 119).

Anything that differs (another task or data, samples, temperature, token limit, prompt options,
`--n`, a record from another step than the run's last) means no reuse: `eval` says why in one
line and generates as before. (A data-parallel run's processes each evaluate their share; rank 0
writes the whole record.) This module imports neither torch nor transformers, so a reused
evaluation costs a fraction of a second.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

FINAL_EVAL = Path("final_eval") / "heldout.json"  # relative to the run dir


def final_eval_path(run_dir: str | Path) -> Path:
    return Path(run_dir) / FINAL_EVAL


def write_final_eval(run_dir: str | Path, task, tokenizer, predictions: list[dict], grades: list, *,
                     step: int, max_new_tokens: int, generate_s: float) -> Path:
    """Write the trainer's greedy held-out evaluation at `step` (the first len(predictions)
    held-out problems of `task`, graded as `grades`) as `grpo-research eval` would write it."""
    from grpo_research.evaluation.score import score_predictions, write_results
    from grpo_research.tasks.prompting import describe

    summary, rows = score_predictions(task, predictions, grades=grades)
    summary["missing_tasks"] = 0  # a prefix of the split was asked for, as `eval --n` does
    summary["missing_task_ids"] = []
    summary.update(
        checkpoint=str(Path(run_dir) / "model"), n_problems=len(predictions),
        generate_s=round(generate_s, 3),  # generation and grading of the trainer's evaluation
        prompt=describe(task, tokenizer),
        decoding={"greedy": True, "samples": 1, "temperature": None, "seed": None, "max_new_tokens": max_new_tokens},
        evaluated_by={"trainer_step": step},
    )
    out = final_eval_path(run_dir)
    write_results(out, summary, rows, predictions)
    return out


def _reuse_problem(args: argparse.Namespace) -> tuple[str | None, Path, dict | None]:
    """(why the record cannot stand for this evaluation or None, the record's path, the record)."""
    run_dir = Path(args.checkpoint)
    record_path = final_eval_path(run_dir)
    if not (run_dir / "config.yaml").is_file() or not (run_dir / "model").is_dir():
        return f"{run_dir} is not a run dir", record_path, None
    if not record_path.is_file():
        return f"the run wrote no {FINAL_EVAL} (trained before this record existed)", \
            record_path, None
    from grpo_research.config import load_yaml

    # the resolved config the trainer wrote, read as plain YAML: validating it would import torch
    # (the algorithm registries), which is most of this command's cost
    cfg = load_yaml(run_dir / "config.yaml")
    try:
        task, eval_size, run_max_new = cfg["task"]["name"], cfg["train"]["eval_size"], cfg["rollout"]["max_new_tokens"]
    except (KeyError, TypeError):
        return f"{run_dir / 'config.yaml'} lacks task.name, train.eval_size or rollout.max_new_tokens", record_path, None
    record = json.loads(record_path.read_text())
    summary_path = run_dir / "summary.json"
    last_step = json.loads(summary_path.read_text()).get("steps") if summary_path.is_file() else None
    max_new = args.max_new_tokens or run_max_new
    checks = [
        (args.config is None, "--config is given"),
        (args.benchmark == task == record.get("benchmark"), f"--benchmark {args.benchmark} is not the run's task {task}"),
        (not args.data, "--data is given"),
        (args.samples == 1, f"--samples {args.samples} is not greedy"),
        (args.n == eval_size == record.get("n_problems"), f"--n {args.n} is not the run's train.eval_size {eval_size}"),
        (max_new == record.get("decoding", {}).get("max_new_tokens"), f"--max-new-tokens {max_new} differs"),
        (args.prompt_format is None and args.system_prompt is None and args.few_shot is None,
         "prompt options are given"),
        (last_step is not None and record.get("evaluated_by", {}).get("trainer_step") == last_step,
         f"the record is of step {record.get('evaluated_by', {}).get('trainer_step')}, the run ended at {last_step}"),
    ]
    for ok, why in checks:
        if not ok:
            return why, record_path, record
    return None, record_path, record


def reuse_final_eval(args: argparse.Namespace, out: Path) -> str | None:
    """Copy the run's final evaluation record to `out` (and its samples and predictions beside
    it) when it is the evaluation `args` ask for; None then, else the reason it is not."""
    from grpo_research.evaluation.score import predictions_path, samples_path, write_results

    why, record_path, record = _reuse_problem(args)
    if why is not None:
        return why
    assert record is not None
    record["checkpoint"] = str(Path(args.checkpoint) / "model")  # as `eval` names it
    record["reused_from"] = str(record_path)
    rows = _read_jsonl(samples_path(record_path))
    predictions = _read_jsonl(predictions_path(record_path))
    if len(rows) != record["n_predictions"] or len(predictions) != record["n_predictions"]:
        return f"{record_path}: its samples or predictions file is incomplete"
    write_results(out, record, rows, predictions)
    return None


def _read_jsonl(path: Path) -> list[Any]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

