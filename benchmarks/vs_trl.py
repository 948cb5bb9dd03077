"""GRPO throughput of this project's trainer against `trl.GRPOTrainer`, side by side.

Both sides train the same checkpoint (the default cached tiny base model, or `--fresh`: a
newly initialised tiny char Llama saved with save_pretrained) with the same tokenizer, on the
`arith` task's training problems, with the same reward (the task's grader: correct + 0.2 x
format, completion read up to EOS, special tokens kept), and the same settings:
G = 8 completions x 8 prompts = 64 completions per step, 32 new tokens, beta = 0.04 (both
keep a frozen reference model), eps = 0.2, lr 3e-5 constant, AdamW betas (0.9, 0.99), grad
clip 1.0, mu = 1, temperature 1.0, top_p 1, top_k 0, float32, no gradient checkpointing,
sequence-mean loss (TRL `loss_type="grpo"`), group std scaling.

Each side runs in its own subprocess with the same thread count, does one warm-up step, then
times `--steps` steps; the sides alternate (A B, B A, ...) for `--repeats` rounds so that the
load from other processes on the machine falls on both. Printed: each run, then per side the
median samples/s and peak RSS, and as the LAST line `ratio_vs_trl=<ours / TRL samples/s>`
(ratio of the medians).

    python benchmarks/vs_trl.py                  # 3 rounds x 10 timed steps, 1 thread
    python benchmarks/vs_trl.py --threads 2 --repeats 5
    python benchmarks/vs_trl.py --shared-prefix  # also our trainer with the other train.shared_prefix
"""
from __future__ import annotations

import argparse
import functools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    ROOT, default_model_dir, git_commit, machine_line, median, peak_rss_mb, set_threads, worker_env,
)

G, PROMPTS, MAX_NEW, BETA, EPS, LR, TEMP = 8, 8, 32, 0.04, 0.2, 3e-5, 1.0
REWARD_WEIGHTS = {"correct": 1.0, "format": 0.2}


# ------------------------------------------------------------------ our trainer
def force_shared_prefix(on: bool, group_size: int) -> list[str]:
    """Our trainer with (`on`) or without shared-prefix log-prob forwards: the config key
    `train.shared_prefix` where the trainer has it, else (`on` only) `token_logprobs_shared_prefix`
    swapped in for `token_logprobs` here, exactly what the key selects."""
    from grpo_research.config import RunConfig
    from grpo_research.trainers import common

    if hasattr(RunConfig().train, "shared_prefix"):
        return [f"train.shared_prefix={'true' if on else 'false'}"]
    if on:
        common.token_logprobs = functools.partial(common.token_logprobs_shared_prefix, group_size=group_size)
    return []


def other_shared_prefix_side() -> str:
    """The extra side of --shared-prefix: the setting the trainer does not use by default."""
    from grpo_research.config import RunConfig

    return "ours-shared" if getattr(RunConfig().train, "shared_prefix", False) else "ours+shared"


def run_ours(model_dir: str, steps: int, threads: int, seed: int, extra: list[str],
             shared_prefix: bool | None = None, side: str = "ours") -> dict:
    """Our trainer; `shared_prefix` None: its default log-prob forwards, True/False: forced."""
    from grpo_research.config import load_config
    from grpo_research.trainers import build_trainer

    if shared_prefix is not None:
        extra = [*extra, *force_shared_prefix(shared_prefix, G)]

    overrides = [
        f"seed={seed}", f"rollout.max_new_tokens={MAX_NEW}", f"rollout.prompts_per_step={PROMPTS}",
        f"algo.group_size={G}", f"algo.beta={BETA}", f"algo.clip_eps={EPS}", f"optim.lr={LR}",
        "algo.num_iterations=1", f"rollout.temperature={TEMP}", "rollout.top_p=1.0", "optim.beta2=0.99",
        "optim.max_grad_norm=1.0", "optim.schedule=constant", f"reward.weights={json.dumps(REWARD_WEIGHTS)}",
        "tracking.wandb=disabled", "tracking.progress=false", f"train.threads={threads}",
        f"train.steps={steps + 1}", *extra,
    ]
    cfg = load_config(None, overrides)
    run_dir = tempfile.mkdtemp(prefix="bench-ours-")
    trainer = build_trainer(cfg, run_dir, model_dir)  # GRPO unless `extra` sets another method (benchmarks/ab.py)
    set_threads(threads)
    trainer.train_step()  # warm-up
    s0, t0 = trainer.samples, time.perf_counter()
    rows = [trainer.train_step() for _ in range(steps)]
    elapsed = time.perf_counter() - t0
    samples = trainer.samples - s0
    return {"side": side, "samples_per_s": samples / elapsed,
            "step_s": elapsed / steps,
            "completion_len": sum(r["completion_len"] for r in rows) / steps,
            "reward": sum(r["reward_mean"] for r in rows) / steps, "peak_rss_mb": peak_rss_mb()}


