"""Aggregation maths and the report (grpo_research/analysis/, `grpo-research report`): the bootstrap interval against a direct
computation, curves and tables from synthetic run dirs, a self-contained report.html."""
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from grpo_research.analysis.aggregate import TRAINER_HELDOUT, curve_table, final_table, natural_key
from grpo_research.analysis.comparisons import comparisons
from grpo_research.analysis.gains import gains_sentences, gains_table, verdict, wall_curve_table
from grpo_research.analysis.load import load_study_runs
from grpo_research.analysis.stats import bootstrap_columns, bootstrap_mean_ci, intervals_overlap
from grpo_research.cli.report import main as analysis_main

ROOT = Path(__file__).resolve().parents[1]


def _direct_bootstrap(values, n_boot, seed, level=0.95):
    """The textbook loop: resample seeds with replacement, take the mean, read percentiles."""
    rng = np.random.default_rng(seed)
    x = np.asarray(values, dtype=float)
    idx = rng.integers(0, len(x), size=(n_boot, len(x)))  # same draws as grpo_research.analysis.stats
    means = [x[row].mean() for row in idx]
    return x.mean(), np.percentile(means, 2.5), np.percentile(means, 97.5)


def test_bootstrap_matches_direct_computation():
    values = [0.31, 0.42, 0.38, 0.27, 0.45]
    got = bootstrap_mean_ci(values, n_boot=4000, seed=123)
    want = _direct_bootstrap(values, 4000, 123)
    assert np.allclose(got, want, rtol=0, atol=1e-12)
    assert got[1] <= got[0] <= got[2]


def test_bootstrap_columns_resample_whole_seeds():
    rng = np.random.default_rng(0)
    m = rng.normal(size=(4, 6))  # 4 seeds x 6 points of a curve
    mean, low, high = bootstrap_columns(m, n_boot=3000, seed=7)
    for j in range(m.shape[1]):
        _, lo, hi = _direct_bootstrap(m[:, j], 3000, 7)
        assert low[j] == pytest.approx(lo, abs=1e-12) and high[j] == pytest.approx(hi, abs=1e-12)
    assert np.allclose(mean, m.mean(axis=0))


def test_bootstrap_agrees_with_normal_theory_for_many_seeds():
    x = np.random.default_rng(1).normal(loc=2.0, scale=1.0, size=400)
    mean, lo, hi = bootstrap_mean_ci(x, n_boot=20000, seed=0)
    half = 1.96 * x.std(ddof=1) / np.sqrt(len(x))
    assert (hi - lo) / 2 == pytest.approx(half, rel=0.05)
    assert mean == pytest.approx(x.mean())


def test_bootstrap_edge_cases():
    assert bootstrap_mean_ci([0.5]) == (0.5, 0.5, 0.5)
    assert all(np.isnan(bootstrap_mean_ci([])))
    assert intervals_overlap((0, 1), (1, 2)) and not intervals_overlap((0, 1), (1.01, 2))
    assert sorted(["grpo-G16", "grpo-G2", "grpo-G8"], key=natural_key) == ["grpo-G2", "grpo-G8", "grpo-G16"]


# ---------------------------------------------------------------- synthetic study
def _write_run(d: Path, method: str, seed: int, acc: list[float], bench: float, steps: int = 20, g: int = 4,
               step_s: float = 0.5):
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": seed}))
    rows = []
    for i, a in enumerate(acc):
        s = i * (steps // (len(acc) - 1))
        rows.append({"step": s, "samples": s * 2 * g, "eval/accuracy": a})
    for s in range(1, steps + 1):
        rows.append({"step": s, "samples": s * 2 * g, "reward_mean": 0.1 * s + seed, "kl": 0.01 * s,
                     "entropy": 1.0 - 0.01 * s, "completion_len": 9.0, "step_s": step_s, "rollout_s": 0.3,
                     "update_s": 0.2, "cost/peak_mem_mb": 100.0 + s, "cost/model_state_mb": 12.0,
                     "cost/gen_tokens_per_s": 500.0, "cost/samples_per_s": 16.0, "cost/mfu": 0.01,
                     "cost/reference_param_mb": 1.0, "cost/reference_grad_mb": 0.0,
                     **({"cost/critic_param_mb": 1.0, "cost/critic_grad_mb": 1.0, "cost/critic_optim_mb": 2.0}
                        if method == "ppo" else {})})
    rows.sort(key=lambda r: (r["step"], "eval/accuracy" not in r))
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "summary.json").write_text(json.dumps({"method": method, "seed": seed, "steps": steps,
                                                "samples": steps * 2 * g, "initial_accuracy": acc[0],
                                                "final_accuracy": acc[-1]}))
    (d / "eval").mkdir()
    (d / "eval" / "arith.json").write_text(json.dumps({"benchmark": "arith", "pass@1": bench}))


