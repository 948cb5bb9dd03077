"""Which torch operators the GRPO update's policy forward + backward spends its time in.

Builds the trainer as benchmarks/rollout.py does (8 prompts x G = 8, 32 new tokens, beta 0.04,
the default cached base model), samples one rollout batch, then profiles `--iters` forward +
backward passes of the policy's log-probs on it (the shared-prompt path of the trainer) under
torch.profiler after `--warm` unprofiled ones, and prints the operators by self CPU time and
the matrix products' share.

    python benchmarks/op_profile.py [--threads 1] [--iters 5] [--rows 30]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import default_model_dir, git_commit, machine_line  # noqa: E402
from rollout import build_trainer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--rows", type=int, default=30)
    args = ap.parse_args()

    from torch.profiler import ProfilerActivity, profile

    print(machine_line(), f"commit {git_commit()}", f"threads {args.threads}")
    tr = build_trainer(default_model_dir(), args.threads, [])
    tr.policy.eval()
    batch, _, _ = tr.rollout_and_score()
    tr.policy.train()
    ids, am, T = batch.input_ids, batch.attention_mask, batch.completion_mask.shape[1]
    print(f"batch: {tuple(ids.shape)} tokens (prompt + completion), {T} completion positions")

    def fwd_bwd() -> None:
        logp, _ = tr.logprobs(tr.policy, ids, am, T, 1.0, with_entropy=True)
        logp.sum().backward()

    for _ in range(args.warm):
        fwd_bwd()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.iters):
            fwd_bwd()
    events = prof.key_averages()
    print(events.table(sort_by="self_cpu_time_total", row_limit=args.rows))
    total = sum(e.self_cpu_time_total for e in events)
    mm = sum(e.self_cpu_time_total for e in events if e.key in ("aten::mm", "aten::bmm", "aten::addmm"))
    attn = sum(e.self_cpu_time_total for e in events if "scaled_dot_product" in e.key)
    print(f"per forward + backward: {total / args.iters / 1000:.1f} ms self CPU time; matrix products "
          f"{100 * mm / total:.1f} %, attention kernels {100 * attn / total:.1f} %, "
          f"everything else {100 * (total - mm - attn) / total:.1f} %")


if __name__ == "__main__":
    main()
