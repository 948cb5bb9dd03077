"""Reward terms (verifiers) and their weighted composition."""
from grpo_research.rewards.base import REWARDS, RewardBatch, WeightedReward, build_reward, register_reward
from grpo_research.rewards import verifiers as _verifiers  # noqa: F401  (correct, format)
from grpo_research.rewards import library as _library  # noqa: F401  (code_tests, json_schema, tool_call, ...)

__all__ = ["REWARDS", "RewardBatch", "WeightedReward", "build_reward", "register_reward"]