@pytest.fixture()
def study_dir(tmp_path):
    runs = tmp_path / "runs" / "toy"
    for seed, (a, b) in enumerate([(0.30, 0.31), (0.34, 0.35), (0.32, 0.33)], start=1):
        _write_run(runs / f"grpo-seed{seed}", "grpo", seed, [0.2, 0.25, a], b)
        _write_run(runs / f"ppo-lam0.95-seed{seed}", "ppo", seed, [0.2, 0.22, a - 0.2], b - 0.2)
    (runs / "ppo-lam0.95-seed9").mkdir()  # unfinished run (no summary.json): ignored
    return runs


def test_final_table_and_overlaps(study_dir):
    runs = load_study_runs(study_dir)
    assert len(runs) == 6
    final = final_table(runs, ["ppo-lam0.95", "grpo"], n_boot=2000, seed=0)
    assert list(dict.fromkeys(final["variant"])) == ["ppo-lam0.95", "grpo"]
    row = final[(final.variant == "grpo") & (final.benchmark == "arith")].iloc[0]
    assert row["n_seeds"] == 3 and row["mean"] == pytest.approx(0.33)
    lo_hi = _direct_bootstrap([0.31, 0.35, 0.33], 2000, 0)[1:]
    assert (row["low"], row["high"]) == pytest.approx(lo_hi)
    assert set(final["benchmark"]) == {"arith", TRAINER_HELDOUT}
    (o,) = [o for o in comparisons(final) if o["benchmark"] == "arith"]
    # every seed: grpo 0.2 above ppo -> paired difference 0.2 with a zero-width interval
    assert o["paired"] and o["n"] == 3 and o["shown"] and o["higher"] == "grpo"
    assert (o["paired_difference"], o["low"], o["high"]) == pytest.approx((0.2, 0.2, 0.2))


def test_comparisons_pair_common_seeds_and_say_when_they_cannot():
    from grpo_research.analysis.comparisons import comparison_sentence

    final = pd.DataFrame([
        # a: seeds 1 2 3 4; b: seeds 2 3 4 5 -> common 2 3 4, differences 0.02, -0.01, 0.05
        {"variant": "a", "benchmark": "x", "mean": 0.30, "low": 0.2, "high": 0.4, "interval": "seeds",
         "seeds": "1 2 3 4", "values": "0.3000 0.3200 0.2900 0.3500"},
        {"variant": "b", "benchmark": "x", "mean": 0.28, "low": 0.2, "high": 0.4, "interval": "seeds",
         "seeds": "2 3 4 5", "values": "0.3000 0.3000 0.3000 0.2200"},
        {"variant": "base model", "benchmark": "x", "mean": 0.10, "low": 0.08, "high": 0.12, "interval": "problems",
         "seeds": "", "values": "0.1000"},
    ])
    by = {(o["a"], o["b"]): o for o in comparisons(final)}
    ab = by[("a", "b")]
    # mean 0.02, sd 0.03, t(0.975, 2) x 0.03 / sqrt(3) = 0.074524
    assert ab["paired"] and ab["n"] == 3 and not ab["shown"]
    assert (ab["paired_difference"], ab["low"], ab["high"]) == pytest.approx((0.02, 0.02 - 0.074524, 0.02 + 0.074524), abs=1e-6)
    assert "paired by seed, n=3" in comparison_sentence(ab) and "no difference shown" in comparison_sentence(ab)
    base = by[("a", "base model")]
    assert not base["paired"] and base["why"] == "one model" and base["shown"]  # [0.2, 0.4] vs [0.08, 0.12]
    assert "not paired by seed (one model)" in comparison_sentence(base)


