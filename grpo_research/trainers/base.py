"""The one training loop every method runs on.

`Trainer` owns the run: the task, the policy and its optimizer and schedule, the reference
model (when `uses_reference` and beta > 0), the rollout backend and the reward (when
`samples_policy`), held-out evaluation, atomic checkpoints and resume, SIGTERM, the metrics
rows, cost metering and data parallelism. A method is a subclass that writes `train_step`
(and, when it holds more state, `setup`, `extra_state` and `load_extra_state`); methods are
siblings on this class, registered in grpo_research/methods.py.

Data parallelism has one code path: `self.dp` is a `distributed.DataParallel` whose every
collective is the identity in a world of one process, so the same lines train one process or
N under torchrun (grpo_research/trainers/distributed.py).

Shared by the RL methods (`samples_policy`): `rollout_and_score` (G completions per prompt,
scored by the task's verifier; DAPO's dynamic sampling refills the batch from more prompts,
and every generated completion counts in `samples`) and `rl_row` (the step's metrics row,
global values under data parallelism).

Over 400 lines on purpose: everything every method shares lives here, so that a method's own
module holds only its step.
"""
from __future__ import annotations

import errno
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from grpo_research.config import RunConfig, data_parallel_problem
from grpo_research.errors import ConfigError, UsageError
from grpo_research.files import fsync_path, write_text_atomic
from grpo_research.locks import DirLock
from grpo_research.models import load_causal_lm
from grpo_research.provenance import environment
from grpo_research.rewards import RewardBatch, build_reward
from grpo_research.rollout import RolloutBatch, rollout_backend, select_and_concat
from grpo_research.tasks import build_task
from grpo_research.tasks.base import heldout_or_refuse, ood_or_refuse
from grpo_research.tasks.prompting import pose
from grpo_research.tracking import NullTracker, Tracker, read_metrics
from grpo_research.trainers import common, distributed
from grpo_research.algorithms import loss_mask
from grpo_research.trainers.cost import CostMeter, estimate_step_bytes, forward_flops, memory_limit_bytes
from grpo_research.trainers.update import OptimGroup, Update, micro_batches, update


BASE_P_PROMPTS = 128  # training problems (x G samples) that measure the base correctness of `random` p: base
BASE_P_STREAM = 7  # the sampling-seed stream of that measurement (the rollout uses streams 0..)


class InfrastructureFailure(RuntimeError):
    """A step could not be scored at all (every completion masked): exit 1 with one line."""


class DiskFull(UsageError):
    """The run dir's file system is full (one line, exit 2; the run resumes once there is space)."""


