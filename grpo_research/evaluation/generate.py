"""`grpo-research eval`: generate on a benchmark from a checkpoint, then score like `score`.

    grpo-research eval --checkpoint DIR --benchmark NAME --out OUT.json
                       [--data PATH] [--n N] [--samples K] [--temperature T] [--seed S]
                       [--max-new-tokens M] [--batch-size B] [--threads N] [--config RUN.yaml]

DIR is an HF checkpoint directory (a run's `model/`) or a run directory (its `model/` is used).
The run's `config.yaml` (beside `model/`, or `--config`) supplies the task options of the run's
own task (e.g. arith's `eval_level`) and `rollout.max_new_tokens`; a benchmark other than the
run's task is built from its name and `--data`.

Decoding: greedy with `--samples 1` (the default), else K samples per problem at
`--temperature` from a seeded sampler. The problems are the first N (`--n`) of the task's
held-out split (all when absent; a task with a larger split than it evaluates by default, e.g.
arith's 2,000 of 49,998, evaluates its default number); an `--n` beyond the split is refused
in one line, with the number it holds, before the model loads. Predictions are graded by
`grpo_research.evaluation.score.score_predictions`, exactly as `grpo-research score` grades
external predictions, so pass@k and its interval are computed the same way.

(the command line: grpo_research/cli/eval.py; this module is the library it calls).

Outputs, written atomically: OUT.json (the score summary plus `checkpoint`, `decoding`,
`n_problems`, `generate_s`), OUT.samples.jsonl (one graded row per prediction) and
OUT.predictions.jsonl (task_id, completion, finished). Usage errors print one `error: ...`
line and exit with status 2.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from grpo_research.errors import UsageError
from grpo_research.tasks.prompting import describe, pose


def _resolve(checkpoint: Path, config: Path | None) -> tuple[Path, Path | None]:
    """(model dir, run config or None). A packaged model's name (e.g. smollm2-135m-instruct) is
    its cached checkpoint, converted on first use."""
    from grpo_research.models.real import PACKAGED_MODELS

    if str(checkpoint) in PACKAGED_MODELS and not checkpoint.exists():
        from grpo_research.config import load_config
        from grpo_research.models.cache import packaged_checkpoint

        checkpoint = packaged_checkpoint(load_config(None, [f"model.name_or_path={checkpoint}"]))
    model_dir = checkpoint / "model" if (checkpoint / "model" / "config.json").exists() else checkpoint
    if not (model_dir / "config.json").exists():
        raise UsageError(f"{checkpoint}: not a checkpoint directory (no config.json) nor a run dir with model/")
    if config is None:
        for cand in (model_dir.parent / "config.yaml", checkpoint / "config.yaml"):
            if cand.exists():
                config = cand
                break
    elif not config.exists():
        raise UsageError(f"{config}: no such file")
    return model_dir, config


def _build_task(name: str, data: str | None, run_cfg):
    from grpo_research.tasks import TASKS, get_task
    from grpo_research.tasks.benchmarks import DataError

    if name not in TASKS:
        raise UsageError(f"unknown benchmark {name!r}; known: {', '.join(sorted(TASKS))}")
    try:
        if run_cfg is not None and run_cfg.task.name == name and not data:
            from grpo_research.tasks import build_task

            return build_task(run_cfg.task)
        return get_task(name, **({"data_path": data} if data else {}))
    except (DataError, OSError, TypeError) as e:
        raise UsageError(str(e)) from None


def check_args(args: argparse.Namespace) -> None:
    """Refuse, before any work, options that cannot mean what they say (UsageError, one line)."""
    import math

    for flag, value in (("--samples", args.samples), ("--n", args.n), ("--batch-size", args.batch_size),
                        ("--max-new-tokens", args.max_new_tokens)):
        if value is not None and value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}")
    if args.threads < 0:
        raise UsageError(f"--threads must be 0 (torch's default) or more, got {args.threads}")
    if args.few_shot is not None and not 0 <= args.few_shot <= 16:
        raise UsageError(f"--few-shot must be in [0, 16], got {args.few_shot}")
    if not 0 <= args.seed < 2**63:
        raise UsageError(f"--seed must be in [0, 2**63), got {args.seed}")
    t = args.temperature
    if args.samples == 1:
        if t is not None:
            raise UsageError("--temperature applies only with --samples > 1 (--samples 1 decodes greedily)")
    elif t is None or not math.isfinite(t) or t <= 0:
        raise UsageError(f"--samples {args.samples} samples at a temperature, which must be a finite number above 0, "
                         f"got {t}" + (" (temperature 0 is greedy: use --samples 1)" if t == 0 else ""))


def _check_context(model, tokenizer, problems, max_new: int) -> None:
    """The longest prompt plus max_new must fit the model's context."""
    ctx = getattr(model.config, "max_position_embeddings", None)
    if not ctx or not problems:
        return
    longest = max(len(ids) for ids in tokenizer([p.prompt for p in problems], add_special_tokens=False)["input_ids"])
    if longest + max_new > ctx:
        raise UsageError(f"--max-new-tokens {max_new} plus the longest prompt ({longest} tokens) exceeds the "
                         f"model's context of {ctx} tokens")


