"""The metrics row of an RL step (grpo_research/trainers/base.py: `Trainer.rl_row`): the step's
per-row values gathered over the data-parallel processes in rank order (the one-process batch
order), counts and FLOPs summed, mean statistics combined by what each is over, and the
reward, group, length and mask metrics computed from them (keys: tracking/__init__.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch


@dataclass
class GlobalStep:
    """One step's values over every data-parallel process (this process's own at world 1)."""

    info: dict[str, Any]  # generated, generated_tokens, dropped_groups, rollout_rounds, zero_std_generated
    stats: dict[str, Any]  # the trainer's statistics, means combined over processes
    flops: float
    rewards: torch.Tensor  # (N,)
    components: dict[str, list[float | None]]  # each reward term per row (None: masked)
    masks: list[float]  # (N,) 1: the row entered the loss
    finished: list[float]  # (N,) 1: ended with EOS
    lengths: torch.Tensor  # (N,) completion tokens


def global_step(dp, info, stats, flops, rewards, components, masks, finished, lengths,
                weights: dict[str, float]) -> GlobalStep:
    """Gather the per-row values of every process in rank order, sum the counts and FLOPs, and
    combine each mean statistic (`kl`, `entropy`, `clip_frac`) from the processes' means and
    what they are over (`weights`), in one all-reduce (`dp.gather_step`; the identity at world 1)."""
    names = list(components)
    cols = torch.tensor([rewards.tolist(), [float(m) for m in masks], [float(f) for f in finished],
                         lengths.tolist(),
                         *[[math.nan if v is None else float(v) for v in components[k]] for k in names]],
                        dtype=torch.float64)  # (4 + terms, n)
    means = [k for k in ("kl", "entropy", "clip_frac") if k in stats and k in weights]
    scalars = [info["generated"], info["generated_tokens"], info["dropped_groups"], flops]
    for k in means:
        scalars += [stats[k] * weights[k], weights[k]]
    scalars.append(info["zero_std_generated"])
    cols, sums = dp.gather_step(cols, scalars)
    info = {**info, "generated": int(sums[0]), "generated_tokens": int(sums[1]), "dropped_groups": int(sums[2]),
            "zero_std_generated": int(sums[-1])}
    stats = dict(stats)
    for i, k in enumerate(means):
        stats[k] = dp.combine_mean(stats[k], sums[4 + 2 * i], sums[5 + 2 * i])
    components = {k: [None if math.isnan(v) else v for v in cols[4 + i].tolist()] for i, k in enumerate(names)}
    return GlobalStep(info, stats, sums[3], cols[0].float(), components, cols[1].tolist(), cols[2].tolist(),
                      cols[3].float())


def rl_metrics(g: GlobalStep, group_size: int) -> dict[str, Any]:
    """The row's reward, statistics, group, length and mask metrics, in the row's key order."""
    rewards, lengths, info, G = g.rewards, g.lengths, g.info, group_size
    groups = rewards.view(-1, G)
    return {
        "reward_mean": rewards.mean().item() if len(rewards) else float("nan"),
        "reward_std": rewards.std(correction=0).item() if len(rewards) else float("nan"),
        **{f"reward/{k}": _mean(v) for k, v in g.components.items()},
        "frac_zero_std": (groups == groups[:, :1]).all(dim=1).float().mean().item() if len(rewards) else 1.0,
        "frac_zero_std_generated": info["zero_std_generated"] / max(info["generated"] // G, 1),
        **g.stats,
        "completion_len": lengths.mean().item() if len(rewards) else 0.0,
        "completion_len_std": lengths.std(correction=0).item() if len(rewards) else 0.0,
        **lengths_by_outcome(lengths.tolist(), g.components.get("correct")),
        "truncated_frac": 1.0 - sum(g.finished) / max(len(g.finished), 1),
        "masked_frac": 1.0 - sum(g.masks) / max(len(g.masks), 1),
        "dropped_groups": info["dropped_groups"],
        "rollout_rounds": info["rollout_rounds"],
    }


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
