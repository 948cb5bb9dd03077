"""Studies replicated over base models (issue 33): the analysis pairs runs by (base, seed) and,
on two or more bases, tests on per-base means (stats.compare_nested); the report opens with the
study's `compare:` pairs; variance.csv holds the variance components; the atlas does the same.
Numbers hand-computed in the comments."""
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from grpo_research.analysis.aggregate import final_table
from grpo_research.analysis.comparisons import comparisons, variance_table
from grpo_research.analysis.gains import gains_table
from grpo_research.analysis.load import load_study_runs
from grpo_research.analysis.study import aggregate_study, base_model_runs
from grpo_research.analysis.report import render_study

# GRPO - PPO per (base, seed): base 0: 0.10, 0.12 (mean 0.11); base 1: 0.02, 0.04 (0.03);
# base 2: 0.06, 0.08 (0.07). Over bases: mean 0.07, var of the per-base means 0.0016, se
# sqrt(0.0016 / 3) = 0.023094, t(0.975, 2) = 4.302653: [-0.0294, 0.1694]: no difference shown.
# Pooled as 6 independent pairs (compare_paired): sd 0.037417, se 0.015275, t(0.975, 5) =
# 2.570582: [0.0307, 0.1093], which would claim a difference. Within-base SD: deviations +-0.01,
# 0.0006 over 3 df: 0.014142; tau^2 = 0.0016 - 0.0002 / 2 = 0.0015, tau 0.038730; a new base:
# 0.07 +- t(0.975, 1) 12.706205 x sqrt(0.0015 + 0.0016 / 3) = +-0.572952.
PPO = {(0, 1): 0.30, (0, 2): 0.31, (1, 1): 0.40, (1, 2): 0.41, (2, 1): 0.20, (2, 2): 0.21}
DIFF = {(0, 1): 0.10, (0, 2): 0.12, (1, 1): 0.02, (1, 2): 0.04, (2, 1): 0.06, (2, 2): 0.08}
BASE_ACC = {0: 0.25, 1: 0.35, 2: 0.15}


def _run(d: Path, variant: str, method: str, base: int, seed: int, final: float) -> None:
    run = d / (f"{variant}-seed{seed}" if base == 0 else f"{variant}-base{base}-seed{seed}")
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": seed, "train": {"eval_size": 1000}}))
    rows = [{"step": 0, "samples": 0, "eval/accuracy": BASE_ACC[base]}]
    rows += [{"step": s, "samples": 64 * s, "step_s": 0.1} for s in range(1, 5)]
    rows.append({"step": 4, "samples": 256, "eval/accuracy": final})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "summary.json").write_text(json.dumps({"final_accuracy": final, "train_s_this_invocation": 30.0,
                                                  "threads": 1}))
    if method == "grpo":  # a benchmark evaluation, which a `base model` arm pairs with its own base's
        (run / "eval").mkdir()
        (run / "eval" / "arith.json").write_text(json.dumps({"pass@1": final, "n_problems": 100}))


@pytest.fixture()
def replicated(tmp_path):
    runs = tmp_path / "runs" / "rep"
    for (b, s), p in PPO.items():
        _run(runs, "ppo-lam0.95", "ppo", b, s, p)
        _run(runs, "grpo", "grpo", b, s, p + DIFF[(b, s)])
    for b in (0, 2):  # base models evaluated on a benchmark (benchmark_base), one dir per base
        d = runs / ("_base_model" if b == 0 else f"_base_model-base{b}") / "eval"
        d.mkdir(parents=True)
        (d / "arith.json").write_text(json.dumps({"pass@1": BASE_ACC[b], "n_problems": 100}))
    study = tmp_path / "rep.yaml"
    study.write_text(yaml.safe_dump({"description": "two arms on three bases", "budget_samples": 256, "seeds": [1, 2],
                                     "base_seeds": [0, 1, 2], "methods": ["grpo", "ppo"], "control": False,
                                     "compare": [["grpo", "ppo-lam0.95"]]}))
    return runs, study


def test_runs_pair_by_base_and_seed_and_test_on_per_base_means(replicated):
    runs, _ = replicated
    loaded = load_study_runs(runs)
    assert sorted(r.unit for r in loaded if r.variant == "grpo") == sorted(PPO)
    final = final_table(loaded)
    (o,) = [o for o in comparisons(final) if o["benchmark"] == "heldout (trainer)"]
    assert o["nested"] and o["n_bases"] == 3 and o["n"] == 6 and o["higher"] == "grpo"
    assert o["paired_difference"] == pytest.approx(0.07)
    assert (o["low"], o["high"]) == pytest.approx((0.07 - 0.099366, 0.07 + 0.099366), abs=1e-5)
    assert not o["shown"]  # compare_paired over the 6 pairs would give [0.0307, 0.1093]
    assert o["between_sd"] == pytest.approx(0.038730, abs=1e-6) and o["within_sd"] == pytest.approx(0.014142, abs=1e-6)
    assert (o["pred_low"], o["pred_high"]) == pytest.approx((0.07 - 0.572952, 0.07 + 0.572952), abs=1e-5)
    # gains over each run's own base model (its step-0 evaluation), per base: +0.35 - ... nested too
    g = gains_table(loaded).set_index("variant")
    assert g.loc["grpo", "vs_base_bases"] == 3 and g.loc["grpo", "vs_base_n"] == 6


