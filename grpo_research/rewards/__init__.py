"""Reward terms (verifiers) and their weighted composition."""
from grpo_research.rewards.base import REWARDS, RewardBatch, WeightedReward, build_reward, register_reward
from grpo_research.rewards import verifiers as _verifiers  # noqa: F401  (registers the built-in terms)

__all__ = ["REWARDS", "RewardBatch", "WeightedReward", "build_reward", "register_reward"]
