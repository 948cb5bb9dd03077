"""Runs nested in base models (issue 33): nested_summary / compare_nested, p_above / p_below with
groups, bases_for_power. Small cases computed by hand in the comments; Student-t quantiles in
closed form where one exists (1 dof: tan(pi (p - 1/2)); 2 dof: (2p - 1) / sqrt(2 p (1 - p)))."""
from __future__ import annotations

import math

import numpy as np
import pytest

from grpo_research.analysis.stats import (bases_for_power, compare_nested, compare_paired, nested_summary, p_above,
                                          p_below, power_one_sided, seeds_for_power)

T1 = math.tan(math.pi * 0.475)  # t_{1, 0.975} = 12.7062
T2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # t_{2, 0.975} = 4.3027
T3 = 3.182446305284263  # t_{3, 0.975} (tables)

# 3 bases x 2 seeds: d = (1, 3), (2, 4), (6, 8); the b arm is 0
A3 = [1.0, 3.0, 2.0, 4.0, 6.0, 8.0]
Z6 = [0.0] * 6
G3 = ["x", "x", "y", "y", "z", "z"]


def test_three_bases_two_seeds_hand_computed():
    # per-base means 2, 3, 7 -> mean 4; var(m) = (4 + 1 + 9) / 2 = 7; se = sqrt(7 / 3)
    # within: deviations +-1 in every base, ss = 6 over 3 dof -> within^2 = 2
    # tau^2 = 7 - 2 / 2 = 6; prediction half = t_1 sqrt(6 + 7/3) = t_1 sqrt(25 / 3)
    s = nested_summary(A3, Z6, G3)
    se = math.sqrt(7 / 3)
    assert s["mean"] == pytest.approx(4.0)
    assert s["se"] == pytest.approx(se)
    assert (s["low"], s["high"]) == pytest.approx((4 - T2 * se, 4 + T2 * se))
    assert (s["df"], s["n_groups"], s["n_runs"], s["pred_df"]) == (2, 3, 6, 1)
    assert s["within_sd"] == pytest.approx(math.sqrt(2)) and s["within_source"] == "pooled"
    assert s["between_sd"] == pytest.approx(math.sqrt(6))
    half = T1 * math.sqrt(25 / 3)
    assert (s["pred_low"], s["pred_high"]) == pytest.approx((4 - half, 4 + half))
    assert s["group_means"] == pytest.approx([2.0, 3.0, 7.0]) and s["seeds_per_group"] == [2, 2, 2]
    assert s["base_dependent"] is False  # the interval of the mean includes 0
    assert compare_nested(A3, Z6, G3) == pytest.approx((4 - 0 * se, 4 - T2 * se, 4 + T2 * se))
    # the nested interval is wider than treating the six pairs as independent (mean 4, sd sqrt(7.6))
    _, lo_p, hi_p = compare_paired(A3, Z6)
    assert hi_p - lo_p < s["high"] - s["low"]


def test_level_and_the_run_order_do_not_matter_beyond_the_labels():
    # level 0.90: t_{2, 0.95} = 0.9 / sqrt(2 * 0.95 * 0.05) = 2.919986
    t90 = 0.9 / math.sqrt(2 * 0.95 * 0.05)
    se = math.sqrt(7 / 3)
    order = [5, 0, 3, 2, 4, 1]
    m, lo, hi = compare_nested([A3[i] for i in order], Z6, [G3[i] for i in order], level=0.9)
    assert (m, lo, hi) == pytest.approx((4.0, 4 - t90 * se, 4 + t90 * se))
    # the differences a - b are what count: shift both arms by a per-base effect
    base = {"x": 30.0, "y": 45.0, "z": 20.0}
    a = [v + base[g] for v, g in zip(A3, G3)]
    b = [base[g] for g in G3]
    assert compare_nested(a, b, G3) == pytest.approx(compare_nested(A3, Z6, G3))


def test_one_seed_per_base_is_compare_paired():
    a, b = [0.31, 0.29, 0.36, 0.33], [0.30, 0.30, 0.31, 0.30]
    assert compare_nested(a, b, ["p", "q", "r", "s"]) == pytest.approx(compare_paired(a, b))


