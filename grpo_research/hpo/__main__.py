import sys

from grpo_research.hpo.cli import main

sys.exit(main())
