"""benchmarks/aa_calibration.py: on arms with no difference, compare_paired declares one about
5 % of the time and the percentile bootstrap far more often at 3 seeds (fixed seeds: the figures
are deterministic, the bounds are the Monte-Carlo error at 4,000 repetitions, about 0.35 %)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import aa_calibration as AA  # noqa: E402


@pytest.mark.parametrize("dist", ["normal", "beta"])
def test_compare_paired_holds_five_percent_and_the_bootstrap_does_not(dist):
    rng = np.random.default_rng(1)
    for n in (3, 10):
        r = AA.rates(AA.simulated_differences(dist, n, 4000, rng), n_boot=1000, seed=1)
        t_rate, _ = r["compare_paired"]
        assert 0.035 < t_rate < 0.065, (dist, n, r)
        if n == 3:
            assert r["bootstrap"][0] > 0.15, (dist, n, r)


def test_runs_mode_splits_distinct_runs_and_names_a_folder_without_runs(tmp_path):
    for i, acc in enumerate(np.linspace(0.2, 0.4, 12)):
        (tmp_path / f"grpo-seed{i}").mkdir()
        (tmp_path / f"grpo-seed{i}" / "summary.json").write_text(json.dumps({"final_accuracy": float(acc)}))
    values = AA.final_accuracies(tmp_path)
    d = AA.run_differences(values, 5, 200, np.random.default_rng(0))
    assert d.shape == (200, 5)
    script = str(ROOT / "benchmarks" / "aa_calibration.py")
    ok = subprocess.run([sys.executable, script, "--runs", str(tmp_path), "--reps", "200", "--n", "3,5",
                         "--n-boot", "200"], capture_output=True, text=True)
    assert ok.returncode == 0 and "runs (12 under" in ok.stdout and "n=5" in ok.stdout, ok.stderr
    bad = subprocess.run([sys.executable, script, "--runs", str(tmp_path), "--n", "10"], capture_output=True, text=True)
    assert bad.returncode != 0 and "12 runs cannot make two arms of 10" in bad.stderr
    empty = subprocess.run([sys.executable, script, "--runs", str(tmp_path / "nope")], capture_output=True, text=True)
    assert empty.returncode != 0 and "no finished runs" in empty.stderr


def test_the_atlas_s_verdicts_hold_their_error_rates_on_null_claims():
    rng = np.random.default_rng(1)
    d = AA.simulated_differences("normal", 3, 4000 * 16, rng).reshape(4000, 16, 3)  # 4,000 atlases of 16 null claims
    r = AA.atlas_rates(d)
    assert 0.020 <= r["per claim, unadjusted"][0] <= 0.030  # one-sided 2.5 % per claim
    assert r["per atlas, BH"][0] <= 0.025 + 3 * r["per atlas, BH"][1]  # all null: FDR = family-wise rate <= 2.5 %
    assert r["per atlas, unadjusted"][0] > 0.25  # 1 - 0.975^16 = 33 %: what the adjustment prevents
    assert r["per claim, BH"][0] < r["per claim, unadjusted"][0] / 5