# ------------------------------------------------------------------ TRL
def run_trl(model_dir: str, steps: int, threads: int, seed: int, extra: list[str]) -> dict:
    import random

    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from grpo_research.rewards import build_reward
    from grpo_research.tasks import get_task

    set_threads(threads)
    task = get_task("arith")
    problems = task.train_problems(random.Random(seed), PROMPTS * (steps + 1) * 4)
    by_index = dict(enumerate(problems))
    dataset = Dataset.from_dict({"prompt": [p.prompt for p in problems], "problem_index": list(by_index)})
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    eos = tokenizer.eos_token_id
    grader = build_reward(task, REWARD_WEIGHTS, {})
    batch_sizes: list[int] = []

    def arith_reward(prompts, completions, completion_ids, problem_index, **_):
        """The same grader as ours: text up to EOS decoded with special tokens kept; a completion
        that did not end in EOS is unfinished (TRL's own `completions` skip special tokens)."""
        batch_sizes.append(len(completion_ids))
        finished = [bool(ids) and ids[-1] == eos for ids in completion_ids]
        texts = tokenizer.batch_decode([ids[:-1] if f else ids for ids, f in zip(completion_ids, finished)],
                                       skip_special_tokens=False)
        return grader([by_index[i] for i in problem_index], texts, finished).total

    class StepClock(TrainerCallback):
        def __init__(self):
            self.ends: list[float] = []

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())

    fields = dict(
        output_dir=tempfile.mkdtemp(prefix="bench-trl-"),
        per_device_train_batch_size=PROMPTS * G, generation_batch_size=PROMPTS * G, num_generations=G,
        gradient_accumulation_steps=1, max_completion_length=MAX_NEW, beta=BETA, epsilon=EPS,
        learning_rate=LR, num_iterations=1, temperature=TEMP, top_p=1.0, top_k=0,
        loss_type="grpo", scale_rewards="group", lr_scheduler_type="constant", warmup_steps=0,
        adam_beta1=0.9, adam_beta2=0.99, weight_decay=0.0, max_grad_norm=1.0,
        max_steps=steps + 1, seed=seed, use_cpu=True, bf16=False, fp16=False, gradient_checkpointing=False,
        report_to="none", logging_strategy="no", save_strategy="no", disable_tqdm=True, push_to_hub=False,
        use_vllm=False, log_completions=False, dataloader_num_workers=0,
    )
    fields.update({k: json.loads(v) for k, v in (e.split("=", 1) for e in extra)})
    args = GRPOConfig(**fields)
    clock = StepClock()
    trainer = GRPOTrainer(model=str(model_dir), reward_funcs=arith_reward, args=args, train_dataset=dataset,
                          processing_class=tokenizer, callbacks=[clock])
    trainer.train()
    elapsed = clock.ends[-1] - clock.ends[0]  # after the warm-up step
    if len(clock.ends) != steps + 1 or batch_sizes != [PROMPTS * G] * (steps + 1):
        raise RuntimeError(f"TRL did {len(clock.ends)} steps with reward batches {batch_sizes}, "
                           f"expected {steps + 1} x {PROMPTS * G}")
    return {"side": "trl", "samples_per_s": PROMPTS * G * steps / elapsed, "step_s": elapsed / steps,
            "peak_rss_mb": peak_rss_mb()}


