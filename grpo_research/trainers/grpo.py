"""The GRPO trainer: rollout -> reward -> advantage -> mu clipped updates, with a frozen
reference model for the KL term.

Paper: Shao et al., DeepSeekMath (arXiv 2402.03300), section 4.1, Algorithm 1 (outcome
supervision). Per step: sample G completions for each of `rollout.prompts_per_step` prompts,
score them with the task's verifier, normalise rewards within each group, and minimise the
clipped surrogate plus beta x KL(pi || pi_ref) (k3 estimator), aggregated as
`algo.loss_agg` says, for `algo.num_iterations` (mu) optimizer steps on the same batch.

The named variants (`method=dr_grpo | dapo | gspo | rloo | reinforce_pp`) run through this
trainer: their presets (grpo_research/trainers/__init__.py) choose the registered advantage
estimator and importance-ratio surrogate (grpo_research/algorithms/variants.py), the loss
aggregation, DAPO's dynamic sampling and overlong filtering; `algo.ref_reset_every` resets
the reference to the policy (DeepSeek-R1 resets it every 400 steps).

Departures from the paper:
- One rollout batch per optimizer step group (no separate "outer iteration" that refreshes
  the reward model: our rewards are verifiers, nothing to refresh).
- Log-probs use logits / temperature, the distribution actually sampled (as TRL does).
- With mu = 1 the old log-probs are the current ones detached (ratio = 1, no extra forward).
- Completions a reward term masks (sandbox errors) are removed from the loss, not scored 0.
- Data parallel (`train.launcher=torchrun`, grpo_research/trainers/distributed.py): each
  process samples a contiguous share of the step's prompts and computes its own groups'
  advantages; the loss is scaled so that its sum over processes is the one-process loss for
  every `algo.loss_agg`, gradients are summed over processes before clipping and AdamW, and
  rank 0 alone writes the run dir. With `rollout.sampler=counter` the processes together draw
  the one-process samples, so they end at the one-process parameters (up to float rounding);
  anything that looks across groups (dynamic sampling, batch-normalised advantages) is refused.
"""
from __future__ import annotations

import functools
import json
import math
import random
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from grpo_research.algorithms import (
    ADVANTAGES,
    SURROGATES,
    aggregate_loss,
    clip_fraction,
    kl_estimate,
    masked_mean,
    sequence_clip_fraction,
)
from grpo_research.config import ConfigError, RunConfig, data_parallel_problem
from grpo_research.models import load_causal_lm
from grpo_research.rewards import RewardBatch, build_reward
from grpo_research.rollout import RolloutBatch, SampledRolloutBatch, rollout_backend, select_and_concat
from grpo_research.rollout.vllm_backend import logp_drift
from grpo_research.tasks import get_task
from grpo_research.tracking import NullTracker, Tracker
from grpo_research.trainers import common, distributed
from grpo_research.trainers.cost import CostMeter, forward_flops, train_flops


def task_from_config(cfg: RunConfig):
    """Build the task, passing each `task.*` field that its factory accepts."""
    import inspect

    from grpo_research.tasks import TASKS

    t = cfg.task
    offered = {"levels": t.levels, "level_weights": t.level_weights, "eval_level": t.eval_level, **t.options}
    if t.data_path:
        offered["data_path"] = t.data_path
    params = inspect.signature(TASKS[t.name]).parameters
    takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
    return get_task(t.name, **{k: v for k, v in offered.items() if takes_all or k in params})


