"""The README is a front door (at most 150 lines, its two set-up commands first); every link in
it and in docs/ resolves (files and #anchors); the methods and config-key tables in docs/ are
generated from the registries and current."""
import re
import subprocess
import sys
from pathlib import Path

from grpo_research.config import key_table
from grpo_research.methods import METHODS, methods_table

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", path.read_text(), re.M)}


def broken_links(page: Path) -> list[str]:
    bad = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue  # no network here: external links are not checked
        file, _, frag = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            bad.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            bad.append(f"{page.relative_to(ROOT)}: {target} (no such heading in {dest.name})")
    return bad


def test_readme_is_short_and_opens_with_the_two_commands():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move detail to docs/"
    block = "\n".join(lines[:6])
    assert "snakemake --cores all ablations" in block and "pytest" in block


def test_every_link_resolves():
    assert len(PAGES) >= 8  # README, RESULTS and the docs pages are all checked
    bad = [b for page in PAGES for b in broken_links(page)]
    assert not bad, "\n".join(bad)


def test_the_link_checker_sees_a_broken_link_and_anchor(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Top part\n[ok](#top-part) [gone](missing.md) [bad](#nowhere) [web](https://x.org/y)\n")
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        bad = broken_links(page)
    finally:
        ROOT = saved
    assert bad == ["p.md: missing.md (no such file)", "p.md: #nowhere (no such heading in p.md)"]


def test_docs_tables_are_current():
    stale = "stale: regenerate with `python scripts/update_readme_tables.py`"
    assert methods_table() in (ROOT / "docs/methods.md").read_text(), f"docs/methods.md's table is {stale}"
    assert key_table() in (ROOT / "docs/config.md").read_text(), f"docs/config.md's key table is {stale}"
    out = subprocess.run([sys.executable, "scripts/update_readme_tables.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_methods_table_lists_every_registered_method():
    table = methods_table()
    for name, m in METHODS.items():
        assert f"| `{name}` | {m.doc} |" in table


def test_docs_name_no_path_outside_the_repository():
    for page in PAGES:
        text = page.read_text()
        for needle in ("/work/", "/root/", "/tmp/"):
            assert needle not in text, f"{page.relative_to(ROOT)} names a path outside the repository: {needle}"
        if page.parent == ROOT:  # docs/ pages link back with ../README.md, inside the repository
            assert "../" not in text, f"{page.name} names a path outside the repository"
