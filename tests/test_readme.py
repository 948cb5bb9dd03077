"""The README's methods and config-key tables are generated from the registries and current."""
import subprocess
import sys
from pathlib import Path

from grpo_research.config import key_table
from grpo_research.methods import METHODS, methods_table

ROOT = Path(__file__).resolve().parents[1]


def test_readme_tables_are_current():
    readme = (ROOT / "README.md").read_text()
    stale = "stale: regenerate with `python scripts/update_readme_tables.py`"
    assert methods_table() in readme, f"README's methods table is {stale}"
    assert key_table() in readme, f"README's config key table is {stale}"
    out = subprocess.run([sys.executable, "scripts/update_readme_tables.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_methods_table_lists_every_registered_method():
    table = methods_table()
    for name, m in METHODS.items():
        assert f"| `{name}` | {m.doc} |" in table


def test_readme_names_no_path_outside_the_repository():
    readme = (ROOT / "README.md").read_text()
    for needle in ("../", "/work/", "/root/", "/tmp/"):
        assert needle not in readme, f"README names a path outside the repository: {needle}"
