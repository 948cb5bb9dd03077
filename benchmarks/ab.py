"""Side-by-side throughput of variants of this project's GRPO trainer (the settings of
benchmarks/vs_trl.py), each run in its own subprocess, variants alternating round by round.

A variant is `NAME:SPEC`; SPEC is space-separated config overrides (`key=value`), `threads=N`
(this variant's thread count instead of --threads) and patches (`+name`) for what is not a
config key:

  +shared_prefix  log-prob forwards through `token_logprobs_shared_prefix` (prompt once per group)
  +one_forward    log-prob forwards through `token_logprobs` (one left-padded forward per pass)
  +hf_generate    rollout through `model.generate` (the fallback path) instead of the lean loop
  +compile        `torch.compile(dynamic=True)` on the forward of policy and reference
  +eager_attn     attention implementation "eager" instead of "sdpa"
  +fused_adamw    AdamW(fused=True) instead of the default for-loop implementation

    python benchmarks/ab.py --variant base: --variant bf16:model.dtype=bfloat16 --repeats 5
    python benchmarks/ab.py --variant before:"+hf_generate +one_forward" --variant after: --threads 1
    python benchmarks/ab.py --variant ppo_plain:"method=ppo train.shared_prefix=false ppo.reuse_first_forward=false" --variant ppo:method=ppo --variant grpo:

Prints each run, then per variant the median samples/s and its ratio to the first variant
(ratio of medians, and the median of per-round ratios).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, default_model_dir, git_commit, machine_line, median, worker_env  # noqa: E402

PATCHES = ("shared_prefix", "one_forward", "hf_generate", "compile", "eager_attn", "fused_adamw")


def apply_patches(patches: list[str], group_size: int) -> list[str]:
    import torch

    extra: list[str] = []
    for name in patches:
        if name in ("shared_prefix", "one_forward"):
            from vs_trl import force_shared_prefix

            extra += force_shared_prefix(name == "shared_prefix", group_size)
        elif name == "hf_generate":
            import grpo_research.rollout.hf as rollout

            rollout.lean_supported = lambda model: False
        elif name in ("compile", "eager_attn"):
            import grpo_research.trainers.base as grpo  # where trainers load their models

            load = grpo.load_causal_lm

            def patched(path, dtype="float32", attn_implementation=None, _load=load, _name=name):
                model, tok = _load(path, dtype, "eager" if _name == "eager_attn" else attn_implementation)
                if _name == "compile":
                    model.forward = torch.compile(model.forward, dynamic=True)
                return model, tok

            grpo.load_causal_lm = patched
        elif name == "fused_adamw":
            from grpo_research.trainers import common

            common.make_optimizer = lambda params, lr, weight_decay, betas: torch.optim.AdamW(
                params, lr=lr, weight_decay=weight_decay, betas=betas, fused=True)
        else:
            raise SystemExit(f"unknown patch +{name}; known: {', '.join(PATCHES)}")
    return extra


def worker(args) -> None:
    from vs_trl import G, run_ours

    tokens = args.spec.split()
    patches = [t[1:] for t in tokens if t.startswith("+")]
    overrides = [t for t in tokens if not t.startswith("+")]
    overrides += apply_patches(patches, G)
    res = run_ours(str(args.model_dir), args.steps, args.threads, args.seed, overrides)
    print("RESULT " + json.dumps(res), flush=True)


def spawn(spec: str, args) -> dict:
    threads = args.threads
    for t in spec.split():
        if t.startswith("threads="):
            threads = int(t.split("=", 1)[1])
    spec = " ".join(t for t in spec.split() if not t.startswith("threads="))
    cmd = [sys.executable, __file__, "--worker", "--spec", spec, "--model-dir", str(args.model_dir),
           "--steps", str(args.steps), "--threads", str(threads), "--seed", str(args.seed)]
    p = subprocess.run(cmd, cwd=ROOT, env=worker_env(threads), capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    sys.stderr.write(p.stdout[-3000:] + p.stderr[-6000:])
    raise SystemExit(f"variant {spec!r} failed (exit {p.returncode})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:SPEC")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--model-dir", type=Path)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--spec", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if len(args.variant) < 2:
        ap.error("give at least two --variant NAME:SPEC")
    variants = [tuple(v.split(":", 1)) if ":" in v else (v, "") for v in args.variant]
    if args.model_dir is None:
        args.model_dir = default_model_dir(args.fresh)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  commit {git_commit()}  {machine_line()}")
    print(f"# model {args.model_dir}  threads {args.threads}  steps {args.steps} (+1 warm-up)")
    results: dict[str, list[dict]] = {name: [] for name, _ in variants}
    for r in range(args.repeats):
        for name, spec in (variants if r % 2 == 0 else variants[::-1]):
            res = spawn(spec, args)
            results[name].append(res)
            print(f"round {r} {name:14s} samples/s {res['samples_per_s']:7.1f}  step {res['step_s']:.3f} s  "
                  f"completion_len {res['completion_len']:.2f}  peak RSS {res['peak_rss_mb']:.0f} MB", flush=True)
    base_name = variants[0][0]
    base = median([x["samples_per_s"] for x in results[base_name]])
    for name, spec in variants:
        sps = [x["samples_per_s"] for x in results[name]]
        per_round = [a["samples_per_s"] / b["samples_per_s"] for a, b in zip(results[name], results[base_name])]
        rss = median([x["peak_rss_mb"] for x in results[name]])
        print(f"{name:14s} [{spec}] samples/s median {median(sps):7.1f}  ratio to {base_name} "
              f"{median(sps) / base:.2f} (per-round median {median(per_round):.2f})  peak RSS {rss:.0f} MB")


if __name__ == "__main__":
    main()
