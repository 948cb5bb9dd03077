"""The study report's pass@k / maj@k section (grpo_research/analysis/passk.py, plots.plot_passk,
report.passk_html): a fake study whose eval files are scored by `score_predictions` itself, the
base model beside two variants, the numbers of the table against the files."""
from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from grpo_research.analysis.stats import bootstrap_columns
from grpo_research.cli.report import main as report_main
from grpo_research.evaluation.score import score_predictions

N_PROBLEMS, SAMPLES, TEMPERATURE = 12, 8, 1.0


def _eval_summary(p_correct: float, seed: int, samples: int = SAMPLES) -> dict:
    """An eval file as `grpo-research eval` writes it: arith graded for real on synthetic
    completions (right with probability p_correct, else one of two wrong sums; 1 in 10 cut off)."""
    from grpo_research.tasks import get_task

    task = get_task("arith")
    rng = random.Random(seed)
    preds = []
    for p in task.heldout_problems(N_PROBLEMS):
        for _ in range(samples):
            answer = int(p.answer) if rng.random() < p_correct else int(p.answer) + rng.choice((1, 10))
            preds.append({"task_id": p.id, "completion": f"#### {answer}", "finished": rng.random() > 0.1})
    summary, _ = score_predictions(task, preds)
    summary.update(n_problems=N_PROBLEMS, missing_tasks=0, missing_task_ids=[],
                   decoding={"greedy": samples == 1, "samples": samples,
                             "temperature": None if samples == 1 else TEMPERATURE, "seed": None, "max_new_tokens": 8})
    return summary