def test_variance_table_and_the_report_open_with_the_question(replicated, tmp_path):
    runs, study = replicated
    out = tmp_path / "results"
    meta = aggregate_study(runs, out, study="rep", study_file=study, n_boot=200)
    assert meta["base_seeds"] == [0, 1, 2] and meta["compare"] == [["grpo", "ppo-lam0.95"]]
    v = pd.read_csv(out / "variance.csv")
    assert {"comparison", "metric", "n_bases", "n_seeds", "mean_diff", "low", "high", "between_base_sd",
            "within_base_sd", "pred_low", "pred_high"} <= set(v.columns)
    row = v[v.metric == "heldout (trainer)"].iloc[0]
    assert row["comparison"] == "grpo - ppo-lam0.95" and row["n_bases"] == 3 and str(row["n_seeds"]) == "2"
    assert row["mean_diff"] == pytest.approx(0.07) and row["between_base_sd"] == pytest.approx(0.038730, abs=1e-6)
    assert row["verdict"] == "no difference shown"
    final_md = (out / "final.md").read_text()
    assert final_md.index("## The study's question") < final_md.index("| variant |")
    assert "**grpo - ppo-lam0.95** (heldout (trainer)): +7.0 points [-2.9, +16.9] (3 base models x 2 seeds" in final_md
    assert "a decision (80 % power, two-sided 95 %) at 2 points:" in final_md
    # the base models' own evaluations: one per base that has one (bases 0 and 2), n = 2
    assert sorted(base_model_runs(runs)) == [0, 2]
    base_row = pd.read_csv(out / "final.csv").query("variant == 'base model'").iloc[0]
    assert base_row["n_seeds"] == 2 and base_row["seeds"] == "None b2"
    from grpo_research.analysis.study import plot_study

    plot_study(out)
    page = render_study(out).read_text()
    assert page.index("The study's question") < page.index("Final accuracy")
    assert "Variance components: base models and seeds" in page and "no difference shown" in page


def test_one_base_model_says_the_interval_covers_seeds_only(replicated, tmp_path):
    runs, _ = replicated
    one = [r for r in load_study_runs(runs) if r.base == 0]
    final = final_table(one)
    (o,) = [o for o in comparisons(final) if o["benchmark"] == "heldout (trainer)"]
    assert not o["nested"] and o["n"] == 2 and o["paired_difference"] == pytest.approx(0.11)
    v = variance_table(final, [["grpo", "ppo-lam0.95"]]).iloc[0]
    assert v["n_bases"] == 1 and math.isnan(v["between_base_sd"]) and math.isnan(v["pred_low"])
    assert v["note"].startswith("one base model: the interval covers RL seeds only")
    from grpo_research.analysis.aggregate import final_markdown

    assert "One base model: the interval covers RL seeds only." in final_markdown(final, 200)
    import shutil

    only = tmp_path / "one"
    for r in one:
        shutil.copytree(r.path, only / r.run_id)
    aggregate_study(only, tmp_path / "out", study="one", n_boot=200)
    text = (tmp_path / "out" / "variance.csv").read_text()
    assert ",nan," in text and ",," not in text  # not estimable: written as nan, never blank


def test_base_dependent_when_the_mean_is_shown_but_a_new_base_need_not_be(tmp_path):
    """Per-base means 0.05, 0.06, 0.07, 0.08, 0.20 with seeds +-0.001: the mean 0.092 is shown
    ([0.0186, 0.1654], t(0.975, 4) = 2.776445 x se 0.026458), while tau ~ 0.0592 and a new base's
    interval 0.092 +- t(0.975, 3) 3.182446 x sqrt(tau^2 + se^2) reaches below 0."""
    from grpo_research.analysis.comparisons import difference_verdict, paired_difference

    means = [0.05, 0.06, 0.07, 0.08, 0.20]
    a, b, groups = [], [], []
    for g, m in enumerate(means):
        for e in (-0.001, 0.001):
            a.append(0.5 + m + e)
            b.append(0.5)
            groups.append(g)
    p = paired_difference(a, b, groups)
    assert p["shown"] and p["pred_low"] < 0 < p["pred_high"] and p["base_dependent"]
    assert difference_verdict(p) == "base-dependent"
    # bases 0-3 alone (means 0.05-0.08): shown, and a new base [+0.003, +0.127] excludes 0 too
    assert difference_verdict(paired_difference(a[:8], b[:8], groups[:8])) == "difference shown"


