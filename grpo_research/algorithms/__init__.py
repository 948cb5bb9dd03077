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

__all__ = [
    "AGGREGATIONS",
    "aggregate_loss",
    "clip_fraction",
    "clipped_surrogate",
    "group_relative_advantages",
    "kl_estimate",
    "masked_mean",
]