def test_fewer_than_two_bases_and_unequal_lengths_are_errors():
    with pytest.raises(ValueError, match="compare_nested needs at least 2 base models, got 1"):
        compare_nested([1.0, 2.0, 3.0], [0.0, 0.0, 0.0], ["m", "m", "m"])
    with pytest.raises(ValueError, match="at least 2 base models, got 1"):
        nested_summary([1.0, 2.0], [0.0, 0.0], ["m", "m"])
    with pytest.raises(ValueError, match="got 0"):
        compare_nested([], [], [])
    with pytest.raises(ValueError, match="one length"):
        compare_nested([1.0, 2.0], [0.0, 0.0], ["m"])
    with pytest.raises(ValueError, match="one length"):
        nested_summary([1.0, 2.0], [0.0], ["m", "n"])
    with pytest.raises(ValueError, match="non-finite"):
        compare_nested([1.0, float("nan")], [0.0, 0.0], ["m", "n"])
    with pytest.raises(ValueError, match="level"):
        compare_nested([1.0, 2.0], [0.0, 0.0], ["m", "n"], level=95)


def test_p_above_with_groups_matches_the_interval_ends():
    s = nested_summary(A3, Z6, G3)
    assert p_above(A3, s["low"], G3) == pytest.approx(0.025, abs=1e-9)
    assert p_below(A3, s["high"], G3) == pytest.approx(0.025, abs=1e-9)
    assert p_above(A3, s["low"] - 1e-6, G3) < 0.025 < p_above(A3, s["low"] + 1e-6, G3)
    # by hand, bound 0: t = 4 / sqrt(7/3) on 2 dof; the t(2) tail 1/2 - t / (2 sqrt(2 + t^2)) = 1/2 - sqrt(6/31)
    assert p_above(A3, 0.0, G3) == pytest.approx(0.5 - math.sqrt(6 / 31), abs=1e-12)
    assert p_below(A3, 0.0, G3) == pytest.approx(0.5 + math.sqrt(6 / 31), abs=1e-12)
    # without groups: unchanged (six values, 5 dof: mean 4, var 34 / 5), far smaller
    from scipy.stats import t as student_t

    assert p_above(A3, 0.0) == pytest.approx(float(student_t.sf(4 / math.sqrt(6.8 / 6), 5)), abs=1e-12)
    assert p_above(A3, 0.0) < p_above(A3, 0.0, G3) / 5
    assert p_above(A3, 0.0) == pytest.approx(p_above(A3, 0.0, groups=None))
    # on the unbalanced case too (G - 1 = 2 dof on the per-base means, at level 0.9 -> alpha 0.05)
    d, g = [1.0, 4.0, 0.0, 3.0, 2.0, 1.0], ["y", "x", "z", "y", "z", "z"]
    _, lo, hi = compare_nested(d, [0.0] * 6, g, level=0.9)
    assert p_above(d, lo, g) == pytest.approx(0.05, abs=1e-9) and p_below(d, hi, g) == pytest.approx(0.05, abs=1e-9)
    assert math.isnan(p_above([1.0, 2.0], 0.0, ["m", "m"]))  # one base: no test
    with pytest.raises(ValueError):
        p_above([1.0, 2.0], 0.0, ["m"])


def test_tau_is_zero_when_base_means_vary_less_than_seed_noise_predicts():
    # d = (0, 3), (0, 4), (1, 4): means 1.5, 2, 2.5, var(m) = 0.25; within ss = 4.5 + 8 + 4.5 = 17 over
    # 3 dof -> within^2 = 17/3, and within^2 / 2 = 2.83 > 0.25 -> tau^2 = max(0, negative) = 0;
    # the prediction interval is then mean -/+ t_1 se, se = sqrt(0.25 / 3)
    s = nested_summary([0.0, 3.0, 0.0, 4.0, 1.0, 4.0], Z6, G3)
    assert s["between_sd"] == 0.0
    assert s["within_sd"] == pytest.approx(math.sqrt(17 / 3))
    se = math.sqrt(0.25 / 3)
    assert (s["pred_low"], s["pred_high"]) == pytest.approx((2 - T1 * se, 2 + T1 * se))


