"""`method=rft | online_rft`: rejection-sampling fine-tuning on the verifier's accepted samples.

Paper: Shao et al., DeepSeekMath (arXiv 2402.03300), section 5.2 (RFT and online RFT beside
SFT, DPO, PPO and GRPO). Per step: sample G completions for each of
`rollout.prompts_per_step` prompts from the sampler (`algo.sampler_sync_every`: the frozen base
model for `rft`, the current policy for `online_rft`; grpo_research/trainers/sampled.py), score
them with the task's verifier, keep those the `algo.accept_term` reward term (`correct`) scores
1, and take one optimizer step on the supervised loss over the kept completions' tokens
(grpo_research/algorithms/rft.py: `rft_loss`). A step with no correct sample makes no update.

Metrics rows are the RL methods' (`rl_row`: the reward, lengths and `frac_zero_std` of the
sampled batch, every generated completion counted in `samples`) plus `loss`, `accepted` (kept
completions), `accepted_frac`, `grad_norm`, `lr` and `entropy` (of the policy on the kept tokens).

Departures from the paper:
- The loss is a token mean over the kept completions (the supervised control's loss), not the
  paper's per-completion length normalisation (see algorithms/rft.py).
- Offline RFT draws each step's samples from the frozen base model as the run goes, the same
  distribution as a data set drawn before training, each sample used once (sampled.py).
- Log-probs are those of the policy itself (temperature 1): it is supervised learning on the
  kept text, whatever temperature sampled it.
"""
from __future__ import annotations

import time
from typing import Any

import torch

from grpo_research.algorithms import masked_mean, rft_loss
from grpo_research.trainers import common
from grpo_research.trainers.cost import train_flops
from grpo_research.trainers.sampled import SampleSourceTrainer
from grpo_research.trainers.update import Loss


class RFTTrainer(SampleSourceTrainer):
    uses_reference = False  # no KL term: the sampler, when it is the base model, is loaded by setup

    def train_step(self) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        batch, rb, info = self.rollout_and_score(self.sampler())
        t_rollout = time.perf_counter()
        correct = rb.components[cfg.algo.accept_term]
        accepted = [bool(m) and c is not None and c >= 1.0 for c, m in zip(correct, rb.mask)]
        rows = [i for i, a in enumerate(accepted) if a]
        stats: dict[str, Any] = {"accepted": len(rows), "accepted_frac": len(rows) / max(len(accepted), 1),
                                 "lr": self.sched.get_last_lr()[0]}
        flops = 0.0
        if rows:
            idx = torch.tensor(rows, device=self.device)
            ids, am = batch.input_ids[idx], batch.attention_mask[idx]  # (K, P + T)
            mask = batch.completion_mask[idx].float()  # (K, T)
            T, K = mask.shape[1], len(rows)
            ones = torch.ones(K, device=self.device)
            total = float(mask.sum())

            def loss_fn(s: slice) -> Loss:
                logp, entropy = common.token_logprobs(self.policy, ids[s], am[s], T, 1.0, with_entropy=True)  # (k, T)
                part, _ = rft_loss(logp, mask[s], ones[s])
                return Loss(part, aux=entropy)

            parts = self.micro_batches(K)
            # micro-batch i: its token mean x its share of the kept tokens
            up = self.update(loss_fn, parts, [float(mask[s].sum()) / total for s in parts])
            if up.finite:
                stats["grad_norm"] = up.grad_norm["policy"].item()
            else:
                stats["nonfinite_loss"] = True
            stats.update(loss=up.loss.item(), entropy=masked_mean(torch.cat(up.aux), mask).item())
            self._stat_weights = {"entropy": total}
            flops = train_flops(self.n_params, int(am.sum()))
        t_end = time.perf_counter()
        return self.rl_row(t0, t_rollout, t_end, info, batch, rb, stats, flops)
