"""The GRPO trainer: rollout -> reward -> advantage -> mu clipped updates, with a frozen
reference model for the KL term.

Paper: Shao et al., DeepSeekMath (arXiv 2402.03300), section 4.1, Algorithm 1 (outcome
supervision). Per step: sample G completions for each of `rollout.prompts_per_step` prompts,
score them with the task's verifier, normalise rewards within each group, and minimise the
clipped surrogate plus beta x KL(pi || pi_ref) (k3 estimator), aggregated as
`algo.loss_agg` says, for `algo.num_iterations` (mu) optimizer steps on the same batch.

The named variants (every method registered in grpo_research/methods.py with this trainer;
`grpo-research train --help` and the methods table in the docs list them) run through this
trainer: their presets (grpo_research/methods.py) choose the registered advantage estimator
(grpo_research/algorithms/advantages.py), importance-ratio surrogate and loss aggregation
(grpo_research/algorithms/loss.py: `policy_loss`), DAPO's dynamic sampling and overlong
filtering; `algo.ref_reset_every` resets the reference to the policy (DeepSeek-R1 resets it
every 400 steps). The loop, evaluation, checkpoints and metrics rows are the shared ones of
grpo_research/trainers/base.py; every optimizer step goes through the update engine
(grpo_research/trainers/update.py).

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

from grpo_research.algorithms import ADVANTAGES, SURROGATES, is_weights, masked_mean, policy_loss, policy_loss_stats
from grpo_research.rollout import SampledRolloutBatch
from grpo_research.rollout.vllm_backend import logp_drift
from grpo_research.trainers import common
from grpo_research.trainers.base import Trainer
from grpo_research.trainers.cost import forward_flops, train_flops
from grpo_research.trainers.update import Loss, micro_batch_scales


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
        t0 = time.perf_counter()
        self.reset_reference_if_due()
        batch, rb, info = self.rollout_and_score()  # G completions per prompt, scored; dynamic sampling
        t_rollout = time.perf_counter()
        n = len(batch.completions)
        if n == 0:  # dynamic sampling found no informative group: no update this step
            return self.rl_row(t0, t_rollout, time.perf_counter(), info, batch, rb, {}, 0.0)
        advantages = ADVANTAGES[a.advantage](torch.tensor(rb.total, device=self.device), a)  # (N,)
        mask = self.loss_mask(batch, rb)  # (N, T) sandbox errors, DAPO's overlong filter
        T, parts = mask.shape[1], self.micro_batches(n)  # micro-batches of train.micro_batch_size rows
        # once per batch: log-probs of the reference and of the rollout policy (mu > 1)
        ref_logp = self.batch_logprobs(self.ref, batch, parts, T) if self.ref is not None else None
        old_logp = self.batch_logprobs(self.policy, batch, parts, T) if a.num_iterations > 1 else None
        # data parallel: this process's share of the one-process loss (1 at world 1)
        scales = micro_batch_scales(parts, mask, a.loss_agg, self.dp.loss_scale(mask, a.loss_agg))
        sampler_logp = self._sampler_logprobs(batch)  # (N, T) for algo.is_correction, else None

        def loss_fn(s: slice, first: bool) -> Loss:
            logp, entropy = self.logprobs(self.policy, batch.input_ids[s], batch.attention_mask[s], T,
                                          cfg.rollout.temperature, with_entropy=first)  # (n, T)
            old = logp.detach() if old_logp is None else old_logp[s]  # (n, T)
            w = None if sampler_logp is None else \
                is_weights(old, sampler_logp[s], mask[s], a.is_correction, a.is_level, a.is_cap)[0]  # (n, T)
            loss, _ = policy_loss(logp, old, None if ref_logp is None else ref_logp[s], advantages[s], mask[s],
                                  a, cfg.rollout.max_new_tokens, is_weight=w)
            return Loss(loss, aux=(logp.detach(), entropy))

        stats: dict[str, Any] = {}
        for it in range(a.num_iterations):  # mu updates on the same batch
            up = self.update(functools.partial(loss_fn, first=it == 0), parts, scales)
            if not up.finite:
                stats = {"loss": up.loss.item(), "nonfinite_loss": True, "lr": up.lr["policy"]}
                break
            if it == 0:
                stats = self._first_update_stats(up, batch, old_logp, ref_logp, advantages, mask, sampler_logp)
        t_end = time.perf_counter()
        return self.rl_row(t0, t_rollout, t_end, info, batch, rb, stats, self._update_flops(batch, T, old_logp))

    def batch_logprobs(self, model, batch, parts: list[slice], T: int) -> torch.Tensor:
        """(N, T) log-probs of the sampled tokens under a model held fixed for the step (no gradient)."""
        with torch.inference_mode():
            logp = torch.cat([self.logprobs(model, batch.input_ids[s], batch.attention_mask[s], T,
                                            self.cfg.rollout.temperature)[0] for s in parts])
        return logp.clone()  # a normal tensor, usable in autograd

    def _sampler_logprobs(self, batch) -> torch.Tensor | None:
        """The sampler's log-probs of the sampled tokens when algo.is_correction asks for them
        (the config check lets it only with a backend that records them), else None."""
        if self.cfg.algo.is_correction == "none":
            return None
        lp = getattr(batch, "sampler_logprobs", None)
        if lp is None:
            raise RuntimeError(f"algo.is_correction={self.cfg.algo.is_correction}: the rollout recorded no sampler log-probs")
        return lp.to(self.device)

    def _first_update_stats(self, up, batch, old_logp, ref_logp, advantages, mask, sampler_logp=None) -> dict[str, Any]:
        """The step's statistics, from the first of the mu updates (before it changed the policy)."""
        a = self.cfg.algo
        logp = torch.cat([x[0] for x in up.aux])  # (N, T)
        entropy = torch.cat([x[1] for x in up.aux])  # (N, T)
        s = policy_loss_stats(logp, logp if old_logp is None else old_logp, ref_logp, advantages, mask, a)
        stats = {"loss": up.loss.item(), "kl": s["kl"].item(), "clip_frac": s["clip_frac"].item(),
                 "entropy": masked_mean(entropy, mask).item(), "grad_norm": up.grad_norm["policy"].item(),
                 "lr": up.lr["policy"]}
        tokens = float(mask.sum())
        clip_unit = float(len(logp)) if SURROGATES[a.importance].unit == "sequence" else tokens
        self._stat_weights = {"kl": tokens, "entropy": tokens, "clip_frac": clip_unit}  # what each mean is over
        if sampler_logp is not None:  # is/ratio_mean, is/ratio_max, is/capped_frac of the trainer-to-sampler ratio
            _, is_stats = is_weights(logp if old_logp is None else old_logp, sampler_logp, mask, a.is_correction,
                                     a.is_level, a.is_cap)
            stats.update({k: v.item() for k, v in is_stats.items()})
            self._stat_weights.update({"is/ratio_mean": tokens, "is/capped_frac": tokens})
        if isinstance(batch, SampledRolloutBatch) and batch.sampler_logprobs is not None:
            # mean |logp under the sampler (vLLM) - logp under the trainer| on the sampled tokens
            stats["rollout/logp_drift"] = logp_drift(batch.sampler_logprobs, logp, batch.completion_mask)
        return stats

    def _update_flops(self, batch, T: int, old_logp) -> float:
        """FLOPs besides generation (counted by rl_row): the once-per-batch forwards and the updates,
        over the prompt + completion tokens of the trained batch (each group's prompt once with the
        shared prefix)."""
        a = self.cfg.algo
        seq_tokens = common.forward_tokens(batch.input_ids, batch.attention_mask, T, self.shared_prefix, a.group_size)
        n_forward = (self.ref is not None) + (old_logp is not None)
        return (forward_flops(self.n_params, seq_tokens) * n_forward
                + train_flops(self.n_params, seq_tokens) * a.num_iterations)
