"""Regenerate the config key table at the end of README.md from grpo_research.config."""
from pathlib import Path

from grpo_research.config import key_table

readme = Path(__file__).resolve().parents[1] / "README.md"
text = readme.read_text()
head = text[: text.index("| key | default | meaning |")]
readme.write_text(head + key_table() + "\n")
