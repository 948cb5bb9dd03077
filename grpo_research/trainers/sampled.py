"""What the methods that learn from verified samples share (rft, online_rft, dpo, online_dpo):
which model samples their training data, `algo.sampler_sync_every`.

- 1 (online): the current policy, every step, as the RL methods sample.
- N > 1 (iterative): a frozen copy of the policy, refreshed at steps 0, N, 2N, ...; the copy is
  checkpointed (it cannot be rebuilt from the policy on resume).
- 0 (offline): the frozen base model for the whole run. Drawing each step's data from the base
  model as the run goes gives the same distribution as drawing the whole data set before
  training (prompts and samples are i.i.d.), with each sample used once; `samples` counts every
  generated completion, so an offline method plots on the same axis as the online ones. The
  frozen base model is the reference when the method has one (DPO), else a copy loaded here.

Each step's problems and sampling seeds follow the run's data RNG and step, as for every
method, so a resumed run draws what the uninterrupted one drew.
"""
from __future__ import annotations

import copy

from grpo_research.models import load_causal_lm
from grpo_research.trainers.base import Trainer


class SampleSourceTrainer(Trainer):
    """A trainer whose data is its sampler's verified samples (`sampler()` each step)."""

    def setup(self, model_path) -> None:
        every = self.cfg.algo.sampler_sync_every
        self._sampler = None  # None: the current policy
        if every == 0:
            if self.ref is not None and not self.cfg.algo.ref_reset_every:
                self._sampler = self.ref
            else:
                self._sampler, _ = load_causal_lm(model_path, self.cfg.model.dtype)
                self._sampler.to(self.device).eval().requires_grad_(False)
                self.cost.register("sampler", self._sampler)
        elif every > 1:
            self._sampler = copy.deepcopy(self.policy).eval().requires_grad_(False)
            self.cost.register("sampler", self._sampler)

    def extra_frozen_models(self) -> int:
        every = self.cfg.algo.sampler_sync_every
        shares_ref = every == 0 and self.needs_reference() and not self.cfg.algo.ref_reset_every
        return int(every != 1 and not shares_ref)

    def sampler(self):
        """The model that samples this step's data (refreshing an iterative copy when due)."""
        every = self.cfg.algo.sampler_sync_every
        if every > 1 and self.step % every == 0:
            self._sampler.load_state_dict(self.policy.state_dict())
        return self.policy if self._sampler is None else self._sampler

    def extra_state(self):
        if self.cfg.algo.sampler_sync_every > 1:
            return {"sampler": self._sampler.state_dict()}
        return {}

    def load_extra_state(self, state) -> None:
        if self.cfg.algo.sampler_sync_every > 1:
            self._sampler.load_state_dict(state["sampler"])