def _disk_full(e: BaseException | None) -> bool:
    """ENOSPC, also when torch's checkpoint writer reports it as a RuntimeError (whose message
    or the exception it was raised while handling says so)."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(e) or "file write failed" in str(e):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False


class Trainer:
    """The loop, evaluation, checkpoints and metrics of a run; subclasses write `train_step`."""

    samples_policy = True  # builds the rollout backend and the reward (RL methods)
    uses_reference = True  # loads the frozen reference when algo.beta > 0

    def __init__(self, cfg: RunConfig, run_dir: str | Path, model_path: str | Path):
        # where this invocation's wall time goes (summary.json `timings_this_invocation`, read
        # by benchmarks/time_breakdown.py): process start and imports up to here, then loading
        self.timings: dict[str, float] = {"startup_s": _since_process_start()}
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
        # world 1 unless started by torchrun with WORLD_SIZE > 1 (then: process group joined, cuda:LOCAL_RANK)
        self.dp, self.device = distributed.setup(common.resolve_device(cfg.model.device))
        problem = data_parallel_problem(cfg, self.dp.world, "WORLD_SIZE")
        if problem:
            raise ConfigError(problem)
        self.policy, self.tokenizer = load_causal_lm(model_path, cfg.model.dtype)
        self.task = pose(self.task, cfg.task, self.tokenizer)  # raw or chat, k-shot (tasks/prompting.py)
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
        self.ref = None
        if self.uses_reference and cfg.algo.beta > 0:
            self.ref, _ = load_causal_lm(model_path, cfg.model.dtype)
            self.ref.to(self.device).eval().requires_grad_(False)
        o = cfg.optim
        self.opt = common.make_optimizer(self.policy.parameters(), o.lr, o.weight_decay, (o.beta1, o.beta2))
        self.cost = CostMeter(next(self.policy.parameters()).device)
        self.cost.register("policy", self.policy, self.opt)
        self.cost.register("reference", self.ref)
        self.n_params = sum(p.numel() for p in self.policy.parameters())
        self.sched = common.make_scheduler(self.opt, o.warmup_steps, self.policy_updates(), o.schedule,
                                           o.min_lr_ratio)
        # what `update` steps (trainers/update.py); a method adds its own groups in setup (PPO's critic)
        self.groups = {"policy": OptimGroup(list(self.policy.parameters()), self.opt, self.sched)}
        self.data_rng = random.Random(cfg.seed)
        self.heldout = self.task.heldout_problems(cfg.train.eval_size)
        # an out-of-distribution split evaluated beside it, where the task has one (arith ood_level)
        ood = getattr(self.task, "ood_problems", None)
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

    def _check_memory(self, seq_len: int) -> None:
        """Refuse a step whose estimated memory exceeds the machine's (`cost.estimate_step_bytes`)."""
        c, t = self.policy.config, self.cfg.train
        hidden = getattr(c, "hidden_size", None)
        if hidden is None:
            return
        rows = self.cfg.rollout.prompts_per_step * self.cfg.algo.group_size
        mb = min(t.micro_batch_size or rows, rows)
        param_bytes = next(self.policy.parameters()).element_size()
        est = estimate_step_bytes(
            n_params=sum(p.numel() for p in self.policy.parameters()), trained_models=1 + (self.cfg.method == "ppo"),
            frozen_models=int(self.uses_reference and self.cfg.algo.beta > 0) + self.extra_frozen_models(),
            param_bytes=param_bytes,
            hidden=hidden, intermediate=getattr(c, "intermediate_size", 4 * hidden),
            layers=getattr(c, "num_hidden_layers", 1), vocab=getattr(c, "vocab_size", 1), rows=mb,
            seq_len=seq_len, checkpointing=t.gradient_checkpointing)
        self.step_memory_estimate = est
        limit = memory_limit_bytes(self.device)
        if est["total"] > limit:
            gb = 2**30
            raise ConfigError(
                f"a training step needs about {est['total'] / gb:.1f} GiB (model state {est['state'] / gb:.1f}, "
                f"activations of {mb} completions x {seq_len} tokens {est['activations'] / gb:.1f}), more than the "
                f"{limit / gb:.0f} GiB here; lower train.micro_batch_size or set train.gradient_checkpointing=true")

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
        cfg = self.cfg
        rng = random.Random(f"base-correctness-{cfg.seed}")
        correct = build_reward(self.task, {"correct": 1.0}, {})
        scores: list[float] = []
        was_training = self.policy.training
        self.policy.eval()
        for i in range(0, BASE_P_PROMPTS, cfg.rollout.prompts_per_step):
            problems = self.task.train_problems(rng, min(cfg.rollout.prompts_per_step, BASE_P_PROMPTS - i))
            batch = self.generate(self.policy, self.tokenizer, problems, cfg.algo.group_size,
                                  max_new_tokens=cfg.rollout.max_new_tokens, temperature=cfg.rollout.temperature,
                                  top_p=cfg.rollout.top_p, seed=common.step_seed(cfg.seed, i, stream=BASE_P_STREAM))
            rb = correct(batch.problems, batch.completions, batch.finished)
            scores += [c for c in rb.components["correct"] if c is not None]
        self.policy.train(was_training)
        if not scores:
            raise InfrastructureFailure("reward term random (p: base): no base-model sample could be graded")
        return sum(scores) / len(scores)

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
        cfg, a = self.cfg, self.cfg.algo
        G, want = a.group_size, cfg.rollout.prompts_per_step
        self.policy.eval()  # sampling mode while generating; back to training mode on return
        try:
            return self._rollout_and_score(model, G, want)
        finally:
            self.policy.train()

    def _rollout_and_score(self, model, G: int, want: int):
        cfg, a = self.cfg, self.cfg.algo
        lo, hi = self.dp.shard(want)  # data parallel: this process's prompts of the step (all of them at world 1)
        sampler = {} if cfg.rollout.sampler == "torch" else {"sampler": cfg.rollout.sampler, "row_offset": lo * G}
        batches, scores, keep_rows = [], [], []
        kept_groups = generated = dropped = zero_std = 0
        for round_ in range(1 + (a.max_resample_rounds if a.dynamic_sampling else 0)):
            problems = self.task.train_problems(self.data_rng, want)[lo:hi]  # every process draws the same problems
            seed = common.step_seed(cfg.seed, self.step, stream=round_)
            if not sampler:  # torch sampler: independent draws per process (rank 0 keeps the seed)
                seed ^= self.dp.rank << 40
            batch = self.generate(
                self.policy if model is None else model, self.tokenizer, problems, G, max_new_tokens=cfg.rollout.max_new_tokens,
                temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p, seed=seed, **sampler,
            )
            rb = self.reward_fn(batch.problems, batch.completions, batch.finished)
            generated += len(batch.completions)
            groups = torch.tensor(rb.total).view(-1, G)  # (prompts, G)
            rows = []
            zero_std += int((groups == groups[:, :1]).all(dim=1).sum())  # before any group is dropped
            for g in range(groups.shape[0]):
                if a.dynamic_sampling and (bool((groups[g] == groups[g, 0]).all()) or kept_groups >= want):
                    dropped += 1
                    continue
                rows += range(g * G, (g + 1) * G)
                kept_groups += 1
            batches.append(batch)
            scores.append(rb)
            keep_rows.append(rows)
            if kept_groups >= want:
                break
        if len(batches) == 1 and len(keep_rows[0]) == len(batches[0].completions):
            batch, rb = batches[0], scores[0]
        else:
            batch = select_and_concat(batches, keep_rows, self.tokenizer.pad_token_id)
            rb = RewardBatch(
                total=[s.total[i] for s, rows in zip(scores, keep_rows) for i in rows],
                components={k: [s.components[k][i] for s, rows in zip(scores, keep_rows) for i in rows]
                            for k in scores[0].components},
                mask=[s.mask[i] for s, rows in zip(scores, keep_rows) for i in rows],
            )
        if not self.dp.any(any(rb.mask) or not rb.mask):  # every completion of the step, on every process, masked
            raise InfrastructureFailure(
                f"step {self.step + 1}: every one of the {len(rb.mask)} completions hit an infrastructure failure "
                "(the reward masked them all, e.g. sandbox errors): the reward is broken, not the policy; nothing "
                "was trained on this step. Fix it and rerun the same command to resume from the last checkpoint")
        batch = common.batch_to(batch, self.device)  # the vLLM backend returns CPU tensors
        info = {"generated": generated, "dropped_groups": dropped, "rollout_rounds": len(batches),
                "generated_tokens": sum(b.completion_tokens for b in batches), "zero_std_generated": zero_std}
        return batch, rb, info

    def rl_row(self, t0, t_rollout, t_end, info, batch, rb, stats, update_flops) -> dict[str, Any]:
        """Count samples and tokens, and build the metrics row of an RL step: global values over
        the data-parallel processes (this process's own at world 1). `stats`' means `kl`,
        `entropy`, `clip_frac` are combined by the weights in `self._stat_weights`."""
        G = self.cfg.algo.group_size
        # generation: with a KV cache each prompt and generated token goes through one forward
        # (both backends prefill each distinct prompt once, not G times)
        gen_tokens = info["generated_tokens"] + info["generated"] // G * batch.prompt_len
        flops = forward_flops(self.n_params, gen_tokens) + update_flops
        rewards = torch.tensor(rb.total, dtype=torch.float32) if rb.total else torch.zeros(0)
        self._last_batch = (batch, rewards)  # this process's rows, for sample_rows
        lengths = batch.completion_mask.sum(dim=1).float()  # (N,)
        info, stats, flops, rewards, components, masks, finished, lengths = self._global_step(
            info, stats, flops, rewards, rb.components, rb.mask, batch.finished, lengths)
        cost = self.cost.step_metrics(step_s=t_end - t0, rollout_s=t_rollout - t0, update_s=t_end - t_rollout,
                                      samples=info["generated"], generated_tokens=info["generated_tokens"],
                                      model_flops=flops, devices=self.dp.world)
        self.step += 1
        self.samples += info["generated"]
        self.tokens += info["generated_tokens"]
        groups = rewards.view(-1, G)
        return {
            "step": self.step,
            "samples": self.samples,
            "tokens": self.tokens,
            "reward_mean": rewards.mean().item() if len(rewards) else float("nan"),
            "reward_std": rewards.std(correction=0).item() if len(rewards) else float("nan"),
            **{f"reward/{k}": _mean(v) for k, v in components.items()},
            "frac_zero_std": (groups == groups[:, :1]).all(dim=1).float().mean().item() if len(rewards) else 1.0,
            "frac_zero_std_generated": info["zero_std_generated"] / max(info["generated"] // G, 1),
            **stats,
            "completion_len": lengths.mean().item() if len(rewards) else 0.0,
            "completion_len_std": lengths.std(correction=0).item() if len(rewards) else 0.0,
            **lengths_by_outcome(lengths.tolist(), components.get("correct")),
            "truncated_frac": 1.0 - sum(finished) / max(len(finished), 1),
            "masked_frac": 1.0 - sum(masks) / max(len(masks), 1),
            "dropped_groups": info["dropped_groups"],
            "rollout_rounds": info["rollout_rounds"],
            "step_s": t_end - t0,
            "rollout_s": t_rollout - t0,
            "update_s": t_end - t_rollout,
            "peak_mem_mb": common.peak_mem_mb(),
            **cost,
        }

    def _global_step(self, info, stats, flops, rewards, components, masks, finished, lengths):
        """The step's per-row values of every process in rank order (the one-process batch
        order), counts and FLOPs summed, and each mean statistic combined from the processes'
        means and what they are over, in one all-reduce (the identity at world 1)."""
        names = list(components)
        cols = torch.tensor([rewards.tolist(), [float(m) for m in masks], [float(f) for f in finished],
                             lengths.tolist(),
                             *[[math.nan if v is None else float(v) for v in components[k]] for k in names]],
                            dtype=torch.float64)  # (4 + terms, n)
        weights = self._stat_weights
        means = [k for k in ("kl", "entropy", "clip_frac") if k in stats and k in weights]
        scalars = [info["generated"], info["generated_tokens"], info["dropped_groups"], flops]
        for k in means:
            scalars += [stats[k] * weights[k], weights[k]]
        scalars.append(info["zero_std_generated"])
        cols, sums = self.dp.gather_step(cols, scalars)
        info = {**info, "generated": int(sums[0]), "generated_tokens": int(sums[1]), "dropped_groups": int(sums[2]),
                "zero_std_generated": int(sums[-1])}
        stats = dict(stats)
        for i, k in enumerate(means):
            stats[k] = self.dp.combine_mean(stats[k], sums[4 + 2 * i], sums[5 + 2 * i])
        components = {k: [None if math.isnan(v) else v for v in cols[4 + i].tolist()] for i, k in enumerate(names)}
        return (info, stats, sums[3], cols[0].float(), components, cols[1].tolist(), cols[2].tolist(),
                cols[3].float())

    # ------------------------------------------------------------ evaluation, checkpoints
    def evaluate(self) -> dict[str, Any]:
        """Greedy held-out accuracy; each data-parallel process grades its share."""
        t0 = time.perf_counter()
        # the last step's predictions are kept as an evaluation file (grpo_research/evaluation/final.py)
        # that the study's equal evaluation of the final model reuses instead of generating again
        accuracy = self._accuracy(self.heldout, record=self.step == self.cfg.train.steps)
        row = {"step": self.step, "samples": self.samples, "tokens": self.tokens, "eval/accuracy": accuracy}
        if self.ood:
            row["eval/accuracy_ood"] = self._accuracy(self.ood)
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
            if not _disk_full(e):
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
        timed("save_model_s", lambda: common.save_model_atomic(self.policy, self.tokenizer, self.run_dir / "model"))
        acc = [r for r in read_metrics(metrics_path) if "eval/accuracy" in r]
        summary = {
            "method": cfg.method, "seed": cfg.seed, "steps": self.step, "samples": self.samples,
            "tokens": self.tokens,
            "initial_accuracy": acc[0]["eval/accuracy"] if acc else None,
            "final_accuracy": acc[-1]["eval/accuracy"] if acc else None,
            "train_s_this_invocation": time.perf_counter() - t_start,
            "threads": self.threads or torch.get_num_threads(),  # what train.threads resolved to
            "environment": environment(self.device),  # machine, versions, commit: results differ across CPUs
        }
        if acc and "eval/accuracy_ood" in acc[-1]:
            summary["initial_accuracy_ood"] = acc[0].get("eval/accuracy_ood")
            summary["final_accuracy_ood"] = acc[-1]["eval/accuracy_ood"]
        if getattr(self, "random_reward_p", None) is not None:  # `random` p: base, as measured
            summary["random_reward_p"] = self.random_reward_p
        if getattr(self, "step_memory_estimate", None):  # the up-front estimate (cost.estimate_step_bytes)
            summary["step_memory_estimate_mb"] = round(self.step_memory_estimate["total"] / 2**20)
        self.timings["wall_s"] = _since_process_start()
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


def _since_process_start() -> float:
    """Seconds since this process was created (the kernel's start time: interpreter start and
    imports included)."""
    import psutil

    return time.time() - psutil.Process().create_time()


def lengths_by_outcome(lengths: list[float], correct: list[float | None] | None) -> dict[str, float]:
    """`completion_len/correct` and `completion_len/incorrect`: mean completion length (tokens) of
    the completions the `correct` reward term scored 1 (a right answer, a full pass) and below 1
    (a masked completion, None, is in neither); a key is absent when no completion is in its
    class, or when the reward has no `correct` term. The Dr. GRPO length-bias claim (arXiv 2503.20783) is about the second."""
    if correct is None:
        return {}
    out = {}
    for key, want in (("completion_len/correct", True), ("completion_len/incorrect", False)):
        xs = [n for n, c in zip(lengths, correct) if c is not None and (c >= 1.0) == want]
        if xs:
            out[key] = sum(xs) / len(xs)
    return out


def _mean(values: list) -> float:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else float("nan")