class GRPOTrainer:
    """Owns the policy, the reference, the optimizer and the run directory."""

    def __init__(self, cfg: RunConfig, run_dir: str | Path, model_path: str | Path):
        self.cfg = cfg
        self.run_dir = Path(run_dir)
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        common.seed_everything(cfg.seed)
        self.task = task_from_config(cfg)
        # world 1 unless started by torchrun with WORLD_SIZE > 1 (then: process group joined, cuda:LOCAL_RANK)
        self.dp, self.device = distributed.setup(common.resolve_device(cfg.model.device))
        problem = data_parallel_problem(cfg, self.dp.world, "WORLD_SIZE") if self.dp.active else None
        if problem:
            raise ConfigError(problem)
        self.policy, self.tokenizer = load_causal_lm(model_path, cfg.model.dtype)
        self.policy.to(self.device)
        # rollout.backend: hf -> rollout.generate; vllm -> a colocated engine's generate (same signature),
        # which pushes the policy's weights into the engine whenever they changed since its last rollout
        self.generate = rollout_backend(cfg.rollout.backend, model_path, seed=cfg.seed, **cfg.rollout.vllm) \
            if cfg.rollout.backend == "vllm" else rollout_backend("hf")
        self.reward_fn = build_reward(self.task, cfg.reward.weights, self._reward_options())
        self.policy.train()
        self.ref = None
        if cfg.algo.beta > 0:
            self.ref, _ = load_causal_lm(model_path, cfg.model.dtype)
            self.ref.to(self.device).eval().requires_grad_(False)
        o = cfg.optim
        self.opt = common.make_optimizer(self.policy.parameters(), o.lr, o.weight_decay, (o.beta1, o.beta2))
        self.cost = CostMeter(next(self.policy.parameters()).device)
        self.cost.register("policy", self.policy, self.opt)
        self.cost.register("reference", self.ref)
        self.n_params = sum(p.numel() for p in self.policy.parameters())
        n_updates = cfg.train.steps * cfg.algo.num_iterations
        self.sched = common.make_scheduler(self.opt, o.warmup_steps, n_updates, o.schedule, o.min_lr_ratio)
        self.data_rng = random.Random(cfg.seed)
        # log-prob forwards: each group's shared prompt once (equal results up to float rounding)
        self.logprobs = (functools.partial(common.token_logprobs_shared_prefix, group_size=cfg.algo.group_size)
                         if cfg.train.shared_prefix else common.token_logprobs)
        self.heldout = self.task.heldout_problems(cfg.train.eval_size)
        self.step = 0
        self.samples = 0
        self.tokens = 0

    def _reward_options(self) -> dict[str, dict]:
        """Reward options from config; the overlong penalty defaults to DAPO's setting measured
        in tokens: max_len = rollout.max_new_tokens, cache = a quarter of it."""
        options = {k: dict(v) for k, v in self.cfg.reward.options.items()}
        if "overlong" in self.cfg.reward.weights:
            opt = options.setdefault("overlong", {})
            max_len = opt.setdefault("max_len", self.cfg.rollout.max_new_tokens)
            opt.setdefault("cache", max(1, max_len // 4))
            if "tokenizer" not in opt and "length_fn" not in opt:
                tok = self.tokenizer
                opt["length_fn"] = lambda text: len(tok(text, add_special_tokens=False)["input_ids"]) + 1  # + EOS
        return options

    # ------------------------------------------------------------ one training step
    def rollout_and_score(self) -> tuple[RolloutBatch, RewardBatch, dict[str, float]]:
        """Sample G completions per prompt and score them. With dynamic sampling (DAPO), groups
        whose rewards are all equal are dropped and more prompts are sampled, up to
        `algo.max_resample_rounds` extra rounds; every generated completion counts in `samples`."""
        cfg, a = self.cfg, self.cfg.algo
        G, want = a.group_size, cfg.rollout.prompts_per_step
        lo, hi = self.dp.shard(want)  # data parallel: this process's prompts of the step (all of them at world 1)
        sampler = {} if cfg.rollout.sampler == "torch" else {"sampler": cfg.rollout.sampler, "row_offset": lo * G}
        batches, scores, keep_rows = [], [], []
        kept_groups = generated = dropped = 0
        for round_ in range(1 + (a.max_resample_rounds if a.dynamic_sampling else 0)):
            problems = self.task.train_problems(self.data_rng, want)  # every process draws the same problems
            if self.dp.active:
                problems = problems[lo:hi]
            seed = common.step_seed(cfg.seed, self.step, stream=round_)
            if self.dp.active and not sampler:  # torch sampler: independent draws per process
                seed ^= self.dp.rank << 40
            batch = self.generate(
                self.policy, self.tokenizer, problems, G, max_new_tokens=cfg.rollout.max_new_tokens,
                temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p, seed=seed, **sampler,
            )
            rb = self.reward_fn(batch.problems, batch.completions, batch.finished)
            generated += len(batch.completions)
            groups = torch.tensor(rb.total).view(-1, G)  # (prompts, G)
            rows = []
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
        batch = common.batch_to(batch, self.device)  # the vLLM backend returns CPU tensors
        info = {"generated": generated, "dropped_groups": dropped, "rollout_rounds": len(batches),
                "generated_tokens": sum(b.completion_tokens for b in batches)}
        return batch, rb, info

    def train_step(self) -> dict[str, Any]:
        cfg, a = self.cfg, self.cfg.algo
        t0 = time.perf_counter()
        if a.ref_reset_every and self.ref is not None and self.step and self.step % a.ref_reset_every == 0:
            self.ref.load_state_dict(self.policy.state_dict())  # DeepSeek-R1: reference reset
        self.policy.eval()
        batch, rb, info = self.rollout_and_score()
        self.policy.train()
        t_rollout = time.perf_counter()
        n = len(batch.completions)
        if n == 0:  # dynamic sampling found no informative group: no update this step
            return self._finish_row(t0, t_rollout, time.perf_counter(), info, batch, rb, {}, 0.0)

        rewards = torch.tensor(rb.total, device=self.device)  # (N,)
        valid = torch.tensor(rb.mask, dtype=torch.float32, device=self.device)  # (N,) sandbox errors etc. masked
        if a.overlong_filter:
            valid = valid * torch.tensor(batch.finished, dtype=torch.float32, device=self.device)  # DAPO: drop truncated
        advantages = ADVANTAGES[a.advantage](rewards, a)  # (N,)
        mask = batch.completion_mask.float() * valid.unsqueeze(1)  # (N, T)
        T = mask.shape[1]
        eps_high = a.clip_eps_high if a.clip_eps_high is not None else a.clip_eps
        surrogate = SURROGATES[a.importance]
        clip_frac_fn = sequence_clip_fraction if a.importance == "sequence" else (
            lambda lp, old, adv, m, lo, hi: clip_fraction(lp, old, adv, m, lo, hi))
        # data parallel: this process's share of the one-process loss (token: one all-reduce of the count)
        loss_scale = self.dp.loss_scale(mask, a.loss_agg) if self.dp.active else 1.0

        ref_logp = None
        if self.ref is not None:
            with torch.inference_mode():
                ref_logp, _ = self.logprobs(self.ref, batch.input_ids, batch.attention_mask, T,
                                                    cfg.rollout.temperature)
            ref_logp = ref_logp.clone()  # (N, T) a normal tensor, usable in autograd
        old_logp = None
        if a.num_iterations > 1:
            with torch.no_grad():
                old_logp, _ = self.logprobs(self.policy, batch.input_ids, batch.attention_mask, T,
                                                    cfg.rollout.temperature)

        stats: dict[str, float] = {}
        for it in range(a.num_iterations):
            logp, entropy = self.logprobs(self.policy, batch.input_ids, batch.attention_mask, T,
                                                  cfg.rollout.temperature, with_entropy=(it == 0))
            old = logp.detach() if old_logp is None else old_logp  # (N, T)
            per_token = surrogate(logp, old, advantages, mask, a.clip_eps, eps_high)  # (N, T)
            kl = None
            if ref_logp is not None:
                kl = kl_estimate(logp, ref_logp, a.kl_estimator)  # (N, T)
                per_token = per_token + a.beta * kl
            loss = aggregate_loss(per_token, mask, a.loss_agg, max_len=cfg.rollout.max_new_tokens)
            if self.dp.active:  # backward on this share, then sum gradients (and the loss) over processes
                self.opt.zero_grad(set_to_none=True)
                (loss * loss_scale).backward()
                loss = self.dp.all_reduce_grads(self.policy.parameters(), loss.detach() * loss_scale)
            if not torch.isfinite(loss):  # skip the update; the parameters stay as they were
                if self.dp.active:
                    self.opt.zero_grad(set_to_none=True)
                stats = {"loss": loss.item(), "nonfinite_loss": True, "lr": self.sched.get_last_lr()[0]}
                break
            if not self.dp.active:
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
            max_norm = cfg.optim.max_grad_norm if cfg.optim.max_grad_norm > 0 else float("inf")
            grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), max_norm)
            lr = self.sched.get_last_lr()[0]
            self.opt.step()
            self.sched.step()
            if it == 0:
                stats = {
                    "loss": loss.item(),
                    "kl": masked_mean(kl.detach(), mask).item() if kl is not None else 0.0,
                    "clip_frac": clip_frac_fn(logp.detach(), old, advantages, mask, a.clip_eps, eps_high).item(),
                    "entropy": masked_mean(entropy, mask).item(),
                    "grad_norm": grad_norm.item(),
                    "lr": lr,
                }
                if self.dp.active:  # what each mean is over, to combine the processes' means
                    tokens = float(mask.sum())
                    self._stat_weights = {"kl": tokens, "entropy": tokens,
                                          "clip_frac": float(n) if a.importance == "sequence" else tokens}
                if isinstance(batch, SampledRolloutBatch) and batch.sampler_logprobs is not None:
                    # mean |logp under the sampler (vLLM) - logp under the trainer| on the sampled tokens
                    stats["rollout/logp_drift"] = logp_drift(batch.sampler_logprobs, logp.detach(),
                                                             batch.completion_mask)
        t_end = time.perf_counter()
        seq_tokens = int(batch.attention_mask.sum())  # prompt + completion tokens of the trained batch
        if cfg.train.shared_prefix:  # each group's prompt went through the model once
            P = batch.prompt_len
            seq_tokens = int(batch.attention_mask[:, P:].sum()) + int(batch.attention_mask[::a.group_size, :P].sum())
        n_forward = (self.ref is not None) + (old_logp is not None)
        flops = forward_flops(self.n_params, seq_tokens) * n_forward + train_flops(self.n_params, seq_tokens) * a.num_iterations
        return self._finish_row(t0, t_rollout, t_end, info, batch, rb, stats, flops)

    def _finish_row(self, t0, t_rollout, t_end, info, batch, rb, stats, update_flops) -> dict[str, Any]:
        """Count samples and tokens, and build the metrics row of the step (global values under
        data parallelism: see `_global_step`)."""
        G = self.cfg.algo.group_size
        # generation: with a KV cache each prompt and generated token goes through one forward
        # (both backends prefill each distinct prompt once, not G times)
        gen_tokens = info["generated_tokens"] + info["generated"] // G * batch.prompt_len
        flops = forward_flops(self.n_params, gen_tokens) + update_flops
        rewards = torch.tensor(rb.total, dtype=torch.float32) if rb.total else torch.zeros(0)
        self._last_batch = (batch, rewards)  # this process's rows, for sample_rows
        components, masks, finished = rb.components, rb.mask, batch.finished
        lengths = batch.completion_mask.sum(dim=1).float()  # (N,)
        if self.dp.active:
            info, stats, flops, rewards, components, masks, finished, lengths = self._global_step(
                info, stats, flops, rewards, components, masks, finished, lengths)
        cost = self.cost.step_metrics(step_s=t_end - t0, rollout_s=t_rollout - t0, update_s=t_end - t_rollout,
                                      samples=info["generated"], generated_tokens=info["generated_tokens"],
                                      model_flops=flops, devices=self.dp.world)
        self.step += 1
        self.samples += info["generated"]
        self.tokens += info["generated_tokens"]
        groups = rewards.view(-1, G)
        row = {
            "step": self.step,
            "samples": self.samples,
            "tokens": self.tokens,
            "reward_mean": rewards.mean().item() if len(rewards) else float("nan"),
            "reward_std": rewards.std(correction=0).item() if len(rewards) else float("nan"),
            **{f"reward/{k}": _mean(v) for k, v in components.items()},
            "frac_zero_std": (groups == groups[:, :1]).all(dim=1).float().mean().item() if len(rewards) else 1.0,
            **stats,
            "completion_len": lengths.mean().item() if len(rewards) else 0.0,
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
        return row

    def _global_step(self, info, stats, flops, rewards, components, masks, finished, lengths):
        """Data parallel: the step's per-row values of every process in rank order (the one-process
        batch order), counts and FLOPs summed, and each mean statistic combined from the
        processes' means and what they are over, in one all-reduce."""
        names = list(components)
        cols = torch.tensor([rewards.tolist(), [float(m) for m in masks], [float(f) for f in finished],
                             lengths.tolist(),
                             *[[math.nan if v is None else float(v) for v in components[k]] for k in names]],
                            dtype=torch.float64)  # (4 + terms, n)
        weights = getattr(self, "_stat_weights", {})
        means = [k for k in ("kl", "entropy", "clip_frac") if k in stats and k in weights]
        scalars = [info["generated"], info["generated_tokens"], info["dropped_groups"], flops]
        for k in means:
            scalars += [stats[k] * weights[k], weights[k]]
        cols, sums = self.dp.gather_step(cols, scalars)
        info = {**info, "generated": int(sums[0]), "generated_tokens": int(sums[1]), "dropped_groups": int(sums[2])}
        stats = dict(stats)
        for i, k in enumerate(means):
            stats[k] = sums[4 + 2 * i] / max(sums[5 + 2 * i], 1.0)
        components = {k: [None if math.isnan(v) else v for v in cols[4 + i].tolist()] for i, k in enumerate(names)}
        return (info, stats, sums[3], cols[0].float(), components, cols[1].tolist(), cols[2].tolist(),
                cols[3].float())

    # ------------------------------------------------------------ evaluation, checkpoints
    def evaluate(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        if self.dp.active:  # each process grades its share of the held-out problems
            lo, hi = self.dp.shard(len(self.heldout))
            correct = common.count_correct(self.policy, self.tokenizer, self.task, self.heldout[lo:hi],
                                           self.cfg.rollout.max_new_tokens)
            acc = self.dp.sum_values([correct])[0] / max(len(self.heldout), 1)
        else:
            acc = common.evaluate_accuracy(self.policy, self.tokenizer, self.task, self.heldout,
                                           self.cfg.rollout.max_new_tokens)
        return {"step": self.step, "samples": self.samples, "tokens": self.tokens, "eval/accuracy": acc,
                "eval_s": time.perf_counter() - t0}

    def state(self) -> dict[str, Any]:
        return {
            "step": self.step, "samples": self.samples, "tokens": self.tokens,
            "policy": self.policy.state_dict(), "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(), "rng": common.rng_state(),
            "data_rng": self.data_rng.getstate(),
            "metrics_bytes": (self.run_dir / "metrics.jsonl").stat().st_size,
            "reference": self.ref.state_dict() if self.ref is not None and self.cfg.algo.ref_reset_every else None,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.step, self.samples, self.tokens = state["step"], state["samples"], state["tokens"]
        self.policy.load_state_dict(state["policy"])
        self.opt.load_state_dict(state["optimizer"])
        self.sched.load_state_dict(state["scheduler"])
        common.set_rng_state(state["rng"])
        self.data_rng.setstate(state["data_rng"])
        if state.get("reference") is not None:
            self.ref.load_state_dict(state["reference"])

    def sample_rows(self) -> list[dict[str, Any]]:
        batch, rewards = self._last_batch
        return [{"prompt": p.prompt, "completion": c, "finished": f, "reward": r}
                for p, c, f, r in zip(batch.problems, batch.completions, batch.finished, rewards.tolist())]

    # ------------------------------------------------------------ the loop
    def train(self) -> dict[str, Any]:
        """The loop. SIGTERM (what SLURM sends before preemption) finishes the current step,
        writes a checkpoint and raises `Preempted`; rerunning the same command resumes.
        Data parallel: every process runs it (each loads the checkpoint; evaluation and sample
        tables are collective); rank 0 alone writes; the processes agree on stopping."""
        cfg, tc, dp = self.cfg, self.cfg.train, self.dp
        metrics_path = self.run_dir / "metrics.jsonl"
        state = common.load_checkpoint(self.run_dir)
        if state is not None:
            self.load_state(state)
            if dp.main:
                common.truncate_file(metrics_path, state["metrics_bytes"])
        elif dp.main:
            common.truncate_file(metrics_path, 0)
        tracker = Tracker(self.run_dir, cfg.to_dict(), mode=cfg.tracking.wandb, project=cfg.tracking.project,
                          group=cfg.tracking.group, name=self.run_dir.name, tags=cfg.tracking.tags,
                          job_type=cfg.method) if dp.main else NullTracker()
        t_start = time.perf_counter()
        stop = common.StopFlag()
        try:
            if self.step == 0:
                tracker.log(self.evaluate())
            bar = tqdm(total=tc.steps, initial=self.step, desc=f"{cfg.method} {self.run_dir.name}",
                       disable=not (cfg.tracking.progress and dp.main), dynamic_ncols=True)
            say = bar.write if dp.main else (lambda msg: None)
            while self.step < tc.steps:
                row = self.train_step()
                tracker.log(row)
                bar.update(1)
                bar.set_postfix(reward=f"{row.get('reward_mean', float('nan')):.3f}", kl=f"{row.get('kl', 0.0):.4f}",
                                s_per_step=f"{row['step_s']:.3f}", refresh=False)
                if row.get("nonfinite_loss"):
                    say(f"step {self.step}: non-finite loss, update skipped (last good checkpoint kept)")
                if self.step % tc.samples_every == 0:
                    parts = dp.gather_objects(self.sample_rows())  # rank 0: every process's rows
                    if dp.main:
                        tracker.log_table(self.step, [r for part in parts for r in part])
                if self.step % tc.eval_every == 0 or self.step == tc.steps:
                    ev = self.evaluate()
                    tracker.log(ev)
                    say(f"step {self.step}: held-out accuracy {ev['eval/accuracy']:.3f}")
                stopping = dp.any(stop.raised)  # SIGTERM reached some process: all stop after this step
                if dp.main and (self.step % tc.checkpoint_every == 0 or self.step == tc.steps or stopping):
                    common.save_checkpoint(self.run_dir, self.state())
                if stopping and self.step < tc.steps:
                    say(f"SIGTERM: checkpoint written at step {self.step}; rerun the same command to resume")
                    dp.barrier()  # the checkpoint is on disk before any process exits
                    raise common.Preempted(self.step)
            bar.close()
        finally:
            stop.restore()
            tracker.close()
        if not dp.main:
            return {}
        common.save_model_atomic(self.policy, self.tokenizer, self.run_dir / "model")
        from grpo_research.tracking import read_metrics

        acc = [r for r in read_metrics(metrics_path) if "eval/accuracy" in r]
        summary = {
            "method": cfg.method, "seed": cfg.seed, "steps": self.step, "samples": self.samples,
            "tokens": self.tokens,
            "initial_accuracy": acc[0]["eval/accuracy"] if acc else None,
            "final_accuracy": acc[-1]["eval/accuracy"] if acc else None,
            "train_s_this_invocation": time.perf_counter() - t_start,
        }
        common.write_text_atomic(self.run_dir / "summary.json", json.dumps(summary, indent=2) + "\n")
        return summary


def _mean(values: list) -> float:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else float("nan")