def test_the_atlas_tests_a_claim_on_per_base_means(replicated):
    """grpo > ppo-lam0.95 over 3 bases: p_claim is the one-sided t on the 3 per-base means
    (t = 0.07 / 0.023094 = 3.0311, 2 df: p = 0.0469), not on the 6 pairs (p ~ 0.003); a base model
    arm pairs each run with its own base's evaluation."""
    from grpo_research.analysis.atlas import claim_row
    from grpo_research.analysis.stats import p_above

    runs, _ = replicated
    loaded = {"rep": load_study_runs(runs)}
    claim = {"id": "grpo-beats-ppo", "claim": "GRPO beats PPO.", "kind": "difference", "predicted": "greater",
             "metric": "heldout", "budget": "equal_samples", "setting": "tiny-1m", "smallest_effect": 0.02,
             "arms": [{"study": "rep", "variant": "grpo"}, {"study": "rep", "variant": "ppo-lam0.95"}]}
    row = claim_row(claim, loaded, {"rep": base_model_runs(runs)}, improvement=False)
    assert row["n_seeds"] == 6 and row["effect"] == pytest.approx(0.07)
    assert row["p_claim"] == pytest.approx(0.0469, abs=5e-4)
    d = [DIFF[u] for u in sorted(DIFF)]
    assert row["p_claim"] == pytest.approx(p_above(d, 0.0, groups=[u[0] for u in sorted(DIFF)]))
    assert row["p_claim"] > 10 * p_above(d, 0.0)
    assert (row["low"], row["high"]) == pytest.approx((0.07 - 0.099366, 0.07 + 0.099366), abs=1e-5)
    assert "3 base models: interval and tests on per-base means" in row["note"]
    gain = claim_row({**claim, "id": "gain", "metric": "arith",
                      "arms": [{"study": "rep", "variant": "grpo"}, {"study": "rep", "variant": "base model"}]},
                     loaded, {"rep": base_model_runs(runs)}, improvement=False)
    # bases 0 and 2 have evaluations, base 1 none: its runs are not paired (and not guessed)
    assert gain["n_seeds"] == 4
    expected = [PPO[u] + DIFF[u] - BASE_ACC[u[0]] for u in sorted(DIFF) if u[0] != 1]
    assert gain["effect"] == pytest.approx(sum(expected) / 4)


def test_one_seed_per_base_takes_the_pilots_within_base_sd(replicated, tmp_path):
    """Seed 1 only: per-base GRPO - PPO 0.10, 0.02, 0.06 (mean 0.06, var of the means 0.0016).
    The runs cannot estimate a within-base SD; the study file's pilot value 2 points gives
    tau^2 = 0.0016 - 0.02^2 / 1 = 0.0012 (tau 0.034641), se sqrt(0.0016 / 3) = 0.023094 and a
    new base 0.06 +- t(0.975, 1) 12.706205 x sqrt(0.0012 + 0.000533) = +-0.529000."""
    import shutil

    runs, _ = replicated
    one = tmp_path / "one_seed"
    for r in load_study_runs(runs):
        if r.seed == 1:
            shutil.copytree(r.path, one / r.run_id)
    study = tmp_path / "one_seed.yaml"
    spec = {"description": "one seed per base", "budget_samples": 256, "seeds": [1], "base_seeds": [0, 1, 2],
            "methods": ["grpo", "ppo"], "control": False, "compare": [["grpo", "ppo-lam0.95"]]}
    study.write_text(yaml.safe_dump(spec))
    aggregate_study(one, tmp_path / "without", study="one_seed", study_file=study, n_boot=200)
    row = pd.read_csv(tmp_path / "without" / "variance.csv").query("metric == 'heldout (trainer)'").iloc[0]
    assert math.isnan(row["within_base_sd"]) and math.isnan(row["pred_low"]) and "no pilot value" in row["note"]
    study.write_text(yaml.safe_dump({**spec, "within_base_sd": {"from": "the pilot of test", "grpo - ppo-lam0.95": 2.0}}))
    aggregate_study(one, tmp_path / "with", study="one_seed", study_file=study, n_boot=200)
    row = pd.read_csv(tmp_path / "with" / "variance.csv").query("metric == 'heldout (trainer)'").iloc[0]
    assert row["within_base_sd"] == pytest.approx(0.02) and row["between_base_sd"] == pytest.approx(0.034641, abs=1e-6)
    assert (row["pred_low"], row["pred_high"]) == pytest.approx((0.06 - 0.529000, 0.06 + 0.529000), abs=1e-5)
    assert "the within-base SD is the pilot's (the pilot of test)" in row["note"]
    assert row["mean_diff"] == pytest.approx(0.06)  # the mean and its interval do not use the pilot
    final_md = (tmp_path / "with" / "final.md").read_text()
    assert "(3 base models x 1 seed, compare_nested)" in final_md and " 1 seeds" not in final_md


def test_a_pilot_sd_for_a_pair_the_study_does_not_compare_is_refused(tmp_path):
    from grpo_research.studies import StudyError, expand_study

    spec = {"description": "x", "budget_samples": 256, "seeds": [1], "control": False,
            "methods": ["grpo", {"method": "ppo", "set": {"ppo.lam": 0.95}}],
            "compare": [["grpo", "ppo-lam0.95"]], "within_base_sd": {"from": "a pilot", "grpo - dpo": 1.0}}
    with pytest.raises(StudyError, match=r"within_base_sd: 'grpo - dpo' is not a compared pair"):
        expand_study(spec, name="x")
