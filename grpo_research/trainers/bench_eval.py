"""`train.eval_benchmarks`: benchmarks evaluated inside training, at every evaluation point.

    train.eval_benchmarks={gsm8k: {n: 100, k: 4}}

evaluates the policy, at each of the run's evaluation points (step 0, every `train.eval_every`
steps and the last), on the first n held-out problems of each named benchmark, k completions
each (k = 1: greedy; else sampled at the entry's `temperature`), posed with the run's prompt
options (`task.prompt_format`, `system_prompt`, `few_shot`) and graded by the same
`grpo_research.evaluation.generate.evaluate_model` as `grpo-research eval`: the unbiased
pass@k estimator and, on the math benchmarks, maj@k, each with its 95 % interval
(grpo_research/evaluation/metrics.py).

Logged in the evaluation's metrics row (metrics.jsonl and W&B) as `eval/<benchmark>/pass@1`,
`eval/<benchmark>/pass@<k>`, `eval/<benchmark>/maj@<k>` (math), each with `_lo` and `_hi` (its
interval), plus `eval/<benchmark>/finished` (share of completions that ended before the token
limit) and `eval/<benchmark>/eval_s`. The graded samples of each point are kept as
`<run dir>/bench_eval/<benchmark>/step<NNNNNN>.json` (+ `.samples.jsonl`,
`.predictions.jsonl`), in the format of `grpo-research eval`.

Sampling uses the counter sampler (grpo_research/rollout/sampling.py) seeded from (run seed,
benchmark, step): the training generator is untouched, so a run with benchmarks trains exactly
as one without, a resumed run evaluates what an uninterrupted one does, and data-parallel
processes, each sampling its share of the problems at its row offset, draw what one process
draws. The benchmarks' tasks and sizes are checked before any model loads.
"""
from __future__ import annotations

import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_research.tasks import build_task
from grpo_research.tasks.base import get_task, heldout_or_refuse
from grpo_research.tasks.benchmarks import DataError
from grpo_research.errors import ConfigError

BENCH_DIR = "bench_eval"  # relative to the run dir


@dataclass
class Benchmark:
    name: str
    entry: dict  # the filled-in config entry (config_checks._check_eval_benchmarks)
    task: Any  # the benchmark's task, posed for the run's tokenizer once `pose_all` ran
    problems: list


def build_benchmarks(cfg) -> list[Benchmark]:
    """The run's benchmarks, their sizes checked (ConfigError, one line) before any model loads."""
    out = []
    for name, entry in cfg.train.eval_benchmarks.items():
        try:
            if name == cfg.task.name and not entry["data"]:
                task = build_task(cfg.task)  # the run's own task, with its options
            else:
                task = get_task(name, **({"data_path": entry["data"]} if entry["data"] else {}))
        except (DataError, OSError, TypeError) as e:
            raise ConfigError(f"'train.eval_benchmarks.{name}': {e}") from None
        heldout_or_refuse(task, entry["n"], f"train.eval_benchmarks.{name}.n={entry['n']}")
        out.append(Benchmark(name, entry, task, []))
    return out


def pose_all(benchmarks: list[Benchmark], cfg, tokenizer, model) -> None:
    """Pose each benchmark as the run poses its own task (raw or chat, system prompt, k-shot);
    its longest prompt plus its token limit must fit the model's context (ConfigError)."""
    from grpo_research.tasks.prompting import pose

    ctx = getattr(model.config, "max_position_embeddings", None)
    for b in benchmarks:
        b.task = pose(b.task, cfg.task, tokenizer)
        b.problems = b.task.heldout_problems(b.entry["n"])
        max_new = b.entry["max_new_tokens"] or cfg.rollout.max_new_tokens
        longest = max(len(ids) for ids in tokenizer([p.prompt for p in b.problems], add_special_tokens=False)["input_ids"])
        if ctx and longest + max_new > ctx:
            raise ConfigError(f"'train.eval_benchmarks.{b.name}': its token limit {max_new} plus its longest prompt "
                              f"({longest} tokens) exceeds the model's context of {ctx} tokens")


def bench_seed(seed: int, name: str, step: int) -> int:
    from grpo_research.rollout.sampling import step_seed

    return step_seed(seed, step, stream=1 + zlib.crc32(name.encode()) % 1_000_000)


def metrics_of(name: str, summary: dict, k: int) -> dict[str, float]:
    """The metrics row entries of one benchmark's summary (see the module docstring)."""
    row: dict[str, float] = {}
    for kind, table in (("pass", summary["pass@k"]), ("maj", summary.get("maj@k", {}))):
        for kk in sorted({"1", str(k)} & set(table), key=int):
            v = table[kk]
            row[f"eval/{name}/{kind}@{kk}"] = v["value"]
            row[f"eval/{name}/{kind}@{kk}_lo"], row[f"eval/{name}/{kind}@{kk}_hi"] = v["ci95"]
    return row


def evaluate_benchmarks(trainer, step: int) -> dict[str, float]:
    """Every benchmark at `step`: each process generates its share, rank 0 grades, writes the
    samples file and returns the metrics (other ranks: {})."""
    from grpo_research.evaluation.generate import evaluate_model, predict
    from grpo_research.evaluation.score import write_results

    if not trainer.benchmarks:
        return {}
    cfg, dp, policy = trainer.cfg, trainer.dp, trainer.policy
    row: dict[str, float] = {}
    was_training = policy.training
    policy.eval()
    for b in trainer.benchmarks:
        t0 = time.perf_counter()
        e, k = b.entry, b.entry["k"]
        max_new = e["max_new_tokens"] or cfg.rollout.max_new_tokens
        temperature = e["temperature"] if k > 1 else None
        seed = bench_seed(cfg.seed, b.name, step)
        lo, hi = dp.shard(len(b.problems))
        share = predict(policy, trainer.tokenizer, b.problems[lo:hi], samples=k, max_new_tokens=max_new,
                        temperature=temperature, seed=seed, batch_size=e["batch_size"], sampler="counter",
                        row_offset=lo * k)
        parts = dp.gather_objects(share)
        if not dp.main:
            continue
        summary, rows, predictions = evaluate_model(
            policy, trainer.tokenizer, b.task, b.problems, samples=k, max_new_tokens=max_new, temperature=temperature,
            seed=seed, predictions=[p for part in parts for p in part], checkpoint=str(trainer.run_dir / "model"))
        summary["generate_s"] = round(time.perf_counter() - t0, 3)
        summary["decoding"]["sampler"] = "counter"
        summary["evaluated_by"] = {"trainer_step": step}
        write_results(Path(trainer.run_dir) / BENCH_DIR / b.name / f"step{step:06d}.json", summary, rows, predictions)
        row.update(metrics_of(b.name, summary, k))
        row[f"eval/{b.name}/finished"] = sum(p["finished"] for p in predictions) / max(len(predictions), 1)
        row[f"eval/{b.name}/eval_s"] = time.perf_counter() - t0
    policy.train(was_training)
    return row
