"""The one training loop every method runs on.

`Trainer` owns the run: the task, the policy and its optimizer and schedule, the reference
model (when `needs_reference()`), the rollout backend and the reward (when
`samples_policy`), held-out evaluation, atomic checkpoints and resume, SIGTERM, the metrics
rows, cost metering and data parallelism. A method is a subclass that writes `train_step`
(and, when it holds more state, `setup`, `extra_state` and `load_extra_state`); methods are
siblings on this class, registered in grpo_research/methods.py.

Data parallelism has one code path: `self.dp` is a `distributed.DataParallel` whose every
collective is the identity in a world of one process, so the same lines train one process or
N under torchrun (grpo_research/trainers/distributed.py).

Shared by the RL methods (`samples_policy`): `rollout_and_score` (G completions per prompt,
scored by the task's verifier, with DAPO's dynamic sampling: grpo_research/rollout/scored.py),
`update` (every optimizer step: grpo_research/trainers/update.py) and `rl_row` (the step's
metrics row, global values under data parallelism: grpo_research/tracking/rows.py).
"""
from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from grpo_research.config import RunConfig
from grpo_research.config_checks import data_parallel_problem
from grpo_research.errors import ConfigError, UsageError
from grpo_research.files import disk_full, fsync_path, write_text_atomic
from grpo_research.locks import DirLock
from grpo_research.models import load_causal_lm, lora
from grpo_research.provenance import environment
from grpo_research.rewards import RewardBatch, build_reward
from grpo_research.rollout import RolloutBatch, rollout_backend
from grpo_research.rollout.scored import base_correctness, rollout_and_score
from grpo_research.tasks import build_task
from grpo_research.tasks.base import heldout_or_refuse, ood_or_refuse
from grpo_research.tasks.prompting import pose
from grpo_research.tracking import NullTracker, Tracker, read_metrics
from grpo_research.tracking.rows import global_step, rl_metrics
from grpo_research.trainers import bench_eval, common, distributed
from grpo_research.algorithms import loss_mask
from grpo_research.trainers.cost import CostMeter, check_step_memory, forward_flops
from grpo_research.trainers.update import OptimGroup, Update, micro_batches, update


BASE_P_PROMPTS = 128  # training problems (x G samples) that measure the base correctness of `random` p: base
BASE_P_STREAM = 7  # the sampling-seed stream of that measurement (the rollout uses streams 0..)


class DiskFull(UsageError):
    """The run dir's file system is full (one line, exit 2; the run resumes once there is space)."""


