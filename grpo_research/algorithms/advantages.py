"""Registered advantage estimators (config `algo.advantage`): rewards of a batch laid out group
after group -> one advantage per completion.

- `group`: GRPO (Shao et al. 2024, arXiv 2402.03300, section 4.1.2): (r - mean_g) / std_g, see
  `core.group_relative_advantages`; `algo.adv_scale=none` is Dr. GRPO (Liu et al. 2025,
  arXiv 2503.20783), `batch` divides by the whole batch's std.
- `rloo`: REINFORCE Leave-One-Out (Kool et al. 2019; Ahmadian et al. 2024, arXiv 2402.14740):
  A_i = r_i - mean_{j != i} r_j = G/(G-1) (r_i - mean_g). No std scaling.
- `reinforce_pp`: REINFORCE++ (Hu 2025, arXiv 2501.03262): A = (r - mean_batch) / std_batch,
  normalised over the whole batch rather than per group.
- `negative_only`: negative sample reinforcement, NSR (Zhu et al. 2025, arXiv 2506.01347): only
  the completions worse than their group's mean are pushed down, A = min(A_group, 0).

Departures: REINFORCE++ in its paper puts a per-token KL penalty in the reward; here the KL
term stays in the loss as in GRPO (beta, `algo.kl_estimator`), so the variants differ only in
the advantage. NSR in its paper gives every incorrect sample the reward -1 with no baseline;
here it is the negative part of the group-relative advantage (as `algo.adv_scale` scales it),
so a group whose completions are all wrong contributes nothing, as in GRPO.

Adding an estimator: one function `f(rewards (N,), algo config) -> advantages (N,)` registered
with `@register_advantage("name")` (say `cross_group=` when it looks beyond a prompt's own
group: data-parallel training then refuses it; `builds_on=` when it calls another estimator,
whose reasons and options it then inherits; `options={"c": Option(1.0, "help", check)}` for
its own parameters, set as `algo.adv_options.c=...`, validated and documented from here with
no edit of grpo_research/config.py), a hand-computed test, and a method preset in
grpo_research/methods.py that selects it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from grpo_research.algorithms.core import group_relative_advantages
from grpo_research.registry import Option, Registry


@dataclass(frozen=True)
class Advantage:
    fn: Callable[[torch.Tensor, object], torch.Tensor]  # (rewards (N,), algo config) -> (N,)
    # why this estimator, under this algo config, needs other groups' rewards (None: it does not)
    cross_group: Callable[[object], str | None]
    # its parameters, `algo.adv_options.<name>` (the config fills in the defaults)
    options: dict[str, Option] = field(default_factory=dict)

    def __call__(self, rewards: torch.Tensor, algo) -> torch.Tensor:
        return self.fn(rewards, algo)


ADVANTAGES: Registry[Advantage] = Registry("advantage estimator")


def register_advantage(name: str, cross_group: str | Callable[[object], str | None] | None = None,
                       builds_on: str | None = None, options: dict[str, Option] | None = None):
    """Decorator: register `fn(rewards, algo) -> advantages` as `algo.advantage=name`.
    `cross_group`: a reason (or a function of the algo config giving one) when it looks across
    groups. `builds_on`: the registered estimator `fn` calls, whose reasons and options it
    inherits (NSR on the group estimator looks across groups whenever that one does).
    `options`: its own parameters, read in `fn` as `algo.adv_options[name]`."""
    own = cross_group if callable(cross_group) else (lambda algo, r=cross_group: r)
    opts = dict(options or {})
    if builds_on is not None:
        inner = ADVANTAGES.lookup(builds_on)
        opts = {**inner.options, **opts}

        def reason(algo):
            return own(algo) or inner.cross_group(algo)
    else:
        reason = own

    def deco(fn):
        ADVANTAGES.register(name, Advantage(fn, reason, opts))
        return fn

    return deco


def options_table() -> str:
    """The Markdown table of every estimator's options (kept in docs/config.md)."""
    rows = ["| `algo.advantage` | option | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{name}` | `algo.adv_options.{key}` | `{opt.default!r}` | {opt.help} |"
             for name, est in ADVANTAGES.items() for key, opt in est.options.items()]
    if len(rows) == 2:
        rows.append("| (none) | | | no registered estimator declares an option |")
    return "\n".join(rows)


def rloo_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """A_i = r_i - mean of the other G-1 rewards of its group; `rewards` 1-D, group after group."""
    if group_size < 2 or rewards.numel() % group_size:
        raise ValueError(f"rewards must hold whole groups of size >= 2, got {rewards.numel()} for G={group_size}")
    r = rewards.float().view(-1, group_size)  # (n_groups, G)
    others = (r.sum(dim=1, keepdim=True) - r) / (group_size - 1)  # (n_groups, G)
    return (r - others).flatten()  # (N,)


def batch_normalized_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """REINFORCE++: (r - mean_batch) / (std_batch + eps), population std; all-equal -> zeros."""
    r = rewards.float()  # (N,)
    centred = r - r.mean()  # (N,)
    if bool((r == r[0]).all()):
        return torch.zeros_like(r)
    return centred / (r.std(correction=0) + eps)  # (N,)


@register_advantage("group", cross_group=lambda a: "algo.adv_scale=batch scales by the whole batch's std; "
                    "use group or none" if a.adv_scale == "batch" else None)
def group(rewards: torch.Tensor, algo) -> torch.Tensor:
    return group_relative_advantages(rewards, algo.group_size, algo.adv_scale, algo.adv_std)


@register_advantage("rloo")
def rloo(rewards: torch.Tensor, algo) -> torch.Tensor:
    return rloo_advantages(rewards, algo.group_size)


@register_advantage("reinforce_pp", cross_group="algo.advantage=reinforce_pp normalises over the whole batch; "
                    "use group or rloo")
def reinforce_pp(rewards: torch.Tensor, algo) -> torch.Tensor:
    return batch_normalized_advantages(rewards)


@register_advantage("negative_only", builds_on="group")
def negative_only(rewards: torch.Tensor, algo) -> torch.Tensor:
    adv = group(rewards, algo)  # (N,)
    return adv.clamp(max=0.0)  # (N,) below-mean completions only
