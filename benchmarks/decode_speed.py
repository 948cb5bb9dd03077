"""Greedy decoding throughput of a checkpoint on a benchmark's prompts, by batch size.

Generates up to `--tokens` new tokens greedily (with a token limit shorter than the answers,
as the default 64 is on GSM8K, every row decodes the whole length) for the first B prompts of `--benchmark`, posed with the chat template as
`grpo-research eval` poses them, for each B of `--batch-sizes`, with the harness's decode loop
(`grpo_research.rollout.generate`); prints tokens per second (generated tokens / wall time,
prefill included) and the peak RSS. Used to choose `--batch-size` and to budget an evaluation.

    python benchmarks/decode_speed.py --checkpoint qwen2.5-coder-0.5b-instruct --benchmark gsm8k \\
        --data $GRPO_RESEARCH_BENCHMARKS/gsm8k/test.jsonl --threads 2 --batch-sizes 1,8,32 --tokens 64
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import git_commit, machine_line, set_threads  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", required=True, type=Path)
    ap.add_argument("--benchmark", default="gsm8k")
    ap.add_argument("--data")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-sizes", default="1,8,32")
    ap.add_argument("--tokens", type=int, default=64)
    args = ap.parse_args()
    set_threads(args.threads)
    import torch

    from grpo_research.config import TaskConfig
    from grpo_research.evaluation.generate import _build_task, _resolve
    from grpo_research.models import load_causal_lm
    from grpo_research.rollout import generate
    from grpo_research.tasks.prompting import pose

    model_dir, _ = _resolve(args.checkpoint, None)
    t0 = time.perf_counter()
    model, tok = load_causal_lm(model_dir, "float32")
    model.eval()
    load_s = time.perf_counter() - t0
    task = pose(_build_task(args.benchmark, args.data, None), TaskConfig(), tok)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    problems = task.heldout_problems(max(sizes))
    print(f"{machine_line()}; commit {git_commit()}; torch threads {torch.get_num_threads()}; "
          f"{model_dir.name}: loaded in {load_s:.1f} s")
    for b in sizes:
        t0 = time.perf_counter()
        batch = generate(model, tok, problems[:b], 1, max_new_tokens=args.tokens, greedy=True)
        wall = time.perf_counter() - t0
        n = batch.completion_tokens
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"batch {b:4d}: {n} tokens in {wall:7.1f} s = {n / wall:6.1f} tokens/s "
              f"({wall / args.tokens:.2f} s per decode step); peak RSS so far {rss:.1f} GB")


if __name__ == "__main__":
    main()
