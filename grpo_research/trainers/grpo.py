"""The GRPO trainer: rollout -> reward -> advantage -> mu clipped updates, with a frozen
reference model for the KL term.

Paper: Shao et al., DeepSeekMath (arXiv 2402.03300), section 4.1, Algorithm 1 (outcome
supervision). Per step: sample G completions for each of `rollout.prompts_per_step` prompts,
score them with the task's verifier, normalise rewards within each group, and minimise the
clipped surrogate plus beta x KL(pi || pi_ref) (k3 estimator), aggregated as
`algo.loss_agg` says, for `algo.num_iterations` (mu) optimizer steps on the same batch.

The named variants (`method=dr_grpo | dapo | gspo | rloo | reinforce_pp`) run through this
trainer: their presets (grpo_research/methods.py) choose the registered advantage estimator
(grpo_research/algorithms/advantages.py), importance-ratio surrogate and loss aggregation
(grpo_research/algorithms/loss.py: `policy_loss`), DAPO's dynamic sampling and overlong
filtering; `algo.ref_reset_every` resets the reference to the policy (DeepSeek-R1 resets it
every 400 steps). The loop, evaluation, checkpoints and metrics rows are the shared ones of
grpo_research/trainers/base.py.

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
import time
from typing import Any

import torch

from grpo_research.algorithms import (
    ADVANTAGES,
    SURROGATES,
    loss_mask,
    masked_mean,
    micro_batch_scale,
    policy_loss,
    policy_loss_stats,
)
from grpo_research.rollout import SampledRolloutBatch
from grpo_research.rollout.vllm_backend import logp_drift
from grpo_research.trainers import common
from grpo_research.trainers.base import Trainer
from grpo_research.trainers.cost import forward_flops, train_flops


class GRPOTrainer(Trainer):
    """GRPO and its variants: rollout -> reward -> advantage -> loss -> mu updates."""

    def setup(self, model_path) -> None:
        # log-prob forwards: each group's shared prompt once (equal results up to float rounding); not
        # with gradient checkpointing, under which transformers drops the KV cache this needs
        t = self.cfg.train
        self.shared_prefix = t.shared_prefix and not t.gradient_checkpointing
        self.logprobs = (functools.partial(common.token_logprobs_shared_prefix, group_size=self.cfg.algo.group_size)
                         if self.shared_prefix else common.token_logprobs)

    def policy_updates(self) -> int:
        return self.cfg.train.steps * self.cfg.algo.num_iterations

    def train_step(self) -> dict[str, Any]:
        cfg, a = self.cfg, self.cfg.algo
        temp = cfg.rollout.temperature
        t0 = time.perf_counter()
        self.reset_reference_if_due()
        # rollout and reward
        self.policy.eval()
        batch, rb, info = self.rollout_and_score()
        self.policy.train()
        t_rollout = time.perf_counter()
        n = len(batch.completions)
        if n == 0:  # dynamic sampling found no informative group: no update this step
            return self.rl_row(t0, t_rollout, time.perf_counter(), info, batch, rb, {}, 0.0)

        # advantage
        rewards = torch.tensor(rb.total, device=self.device)  # (N,)
        advantages = ADVANTAGES[a.advantage](rewards, a)  # (N,)
        keep = torch.tensor(rb.mask, dtype=torch.float32, device=self.device)  # (N,) sandbox errors etc. masked
        finished = torch.tensor(batch.finished, dtype=torch.float32, device=self.device)  # (N,)
        mask = loss_mask(batch.completion_mask, keep, finished, a.overlong_filter)  # (N, T)
        T = mask.shape[1]
        # data parallel: this process's share of the one-process loss (1 at world 1)
        loss_scale = self.dp.loss_scale(mask, a.loss_agg)

        # log-probs of the reference and of the rollout policy (mu > 1), once per batch
        parts = self.micro_batches(n)  # slices of train.micro_batch_size rows (one slice: the whole batch)
        ids, am = batch.input_ids, batch.attention_mask
        ref_logp = old_logp = None
        if self.ref is not None:
            with torch.inference_mode():
                ref_logp = torch.cat([self.logprobs(self.ref, ids[s], am[s], T, temp)[0] for s in parts])
            ref_logp = ref_logp.clone()  # (N, T) a normal tensor, usable in autograd
        if a.num_iterations > 1:
            with torch.no_grad():
                old_logp = torch.cat([self.logprobs(self.policy, ids[s], am[s], T, temp)[0] for s in parts])

        # loss and mu updates, gradients accumulated over the micro-batches
        stats: dict[str, Any] = {}
        max_norm = cfg.optim.max_grad_norm if cfg.optim.max_grad_norm > 0 else float("inf")
        tokens = float(mask.sum())  # valid tokens of the batch
        for it in range(a.num_iterations):
            self.opt.zero_grad(set_to_none=True)
            loss, logps, entropies = None, [], []
            for s in parts:
                logp, entropy = self.logprobs(self.policy, ids[s], am[s], T, temp, with_entropy=(it == 0))  # (n, T)
                old = logp.detach() if old_logp is None else old_logp[s]  # (n, T)
                part_loss, _ = policy_loss(logp, old, None if ref_logp is None else ref_logp[s], advantages[s],
                                           mask[s], a, cfg.rollout.max_new_tokens)
                scale = loss_scale * micro_batch_scale(a.loss_agg, len(logp), n, float(mask[s].sum()), tokens)
                (part_loss * scale).backward()
                loss = part_loss.detach() * scale if loss is None else loss + part_loss.detach() * scale
                logps.append(logp.detach())
                entropies.append(entropy)
            # gradients (and the loss) summed over data-parallel processes (nothing at world 1)
            loss = self.dp.all_reduce_grads(self.policy.parameters(), loss)
            if not torch.isfinite(loss):  # skip the update; the parameters stay as they were
                self.opt.zero_grad(set_to_none=True)
                stats = {"loss": loss.item(), "nonfinite_loss": True, "lr": self.sched.get_last_lr()[0]}
                break
            grad_norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), max_norm)
            lr = self.sched.get_last_lr()[0]
            self.opt.step()
            self.sched.step()
            if it == 0:
                logp = torch.cat(logps)  # (N, T)
                entropy = torch.cat(entropies)  # (N, T)
                old = logp if old_logp is None else old_logp
                loss_stats = policy_loss_stats(logp, old, ref_logp, advantages, mask, a)
                stats = {"loss": loss.item(), "kl": loss_stats["kl"].item(), "clip_frac": loss_stats["clip_frac"].item(),
                         "entropy": masked_mean(entropy, mask).item(), "grad_norm": grad_norm.item(), "lr": lr}
                clip_unit = float(n) if SURROGATES[a.importance].unit == "sequence" else tokens
                self._stat_weights = {"kl": tokens, "entropy": tokens, "clip_frac": clip_unit}  # what each mean is over
                if isinstance(batch, SampledRolloutBatch) and batch.sampler_logprobs is not None:
                    # mean |logp under the sampler (vLLM) - logp under the trainer| on the sampled tokens
                    stats["rollout/logp_drift"] = logp_drift(batch.sampler_logprobs, logp, batch.completion_mask)
        t_end = time.perf_counter()

        # FLOPs besides generation (counted by rl_row): the once-per-batch forwards and the updates
        # prompt + completion tokens of the trained batch (each group's prompt once with the shared prefix)
        seq_tokens = common.forward_tokens(batch.input_ids, batch.attention_mask, T,
                                           self.shared_prefix, a.group_size)
        n_forward = (self.ref is not None) + (old_logp is not None)
        flops = forward_flops(self.n_params, seq_tokens) * n_forward + train_flops(self.n_params, seq_tokens) * a.num_iterations
        return self.rl_row(t0, t_rollout, t_end, info, batch, rb, stats, flops)
