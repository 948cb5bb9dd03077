"""`method=sft_control`: continued supervised training from the same base checkpoint, the
control every RL comparison needs.

It continues the base-model stage (grpo_research/trainers/sft.py) on the same training
prompts with their reference solutions, through the same loop, evaluation and checkpoints as
the RL trainers (grpo_research/trainers/base.py; it builds no rollout backend, reward or
reference model), and logs the same rows: `samples` counts the training examples seen (per
step `rollout.prompts_per_step` x `algo.group_size`, the RL methods' completions per step,
so equal `samples` means equal data), `tokens` the supervised target tokens, and
`eval/accuracy` the same held-out split. Its preset uses the base stage's optimizer
settings (lr 1e-3, betas (0.9, 0.98)); anything can be overridden.

A task whose reference solutions are withheld (only a reward is available) cannot be
trained this way: the trainer stops with a clear error instead of training on nothing.
"""
from __future__ import annotations

import random
import time
from typing import Any


from grpo_research.errors import ConfigError
from grpo_research.trainers import common
from grpo_research.trainers.base import Trainer
from grpo_research.trainers.cost import train_flops
from grpo_research.trainers.sft import sft_batch
from grpo_research.trainers.update import Loss


class NoReferenceSolutions(ConfigError):
    pass


class SFTControlTrainer(Trainer):
    samples_policy = False  # trains on the reference solutions: no rollout backend, no reward
    uses_reference = False

    # one update per step (Trainer.policy_updates), whatever algo.num_iterations a study sets for its RL runs
    def setup(self, model_path) -> None:
        probe = self.task.train_problems(random.Random(0), 1)
        if probe and probe[0].solution is None:
            raise NoReferenceSolutions(
                f"task {self.cfg.task.name!r} gives no reference solutions (withheld): sft_control cannot train on it"
            )

    def train_step(self) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        n = cfg.rollout.prompts_per_step * cfg.algo.group_size
        problems = self.task.train_problems(self.data_rng, n)
        if any(p.solution is None for p in problems):
            raise NoReferenceSolutions(
                f"task {cfg.task.name!r} gives no reference solutions (withheld): sft_control cannot train on it"
            )
        ids, mask, labels = (t.to(self.device) for t in sft_batch(self.tokenizer, problems))
        self.policy.train()
        # the model's loss is a mean over the batch's target tokens (each label predicts the next
        # token): micro-batch i contributes its mean x its share of those tokens
        total_targets = float((labels[:, 1:] != -100).sum())
        parts = self.micro_batches(n)
        scales = [max(float((labels[s, 1:] != -100).sum()), 1.0) / max(total_targets, 1.0) for s in parts]
        up = self.update(lambda s: Loss(self.policy(input_ids=ids[s], attention_mask=mask[s], labels=labels[s]).loss),
                         parts, scales)
        row: dict[str, Any] = {"loss": up.loss.item(), "lr": up.lr["policy"]}
        if up.finite:
            row["grad_norm"] = up.grad_norm["policy"].item()
        else:
            row["nonfinite_loss"] = True
        t_end = time.perf_counter()
        target_tokens = int((labels != -100).sum())
        cost = self.cost.step_metrics(step_s=t_end - t0, rollout_s=0.0, update_s=t_end - t0, samples=n,
                                      generated_tokens=0, model_flops=train_flops(self.n_params, int(mask.sum())))
        self.step += 1
        self.samples += n
        self.tokens += target_tokens
        self._last_problems = problems
        return {"step": self.step, "samples": self.samples, "tokens": self.tokens, **row,
                "completion_len": target_tokens / n, "step_s": t_end - t0, "rollout_s": 0.0,
                "update_s": t_end - t0, "peak_mem_mb": common.peak_mem_mb(), **cost}

    def sample_rows(self) -> list[dict[str, Any]]:
        return [{"prompt": p.prompt, "completion": p.solution, "reward": None} for p in self._last_problems]

