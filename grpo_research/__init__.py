"""grpo-research: GRPO, PPO and their variants on Hugging Face models with verifiable rewards."""

__version__ = "0.1.0"