def test_base_dependent_true_and_false():
    # 4 bases x 2 seeds, d = m_g -/+ 0.1 with m = 1, 2, 3, 4: mean 2.5, var(m) = 5/3, se = sqrt(5/12),
    # low = 2.5 - t_3 0.6455 = 0.446 > 0; within^2 = 0.02, tau^2 = 5/3 - 0.01 = 1.6567;
    # prediction half = t_2 sqrt(1.6567 + 0.4167) = 6.20 -> the prediction interval includes 0
    a = [0.9, 1.1, 1.9, 2.1, 2.9, 3.1, 3.9, 4.1]
    g = ["p", "p", "q", "q", "r", "r", "s", "s"]
    s = nested_summary(a, [0.0] * 8, g)
    assert s["low"] == pytest.approx(2.5 - T3 * math.sqrt(5 / 12))
    assert s["between_sd"] == pytest.approx(math.sqrt(5 / 3 - 0.01))
    half = T2 * math.sqrt(5 / 3 - 0.01 + 5 / 12)
    assert (s["pred_low"], s["pred_high"]) == pytest.approx((2.5 - half, 2.5 + half))
    assert s["low"] > 0 and s["pred_low"] < 0 and s["base_dependent"] is True
    # the same spread around 10: both intervals exclude 0 -> an effect every base shows, not base-dependent
    s = nested_summary([v + 9.0 for v in a], [0.0] * 8, g)
    assert s["pred_low"] > 0 and s["base_dependent"] is False
    # the interval includes 0 (the 3 x 2 case): False; two bases: no prediction interval, False
    assert nested_summary(A3, Z6, G3)["base_dependent"] is False
    two = nested_summary([1.0, 1.2, 3.0, 3.2], [0.0] * 4, ["p", "p", "q", "q"])
    assert math.isnan(two["pred_low"]) and math.isnan(two["pred_high"]) and two["base_dependent"] is False
    assert two["between_sd"] == pytest.approx(math.sqrt(2 - 0.02 / 2))  # var(1.1, 3.1) = 2, within^2 = 0.02


def test_one_seed_per_base_needs_a_given_within_sd():
    # d = 1, 2, 6 on three bases: mean 3, var(m) = (4 + 1 + 9) / 2 = 7
    a, b, g = [1.0, 2.0, 6.0], [0.0, 0.0, 0.0], ["p", "q", "r"]
    s = nested_summary(a, b, g)
    assert math.isnan(s["within_sd"]) and s["within_source"] == "none"
    assert math.isnan(s["between_sd"]) and math.isnan(s["pred_low"]) and s["base_dependent"] is False
    assert (s["low"], s["high"]) == pytest.approx((3 - T2 * math.sqrt(7 / 3), 3 + T2 * math.sqrt(7 / 3)))
    # a pilot's within SD of 1: tau^2 = 7 - 1 / 1 = 6; prediction half = t_1 sqrt(6 + 7/3)
    s = nested_summary(a, b, g, within_sd=1.0)
    assert s["within_source"] == "given" and s["within_sd"] == 1.0 and math.isnan(s["within_sd_pooled"])
    assert s["between_sd"] == pytest.approx(math.sqrt(6))
    assert s["pred_high"] == pytest.approx(3 + T1 * math.sqrt(25 / 3))
    # a given value is used even where the runs could estimate one (here pooled sqrt(2))
    s = nested_summary(A3, Z6, G3, within_sd=2.0)  # tau^2 = 7 - 4 / 2 = 5
    assert s["within_source"] == "given" and s["within_sd_pooled"] == pytest.approx(math.sqrt(2))
    assert s["between_sd"] == pytest.approx(math.sqrt(5))
    with pytest.raises(ValueError, match="within_sd"):
        nested_summary(a, b, g, within_sd=-1.0)


def test_unbalanced_bases_weigh_equally_and_use_the_harmonic_seed_count():
    # x: (4); y: (1, 3); z: (0, 1, 2), interleaved. Per-base means 4, 2, 1 -> mean 7/3 (the mean of the
    # six runs would be 11/6). var(m) = ((5/3)^2 + (1/3)^2 + (4/3)^2) / 2 = 7/3, se = sqrt(7/9).
    # within: ss 2 (y) + 2 (z) over 1 + 2 dof -> 4/3. S_h = 3 / (1 + 1/2 + 1/3) = 18/11.
    # tau^2 = 7/3 - (4/3) (11/18) = 63/27 - 22/27 = 41/27.
    d, g = [1.0, 4.0, 0.0, 3.0, 2.0, 1.0], ["y", "x", "z", "y", "z", "z"]
    s = nested_summary(d, [0.0] * 6, g)
    assert s["groups"] == ["y", "x", "z"] and s["seeds_per_group"] == [2, 1, 3]
    assert s["mean"] == pytest.approx(7 / 3)
    assert s["se"] == pytest.approx(math.sqrt(7 / 9))
    assert s["within_sd"] == pytest.approx(math.sqrt(4 / 3))
    assert s["seeds_harmonic"] == pytest.approx(18 / 11)
    assert s["between_sd"] == pytest.approx(math.sqrt(41 / 27))
    half = T1 * math.sqrt(41 / 27 + 7 / 9)
    assert (s["pred_low"], s["pred_high"]) == pytest.approx((7 / 3 - half, 7 / 3 + half))


