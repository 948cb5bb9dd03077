"""Pure tensor functions for the RL algorithms (torch only, no models, no I/O), and the
registries of their named choices: `ADVANTAGES` (algo.advantage), `SURROGATES`
(algo.importance), `AGGREGATIONS` (algo.loss_agg), `KL_ESTIMATORS` (algo.kl_estimator),
`DPO_LOSSES` (dpo_loss's loss_type), `IS_CORRECTIONS` (algo.is_correction)."""
from grpo_research.algorithms.advantages import (
    ADVANTAGES,
    batch_normalized_advantages,
    register_advantage,
    rloo_advantages,
)
from grpo_research.algorithms.core import (
    KL_ESTIMATORS,
    clip_fraction,
    clipped_surrogate,
    group_relative_advantages,
    kl_estimate,
    masked_mean,
    upper_clip,
)
from grpo_research.algorithms.dpo import DPO_LOSSES, dpo_implicit_rewards, dpo_loss, preference_pairs
from grpo_research.algorithms.loss import (
    AGGREGATIONS,
    SURROGATES,
    aggregate_loss,
    loss_mask,
    micro_batch_scale,
    policy_loss,
    policy_loss_stats,
    register_aggregation,
    sequence_clip_fraction,
    sequence_clipped_surrogate,
)
from grpo_research.algorithms.off_policy import IS_CORRECTIONS, is_weights, sampler_ratio
from grpo_research.algorithms.ppo import (
    clipped_value_loss,
    explained_variance,
    gae,
    kl_penalized_rewards,
    whiten,
)
from grpo_research.algorithms.rft import rft_loss

__all__ = [
    "ADVANTAGES",
    "AGGREGATIONS",
    "DPO_LOSSES",
    "IS_CORRECTIONS",
    "KL_ESTIMATORS",
    "SURROGATES",
    "aggregate_loss",
    "batch_normalized_advantages",
    "clip_fraction",
    "clipped_surrogate",
    "clipped_value_loss",
    "dpo_implicit_rewards",
    "dpo_loss",
    "explained_variance",
    "gae",
    "is_weights",
    "group_relative_advantages",
    "kl_estimate",
    "kl_penalized_rewards",
    "loss_mask",
    "masked_mean",
    "micro_batch_scale",
    "policy_loss",
    "policy_loss_stats",
    "preference_pairs",
    "register_advantage",
    "register_aggregation",
    "rft_loss",
    "sampler_ratio",
    "rloo_advantages",
    "sequence_clip_fraction",
    "sequence_clipped_surrogate",
    "upper_clip",
    "whiten",
]
