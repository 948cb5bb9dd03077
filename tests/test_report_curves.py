"""What report.html shows of a study with the supervised control (issue 18): the equal-samples
panels hold only the arms trained on the sample budget, training curves are smoothed over full
windows and say so, differences are paired by seed once per set of numbers (never an overlap
read as "no difference"), and the interactive charts are inlined (nothing fetched)."""
import json
import re

import pandas as pd
import pytest

from grpo_research.analysis.aggregate import curve_table
from grpo_research.analysis.comparisons import against_best, same_numbers
from grpo_research.analysis.load import load_study_runs
from grpo_research.analysis.study import report_study
from tests.synthetic_study import write_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    root = tmp_path_factory.mktemp("curves")
    runs = write_study(root / "runs" / "s", seeds=(1, 2), steps=40)
    report = report_study(runs, root / "results" / "s", n_boot=200, smooth=5)
    return runs, report


def _charts(html):
    return json.loads(re.search(r"var charts = (\[.*?\]);\n", html).group(1).replace("<\\/", "</"))


def test_equal_samples_panels_leave_out_the_wall_time_control(study):
    runs, report = study
    meta = json.loads((report.parent / "summary.json").read_text())
    assert meta["wall_variants"] == ["sft_control-wall"]
    charts = {c["title"]: c for c in _charts(report.read_text())}
    acc = charts["Held-out accuracy"]
    assert not [s for s in acc["series"] if s["label"].startswith("sft_control-wall")]
    assert any(s["label"].startswith("sft_control (") for s in acc["series"])
    assert max(acc["x"]) == 40 * 64  # the budget, not the wall-time control's 5x
    html = report.read_text()
    assert "Not shown: sft_control-wall (trained on more samples than the budget)" in html
    # the wall-time control keeps its own panel
    assert (report.parent / "figures" / "curve_eval_accuracy_wall.png").exists()


def test_training_curves_are_smoothed_over_full_windows_and_say_so(study):
    runs, report = study
    grpo = [r for r in load_study_runs(runs) if r.variant == "grpo"]
    curves = curve_table(grpo, smooth=5, n_boot=50)
    reward = curves[curves.metric == "reward_mean"]
    assert reward["samples"].min() == 5 * 64  # no point averages fewer than 5 steps
    raw = [r["reward_mean"] for r in grpo[0].train[:5]]
    one = curve_table(grpo[:1], smooth=5, n_boot=10)
    first = one[one.metric == "reward_mean"].iloc[0]["mean"]
    assert first == pytest.approx(sum(raw) / 5)
    assert "trailing rolling mean over 5 steps per run, full windows only" in report.read_text()


def test_differences_are_paired_once_per_set_of_numbers(study):
    runs, report = study
    final = pd.read_csv(report.parent / "final.csv")
    assert same_numbers(final) == {"heldout (trainer)": "arith"}  # the same evaluations twice
    pairs = against_best(final)
    best = final[final.benchmark == "arith"].sort_values("mean").iloc[-1]["variant"]
    assert len(pairs) == final["variant"].nunique() - 1 and all(best in (o["a"], o["b"]) for o in pairs)
    assert all(o["paired"] for o in pairs)
    html = report.read_text()
    assert html.count("against each other variant</h4>") == 1
    assert "the same numbers" in html and "Where intervals overlap" not in html
    assert "no difference" not in html.split("Differences from the highest mean")[1].split("<h2>")[0]
    # the equal-wall-time control (trained on more samples) is not the reference of the table
    equal = final[(final.benchmark == "arith") & (final.variant != "sft_control-wall")]
    best_equal = equal.sort_values("mean").iloc[-1]["variant"]
    assert best == "sft_control-wall" and f"arith (and heldout (trainer): the same numbers): {best_equal} against" in html
    assert "Not in this table: sft_control-wall" in html
    assert {o["a"] for o in against_best(final, {"sft_control-wall"})} | {o["b"] for o in against_best(
        final, {"sft_control-wall"})} == set(equal["variant"])


def test_the_report_is_one_file_with_its_chart_library_inlined(study):
    _, report = study
    html = report.read_text()
    assert "uPlot 1.6.32, MIT licence" in html and 'name=viewport' in html
    assert not re.search(r"(src|href)=\"(?!data:)[^\"#]", html), "the report must not load any external file"
    assert not re.search(r"https?://(?!www\.w3\.org)", html.split("<script>")[0])


def test_benchmarks_evaluated_in_training_get_curves(tmp_path):
    """train.eval_benchmarks rows (eval/<benchmark>/pass@k, maj@k, with _lo/_hi) become curves
    in curves.csv, a static figure and an interactive chart; their intervals do not."""
    runs = write_study(tmp_path / "runs" / "s", seeds=(1, 2), steps=20)
    for d in runs.iterdir():
        rows = [json.loads(l) for l in (d / "metrics.jsonl").read_text().splitlines()]
        for r in rows:
            if "eval/accuracy" in r:
                r.update({"eval/gsm8k/pass@1": r["eval/accuracy"] / 2, "eval/gsm8k/pass@1_lo": 0.0,
                          "eval/gsm8k/pass@1_hi": 1.0, "eval/gsm8k/pass@4": r["eval/accuracy"],
                          "eval/gsm8k/maj@4": r["eval/accuracy"] / 3, "eval/gsm8k/finished": 1.0})
        (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = report_study(runs, tmp_path / "results" / "s", n_boot=50, smooth=2)
    curves = pd.read_csv(report.parent / "curves.csv")
    bench = sorted(m for m in set(curves.metric) if m.startswith("eval/gsm8k"))
    assert bench == ["eval/gsm8k/maj@4", "eval/gsm8k/pass@1", "eval/gsm8k/pass@4"]
    grpo = curves[(curves.metric == "eval/gsm8k/pass@1") & (curves.variant == "grpo")]
    acc = curves[(curves.metric == "eval/accuracy") & (curves.variant == "grpo")]
    assert list(grpo["samples"]) == list(acc["samples"]) and (grpo["mean"].to_numpy() == acc["mean"].to_numpy() / 2).all()
    assert (report.parent / "figures" / "curve_eval_gsm8k_pass@4.png").exists()
    charts = {c["title"]: c for c in _charts(report.read_text())}
    assert charts["gsm8k pass@4 during training"]["ylabel"] == "pass@4 (%)"
    assert "gsm8k maj@4 during training" in charts and not [t for t in charts if "_lo" in t or "finished" in t]