def _run(d: Path, method: str, seed: int | None, evals: dict[str, dict]) -> None:
    (d / "eval").mkdir(parents=True)
    if seed is not None:
        (d / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": seed}))
        (d / "metrics.jsonl").write_text(json.dumps({"step": 0, "samples": 0, "eval/accuracy": 0.2}) + "\n")
        (d / "summary.json").write_text(json.dumps({"method": method, "seed": seed, "steps": 1, "samples": 8,
                                                    "final_accuracy": 0.3}))
    for name, summary in evals.items():
        (d / "eval" / f"{name}.json").write_text(json.dumps(summary))


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """grpo (3 seeds), ppo (one seed) and the base model, each on arith (greedy) and arith_pass8."""
    runs = tmp_path_factory.mktemp("passk") / "runs" / "toy"
    greedy = {"arith": {"benchmark": "arith", "pass@1": 0.3, "pass@k": {"1": {"value": 0.3, "ci95": [0.1, 0.6]}}}}
    _run(runs / "_base_model", "base", None, {**greedy, "arith_pass8": _eval_summary(0.25, 0)})
    for seed in (1, 2, 3):
        _run(runs / f"grpo-seed{seed}", "grpo", seed, {**greedy, "arith_pass8": _eval_summary(0.55, seed)})
    _run(runs / "ppo-seed1", "ppo", 1, {**greedy, "arith_pass8": _eval_summary(0.4, 9)})
    return runs


def _file(runs: Path, run: str) -> dict:
    return json.loads((runs / run / "eval" / "arith_pass8.json").read_text())


def test_the_report_shows_pass_at_k_and_maj_at_k_of_the_base_model_and_the_variants(study, tmp_path):
    out = tmp_path / "results"
    assert report_main(["study", "--runs", str(study), "--out", str(out), "--n-boot", "500",
                        "--variants", "grpo,ppo"]) == 0
    assert (out / "figures" / "passk_arith_pass8.png").stat().st_size > 10_000
    assert not (out / "figures" / "passk_arith.png").exists()  # greedy: one sample per problem, no curve
    table = pd.read_csv(out / "passk.csv")
    assert set(table.benchmark) == {"arith_pass8"}
    assert list(dict.fromkeys(table.variant)) == ["base model", "grpo", "ppo"]
    for metric in ("pass@k", "maj@k"):
        assert sorted(set(table[table.metric == metric].k)) == [1, 2, 4, 8]
    # base model and a one-seed variant: the file's value and its interval over problems
    for variant, run in (("base model", "_base_model"), ("ppo", "ppo-seed1")):
        f = _file(study, run)
        for metric in ("pass@k", "maj@k"):
            for k in (1, 8):
                r = table[(table.variant == variant) & (table.metric == metric) & (table.k == k)].iloc[0]
                assert (r["mean"], r["low"], r["high"]) == pytest.approx(
                    (f[metric][str(k)]["value"], *f[metric][str(k)]["ci95"]))
                assert (r["n_seeds"], r["interval"]) == (1, "problems")
    # three seeds: the mean of the files, the bootstrap interval over seeds
    files = [_file(study, f"grpo-seed{s}") for s in (1, 2, 3)]
    for metric in ("pass@k", "maj@k"):
        matrix = np.array([[f[metric][str(k)]["value"] for k in (1, 2, 4, 8)] for f in files])
        mean, low, high = bootstrap_columns(matrix, n_boot=500, seed=0)
        g = table[(table.variant == "grpo") & (table.metric == metric)].sort_values("k")
        assert g["mean"].tolist() == pytest.approx(mean.tolist()) and g["low"].tolist() == pytest.approx(low.tolist())
        assert g["high"].tolist() == pytest.approx(high.tolist()) and set(g.interval) == {"seeds"}
    base = _file(study, "_base_model")
    assert base["maj@k"]["8"]["value"] != base["pass@k"]["8"]["value"]  # the fixture tells them apart
    md = (out / "passk.md").read_text()
    assert f"temperature {TEMPERATURE}, {N_PROBLEMS} problems x {SAMPLES} samples per problem" in md
    cells = [f"{100 * base[m][k]['value']:.1f} [{100 * base[m][k]['ci95'][0]:.1f}, {100 * base[m][k]['ci95'][1]:.1f}]"
             for m, k in (("pass@k", "1"), ("pass@k", "8"), ("maj@k", "8"))]
    assert f"| base model (one model, problems) | {' | '.join(cells)} |" in md
    grpo_p8 = 100 * float(np.mean([f["pass@k"]["8"]["value"] for f in files]))
    assert f"| grpo (n=3) | " in md and f"{grpo_p8:.1f} [" in md.split("| grpo (n=3) | ")[1].split("\n")[0]
    html = (out / "report.html").read_text()
    section = html.split("pass@k and maj@k: the base model against the final models")[1]
    assert ">base model</td>" in section and "maj@8 (%)" in section and "pass@8 (%)" in section
    assert f"temperature {TEMPERATURE}, {N_PROBLEMS} problems x {SAMPLES} samples per problem" in section
    assert section.count('src="data:image/png;base64,') >= 1


def test_a_sampled_eval_file_without_its_decoding_is_named(study, tmp_path, capsys):
    runs = tmp_path / "runs"
    import shutil

    shutil.copytree(study, runs)
    f = runs / "ppo-seed1" / "eval" / "arith_pass8.json"
    data = json.loads(f.read_text())
    del data["decoding"]
    f.write_text(json.dumps(data))
    assert report_main(["aggregate", "--runs", str(runs), "--out", str(tmp_path / "out"), "--n-boot", "50"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{f}: no 'decoding' or 'n_problems'" in err[0]


def test_files_of_an_entry_with_fewer_samples_limit_its_k(study, tmp_path):
    """A base model sampled 4 times: every line stops at k = 4; the caption names both settings."""
    from grpo_research.analysis.load import load_study_runs
    from grpo_research.analysis.passk import passk_settings, passk_table, settings_caption
    from grpo_research.analysis.study import base_model_run

    import shutil

    runs_dir = tmp_path / "runs"
    shutil.copytree(study, runs_dir)
    (runs_dir / "_base_model" / "eval" / "arith_pass8.json").write_text(json.dumps(_eval_summary(0.25, 0, samples=4)))
    runs, base = load_study_runs(runs_dir), base_model_run(runs_dir)
    table = passk_table(runs, base, ["grpo", "ppo"], n_boot=50)
    assert set(table.k) == {1, 2, 4}
    settings = passk_settings([base, *runs], ["arith_pass8"])["arith_pass8"]
    assert settings_caption(settings).startswith("eval files differ: ") and len(settings) == 2


def test_code_benchmarks_get_pass_at_k_alone_and_greedy_studies_no_section(tmp_path):
    """No maj@k in a code benchmark's files: one panel, maj@k n/a. Only greedy entries: no section."""
    def code_file(values):
        return {"benchmark": "humaneval", "pass@1": values[0], "n_problems": 10,
                "decoding": {"samples": 4, "temperature": 0.8},
                "pass@k": {str(k): {"value": v, "ci95": [v / 2, (1 + v) / 2]} for k, v in zip((1, 2, 3, 4), values)}}

    runs = tmp_path / "runs"
    _run(runs / "_base_model", "base", None, {"he4": code_file([0.1, 0.15, 0.18, 0.2])})
    _run(runs / "grpo-seed1", "grpo", 1, {"he4": code_file([0.2, 0.3, 0.35, 0.4])})
    out = tmp_path / "out"
    assert report_main(["study", "--runs", str(runs), "--out", str(out), "--n-boot", "50"]) == 0
    table = pd.read_csv(out / "passk.csv")
    assert set(table.metric) == {"pass@k"} and sorted(set(table.k)) == [1, 2, 4]
    assert "| base model (one model, problems) | 10.0 [5.0, 55.0] | 20.0 [10.0, 60.0] | n/a |" in \
        (out / "passk.md").read_text()
    assert (out / "figures" / "passk_he4.png").exists()
    greedy = tmp_path / "greedy"
    _run(greedy / "grpo-seed1", "grpo", 1, {"arith": {"benchmark": "arith", "pass@1": 0.3,
                                                      "pass@k": {"1": {"value": 0.3, "ci95": [0.1, 0.6]}}}})
    assert report_main(["study", "--runs", str(greedy), "--out", str(tmp_path / "g"), "--n-boot", "50"]) == 0
    assert "pass@k and maj@k" not in (tmp_path / "g" / "report.html").read_text()
    assert not list((tmp_path / "g" / "figures").glob("passk_*.png"))
    assert "_No benchmark evaluated with several samples per problem._" in (tmp_path / "g" / "passk.md").read_text()
