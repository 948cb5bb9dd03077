"""Pure tensor functions for the RL algorithms (torch only, no models, no I/O)."""
from grpo_research.algorithms.core import (
    AGGREGATIONS,
    aggregate_loss,
    clip_fraction,
    clipped_surrogate,
    group_relative_advantages,
    kl_estimate,
    masked_mean,
)
from grpo_research.algorithms.ppo import (
    clipped_value_loss,
    explained_variance,
    gae,
    kl_penalized_rewards,
    whiten,
)
from grpo_research.algorithms.variants import (
    ADVANTAGES,
    SURROGATES,
    batch_normalized_advantages,
    rloo_advantages,
    sequence_clip_fraction,
    sequence_clipped_surrogate,
)

__all__ = [
    "clipped_value_loss",
    "explained_variance",
    "gae",
    "kl_penalized_rewards",
    "whiten",
    "ADVANTAGES",
    "SURROGATES",
    "batch_normalized_advantages",
    "rloo_advantages",
    "sequence_clip_fraction",
    "sequence_clipped_surrogate",
    "AGGREGATIONS",
    "aggregate_loss",
    "clip_fraction",
    "clipped_surrogate",
    "group_relative_advantages",
    "kl_estimate",
    "masked_mean",
]
