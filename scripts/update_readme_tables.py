"""Regenerate the README's tables from the registries: the methods table (grpo_research.methods)
and the config key table (grpo_research.config). Each sits between a pair of marker comments,
`<!-- generated: NAME -->` and `<!-- end generated: NAME -->`; tests/test_readme.py fails when
either is stale. Usage: python scripts/update_readme_tables.py [--check]"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_research.config import key_table  # noqa: E402
from grpo_research.methods import methods_table  # noqa: E402

TABLES = {"methods": methods_table, "config keys": key_table}


def render(text: str) -> str:
    for name, make in TABLES.items():
        start, end = f"<!-- generated: {name} -->", f"<!-- end generated: {name} -->"
        pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
        if not pattern.search(text):
            raise SystemExit(f"README.md has no '{start}' ... '{end}' block")
        text = pattern.sub(lambda m: f"{start}\n{make()}\n{end}", text)
    return text


def main() -> int:
    path = ROOT / "README.md"
    old = path.read_text()
    new = render(old)
    if "--check" in sys.argv[1:]:
        if new != old:
            print("README.md tables are stale: run python scripts/update_readme_tables.py", file=sys.stderr)
            return 1
        return 0
    if new != old:
        path.write_text(new)
        print("README.md tables updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