# ------------------------------------------------------------------ driver
def worker(args) -> None:
    if args.worker == "trl":
        res = run_trl(str(args.model_dir), args.steps, args.threads, args.seed, args.trl_override)
    else:
        forced = {"ours+shared": True, "ours-shared": False}.get(args.worker)
        res = run_ours(str(args.model_dir), args.steps, args.threads, args.seed, args.ours_override,
                       shared_prefix=forced, side=args.worker)
    print("RESULT " + json.dumps(res), flush=True)


def spawn(side: str, args) -> dict:
    cmd = [sys.executable, __file__, "--worker", side, "--model-dir", str(args.model_dir), "--steps",
           str(args.steps), "--threads", str(args.threads), "--seed", str(args.seed)]
    for o in args.ours_override:
        cmd += ["--ours-override", o]
    for o in args.trl_override:
        cmd += ["--trl-override", o]
    p = subprocess.run(cmd, cwd=ROOT, env=worker_env(args.threads), capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    sys.stderr.write(p.stdout[-3000:] + p.stderr[-6000:])
    raise SystemExit(f"{side} worker failed (exit {p.returncode})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10, help="timed steps per run (after one warm-up step)")
    ap.add_argument("--repeats", type=int, default=3, help="rounds; each round runs both sides once")
    ap.add_argument("--threads", type=int, default=1, help="torch/OpenMP threads of every worker")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fresh", action="store_true", help="a newly initialised tiny model instead of the cached base")
    ap.add_argument("--model-dir", type=Path, help="checkpoint directory (default: the cached base model)")
    ap.add_argument("--ours-override", action="append", default=[], help="extra key=value for our config")
    ap.add_argument("--trl-override", action="append", default=[], help="extra GRPOConfig field=json-value")
    ap.add_argument("--shared-prefix", action="store_true",
                    help="also run our trainer with the other setting of train.shared_prefix: side 'ours+shared' "
                         "(shared-prefix log-prob forwards) or 'ours-shared' (one left-padded forward)")
    ap.add_argument("--worker", choices=["ours", "ours+shared", "ours-shared", "trl"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args)
    if args.model_dir is None:
        args.model_dir = default_model_dir(args.fresh)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  commit {git_commit()}  {machine_line()}")
    print(f"# model {args.model_dir}  threads {args.threads}  steps {args.steps} (+1 warm-up)  "
          f"{PROMPTS} prompts x G={G}  max_new_tokens {MAX_NEW}")
    other = other_shared_prefix_side()
    sides = ("ours", other, "trl") if args.shared_prefix else ("ours", "trl")
    results = {side: [] for side in sides}
    for r in range(args.repeats):
        for side in (sides if r % 2 == 0 else sides[::-1]):
            res = spawn(side, args)
            results[side].append(res)
            print(f"round {r} {side:11s} samples/s {res['samples_per_s']:7.1f}  step {res['step_s']:.3f} s  "
                  f"peak RSS {res['peak_rss_mb']:.0f} MB", flush=True)
    ratios = [o["samples_per_s"] / t["samples_per_s"] for o, t in zip(results["ours"], results["trl"])]
    for side in sides:
        sps = [x["samples_per_s"] for x in results[side]]
        print(f"{side}: samples/s median {median(sps):.1f} (runs {', '.join(f'{x:.1f}' for x in sps)}), "
              f"peak RSS median {median([x['peak_rss_mb'] for x in results[side]]):.0f} MB")
    trl = median([x["samples_per_s"] for x in results["trl"]])
    if args.shared_prefix:
        sp = [o["samples_per_s"] / t["samples_per_s"] for o, t in zip(results[other], results["trl"])]
        print(f"{other} per-round ratios: {', '.join(f'{x:.2f}' for x in sp)}")
        key = "ratio_shared_prefix_vs_trl" if other == "ours+shared" else "ratio_one_forward_vs_trl"
        print(f"{key}={median([x['samples_per_s'] for x in results[other]]) / trl:.2f}")
    print(f"per-round ratios: {', '.join(f'{x:.2f}' for x in ratios)}")
    ours = median([x["samples_per_s"] for x in results["ours"]])
    print(f"ratio_vs_trl={ours / trl:.2f}")


if __name__ == "__main__":
    main()
