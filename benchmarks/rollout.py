"""Where the time of a GRPO step goes, and what the rollout wrapper costs over bare `generate`.

1. Generated tokens per second of the in-loop rollout (`GRPOTrainer.rollout_and_score`: our
   `generate` exactly as the trainer calls it, plus reward scoring) against a bare
   `model.generate` on the same batch (same prompts repeated G times, same seed, same
   sampling settings), alternating the two `--repeats` times; medians and their ratio.
   Tokens are completion tokens up to and including EOS, counted the same way for both.
2. A profile of whole training steps: time in generation (the decode loop, or
   `model.generate` on the fallback path), in the policy forward, in the
   reference forward, in backward + optimizer step (incl. gradient clipping), and the rest
   (prompt encoding, decoding, reward scoring, advantages, loss arithmetic, metrics); medians
   over `--steps` steps after two warm-up steps, and the share of the step outside
   generation, forward and backward.

Settings as in benchmarks/vs_trl.py: 8 prompts x G = 8, 32 new tokens, beta 0.04, the default
cached base model (or `--fresh`). Extra `key=value` arguments override the run config.

    python benchmarks/rollout.py [--threads 1] [--repeats 7] [--steps 10] [key=value ...]
"""
from __future__ import annotations

import argparse
import functools
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import default_model_dir, git_commit, machine_line, median, set_threads  # noqa: E402


def build_trainer(model_dir, threads: int, extra: list[str]):
    from grpo_research.config import load_config
    from grpo_research.trainers.grpo import GRPOTrainer

    overrides = ["rollout.max_new_tokens=32", "rollout.prompts_per_step=8", "algo.group_size=8", "algo.beta=0.04",
                 "algo.num_iterations=1", "tracking.wandb=disabled", "tracking.progress=false",
                 f"train.threads={threads}", *extra]
    cfg = load_config(None, overrides)
    trainer = GRPOTrainer(cfg, tempfile.mkdtemp(prefix="bench-rollout-"), model_dir)
    set_threads(threads)
    return trainer


def completion_tokens(out, prompt_len: int, eos: int) -> int:
    from grpo_research.rollout import completion_mask_from

    mask, _ = completion_mask_from(out[:, prompt_len:], eos)
    return int(mask.sum())


def rollout_vs_bare(trainer, repeats: int) -> dict:
    import torch

    from grpo_research.rollout import encode_prompts
    from grpo_research.rollout.sampling import step_seed

    cfg, tok, model = trainer.cfg, trainer.tokenizer, trainer.policy
    G = cfg.algo.group_size
    model.eval()
    res = defaultdict(list)
    for r in range(2 + repeats):  # two warm-up rounds
        state = trainer.data_rng.getstate()
        seed = step_seed(cfg.seed, trainer.step, stream=0)
        t0 = time.perf_counter()
        batch, rb, info = trainer.rollout_and_score()
        t_loop = time.perf_counter() - t0
        trainer.data_rng.setstate(state)
        problems = trainer.task.train_problems(trainer.data_rng, cfg.rollout.prompts_per_step)
        trainer.step += 1  # a new seed next round
        ids, mask = encode_prompts(tok, [p.prompt for p in problems], torch.device("cpu"))
        ids, mask = ids.repeat_interleave(G, 0), mask.repeat_interleave(G, 0)
        torch.manual_seed(seed)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                                 max_new_tokens=cfg.rollout.max_new_tokens, temperature=cfg.rollout.temperature,
                                 top_p=cfg.rollout.top_p, top_k=0, eos_token_id=tok.eos_token_id,
                                 pad_token_id=tok.pad_token_id)
        t_bare = time.perf_counter() - t0
        if r < 2:
            continue
        res["loop_tok_s"].append(info["generated_tokens"] / t_loop)
        res["bare_tok_s"].append(completion_tokens(out, ids.shape[1], tok.eos_token_id) / t_bare)
        res["loop_s"].append(t_loop)
        res["bare_s"].append(t_bare)
    model.train()
    return res


class PhaseClock:
    """Accumulates wall time per phase by wrapping the callables a training step goes through."""

    def __init__(self):
        self.t = defaultdict(float)
        self._undo = []

    def wrap(self, owner, name: str, phase, instance: bool = False):
        orig = getattr(owner, name)
        clock = self

        def timed(*args, **kwargs):
            key = phase(*args, **kwargs) if callable(phase) else phase
            t0 = time.perf_counter()
            try:
                return orig(*args, **kwargs)
            finally:
                clock.t[key] += time.perf_counter() - t0

        functools.update_wrapper(timed, orig)
        setattr(owner, name, timed)
        self._undo.append((owner, name, orig))

    def undo(self):
        for owner, name, orig in reversed(self._undo):
            setattr(owner, name, orig)