def test_bases_for_power_is_the_per_base_mean_t_test():
    # a per-base mean has SD sqrt(0.6^2 + 0.8^2 / 4) = sqrt(0.52)
    g = bases_for_power(1.0, 0.6, 0.8, 4)
    sd = math.sqrt(0.52)
    assert g == seeds_for_power(1.0, sd)
    assert power_one_sided(g, 1.0, sd) >= 0.8 > power_one_sided(g - 1, 1.0, sd)
    assert bases_for_power(1.0, 0.0, 1.0, 1) == seeds_for_power(1.0, 1.0)
    # seeds cannot stand in for bases: with many seeds the count tends to the between-only one
    assert bases_for_power(1.0, 1.0, 1.0, 1000) == seeds_for_power(1.0, 1.0)
    assert bases_for_power(1.0, 1.0, 1.0, 1) > bases_for_power(1.0, 1.0, 1.0, 4) >= seeds_for_power(1.0, 1.0)
    assert bases_for_power(1.0, 0.6, 0.8, 4, sides=2) > g
    assert bases_for_power(0.0, 0.6, 0.8, 4) is None
    with pytest.raises(ValueError):
        bases_for_power(1.0, 0.6, 0.8, 0)
    # simulated: g bases x 4 seeds with the truth 1.0 above the bound 0; p_above with groups at 2.5 %
    rng = np.random.default_rng(0)
    labels = np.repeat(np.arange(g), 4)
    hits = 0
    reps = 1500
    for _ in range(reps):
        d = 1.0 + rng.normal(0.0, 0.6, g)[labels] + rng.normal(0.0, 0.8, 4 * g)
        hits += p_above(d, 0.0, labels) < 0.025
    assert hits / reps == pytest.approx(power_one_sided(g, 1.0, sd), abs=0.04)


def test_aa_calibration_nested_mode_runs_on_simulated_and_real_runs(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    script = str(Path(__file__).resolve().parents[1] / "benchmarks" / "aa_calibration.py")
    ok = subprocess.run([sys.executable, script, "--nested", "--reps", "20"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    rows = [line for line in ok.stdout.splitlines() if "compare_nested" in line and not line.startswith("#")]
    assert len(rows) == 36 and "seeds=1 (pilot)" in ok.stdout and "t3  interaction   9  G=8" in ok.stdout
    import json

    rng = np.random.default_rng(1)
    for b in range(3):  # 3 bases x 4 seeds of one configuration: base effects of 10 points
        for s in range(1, 5):
            run = tmp_path / (f"grpo-seed{s}" if b == 0 else f"grpo-base{b}-seed{s}")
            run.mkdir()
            acc = 0.2 + 0.1 * b + rng.normal(0, 0.02)
            (run / "summary.json").write_text(json.dumps({"final_accuracy": acc}))
    real = subprocess.run([sys.executable, script, "--nested", "--runs", str(tmp_path), "--reps", "50"],
                          capture_output=True, text=True)
    assert real.returncode == 0, real.stderr
    assert "3 bases x 4 seeds" in real.stdout and "  real  G=3  compare_nested" in real.stdout
    for run in tmp_path.glob("grpo-base*"):  # one base model left: no nested test
        (run / "summary.json").unlink()
    bad = subprocess.run([sys.executable, script, "--nested", "--runs", str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode != 0 and "on 1 base model(s); --nested needs at least 2" in bad.stderr


def test_the_real_aa_cell_splits_seeds_within_each_base():
    """Runs of base g are 100 g + {0, 1, 2, 3}: a pair within a base differs by at most 3, one
    across bases by at least 97; every run is used once; 5 runs on a base make 2 pairs."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import aa_calibration as AA

    by_base = {0: np.array([0.0, 1, 2, 3]), 1: np.array([100.0, 101, 102, 103, 104]), 2: np.array([200.0, 201])}
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b, groups = AA.split_within_bases(by_base, rng)
        assert groups == [0, 0, 1, 1, 2]
        assert all(abs(x - y) <= 4 for x, y in zip(a, b))
        assert all(100 * g <= x < 100 * g + 5 for x, g in zip(a + b, groups + groups))
        assert len(set(a + b)) == len(a + b) == 10
