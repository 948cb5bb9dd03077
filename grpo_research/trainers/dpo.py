"""`method=dpo | online_dpo`: DPO on preference pairs built from verified samples.

Paper: Rafailov et al., DPO (arXiv 2305.18290); online DPO as in Guo et al. (arXiv
2402.04792), where the pairs come from the current policy; DeepSeekMath (arXiv 2402.03300)
section 5.2 places DPO beside RFT, PPO and GRPO. Per step: sample G completions for each of
`rollout.prompts_per_step` prompts from the sampler (`algo.sampler_sync_every`: the frozen base
model for `dpo`, the current policy for `online_dpo`, a copy refreshed every N steps when N > 1;
grpo_research/trainers/sampled.py), score them with the task's verifier, pair a correct
completion (one the `algo.accept_term` reward term scores 1) with an incorrect one of the same
prompt (`preference_pairs`: min(#correct, #incorrect) disjoint pairs per group), and take one optimizer step on the mean DPO loss of the pairs against the
frozen reference (the base model), with beta = `dpo.beta` and `dpo.loss_type` /
`dpo.label_smoothing` (grpo_research/algorithms/dpo.py). A step without a pair makes no update.

Metrics rows are the RL methods' (`rl_row`: every generated completion counted in `samples`)
plus `loss`, `pairs`, `dpo/accuracy` (share of pairs whose implicit reward ranks the chosen
one higher), `dpo/margin` (mean chosen-minus-rejected implicit reward), `dpo/chosen_reward`,
`dpo/rejected_reward`, `grad_norm`, `lr` and `entropy` (of the policy on the paired tokens).

Departures from the paper:
- Pairs come from the verifier (correct vs incorrect), not from human or AI preferences.
- Sequence log-probs are sums over the completion's tokens up to and including EOS, of the
  policy itself (temperature 1), whatever temperature sampled the pair.
- Offline DPO draws each step's pairs from the frozen base model as the run goes: the same
  distribution as a preference data set built before training, each pair used once (one epoch).
"""
from __future__ import annotations

import time
from typing import Any

import torch

from grpo_research.algorithms import dpo_implicit_rewards, dpo_loss, masked_mean, preference_pairs
from grpo_research.trainers import common
from grpo_research.trainers.cost import forward_flops, train_flops
from grpo_research.trainers.sampled import SampleSourceTrainer
from grpo_research.trainers.update import Loss


class DPOTrainer(SampleSourceTrainer):
    def needs_reference(self) -> bool:
        return True  # the DPO loss is relative to the reference; there is no KL term (algo.beta 0)

    def train_step(self) -> dict[str, Any]:
        cfg, a = self.cfg, self.cfg.algo
        t0 = time.perf_counter()
        self.reset_reference_if_due()
        batch, rb, info = self.rollout_and_score(self.sampler())
        t_rollout = time.perf_counter()
        correct = torch.tensor([c is not None and c >= 1.0 for c in rb.components[cfg.algo.accept_term]])  # (N,)
        chosen, rejected = preference_pairs(correct, torch.tensor(rb.mask, dtype=torch.bool), a.group_size)  # (P,)
        P = len(chosen)
        stats: dict[str, Any] = {"pairs": P, "lr": self.sched.get_last_lr()[0]}
        flops = 0.0
        if P:
            T = batch.completion_mask.shape[1]

            def loss_fn(lo: int) -> Loss:
                """Pairs lo .. lo + per: their chosen rows then their rejected rows."""
                idx = torch.cat([chosen[lo:lo + per], rejected[lo:lo + per]]).to(self.device)  # (2k,)
                k = len(idx) // 2
                ids, am = batch.input_ids[idx], batch.attention_mask[idx]  # (2k, P + T)
                mask = batch.completion_mask[idx].float()  # (2k, T)
                with torch.inference_mode():
                    ref_seq = (common.token_logprobs(self.ref, ids, am, T)[0] * mask).sum(1)  # (2k,)
                ref_seq = ref_seq.clone()
                logp, entropy = common.token_logprobs(self.policy, ids, am, T, 1.0, with_entropy=True)  # (2k, T)
                seq = (logp * mask).sum(1)  # (2k,)
                losses = dpo_loss(seq[:k], seq[k:], ref_seq[:k], ref_seq[k:], cfg.dpo.beta,
                                  label_smoothing=cfg.dpo.label_smoothing, loss_type=cfg.dpo.loss_type)  # (k,)
                rewards = torch.stack([dpo_implicit_rewards(seq[:k].detach(), ref_seq[:k], cfg.dpo.beta),
                                       dpo_implicit_rewards(seq[k:].detach(), ref_seq[k:], cfg.dpo.beta)])  # (2, k)
                tokens = int(am.sum())
                return Loss(losses.sum() / P,  # this micro-batch's share of the mean over all pairs
                            aux=(rewards, entropy, mask, forward_flops(self.n_params, tokens) + train_flops(self.n_params, tokens)))

            per = max(1, (cfg.train.micro_batch_size or 2 * P) // 2)  # pairs per micro-batch
            parts = list(range(0, P, per))
            up = self.update(loss_fn, parts, [1.0] * len(parts))
            if up.finite:
                stats["grad_norm"] = up.grad_norm["policy"].item()
            else:
                stats["nonfinite_loss"] = True
            r = torch.cat([x[0] for x in up.aux], dim=1)  # (2, P) implicit rewards of the chosen and rejected completions
            masks = [x[2] for x in up.aux]
            stats.update({
                "loss": up.loss.item(),
                "dpo/accuracy": (r[0] > r[1]).float().mean().item(),
                "dpo/margin": (r[0] - r[1]).mean().item(),
                "dpo/chosen_reward": r[0].mean().item(),
                "dpo/rejected_reward": r[1].mean().item(),
                "entropy": masked_mean(torch.cat([x[1] for x in up.aux]), torch.cat(masks)).item(),
            })
            self._stat_weights = {"entropy": float(sum(m.sum() for m in masks))}
            flops = sum(x[3] for x in up.aux)
        t_end = time.perf_counter()
        return self.rl_row(t0, t_rollout, t_end, info, batch, rb, stats, flops)