def profile_steps(trainer, steps: int) -> dict:
    import torch

    from grpo_research.trainers import common

    import grpo_research.rollout.hf as rollout_mod

    clock = PhaseClock()
    clock.wrap(trainer.policy, "generate", "generate")  # the fallback path
    clock.wrap(rollout_mod, "sample_completions", "generate")  # the lean decode loop
    which = lambda model, *a, **k: "policy_forward" if model is trainer.policy else "ref_forward"  # noqa: E731
    if hasattr(trainer, "logprobs"):  # a trainer that picks its log-prob function at init
        clock.wrap(trainer, "logprobs", which)
    else:
        clock.wrap(common, "token_logprobs", which)
    clock.wrap(torch.Tensor, "backward", "backward_optimizer")
    clock.wrap(torch.nn.utils, "clip_grad_norm_", "backward_optimizer")
    clock.wrap(trainer.opt, "step", "backward_optimizer")
    clock.wrap(trainer, "reward_fn", "reward")
    import grpo_research.trainers.grpo as grpo_mod

    if hasattr(trainer, "generate"):  # a trainer that picks its rollout backend at init
        clock.wrap(trainer, "generate", "rollout_call")
    else:
        clock.wrap(grpo_mod, "generate", "rollout_call")
    rows = defaultdict(list)
    try:
        for i in range(2 + steps):
            clock.t.clear()
            t0 = time.perf_counter()
            trainer.train_step()
            step = time.perf_counter() - t0
            if i < 2:
                continue
            t = dict(clock.t)
            rows["step"].append(step)
            for k in ("generate", "policy_forward", "ref_forward", "backward_optimizer", "reward"):
                rows[k].append(t.get(k, 0.0))
            rows["rollout_wrapper"].append(t.get("rollout_call", 0.0) - t.get("generate", 0.0))
            core = sum(t.get(k, 0.0) for k in ("generate", "policy_forward", "ref_forward", "backward_optimizer"))
            rows["rest"].append(step - core)
            rows["rest_share"].append((step - core) / step)
    finally:
        clock.undo()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=7, help="rollout rounds (each: in-loop, then bare)")
    ap.add_argument("--steps", type=int, default=10, help="profiled training steps")
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--model-dir", type=Path)
    ap.add_argument("overrides", nargs="*", metavar="key=value")
    args = ap.parse_args()
    set_threads(args.threads)
    model_dir = args.model_dir or default_model_dir(args.fresh)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  commit {git_commit()}  {machine_line()}")
    print(f"# model {model_dir}  threads {args.threads}  overrides {args.overrides}")
    random.seed(0)
    trainer = build_trainer(model_dir, args.threads, args.overrides)

    r = rollout_vs_bare(trainer, args.repeats)
    ratios = [a / b for a, b in zip(r["loop_tok_s"], r["bare_tok_s"])]
    print(f"in-loop rollout (generate + reward): {median(r['loop_tok_s']):.0f} tok/s "
          f"(median of {len(ratios)}; {median(r['loop_s']) * 1000:.0f} ms per batch)")
    print(f"bare model.generate:                 {median(r['bare_tok_s']):.0f} tok/s "
          f"({median(r['bare_s']) * 1000:.0f} ms per batch)")
    print(f"per-round ratios: {', '.join(f'{x:.2f}' for x in ratios)}")
    print(f"rollout_tokens_per_s_ratio={median(r['loop_tok_s']) / median(r['bare_tok_s']):.2f}")

    p = profile_steps(trainer, args.steps)
    step = median(p["step"])
    print(f"\ntraining step (median of {len(p['step'])}): {step * 1000:.0f} ms")
    for k in ("generate", "policy_forward", "ref_forward", "backward_optimizer", "rest"):
        v = median(p[k])
        print(f"  {k:20s} {v * 1000:7.1f} ms  {v / step:6.1%}")
    for k in ("rollout_wrapper", "reward"):
        v = median(p[k])
        print(f"    of which {k:15s} {v * 1000:5.1f} ms  {v / step:6.1%}")
    print(f"overhead_share={median(p['rest_share']):.3f}")


if __name__ == "__main__":
    main()
