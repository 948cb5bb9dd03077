"""One step's rollout with its scores: G completions per prompt from the sampling model, scored
by the reward, with DAPO's dynamic sampling (groups whose rewards are all equal dropped and
more prompts sampled, up to `algo.max_resample_rounds` extra rounds; every generated completion
counted) and this data-parallel process's share of the prompts. Shared by every method that
samples (grpo_research/trainers/base.py: `Trainer.rollout_and_score`)."""
from __future__ import annotations

import random

import torch

from grpo_research.rewards import RewardBatch, build_reward
from grpo_research.rollout.batch import RolloutBatch, batch_to, select_and_concat
from grpo_research.rollout.sampling import step_seed


class InfrastructureFailure(RuntimeError):
    """A step could not be scored at all (every completion masked): exit 1 with one line."""


def rollout_and_score(cfg, generate, reward_fn, model, tokenizer, task, data_rng, dp, step: int,
                      device) -> tuple[RolloutBatch, RewardBatch, dict[str, float]]:
    """(batch, rewards, info) of step `step` (0-based): `generate` (the rollout backend) samples
    `algo.group_size` completions for each of this process's share of `rollout.prompts_per_step`
    problems drawn from `data_rng` (every process draws the same problems), `reward_fn` scores
    them; info counts `generated` completions and tokens, `dropped_groups`, `rollout_rounds`
    and `zero_std_generated` (groups of equal rewards before any is dropped). The batch's tensors
    are moved to `device`. Raises InfrastructureFailure when every completion of the step, on
    every process, was masked by the reward."""
    a = cfg.algo
    G, want = a.group_size, cfg.rollout.prompts_per_step
    lo, hi = dp.shard(want)  # data parallel: this process's prompts of the step (all of them at world 1)
    sampler = {} if cfg.rollout.sampler == "torch" else {"sampler": cfg.rollout.sampler, "row_offset": lo * G}
    batches, scores, keep_rows = [], [], []
    kept_groups = generated = dropped = zero_std = 0
    for round_ in range(1 + (a.max_resample_rounds if a.dynamic_sampling else 0)):
        problems = task.train_problems(data_rng, want)[lo:hi]  # every process draws the same problems
        seed = step_seed(cfg.seed, step, stream=round_)
        if not sampler:  # torch sampler: independent draws per process (rank 0 keeps the seed)
            seed ^= dp.rank << 40
        batch = generate(model, tokenizer, problems, G, max_new_tokens=cfg.rollout.max_new_tokens,
                         temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p, seed=seed, **sampler)
        rb = reward_fn(batch.problems, batch.completions, batch.finished)
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
        batch = select_and_concat(batches, keep_rows, tokenizer.pad_token_id)
        rb = RewardBatch(
            total=[s.total[i] for s, rows in zip(scores, keep_rows) for i in rows],
            components={k: [s.components[k][i] for s, rows in zip(scores, keep_rows) for i in rows]
                        for k in scores[0].components},
            mask=[s.mask[i] for s, rows in zip(scores, keep_rows) for i in rows],
        )
    if not dp.any(any(rb.mask) or not rb.mask):  # every completion of the step, on every process, masked
        raise InfrastructureFailure(
            f"step {step + 1}: every one of the {len(rb.mask)} completions hit an infrastructure failure "
            "(the reward masked them all, e.g. sandbox errors): the reward is broken, not the policy; nothing "
            "was trained on this step. Fix it and rerun the same command to resume from the last checkpoint")
    batch = batch_to(batch, device)  # the vLLM backend returns CPU tensors
    info = {"generated": generated, "dropped_groups": dropped, "rollout_rounds": len(batches),
            "generated_tokens": sum(b.completion_tokens for b in batches), "zero_std_generated": zero_std}
    return batch, rb, info


def base_correctness(cfg, generate, model, tokenizer, task, n_prompts: int, stream: int) -> float:
    """The mean `correct` score of `model`'s samples on `n_prompts` training problems x G, sampled
    as the rollout samples (seeds from `stream`); its own problem RNG, so that the run's data
    order is untouched and a resumed run measures the same value (the `random` reward's p: base)."""
    rng = random.Random(f"base-correctness-{cfg.seed}")
    correct = build_reward(task, {"correct": 1.0}, {})
    scores: list[float] = []
    for i in range(0, n_prompts, cfg.rollout.prompts_per_step):
        problems = task.train_problems(rng, min(cfg.rollout.prompts_per_step, n_prompts - i))
        batch = generate(model, tokenizer, problems, cfg.algo.group_size, max_new_tokens=cfg.rollout.max_new_tokens,
                         temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                         seed=step_seed(cfg.seed, i, stream=stream))
        rb = correct(batch.problems, batch.completions, batch.finished)
        scores += [c for c in rb.components["correct"] if c is not None]
    if not scores:
        raise InfrastructureFailure("reward term random (p: base): no base-model sample could be graded")
    return sum(scores) / len(scores)
