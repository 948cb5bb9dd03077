"""`python -m grpo_research.cli ...`: the same as `grpo-research ...`."""
import sys

from grpo_research.cli import main

sys.exit(main())