def _prompt_config(args: argparse.Namespace, run_cfg):
    """The task section the prompts are posed by: the run's (its prompt format, system prompt
    and examples) or the defaults, with --prompt-format / --system-prompt / --few-shot over it."""
    import dataclasses

    from grpo_research.config import TaskConfig

    t = run_cfg.task if run_cfg is not None else TaskConfig()
    changes = {k: v for k, v in (("prompt_format", args.prompt_format), ("system_prompt", args.system_prompt),
                                 ("few_shot", args.few_shot)) if v is not None}
    return dataclasses.replace(t, **changes)


def predict(model, tokenizer, problems: list, *, samples: int, max_new_tokens: int, temperature: float | None = None,
            seed: int = 0, batch_size: int = 256, sampler: str = "torch", row_offset: int = 0) -> list[dict]:
    """`samples` completions of each problem ({task_id, completion, finished} rows, in problem
    order): greedy when `samples` is 1, else at `temperature`, `batch_size` prompts per
    generate() call. The "torch" sampler is seeded per call from (seed, the call's first
    problem); the "counter" sampler from `seed` and each row's global index (`row_offset` + its
    index here), so a share of the problems sampled with its offset draws what the whole set
    draws, and the global generator is left untouched (the trainer's evaluation)."""
    from grpo_research.rollout import generate
    from grpo_research.rollout.sampling import step_seed

    greedy = samples == 1
    predictions: list[dict] = []
    for i in range(0, len(problems), batch_size):
        chunk = problems[i : i + batch_size]
        batch_seed = None if greedy else (seed if sampler == "counter" else step_seed(seed, i))
        batch = generate(model, tokenizer, chunk, samples, max_new_tokens=max_new_tokens, temperature=temperature,
                         greedy=greedy, seed=batch_seed, sampler=sampler, row_offset=row_offset + i * samples)
        predictions += [{"task_id": p.id, "completion": c, "finished": f}
                        for p, c, f in zip(batch.problems, batch.completions, batch.finished)]
    return predictions


def evaluate_model(model, tokenizer, task, problems: list, *, samples: int, max_new_tokens: int,
                   temperature: float | None = None, seed: int = 0, batch_size: int = 256,
                   predictions: list[dict] | None = None, checkpoint: str = "",
                   prefix: bool = True) -> tuple[dict, list[dict], list[dict]]:
    """Generate (`predict`) on `problems`, a prefix of `task`'s held-out split posed for
    `tokenizer`, and grade like `grpo-research score`: (summary, graded rows, predictions).
    `predictions` already generated (the trainer's shares, gathered) are graded as they are.
    `prefix`: only the first problems of the split were asked for, so the rest are not listed
    as missing. Both `grpo-research eval` and the trainer's `train.eval_benchmarks` come
    through here."""
    from grpo_research.evaluation.score import score_predictions

    greedy = samples == 1
    t0 = time.perf_counter()
    if predictions is None:
        predictions = predict(model, tokenizer, problems, samples=samples, max_new_tokens=max_new_tokens,
                              temperature=temperature, seed=seed, batch_size=batch_size)
    gen_s = time.perf_counter() - t0
    summary, rows = score_predictions(task, predictions)
    if prefix:
        summary["missing_tasks"] = 0
        summary["missing_task_ids"] = []
    summary.update(
        checkpoint=checkpoint, n_problems=len(problems), generate_s=round(gen_s, 3), prompt=describe(task, tokenizer),
        decoding={"greedy": greedy, "samples": samples, "temperature": None if greedy else temperature,
                  "seed": None if greedy else seed, "max_new_tokens": max_new_tokens},
    )
    return summary, rows, predictions


def evaluate_checkpoint(args: argparse.Namespace) -> dict[str, Any]:
    """Generate on `args.benchmark` from `args.checkpoint` and grade (the options of
    `grpo-research eval`, grpo_research/cli/eval.py); returns {summary, rows, predictions}."""
    import os

    import torch
    import transformers

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    from grpo_research.config import config_from_dict, load_yaml
    from grpo_research.errors import ConfigError
    from grpo_research.models import load_causal_lm

    check_args(args)
    model_dir, cfg_path = _resolve(args.checkpoint, args.config)
    run_cfg = None
    if cfg_path is not None:
        try:
            run_cfg = config_from_dict(load_yaml(cfg_path), str(cfg_path))
        except ConfigError as e:
            raise UsageError(str(e)) from None
    task = _build_task(args.benchmark, args.data, run_cfg)
    if args.n:  # more than the held-out split holds: one line now, before the model loads
        from grpo_research.tasks.base import heldout_or_refuse

        heldout_or_refuse(task, args.n, f"--n {args.n}")
    max_new = args.max_new_tokens or (run_cfg.rollout.max_new_tokens if run_cfg is not None else 512)
    if args.threads:
        torch.set_num_threads(args.threads)
    model, tokenizer = load_causal_lm(model_dir, run_cfg.model.dtype if run_cfg is not None else "float32")
    model.eval()
    task = pose(task, _prompt_config(args, run_cfg), tokenizer)  # as the run was trained (tasks/prompting.py)
    problems = task.heldout_problems(args.n) if args.n else task.heldout_problems()
    if args.n and len(problems) < args.n:
        raise UsageError(f"benchmark {args.benchmark!r} has only {len(problems)} problems, asked for {args.n}")
    _check_context(model, tokenizer, problems, max_new)
    summary, rows, predictions = evaluate_model(
        model, tokenizer, task, problems, samples=args.samples, max_new_tokens=max_new, temperature=args.temperature,
        seed=args.seed, batch_size=args.batch_size, checkpoint=str(model_dir), prefix=bool(args.n))
    return {"summary": summary, "rows": rows, "predictions": predictions}