def test_curves_mean_over_seeds(study_dir):
    curves = curve_table(load_study_runs(study_dir), smooth=1, n_boot=500)
    reward = curves[(curves.variant == "grpo") & (curves.metric == "reward_mean")].sort_values("samples")
    assert reward["samples"].tolist() == [8 * s for s in range(1, 21)]
    assert reward["mean"].iloc[0] == pytest.approx(0.1 + 2.0)  # seeds 1, 2, 3 offset the reward by the seed
    assert (reward["low"] <= reward["mean"]).all() and (reward["mean"] <= reward["high"]).all()
    acc = curves[(curves.variant == "grpo") & (curves.metric == "eval/accuracy")]
    assert acc["mean"].iloc[-1] == pytest.approx(100 * 0.32)  # percent


def test_cli_writes_tables_figures_and_self_contained_report(study_dir, tmp_path):
    out = tmp_path / "results" / "toy"
    assert analysis_main(["study", "--runs", str(study_dir), "--out", str(out), "--n-boot", "500",
                          "--variants", "grpo,ppo-lam0.95"]) == 0
    for name in ("final.csv", "final.md", "cost.csv", "cost.md", "curves.csv", "runs.csv", "summary.json",
                 "report.html"):
        assert (out / name).exists(), name
    pngs = sorted(p.name for p in (out / "figures").glob("*.png"))
    assert {"curve_reward_mean.png", "curve_eval_accuracy.png", "curve_kl.png", "curve_entropy.png",
            "curve_completion_len.png", "final_arith.png"} <= set(pngs)
    html = (out / "report.html").read_text()
    assert html.count("src=\"data:image/png;base64,") >= len(pngs)
    assert not re.search(r"(src|href)=\"(?!data:)[^\"#]", html), "the report must not load any external file"
    assert "Differences from the highest mean" in html and "interval excludes 0" in html
    md = (out / "final.md").read_text()
    assert "| grpo |" in md and "(n=3)" in md and "(paired by seed, n=3): the interval excludes 0" in md
    cost = pd.read_csv(out / "cost.csv")
    assert cost.set_index("variant").loc["grpo", "peak memory (MiB)"] == pytest.approx(120.0)
    assert cost.set_index("variant").loc["grpo", "MFU (%)"] == pytest.approx(1.0)
    # the critic's state (PPO's 1 + 1 + 2 MiB; none for GRPO) and the reference, as columns of their own
    by = cost.set_index("variant")
    assert by.loc["ppo-lam0.95", "critic state (MiB)"] == pytest.approx(4.0)
    assert by.loc["grpo", "critic state (MiB)"] == 0.0
    assert by.loc["grpo", "reference (MiB)"] == by.loc["ppo-lam0.95", "reference (MiB)"] == pytest.approx(1.0)
    assert "critic state (MiB)" in (out / "cost.md").read_text() and "critic state (MiB)" in html
    assert analysis_main(["index", "--results", str(tmp_path / "results")]) == 0
    index = (tmp_path / "results" / "index.html").read_text()
    assert 'href="toy/report.html"' in index


# ---------------------------------------------------------------- the supervised control
@pytest.fixture()
def control_study(tmp_path):
    """grpo (10 s of training), ppo (6 s), the equal-samples control (0.1 above grpo every seed)
    and the equal-wall-time control (40 steps x 0.25 s: evaluations at 0, 2.5, 5, 7.5, 10 s)."""
    runs = tmp_path / "runs" / "ctl"
    for seed, a in {1: 0.30, 2: 0.34, 3: 0.32}.items():
        _write_run(runs / f"grpo-seed{seed}", "grpo", seed, [0.2, 0.25, a], a)
        _write_run(runs / f"ppo-seed{seed}", "ppo", seed, [0.2, 0.21, a - 0.2], a - 0.2, step_s=0.3)
        _write_run(runs / f"sft_control-seed{seed}", "sft_control", seed, [0.2, 0.3, a + 0.1], a + 0.1)
        wall = runs / f"sft_control-wall-seed{seed}"
        _write_run(wall, "sft_control", seed, [0.2, 0.3, 0.4, 0.5, 0.6], 0.6, steps=40, step_s=0.25)
        (wall / "wall_budget.json").write_text(json.dumps({"target_s": 10.0}))
    return runs


