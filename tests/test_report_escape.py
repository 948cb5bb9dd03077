"""A study whose run dirs have names that are HTML (issue 32: a name holding `<!--` and `<script`
truncated report.html): the report shows the name, as text, everywhere it appears, and no inline
<script> holds a `<` the HTML parser could read as markup."""
import json
import re

import numpy as np

from grpo_research.analysis.study import report_study
from tests.synthetic_study import write_run

NAME = "grpo<script>x&y<!--"  # a variant: run dirs NAME-seed1, NAME-seed2 (a name cannot hold "/")


def test_html_in_a_run_dir_name_cannot_truncate_the_report(tmp_path):
    runs = tmp_path / "runs" / "s"
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        write_run(runs / f"{NAME}-seed{seed}", "grpo", seed, 0.45, 12, evals=3, rng=rng)
        write_run(runs / f"ppo-seed{seed}", "ppo", seed, 0.40, 12, evals=3, rng=rng)
    html = report_study(runs, tmp_path / "results" / "s", n_boot=20, smooth=2).read_text()
    assert html.rstrip().endswith("</html>")
    assert NAME not in html and "<!--" not in html  # nowhere as markup
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    data = [s for s in scripts if "var charts = " in s]
    assert len(data) == 1 and len(scripts) == 2
    assert "<" not in data[0] and "&" not in data[0]  # the HTML tokenizer has nothing to act on in it
    charts = json.loads(re.search(r"var charts = (\[.*?\]);\n", data[0]).group(1))
    labels = {s["label"] for c in charts for s in c["series"]}
    assert f"{NAME} (n=2)" in labels  # the same name, to the charts
    assert "grpo&lt;script&gt;x&amp;y&lt;!--" in html  # and as text in the tables
