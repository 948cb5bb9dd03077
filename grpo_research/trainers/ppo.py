"""The PPO trainer (`method=ppo`): rollout -> reward (verifier score minus a per-token KL
penalty) -> critic values -> GAE advantages -> several epochs of minibatch updates of the
clipped policy surrogate, the clipped value loss and an optional entropy bonus.

Papers: Schulman et al., "Proximal Policy Optimization Algorithms" (2017, arXiv 1707.06347);
Schulman et al., "High-Dimensional Continuous Control Using Generalized Advantage Estimation"
(2016, arXiv 1506.02438); Ouyang et al., InstructGPT (2022, arXiv 2203.02155), the per-token KL
penalty in the reward; Shao et al., DeepSeekMath (2024, arXiv 2402.03300), section 4.1: PPO for
LLMs with a value model of the policy's size initialised from the same checkpoint, eq. 1-2.

Per step, the shared rollout and reward of the RL methods (`Trainer.rollout_and_score` in
grpo_research/trainers/base.py, so samples per step are equal across methods):
`algo.group_size` completions for each of `rollout.prompts_per_step` prompts, scored by
`build_reward`; the shared metrics row (`rl_row`), evaluation, loop and checkpoints are
reused too, as are the GRPO options that are not about the advantage
(`algo.overlong_filter`, `algo.ref_reset_every`, `algo.dynamic_sampling`). Then, once per rollout batch and without gradient: log-probs of the rollout
policy, values of the critic, log-probs of the reference (with `ppo.reuse_first_forward`, when
one minibatch holds the batch in one micro-batch, the first epoch's forward with gradient gives
the first two: the same parameters, so the same numbers). With `train.shared_prefix` every
forward of policy, critic and reference computes each group's prompt once, and each
minibatch's rows are taken in rollout order so that a group's rows sit together (the same
update up to float rounding). Per-token rewards are
-beta x KL_t (estimator `ppo.reward_kl_estimator`, k1 by default) plus the score on the last
completion token; GAE(gamma, lambda) gives advantages and returns; advantages are whitened
over the batch's valid tokens. Then `ppo.epochs` passes over shuffled minibatches of
`ppo.minibatch_size` completions, one AdamW step of policy and critic each, on
loss = surrogate + vf_coef x value loss - ent_coef x entropy (+ beta x KL when
`ppo.kl_in_loss`), each term aggregated as `algo.loss_agg` says.

Critic: by default a separate value model, the policy's base checkpoint loaded as a bare trunk
(`AutoModel`, no LM head) plus a scalar head, with its own AdamW (`critic.lr`); with
`critic.shared_trunk` a scalar head on the policy's own trunk (its value-loss gradient then
also trains the trunk through the policy's optimizer). `critic.warmup_steps` first steps
update only the critic.

Defaults (`ppo.*`, `critic.*`) as tuned on the offline default (1 M-parameter char Llama,
arith, policy lr 3e-5 from `optim.lr`, beta 0.04, seed 0; held-out greedy accuracy on 1,000
problems at steps 100/200/300, from 0.26; single seed, so +-2-3 points is noise):
  epochs 2 x minibatch 32, critic lr 1e-4, lambda 0.95     .279 .334 .322
  epochs 4 x minibatch 16, critic lr 3e-4                   .209 .219 .254
  epochs 2 x 32, lambda 1.0                                 .265 .344 .325
  epochs 2 x 32, lambda 1.0, critic lr 3e-4, warm-up 20     .280 .312 .356
  epochs 2 x minibatch 64 (the default)                     .287 .370 .361
  epochs 1 x 64 (no reuse: ratio 1, no clipping)            .321 .390 .375
  epochs 1 x 64, lambda 1.0                                 .339 .385 .367
  GRPO (its defaults)                                       .308 .358 .373
More policy updates per rollout batch at this lr lowered accuracy (and raised KL); lambda
and the critic lr made no difference beyond noise. The default keeps two epochs (so the
clipped ratio does work) over one minibatch of the default 64 completions; `vf_coef` only
matters with `critic.shared_trunk` or grad clipping (AdamW is scale-invariant), untuned.

Departures from the papers:
- The value head is initialised to zero (all values 0 at the start) rather than from a
  reward model (InstructGPT) or at random; `critic.warmup_steps` lets it fit first.
- `algo.num_iterations`, `algo.advantage`, `algo.adv_scale`, `algo.adv_std` and
  `algo.importance` are not used: GAE gives the advantages and `ppo.epochs` x minibatches is
  PPO's inner loop (token-level ratio). The
  policy lr schedule spans (steps - critic warm-up) x epochs x minibatches updates.
- The state after a completion's last token is terminal (value 0), truncated completions
  included. Completions a reward term masks are removed from the loss (as in GRPO).
- Log-probs use logits / temperature, the distribution actually sampled (as in GRPO).
- `kl` in the metrics is the mean of `algo.kl_estimator` between the rollout policy and the
  reference (the same quantity GRPO logs); the reward penalty uses `ppo.reward_kl_estimator`.
- The entropy bonus and value loss use the same aggregation (`algo.loss_agg`) as the
  surrogate. Critic AdamW betas, weight decay, grad clipping and lr schedule shape come from
  `optim`.
- With `critic.shared_trunk`, logits are the LM head applied to the trunk's last hidden state
  (model-specific logit post-processing such as soft-capping is not applied).
"""
from __future__ import annotations