class Trainer:
    """The loop, evaluation, checkpoints and metrics of a run; subclasses write `train_step`."""

    samples_policy = True  # builds the rollout backend and the reward (RL methods)
    uses_reference = True  # loads the frozen reference when algo.beta > 0 (`needs_reference`)

    def __init__(self, cfg: RunConfig, run_dir: str | Path, model_path: str | Path):
        # where this invocation's wall time goes (summary.json `timings_this_invocation`, read
        # by benchmarks/time_breakdown.py): process start and imports up to here, then loading
        self.timings: dict[str, float] = {"startup_s": common.since_process_start()}
        t_init = time.perf_counter()
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        self.threads = common.resolve_threads(cfg.train.threads)  # auto: the cores idle now
        if self.threads:
            torch.set_num_threads(self.threads)
        common.seed_everything(cfg.seed)
        self.task = build_task(cfg.task)
        # an evaluation set larger than the task's held-out split: one line now, before any model loads
        heldout_or_refuse(self.task, cfg.train.eval_size, f"train.eval_size={cfg.train.eval_size}")
        ood_or_refuse(self.task, cfg.train.eval_size, f"train.eval_size={cfg.train.eval_size}")
        self.benchmarks = bench_eval.build_benchmarks(cfg)  # train.eval_benchmarks, their sizes checked here too
        # world 1 unless started by torchrun with WORLD_SIZE > 1 (then: process group joined, cuda:LOCAL_RANK)
        self.dp, self.device = distributed.setup(common.resolve_device(cfg.model.device))
        problem = data_parallel_problem(cfg, self.dp.world, "WORLD_SIZE")
        if problem:
            raise ConfigError(problem)
        self.policy, self.tokenizer = load_causal_lm(model_path, cfg.model.dtype)
        if cfg.model.lora_rank:  # adapters on a frozen base (models/lora.py)
            self.policy = lora.add_adapters(self.policy, cfg.model)
        self.task = pose(self.task, cfg.task, self.tokenizer)  # raw or chat, k-shot (tasks/prompting.py)
        bench_eval.pose_all(self.benchmarks, cfg, self.tokenizer, self.policy)
        self.policy.to(self.device)
        if self.samples_policy:
            # rollout.backend: hf -> rollout.generate; vllm -> a colocated engine's generate (same signature),
            # which pushes the policy's weights into the engine whenever they changed since its last rollout
            self.generate = rollout_backend(cfg.rollout.backend, model_path, seed=cfg.seed, **cfg.rollout.vllm) \
                if cfg.rollout.backend == "vllm" else rollout_backend("hf")
            self.reward_fn = build_reward(self.task, cfg.reward.weights, self._reward_options())
        if cfg.train.gradient_checkpointing:
            common.enable_activation_checkpointing(self.policy)
        self.policy.train()
        # the frozen reference: a second copy, or with LoRA the policy with its adapters off
        self.ref = lora.reference(self.policy, model_path, cfg.model, self.device) if self.needs_reference() else None
        o = cfg.optim
        self.opt = common.make_optimizer(lora.trainable(self.policy), o.lr, o.weight_decay, (o.beta1, o.beta2))
        self.cost = CostMeter(next(self.policy.parameters()).device)
        self.cost.register("policy", self.policy, self.opt)
        self.cost.register("reference", None if cfg.model.lora_rank else self.ref)
        self.n_params = sum(p.numel() for p in self.policy.parameters())
        self.sched = common.make_scheduler(self.opt, o.warmup_steps, self.policy_updates(), o.schedule,
                                           o.min_lr_ratio)
        # what `update` steps (trainers/update.py); a method adds its own groups in setup (PPO's critic)
        self.groups = {"policy": OptimGroup(lora.trainable(self.policy), self.opt, self.sched)}
        self.data_rng = random.Random(cfg.seed)
        self.heldout = self.task.heldout_problems(cfg.train.eval_size)
        ood = getattr(self.task, "ood_problems", None)  # an out-of-distribution split, where the task has one
        self.ood = ood(cfg.train.eval_size) if ood is not None else []
        self._check_context()
        self.step = 0
        self.samples = 0
        self.tokens = 0
        self._stat_weights: dict[str, float] = {}
        self.setup(model_path)
        self.timings["load_s"] = time.perf_counter() - t_init

    def _check_context(self) -> None:
        """The longest held-out prompt plus rollout.max_new_tokens must fit the model's context."""
        ctx = getattr(self.policy.config, "max_position_embeddings", None)
        prompts = [p.prompt for p in self.heldout + self.ood]
        if not ctx or not prompts:
            return
        longest = max(len(ids) for ids in self.tokenizer(prompts, add_special_tokens=False)["input_ids"])
        if longest + self.cfg.rollout.max_new_tokens > ctx:
            raise ConfigError(f"rollout.max_new_tokens={self.cfg.rollout.max_new_tokens} plus the longest held-out "
                              f"prompt ({longest} tokens) exceeds the model's context of {ctx} tokens")
        self._check_memory(longest + self.cfg.rollout.max_new_tokens)

    def needs_reference(self) -> bool:
        """Whether the run holds a frozen reference model: the KL term's (algo.beta > 0)."""
        return self.uses_reference and self.cfg.algo.beta > 0

    def _check_memory(self, seq_len: int) -> None:
        """Refuse a step too big for the machine (`cost.check_step_memory`); no reference copy with adapters."""
        frozen = int(self.needs_reference() and not self.cfg.model.lora_rank) + self.extra_frozen_models()
        self.step_memory_estimate = check_step_memory(self.policy, self.cfg, seq_len, frozen, self.device)

    # ------------------------------------------------------------ what a method provides
    def setup(self, model_path: str | Path) -> None:
        """Build what the method holds besides the policy (e.g. a critic)."""

    def extra_frozen_models(self) -> int:
        """Frozen models the method holds besides the reference (for the memory estimate)."""
        return 0

    def policy_updates(self) -> int:
        """Optimizer steps of the policy over the whole run (the length of the lr schedule)."""
        return self.cfg.train.steps

    def train_step(self) -> dict[str, Any]:
        """One step; returns its metrics row (`rl_row` for RL methods)."""
        raise NotImplementedError

    def extra_state(self) -> dict[str, Any]:
        """Checkpointed state besides the policy, optimizer, schedule, RNGs and counters."""
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        pass

    def sample_rows(self) -> list[dict[str, Any]]:
        """This process's rows of the last step, for samples/step_N.jsonl."""
        batch, rewards = self._last_batch
        return [{"prompt": p.prompt, "completion": c, "finished": f, "reward": r}
                for p, c, f, r in zip(batch.problems, batch.completions, batch.finished, rewards.tolist())]

    def micro_batches(self, n: int) -> list[slice]:
        """Slices of `train.micro_batch_size` rows over a batch of `n` (one slice when 0 or >= n)."""
        return micro_batches(n, self.cfg.train.micro_batch_size)

    def update(self, loss_fn, parts, scales, step=None) -> Update:
        """One optimizer step through the update engine (trainers/update.py): micro-batches
        accumulated, the data-parallel sum, the non-finite skip, clipping at optim.max_grad_norm,
        the optimizer and schedule of each group in `step` (default: every group)."""
        return update(loss_fn, parts, scales, self.groups, max_norm=self.cfg.optim.max_grad_norm, dp=self.dp,
                      step=step)

    def loss_mask(self, batch: RolloutBatch, rb: RewardBatch) -> torch.Tensor:
        """(N, T) the tokens that enter the loss: completion tokens of the completions no reward
        term masked (sandbox errors), and with algo.overlong_filter (DAPO) only finished ones."""
        keep = torch.tensor(rb.mask, dtype=torch.float32, device=self.device)  # (N,)
        finished = torch.tensor(batch.finished, dtype=torch.float32, device=self.device)  # (N,)
        return loss_mask(batch.completion_mask, keep, finished, self.cfg.algo.overlong_filter)  # (N, T)

    # ------------------------------------------------------------ RL pieces
    def _reward_options(self) -> dict[str, dict]:
        """Reward options from config; the overlong penalty defaults to DAPO's setting measured
        in tokens: max_len = rollout.max_new_tokens, cache = a quarter of it."""
        options = {k: dict(v) for k, v in self.cfg.reward.options.items()}
        if "random" in self.cfg.reward.weights:  # the random control: a coin per run seed, p = base correctness if asked
            opt = options.setdefault("random", {})
            opt.setdefault("seed", self.cfg.seed)
            if opt.get("p") == "base":
                opt["p"] = self.random_reward_p = self._base_correctness()
                self._warn(f"reward term random: p = {opt['p']:.4f}, the base model's mean correctness over "
                           f"{BASE_P_PROMPTS} x {self.cfg.algo.group_size} training samples")
        if "overlong" in self.cfg.reward.weights:
            opt = options.setdefault("overlong", {})
            max_len = opt.setdefault("max_len", self.cfg.rollout.max_new_tokens)
            opt.setdefault("cache", max(1, max_len // 4))
            if "tokenizer" not in opt and "length_fn" not in opt:
                tok = self.tokenizer
                opt["length_fn"] = lambda text: len(tok(text, add_special_tokens=False)["input_ids"]) + 1  # + EOS
        return options

    def _base_correctness(self) -> float:
        """The mean `correct` score of the base model's samples (this policy before any update: the
        trainer calls it before loading a checkpoint) on BASE_P_PROMPTS training problems x G,
        sampled as the rollout samples. Its own problem RNG and seeds: the run's data order is
        untouched, and a resumed run measures the same value."""
        was_training = self.policy.training
        self.policy.eval()
        try:
            return base_correctness(self.cfg, self.generate, self.policy, self.tokenizer, self.task,
                                    BASE_P_PROMPTS, BASE_P_STREAM)
        finally:
            self.policy.train(was_training)

    def reset_reference_if_due(self) -> None:
        """DeepSeek-R1: the reference becomes the current policy every `algo.ref_reset_every` steps."""
        every = self.cfg.algo.ref_reset_every
        if every and self.ref is not None and self.step and self.step % every == 0:
            self.ref.load_state_dict(self.policy.state_dict())

    def rollout_and_score(self, model=None) -> tuple[RolloutBatch, RewardBatch, dict[str, float]]:
        """Sample G completions per prompt from `model` (the policy when None) and score them.
        With dynamic sampling (DAPO), groups whose rewards are all equal are dropped and more
        prompts are sampled, up to `algo.max_resample_rounds` extra rounds; every generated
        completion counts in `samples`."""
        self.policy.eval()  # sampling mode while generating; back to training mode on return
        try:
            return rollout_and_score(self.cfg, self.generate, self.reward_fn, self.policy if model is None else model,
                                     self.tokenizer, self.task, self.data_rng, self.dp, self.step, self.device)
        finally:
            self.policy.train()

    def rl_row(self, t0, t_rollout, t_end, info, batch, rb, stats, update_flops) -> dict[str, Any]:
        """Count samples and tokens, and build the metrics row of an RL step: global values over
        the data-parallel processes (this process's own at world 1; tracking/rows.py). `stats`'
        means `kl`, `entropy`, `clip_frac` are combined by the weights in `self._stat_weights`."""
        G = self.cfg.algo.group_size
        # generation: with a KV cache each prompt and generated token goes through one forward
        # (both backends prefill each distinct prompt once, not G times)
        gen_tokens = info["generated_tokens"] + info["generated"] // G * batch.prompt_len
        flops = forward_flops(self.n_params, gen_tokens) + update_flops
        rewards = torch.tensor(rb.total, dtype=torch.float32) if rb.total else torch.zeros(0)
        self._last_batch = (batch, rewards)  # this process's rows, for sample_rows
        lengths = batch.completion_mask.sum(dim=1).float()  # (N,)
        g = global_step(self.dp, info, stats, flops, rewards, rb.components, rb.mask, batch.finished, lengths,
                        self._stat_weights)
        cost = self.cost.step_metrics(step_s=t_end - t0, rollout_s=t_rollout - t0, update_s=t_end - t_rollout,
                                      samples=g.info["generated"], generated_tokens=g.info["generated_tokens"],
                                      model_flops=g.flops, devices=self.dp.world)
        self.step += 1
        self.samples += g.info["generated"]
        self.tokens += g.info["generated_tokens"]
        return {"step": self.step, "samples": self.samples, "tokens": self.tokens, **rl_metrics(g, G),
                "step_s": t_end - t0, "rollout_s": t_rollout - t0, "update_s": t_end - t_rollout,
                "peak_mem_mb": common.peak_mem_mb(), **cost}

    # ------------------------------------------------------------ evaluation, checkpoints
    def evaluate(self) -> dict[str, Any]:
        """Greedy held-out accuracy (each data-parallel process grades its share), train.eval_benchmarks."""
        t0 = time.perf_counter()
        # the last step's predictions are kept as an evaluation file that the study's equal evaluation of
        # the final model reuses instead of generating again (grpo_research/evaluation/final.py)
        accuracy = self._accuracy(self.heldout, record=self.step == self.cfg.train.steps)
        row = {"step": self.step, "samples": self.samples, "tokens": self.tokens, "eval/accuracy": accuracy}
        if self.ood:
            row["eval/accuracy_ood"] = self._accuracy(self.ood)
        row.update(bench_eval.evaluate_benchmarks(self, self.step))
        return {**row, "eval_s": time.perf_counter() - t0}

    def _accuracy(self, problems: list, record: bool = False) -> float:
        """Greedy accuracy on `problems`, each data-parallel process grading its share; with
        `record`, rank 0 writes every process's predictions, in problem order, as the run's
        final evaluation file."""
        t0 = time.perf_counter()
        lo, hi = self.dp.shard(len(problems))
        predictions, grades = common.greedy_predictions(self.policy, self.tokenizer, self.task, problems[lo:hi],
                                                        self.cfg.rollout.max_new_tokens)
        correct = self.dp.sum_values([sum(g.correct for g in grades)])[0]
        if record:
            from grpo_research.evaluation.final import write_final_eval

            parts = self.dp.gather_objects((predictions, grades))  # rank 0: every process's share in rank order
            if self.dp.main:
                write_final_eval(self.run_dir, self.task, self.tokenizer, [p for ps, _ in parts for p in ps],
                                 [g for _, gs in parts for g in gs], step=self.step,
                                 max_new_tokens=self.cfg.rollout.max_new_tokens, generate_s=time.perf_counter() - t0)
        return correct / max(len(problems), 1)

    def state(self) -> dict[str, Any]:
        return {
            "step": self.step, "samples": self.samples, "tokens": self.tokens,
            "policy": self.policy.state_dict(), "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(), "rng": common.rng_state(),
            "data_rng": self.data_rng.getstate(),
            **self._metrics_snapshot(),
            "reference": self.ref.state_dict() if self.ref is not None and self.cfg.algo.ref_reset_every else None,
            **self.extra_state(),
        }

    def _warn(self, msg: str) -> None:
        """One line on stderr (rank 0): a damaged checkpoint or metrics file was repaired."""
        if self.dp.main:
            print(msg, file=sys.stderr, flush=True)

    def _metrics_snapshot(self) -> dict[str, Any]:
        """metrics.jsonl as the checkpoint covers it, fsynced first: its length, and its text so
        that a file cut or damaged later can be restored on resume (`common.restore_metrics`)."""
        path = self.run_dir / "metrics.jsonl"
        fsync_path(path)
        text = path.read_bytes()
        return {"metrics_bytes": len(text), "metrics_text": text}

    def load_state(self, state: dict[str, Any]) -> None:
        self.step, self.samples, self.tokens = state["step"], state["samples"], state["tokens"]
        self.policy.load_state_dict(state["policy"])
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        common.set_rng_state(state["rng"])
        self.data_rng.setstate(state["data_rng"])
        if state.get("reference") is not None:
            self.ref.load_state_dict(state["reference"])
        self.load_extra_state(state)

    # ------------------------------------------------------------ the loop
    def train(self, lock: DirLock | None = None, early_stop=None) -> dict[str, Any]:
        """The loop. SIGTERM (what SLURM sends before preemption) finishes the current step,
        writes a checkpoint and raises `Preempted`; rerunning the same command resumes.
        Data parallel: every process runs it (each loads the checkpoint; evaluation and sample
        tables are collective); rank 0 alone writes; the processes agree on stopping.

        One process trains a run dir at a time: rank 0 holds the run dir's lock for all ranks.
        `lock` is that lock when the caller already holds it (`grpo-research train` takes it
        before checking the run dir); without it, it is taken here and released at the end. The
        kernel releases it when the holder dies, so a crashed run resumes at once.

        `early_stop`: the handler `grpo-research train` installs before the loop's own (an
        object whose `raised` says a signal arrived already: the loop then stops after one step)."""
        self._early_stop = early_stop
        own = lock is None
        if own:
            lock = DirLock(self.run_dir / ".lock", f"run dir {self.run_dir}", self.cfg.train.lock_wait)
            if self.dp.main:
                lock.acquire()
        try:
            return self._train()
        except (OSError, RuntimeError) as e:
            if not disk_full(e):
                raise
            raise DiskFull(f"no space left on the device of {self.run_dir} (writing {getattr(e, 'filename', None) or 'the run dir'}); "
                           "the last complete checkpoint is kept: free space and rerun the same command to resume") from None
        finally:
            if own:
                lock.release()

    def _train(self) -> dict[str, Any]:
        cfg, tc, dp = self.cfg, self.cfg.train, self.dp
        metrics_path = self.run_dir / "metrics.jsonl"
        t_init_train = time.perf_counter()
        state = common.load_checkpoint(self.run_dir, warn=self._warn)
        if state is not None:
            self.load_state(state)
        if dp.main:  # exactly the rows the checkpoint covers
            common.restore_metrics(metrics_path, state, warn=self._warn)
        t_start = time.perf_counter()
        timed = self._timed
        tracker = timed("tracking_s", lambda: Tracker(
            self.run_dir, cfg.to_dict(), mode=cfg.tracking.wandb, project=cfg.tracking.project,
            group=cfg.tracking.group, name=self.run_dir.name, tags=cfg.tracking.tags,
            job_type=cfg.method) if dp.main else NullTracker())
        self.timings["resume_s"] = t_start - t_init_train  # reading the checkpoint and cutting metrics back
        stop = common.StopFlag(raised=bool(getattr(self, "_early_stop", None) and self._early_stop.raised))
        try:
            if self.step == 0:
                tracker.log(timed("eval_s", self.evaluate))
            bar = tqdm(total=tc.steps, initial=self.step, desc=f"{cfg.method} {self.run_dir.name}",
                       disable=not (cfg.tracking.progress and dp.main), dynamic_ncols=True)
            say = bar.write if dp.main else (lambda msg: None)
            while self.step < tc.steps:
                row = self.train_step()
                for key in ("rollout_s", "update_s"):
                    self.timings[key] = self.timings.get(key, 0.0) + row.get(key, 0.0)
                self.timings["step_s"] = self.timings.get("step_s", 0.0) + row["step_s"]
                tracker.log(row)
                bar.update(1)
                bar.set_postfix(reward=f"{row.get('reward_mean', float('nan')):.3f}", kl=f"{row.get('kl', 0.0):.4f}",
                                s_per_step=f"{row['step_s']:.3f}", refresh=False)
                if row.get("nonfinite_loss"):
                    say(f"step {self.step}: non-finite loss, update skipped (last good checkpoint kept)")
                if self.step % tc.samples_every == 0:
                    parts = dp.gather_objects(self.sample_rows())  # rank 0: every process's rows
                    if dp.main:
                        timed("samples_s", lambda: tracker.log_table(self.step, [r for part in parts for r in part]))
                if self.step % tc.eval_every == 0 or self.step == tc.steps:
                    ev = timed("eval_s", self.evaluate)
                    tracker.log(ev)
                    say(f"step {self.step}: held-out accuracy {ev['eval/accuracy']:.3f}")
                stopping = dp.any(stop.raised)  # SIGTERM reached some process: all stop after this step
                if dp.main and (self.step % tc.checkpoint_every == 0 or self.step == tc.steps or stopping):
                    timed("checkpoint_s", lambda: common.save_checkpoint(self.run_dir, self.state()))
                if stopping and self.step < tc.steps:
                    say(f"SIGTERM: checkpoint written at step {self.step}; rerun the same command to resume")
                    dp.barrier()  # the checkpoint is on disk before any process exits
                    raise common.Preempted(self.step)
            bar.close()
        finally:
            stop.restore()
            timed("tracking_s", tracker.close)
        if not dp.main:
            return {}
        timed("save_model_s", lambda: lora.save_final(self.policy, self.tokenizer, self.run_dir, common.save_model_atomic))
        acc = [r for r in read_metrics(metrics_path) if "eval/accuracy" in r]
        summary = {
            "method": cfg.method, "seed": cfg.seed, "steps": self.step, "samples": self.samples, "tokens": self.tokens,
            "initial_accuracy": acc[0]["eval/accuracy"] if acc else None,
            "final_accuracy": acc[-1]["eval/accuracy"] if acc else None,
            "train_s_this_invocation": time.perf_counter() - t_start,
            "threads": self.threads or torch.get_num_threads(),  # what train.threads resolved to
            "environment": environment(self.device),  # machine, versions, commit: results differ across CPUs
        }
        if acc and "eval/accuracy_ood" in acc[-1]:
            summary.update(initial_accuracy_ood=acc[0].get("eval/accuracy_ood"), final_accuracy_ood=acc[-1]["eval/accuracy_ood"])
        if getattr(self, "random_reward_p", None) is not None:  # `random` p: base, as measured
            summary["random_reward_p"] = self.random_reward_p
        if getattr(self, "step_memory_estimate", None):  # the up-front estimate (cost.estimate_step_bytes)
            summary["step_memory_estimate_mb"] = round(self.step_memory_estimate["total"] / 2**20)
        self.timings["wall_s"] = common.since_process_start()
        summary["timings_this_invocation"] = {k: round(v, 3) for k, v in self.timings.items()}
        write_text_atomic(self.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        return summary

    def _timed(self, key: str, fn):
        """fn(), its wall time added to self.timings[key]."""
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - t0