def test_gains_over_base_and_control_are_paired_by_seed(control_study):
    runs = load_study_runs(control_study)
    gains = gains_table(runs, ["grpo", "ppo"], n_boot=2000, seed=0).set_index("variant")
    assert list(gains.index) == ["grpo", "ppo"]  # the controls are what RL is compared with, not rows
    g = gains.loc["grpo"]
    # final - step-0 accuracy per seed: 0.10, 0.14, 0.12; mean 0.12, sd 0.02, Student-t (2 df) half-width
    # 4.302653 x 0.02 / sqrt(3) = 0.049683
    want = (0.12, 0.12 - 0.049683, 0.12 + 0.049683)
    assert (g["vs_base_mean"], g["vs_base_low"], g["vs_base_high"]) == pytest.approx(want, abs=1e-6)
    assert g["vs_base_verdict"] == "RL higher"
    assert g["vs_control_mean"] == pytest.approx(-0.10) and g["vs_control_high"] == pytest.approx(-0.10)
    assert g["vs_control_verdict"] == "control higher" and g["vs_control_n"] == 3
    # equal wall time: grpo trained 20 x 0.5 = 10 s -> the wall control's 0.6 at 10 s
    assert g["train_s"] == pytest.approx(10.0)
    assert g["vs_wall_mean"] == pytest.approx(np.mean([0.30, 0.34, 0.32]) - 0.6)
    # ppo trained 20 x 0.3 = 6 s -> interpolated between 0.4 (5 s) and 0.5 (7.5 s): 0.44
    p = gains.loc["ppo"]
    assert p["vs_wall_mean"] == pytest.approx(np.mean([0.10, 0.14, 0.12]) - 0.44)
    assert p["wall_beyond"] == 0 and p["vs_wall_verdict"] == "control higher"
    text = gains_sentences(gains.reset_index())
    assert text[0] == ("The supervised control wins (the interval of RL minus control entirely below 0) against "
                       "2 of 2 RL variants at equal samples and 2 of 2 RL variants at equal wall time.")
    assert text[1].startswith("grpo: 32.0 % held-out accuracy; +12.0 points [") and "the control wins" in text[1]