import functools
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModel

from grpo_research.algorithms import clip_fraction, kl_estimate, masked_mean, upper_clip
from grpo_research.algorithms.ppo import (
    explained_variance,
    gae,
    kl_penalized_rewards,
    masked_mean_std,
    ppo_loss,
    token_entropy,
    value_clip_fraction,
    whiten,
)
from grpo_research.models import DTYPES, lora
from grpo_research.rollout.sampling import step_seed
from grpo_research.trainers import common
from grpo_research.trainers.base import Trainer
from grpo_research.trainers.cost import forward_flops, train_flops
from grpo_research.trainers.update import Loss, OptimGroup, micro_batch_scales


class ValueHead(torch.nn.Module):
    """A scalar head on hidden states: (..., H) -> (...). Zero-initialised (values start at 0)."""

    def __init__(self, hidden_size: int, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.proj = torch.nn.Linear(hidden_size, 1, dtype=dtype)
        torch.nn.init.zeros_(self.proj.weight)
        torch.nn.init.zeros_(self.proj.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.proj(hidden).squeeze(-1).float()  # (...)


class ValueModel(torch.nn.Module):
    """A separate critic: a transformer trunk (no LM head) and a scalar value head."""

    def __init__(self, trunk: torch.nn.Module, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.trunk = trunk
        self.head = ValueHead(trunk.config.hidden_size, dtype)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, n_completion: int,
                group_size: int | None = None) -> torch.Tensor:
        """Values (N, T): V of the state before each of the last `n_completion` tokens (each
        shared prompt computed once when `group_size` is given, see `_trunk_hidden`)."""
        hidden = _trunk_hidden(self.trunk, input_ids, attention_mask, n_completion, group_size)  # (N, T, H)
        return self.head(hidden)  # (N, T)


def _trunk_hidden(trunk, input_ids: torch.Tensor, attention_mask: torch.Tensor, n_completion: int,
                  group_size: int | None = None) -> torch.Tensor:
    """Last hidden states (N, T, H) at the positions that predict the last `n_completion` tokens.
    With `group_size`, runs of rows sharing a prompt compute it once
    (`common.shared_prefix_outputs`; equal up to float rounding), else one plain forward."""
    if group_size is not None:
        hidden = common.shared_prefix_outputs(trunk, input_ids, attention_mask, n_completion,
                                              group_size=group_size, hidden=True)
        if hidden is not None:
            return hidden
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)  # (N, L)
    out = trunk(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids, use_cache=False)
    return out.last_hidden_state[:, -(n_completion + 1) : -1]  # (N, T, H)


def load_value_model(model_path: str | Path, dtype: str = "float32") -> ValueModel:
    """The policy's base checkpoint as a bare trunk (its LM head dropped) plus a scalar head."""
    from grpo_research.model_source import hub_load

    with hub_load(model_path):
        trunk = AutoModel.from_pretrained(str(model_path), dtype=DTYPES[dtype])
    return ValueModel(trunk, DTYPES[dtype])


class PPOTrainer(Trainer):
    """The shared loop, rollout, evaluation and checkpoints, with a critic and PPO's update."""

    def _updates_per_step(self) -> int:
        """Optimizer steps per rollout batch: epochs x minibatches."""
        n = self.cfg.rollout.prompts_per_step * self.cfg.algo.group_size
        return self.cfg.ppo.epochs * -(-n // min(self.cfg.ppo.minibatch_size, n))

    def policy_updates(self) -> int:
        return max(1, (self.cfg.train.steps - self.cfg.critic.warmup_steps) * self._updates_per_step())

    def setup(self, model_path: str | Path) -> None:
        cfg = self.cfg
        c, o = cfg.critic, cfg.optim
        self.shared = c.shared_trunk
        if self.shared:
            hidden = self.policy.config.hidden_size
            self.critic: torch.nn.Module = ValueHead(hidden, DTYPES[cfg.model.dtype])
        else:
            self.critic = load_value_model(model_path, cfg.model.dtype)
            if cfg.model.lora_rank:  # its own adapters on its own frozen copy of the base, and the head
                self.critic.trunk = lora.add_adapters(self.critic.trunk, cfg.model)
        if cfg.train.gradient_checkpointing and not self.shared:
            common.enable_activation_checkpointing(self.critic.trunk)
        self.critic.to(next(self.policy.parameters()).device).train()
        # every forward (rollout-policy, critic, reference, minibatch updates) computes each shared
        # prompt once, as GRPO's do; minibatch rows are then taken in rollout order so that a
        # group's rows sit together (the same update up to float rounding); not with gradient
        # checkpointing, under which transformers drops the KV cache this needs
        t = cfg.train
        self.shared_prefix = t.shared_prefix and not t.gradient_checkpointing
        self.prefix_group = cfg.algo.group_size if self.shared_prefix else None
        self.ref_logprobs = (functools.partial(common.token_logprobs_shared_prefix, group_size=cfg.algo.group_size)
                             if self.shared_prefix else common.token_logprobs)
        self.critic_opt = common.make_optimizer(lora.trainable(self.critic), c.lr, o.weight_decay, (o.beta1, o.beta2))
        self.critic_sched = common.make_scheduler(self.critic_opt, 0, cfg.train.steps * self._updates_per_step(),
                                                  o.schedule, o.min_lr_ratio)
        self.groups["critic"] = OptimGroup(lora.trainable(self.critic), self.critic_opt, self.critic_sched)
        self.cost.register("critic", self.critic, self.critic_opt)
        self.n_critic_params = sum(q.numel() for q in self.critic.parameters())

    # ------------------------------------------------------------ forward passes
    def _forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, T: int, *, values: bool,
                 entropy: bool, entropy_grad: bool = False):
        """(logp (N, T), entropy (N, T) or None, values (N, T) or None) in one pass per model."""
        temp = self.cfg.rollout.temperature
        G = self.prefix_group
        if self.shared:
            hidden = _trunk_hidden(lora.body(self.policy), input_ids, attention_mask, T, G)  # (N, T, H)
            logits = self.policy.get_output_embeddings()(hidden).float() / temp  # (N, T, V)
        else:
            logits = None
            if G is not None:
                logits = common.shared_prefix_outputs(self.policy, input_ids, attention_mask, T, group_size=G)
            if logits is None:
                position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)  # (N, L)
                logits = self.policy(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                     logits_to_keep=T + 1, use_cache=False).logits[:, :-1]
            logits = logits.float() / temp  # (N, T, V)
        logp_all = torch.log_softmax(logits, dim=-1)  # (N, T, V)
        targets = input_ids[:, -T:]  # (N, T)
        logp = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (N, T)
        ent = None
        if entropy:
            with torch.set_grad_enabled(torch.is_grad_enabled() and entropy_grad):
                ent = token_entropy(logits)  # (N, T)
        vals = None
        if values:
            if self.shared:
                vals = self.critic(hidden)  # (N, T)
            else:
                vals = self.critic(input_ids, attention_mask, T, G)  # (N, T)
        return logp, ent, vals

    def _values_only(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, T: int) -> torch.Tensor:
        """Critic values (N, T) with gradient to the critic only (critic warm-up)."""
        G = self.prefix_group
        if self.shared:
            with torch.no_grad():
                hidden = _trunk_hidden(lora.body(self.policy), input_ids, attention_mask, T, G)  # (N, T, H)
            return self.critic(hidden)  # (N, T)
        return self.critic(input_ids, attention_mask, T, G)  # (N, T)

    def _minibatch_forward(self, batch, j: torch.Tensor, T: int, critic_only: bool, first):
        """(logp, entropy, values) (k, T) of rows `j` with gradient: values alone during the
        critic warm-up; the rows of `first` (the forward done before GAE) when given."""
        ids, am = batch.input_ids[j], batch.attention_mask[j]  # (k, L)
        ent_coef = self.cfg.ppo.ent_coef
        if critic_only:
            return None, None, self._values_only(ids, am, T)
        if first is not None:
            logp, ent, values = (x[j] if x is not None else None for x in first)  # (k, T) each
            return logp, ent if ent_coef > 0 else None, values
        return self._forward(ids, am, T, values=True, entropy=ent_coef > 0, entropy_grad=True)

    def _batch_forwards(self, batch, T: int, reuse: bool):
        """Once per rollout batch: (first, old_logp, entropy, old_values, ref_logp). With `reuse`
        (the first epoch's one minibatch is the whole batch in one micro-batch) the forward with
        gradient is done here and kept as `first`, its detached outputs the old values (same
        parameters, same numbers); otherwise micro-batches of train.micro_batch_size rows, no gradient."""
        p, N = self.cfg.ppo, len(batch.completions)
        first = None
        if reuse:
            first = self._forward(batch.input_ids, batch.attention_mask, T, values=True, entropy=True,
                                  entropy_grad=p.ent_coef > 0)  # (N, T) each, with gradient
            old_logp, entropy, old_values = (x.detach() for x in first)
        with torch.no_grad():
            if first is None:
                parts = [self._forward(batch.input_ids[s], batch.attention_mask[s], T, values=True, entropy=True)
                         for s in self.micro_batches(N)]
                old_logp, entropy, old_values = (torch.cat(x) for x in zip(*parts))  # (N, T) each
            ref_logp = None
            if self.ref is not None:
                ref_logp = torch.cat([self.ref_logprobs(self.ref, batch.input_ids[s], batch.attention_mask[s], T,
                                                        self.cfg.rollout.temperature)[0]
                                      for s in self.micro_batches(N)])  # (N, T)
        return first, old_logp, entropy, old_values, ref_logp

    # ------------------------------------------------------------ one training step
    def train_step(self) -> dict[str, Any]:
        cfg, a, p = self.cfg, self.cfg.algo, self.cfg.ppo
        t0 = time.perf_counter()
        self.reset_reference_if_due()
        batch, rb, info = self.rollout_and_score()  # the shared rollout and reward
        t_rollout = time.perf_counter()
        N = len(batch.completions)
        if N == 0:  # dynamic sampling (when enabled) found no informative group: no update
            return self.rl_row(t0, t_rollout, time.perf_counter(), info, batch, rb, {}, 0.0)
        scores = torch.tensor(rb.total, device=self.device)  # (N,) verifier score per completion
        mask = self.loss_mask(batch, rb)  # (N, T) sandbox errors, the overlong filter
        T = mask.shape[1]
        critic_only = self.step < cfg.critic.warmup_steps
        mb = min(p.minibatch_size, N)
        reuse = p.reuse_first_forward and not critic_only and mb == N and len(self.micro_batches(N)) == 1
        first, old_logp, entropy, old_values, ref_logp = self._batch_forwards(batch, T, reuse)
        with torch.no_grad():  # per-token rewards (score minus the KL penalty), GAE, whitening
            token_rewards = kl_penalized_rewards(scores, old_logp, ref_logp, mask, 0.0 if p.kl_in_loss else a.beta,
                                                 p.reward_kl_estimator)  # (N, T)
            advantages, returns = gae(token_rewards, old_values, mask, p.gamma, p.lam)  # (N, T), (N, T)
            adv_used = whiten(advantages, mask) if p.whiten_advantages else advantages  # (N, T)

        gen = torch.Generator().manual_seed(step_seed(cfg.seed, self.step, stream=1))
        acc: dict[str, list[float]] = defaultdict(list)
        lrs = (0.0 if critic_only else self.sched.get_last_lr()[0], self.critic_sched.get_last_lr()[0])
        trained_tokens, nonfinite = 0, False
        for epoch in range(p.epochs):
            perm = torch.randperm(N, generator=gen)  # (N,)
            for start in range(0, N, mb):
                idx = perm[start : start + mb]  # (n,)
                if self.shared_prefix:  # a group's rows together, so its prompt is computed once
                    idx = idx.sort().values
                m = mask[idx]  # (n, T)
                if m.sum() == 0:
                    continue

                def loss_fn(s: slice) -> Loss:  # micro-batch s of the minibatch
                    j = idx[s]  # (k,)
                    logp, ent, values = self._minibatch_forward(batch, j, T, critic_only, first if epoch == 0 else None)
                    loss, st = ppo_loss(logp, old_logp[j], adv_used[j], values, old_values[j], returns[j], m[s],
                                        clip_eps=a.clip_eps, clip_eps_high=a.clip_eps_high, value_clip=p.value_clip,
                                        vf_coef=p.vf_coef, entropy=ent, ent_coef=p.ent_coef,
                                        ref_logp=ref_logp[j] if p.kl_in_loss and ref_logp is not None else None,
                                        beta=a.beta, kl_estimator=a.kl_estimator, loss_agg=a.loss_agg,
                                        max_len=cfg.rollout.max_new_tokens)
                    return Loss(loss, st, (None if logp is None else logp.detach(), values.detach()))

                parts = self.micro_batches(len(idx))
                up = self.update(loss_fn, parts, micro_batch_scales(parts, m, a.loss_agg),
                                 step=["critic"] if critic_only else None)
                if not up.finite:  # skipped; the parameters stay as they were
                    nonfinite = True
                    continue
                trained_tokens += sum(common.forward_tokens(batch.input_ids[idx[s]], batch.attention_mask[idx[s]], T,
                                                            self.shared_prefix, a.group_size) for s in parts)
                self._minibatch_stats(acc, up, idx, m, old_logp, adv_used, old_values, returns)
        t_end = time.perf_counter()
        stats = self._step_stats(acc, lrs, critic_only, mask, old_logp, ref_logp, entropy, old_values, returns,
                                 advantages, token_rewards, scores)
        if nonfinite:
            stats["nonfinite_loss"] = True
        return self.rl_row(t0, t_rollout, t_end, info, batch, rb, stats,
                           self._update_flops(batch, T, first, critic_only, trained_tokens))

    def _minibatch_stats(self, acc, up, idx, m, old_logp, adv_used, old_values, returns) -> None:
        """Append one minibatch update's statistics to `acc` (their means are the step's)."""
        a, p = self.cfg.algo, self.cfg.ppo
        eps_high = upper_clip(a.clip_eps, a.clip_eps_high)
        values = torch.cat([x[1] for x in up.aux])  # (n, T)
        with torch.no_grad():
            if "policy" in up.grad_norm:
                logp = torch.cat([x[0] for x in up.aux])  # (n, T)
                acc["pg_loss"].append(up.stats["pg_loss"].item())
                acc["grad_norm"].append(up.grad_norm["policy"].item())
                acc["clip_frac"].append(clip_fraction(logp, old_logp[idx], adv_used[idx], m, a.clip_eps, eps_high).item())
                acc["approx_kl"].append(masked_mean(kl_estimate(logp, old_logp[idx], "k3"), m).item())
            acc["loss"].append(up.loss.item())
            acc["value_loss"].append(up.stats["value_loss"].item())
            acc["critic_grad_norm"].append(up.grad_norm["critic"].item())
            acc["value_clip_frac"].append(value_clip_fraction(values, old_values[idx], returns[idx], m, p.value_clip).item())

    def _step_stats(self, acc, lrs, critic_only, mask, old_logp, ref_logp, entropy, old_values, returns, advantages,
                    token_rewards, scores) -> dict[str, Any]:
        a = self.cfg.algo
        with torch.no_grad():
            adv_mean, adv_std = masked_mean_std(advantages, mask)  # (), ()
            kl_metric = kl_estimate(old_logp, ref_logp, a.kl_estimator) if ref_logp is not None else None  # (N, T)
            kl_penalty = -(token_rewards.sum(dim=1) - scores * (mask.sum(dim=1) > 0))  # (N,) beta x sum of KL
        mean = lambda k: sum(acc[k]) / len(acc[k]) if acc[k] else 0.0  # noqa: E731
        return {
            "loss": mean("loss"),
            "pg_loss": mean("pg_loss"),
            "kl": masked_mean(kl_metric, mask).item() if kl_metric is not None else 0.0,
            "kl_penalty": kl_penalty.mean().item(),
            "approx_kl": mean("approx_kl"),
            "clip_frac": mean("clip_frac"),
            "entropy": masked_mean(entropy, mask).item(),
            "grad_norm": mean("grad_norm"),
            "lr": lrs[0],
            "value_loss": mean("value_loss"),
            "value_clip_frac": mean("value_clip_frac"),
            "explained_variance": explained_variance(old_values, returns, mask).item(),
            "value_mean": masked_mean(old_values, mask).item(),
            "return_mean": masked_mean(returns, mask).item(),
            "adv_mean": adv_mean.item(),
            "adv_std": adv_std.item(),
            "critic_grad_norm": mean("critic_grad_norm"),
            "critic_lr": lrs[1],
            "critic_only": critic_only,
        }

    def _update_flops(self, batch, T: int, first, critic_only: bool, trained_tokens: int) -> float:
        """FLOPs besides generation (counted by rl_row): the once-per-batch forwards and the updates."""
        a, N = self.cfg.algo, len(batch.completions)
        total_seq = sum(common.forward_tokens(batch.input_ids[s], batch.attention_mask[s], T, self.shared_prefix,
                                              a.group_size) for s in self.micro_batches(N))  # one pass over the batch
        # old log-probs and values (unless the first update's forward gave them), reference
        flops = forward_flops(self.n_params, total_seq) * ((first is None) + (self.ref is not None))
        if first is None:
            flops += forward_flops(self.n_critic_params, total_seq)  # old values (the head alone when shared)
        flops += train_flops(self.n_critic_params, trained_tokens)
        if not critic_only:
            flops += train_flops(self.n_params, trained_tokens)
        elif self.shared:
            flops += forward_flops(self.n_params, trained_tokens)  # warm-up: the trunk runs forward only
        return flops

    # ------------------------------------------------------------ checkpoints
    def extra_state(self) -> dict[str, Any]:
        return {"critic": self.critic.state_dict(), "critic_optimizer": self.critic_opt.state_dict(),
                "critic_scheduler": self.critic_sched.state_dict()}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        self.critic.load_state_dict(state["critic"])
        self.critic_opt.load_state_dict(state["critic_optimizer"])
        self.critic_sched.load_state_dict(state["critic_scheduler"])

