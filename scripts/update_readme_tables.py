"""Regenerate the documentation's tables from the registries: the methods table
(grpo_research.methods) in docs/methods.md, the config key table (grpo_research.config) and
the advantage estimators' options (grpo_research.algorithms.advantages) in docs/config.md, and the
shipped studies (experiments/, grpo_research.studies) in docs/pipeline.md. Each sits between a pair of marker comments, `<!-- generated: NAME -->` and
`<!-- end generated: NAME -->`; tests/test_readme.py fails when either is stale.
Usage: python scripts/update_readme_tables.py [--check]"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_research.algorithms.advantages import options_table  # noqa: E402
from grpo_research.config import key_table  # noqa: E402
from grpo_research.methods import methods_table  # noqa: E402
from grpo_research.studies import studies_table  # noqa: E402

TABLES = {"docs/methods.md": {"methods": methods_table},
          "docs/config.md": {"config keys": key_table, "advantage options": options_table},
          "docs/pipeline.md": {"studies": lambda: studies_table(ROOT / "experiments")}}


def render(text: str, tables: dict, where: str) -> str:
    for name, make in tables.items():
        start, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"{where} has no '{start}' ... '{end}' block")
        text = pattern.sub(lambda m: f"{start}\n{make()}\n{end}", text)
    return text


def main() -> int:
    stale = []
    for rel, tables in TABLES.items():
        path = ROOT / rel
        old = path.read_text()
        new = render(old, tables, rel)
        if new == old:
            continue
        if "--check" in sys.argv[1:]:
            stale.append(rel)
        else:
            path.write_text(new)
            print(f"{rel}: tables updated")
    if stale:
        print(f"{', '.join(stale)}: tables are stale: run python scripts/update_readme_tables.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