def test_wall_time_beyond_the_control_is_flagged(control_study):
    slow = control_study / "grpo-seed1"
    rows = [json.loads(line) for line in (slow / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        if "step_s" in r:
            r["step_s"] = 0.6  # 12 s: longer than the wall control's last evaluation (10 s)
    (slow / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    g = gains_table(load_study_runs(control_study), n_boot=500).set_index("variant").loc["grpo"]
    assert g["wall_beyond"] == 1
    assert g["vs_wall_mean"] == pytest.approx(np.mean([0.30, 0.34, 0.32]) - 0.6)  # the control's last value


def test_verdicts_and_a_study_without_control(study_dir):
    assert verdict(0.01, 0.05, 3, "RL", "control") == "RL higher"
    assert verdict(-0.05, -0.01, 3, "RL", "control") == "control higher"
    assert verdict(-0.01, 0.05, 3, "RL", "control") == "no difference shown"
    assert verdict(0.1, 0.1, 1, "RL", "control") == "one seed: no interval"
    gains = gains_table(load_study_runs(study_dir), n_boot=200)
    assert (gains["vs_control_n"] == 0).all()
    assert gains_sentences(gains)[0].startswith("No supervised control in this comparison")


def test_wall_curves_and_the_report_panel(control_study, tmp_path):
    wall = wall_curve_table(load_study_runs(control_study), n_boot=200)
    ctl = wall[wall.variant == "sft_control-wall"].sort_values("train_s")
    assert ctl["train_s"].tolist() == pytest.approx([0.0, 2.5, 5.0, 7.5, 10.0])
    assert ctl["mean"].tolist() == pytest.approx([20.0, 30.0, 40.0, 50.0, 60.0])
    out = tmp_path / "results" / "ctl"
    assert analysis_main(["study", "--runs", str(control_study), "--out", str(out), "--n-boot", "300"]) == 0
    assert (out / "figures" / "curve_eval_accuracy_wall.png").exists()
    html = (out / "report.html").read_text()
    assert "RL against the base model and the supervised control" in html and "the control wins" in html
    assert "equal wall time: held-out accuracy against seconds of training" in html
    md = (out / "gains.md").read_text()
    assert "2 of 2 RL variants at equal samples" in md
    import shutil

    for d in control_study.glob("sft_control-wall-*"):
        shutil.rmtree(d)  # the equal-wall-time controls not run: said, not counted as RL wins
    gains = gains_table(load_study_runs(control_study), n_boot=200)
    assert gains_sentences(gains)[0].endswith("and none at equal wall time (no control run there).")
    cost = pd.read_csv(out / "cost.csv").set_index("variant")
    assert cost.loc["sft_control-wall", "training time (s)"] == pytest.approx(10.0)  # control rows are read too


def test_report_usage_errors_are_one_line_exit_2(tmp_path, capsys):
    assert analysis_main(["study", "--runs", str(tmp_path / "none"), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: --runs {tmp_path / 'none'}: no such directory"]
    (tmp_path / "none").mkdir()
    assert analysis_main(["study", "--runs", str(tmp_path / "none"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: no finished run (with summary.json) under {tmp_path / 'none'}"]
    assert analysis_main(["render", "--out", str(tmp_path), "--extra", "no-equals-sign"]) == 2
    assert capsys.readouterr().err.strip() == "error: expected NAME=PATH, got 'no-equals-sign'"


def test_report_study_script_of_analysis_dir(study_dir, tmp_path):
    """analysis/report_study.py, the researcher's script, builds the same report from the library."""
    out = tmp_path / "toy"
    proc = subprocess.run([sys.executable, str(ROOT / "analysis" / "report_study.py"), str(study_dir), str(out),
                           "--n-boot", "200"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (out / "report.html").exists() and (out / "final.csv").exists() and list((out / "figures").glob("*.png"))


# ---------------------------------------------------------------- outputs and damaged inputs (issue 13)
def _files(d: Path) -> dict[str, bytes]:
    return {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("out, needle", [
    (".", "is the input"), ("grpo-seed1", "is inside the input"), ("grpo-seed1/metrics.jsonl", "is a file; give a directory"),
])
def test_report_never_writes_into_its_runs(study_dir, capsys, out, needle):
    before = _files(study_dir)
    assert analysis_main(["study", "--runs", str(study_dir), "--out", str(study_dir / out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert _files(study_dir) == before


@pytest.mark.parametrize("damage, needle", [
    (lambda d: (d / "summary.json").write_text('{"method": "grpo", "se'), "summary.json: damaged"),
    (lambda d: (d / "metrics.jsonl").write_text((d / "metrics.jsonl").read_text() + "{cut\n"), "line 24: not a JSON row"),
    (lambda d: (d / "eval" / "arith.json").write_text("{"), "eval/arith.json: damaged"),
    (lambda d: (d / "config.yaml").write_bytes(b"\xff\xfe"), "config.yaml: damaged"),
])
def test_a_damaged_file_of_a_finished_run_is_named_never_left_out(study_dir, tmp_path, capsys, damage, needle):
    """Leaving a damaged run's benchmark or rows out would change the study's numbers silently."""
    damage(study_dir / "grpo-seed2")
    assert analysis_main(["study", "--runs", str(study_dir), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "grpo-seed2" in err[0] and needle in err[0], err
    assert not (tmp_path / "out" / "report.html").exists()


def test_plot_render_and_index_check_their_paths(tmp_path, capsys):
    (tmp_path / "results").mkdir()
    for argv, needle in ((["plot", "--out", str(tmp_path)], "no summary.json (run `grpo-research report aggregate`"),
                         (["render", "--out", str(tmp_path)], "no summary.json"),
                         (["index", "--results", str(tmp_path / "results"), "--out", str(tmp_path)], "is a directory"),
                         (["index", "--results", str(tmp_path / "nope")], "no such directory")):
        assert analysis_main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], (argv, err)


def test_the_base_model_row_and_one_model_cells_use_the_interval_over_problems(study_dir, tmp_path):
    base = study_dir / "_base_model" / "eval"
    base.mkdir(parents=True)
    (base / "arith.json").write_text(json.dumps({"benchmark": "arith", "pass@1": 0.1,
                                                 "pass@k": {"1": {"value": 0.1, "ci95": [0.03, 0.25]}}}))
    only_seed1 = [f"{v}-seed1" for v in ("grpo", "ppo-lam0.95")]
    for run in only_seed1:  # a one-seed study: one model per variant
        data = json.loads((study_dir / run / "eval" / "arith.json").read_text())
        data["pass@k"] = {"1": {"value": data["pass@1"], "ci95": [0.0, 0.9]}}
        (study_dir / run / "eval" / "arith.json").write_text(json.dumps(data))
    out = tmp_path / "out"
    assert analysis_main(["aggregate", "--runs", str(study_dir), "--out", str(out), "--include",
                          ",".join(only_seed1)]) == 0
    final = pd.read_csv(out / "final.csv")
    row = final[(final.variant == "base model") & (final.benchmark == "arith")].iloc[0]
    assert (row["mean"], row["low"], row["high"], row["interval"]) == (0.1, 0.03, 0.25, "problems")
    grpo = final[(final.variant == "grpo") & (final.benchmark == "arith")].iloc[0]
    assert (grpo["low"], grpo["high"], grpo["interval"]) == (0.0, 0.9, "problems")
    assert "10.0 [3.0, 25.0] (one model, problems)" in (out / "final.md").read_text()
    assert list(final.variant.drop_duplicates())[0] == "base model"


def test_final_charts_show_the_base_model_and_say_what_their_intervals_are(tmp_path):
    """The base model's benchmark row (not a study variant) gets a bar, first; one-model bars
    are captioned as intervals over problems, not over seeds."""
    import pandas as pd

    from grpo_research.analysis.plots import final_bar_order, interval_caption, plot_final

    final = pd.DataFrame([
        {"variant": "base model", "method": "base", "benchmark": "gsm8k", "mean": 0.1, "low": 0.02, "high": 0.4,
         "n_seeds": 1, "interval": "problems", "seeds": "", "values": "0.1"},
        {"variant": "grpo", "method": "grpo", "benchmark": "gsm8k", "mean": 0.2, "low": 0.06, "high": 0.5,
         "n_seeds": 1, "interval": "problems", "seeds": "1", "values": "0.2"}])
    assert final_bar_order(final, ["grpo", "ppo"]) == ["base model", "grpo", "ppo"]
    assert interval_caption({"problems"}) == "n = 1: one model, 95 % interval over problems"
    assert "mean over runs (base models x seeds)" in interval_caption({"seeds", "problems"})
    (path,) = plot_final(final, tmp_path, "s", ["grpo"])
    assert path.name == "final_gsm8k.png" and path.stat().st_size > 1000


# ---------------------------------------------------------------- compare_paired (Student-t, paired by seed)
def test_compare_paired_hand_computed():
    from grpo_research.analysis.stats import compare_paired

    # differences 1, 2, 3: mean 2, sd 1, se 1/sqrt(3); t(0.975, 2 df) = 4.302653
    mean, low, high = compare_paired([1.0, 2.0, 3.0], [0.0, 0.0, 0.0])
    assert mean == pytest.approx(2.0)
    assert low == pytest.approx(2.0 - 4.302653 / 3 ** 0.5, abs=1e-5) and high == pytest.approx(2.0 + 2.484138, abs=1e-5)
    # pairing matters: the same values unpaired would differ; here every seed gains exactly 0.1
    mean, low, high = compare_paired([0.3, 0.5, 0.7, 0.9], [0.2, 0.4, 0.6, 0.8])
    assert (mean, low, high) == pytest.approx((0.1, 0.1, 0.1))
    # differences -1, 1 at 90 %: mean 0, sd sqrt(2), se 1; t(0.95, 1 df) = 6.313752
    assert compare_paired([0.0, 2.0], [1.0, 1.0], level=0.9) == pytest.approx((0.0, -6.313752, 6.313752), abs=1e-5)
    one = compare_paired([0.5], [0.25])
    assert one[0] == 0.25 and np.isnan(one[1]) and np.isnan(one[2])
    assert all(np.isnan(compare_paired([], [])))


def test_compare_paired_refuses_what_it_cannot_pair():
    from grpo_research.analysis.stats import compare_paired

    with pytest.raises(ValueError, match="equal-length"):
        compare_paired([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="non-finite"):
        compare_paired([1.0, float("nan")], [1.0, 2.0])
    with pytest.raises(ValueError, match="level"):
        compare_paired([1.0, 2.0], [0.0, 0.0], level=95)
