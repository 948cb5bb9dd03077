"""benchmarks/time_breakdown.py on a hand-made finished pipeline run: the shares add up to
the core-seconds, and each part is what the job and run files say."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import time_breakdown as TB  # noqa: E402

HEAD = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def job(root: Path, rule: str, name: str, seconds: float, end: float) -> None:
    p = root / "results" / "benchmarks" / rule / name
    p = p.with_name(p.name + ".tsv")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(HEAD + f"{seconds}\t0:00:00\t1\t1\t1\t1\t0\t0\t50\t{seconds}\n")
    os.utime(p, (end, end))


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "configs").mkdir(parents=True)
    shutil.copy(ROOT / "configs" / "defaults.yaml", root / "configs" / "defaults.yaml")
    return root


def test_shares_are_the_files_figures_and_add_up(tmp_path):
    root = project(tmp_path)
    t0 = 1_000_000.0
    # base model: 2 threads, 10 s, ends when the study's first job starts
    job(root, "build_base_model", "tiny-arith", 10.0, t0 + 10)
    run = root / "runs" / "s" / "grpo-seed1"
    run.mkdir(parents=True)
    timings = {"startup_s": 2.0, "load_s": 1.0, "tracking_s": 0.5, "resume_s": 0.0, "eval_s": 3.0,
               "rollout_s": 4.0, "update_s": 5.0, "step_s": 9.5, "samples_s": 0.0, "checkpoint_s": 0.25,
               "save_model_s": 0.25, "wall_s": 21.0}
    (run / "summary.json").write_text(json.dumps({"timings_this_invocation": timings}))
    job(root, "train_run", "s/grpo-seed1", 22.0, t0 + 32)  # 1 s outside the process
    # a run trained before the timings existed: metrics.jsonl sums, the rest "not recorded"
    old = root / "runs" / "s" / "ppo-seed1"
    old.mkdir(parents=True)
    (old / "summary.json").write_text(json.dumps({"final_accuracy": 0.5}))
    (old / "metrics.jsonl").write_text(
        json.dumps({"step": 0, "eval_s": 2.0}) + "\n"
        + json.dumps({"step": 1, "rollout_s": 3.0, "update_s": 6.0, "step_s": 9.0}) + "\n")
    job(root, "train_run", "s/ppo-seed1", 15.0, t0 + 25)
    job(root, "evaluate_run", "s/grpo-seed1/arith", 4.0, t0 + 36)
    b = TB.breakdown(root, "s", cores=2)
    assert b["span_s"] == pytest.approx(36.0)  # t0 .. t0 + 36
    parts = b["core_s_by_part"]
    assert parts["base-model build"] == pytest.approx(20.0)  # 10 s x 2 threads
    assert parts["train: process start, imports, config"] == pytest.approx(2.0)
    assert parts["train: model and data loading"] == pytest.approx(1.0)
    assert parts["train: rollout"] == pytest.approx(4.0 + 3.0)
    assert parts["train: update"] == pytest.approx(5.0 + 6.0)
    assert parts["train: rest of the step"] == pytest.approx(0.5)
    assert parts["train: evaluation in the run"] == pytest.approx(3.0 + 2.0)
    assert parts["train: checkpoints and final model"] == pytest.approx(0.5)
    assert parts["train: tracking (W&B, sample tables)"] == pytest.approx(0.5)
    # inside the process: 2 + 1 + 4 + 5 + 0.5 + 3 + 0.5 + 0.5 = 16.5 of its 21 s
    assert parts["train: rest of the process"] == pytest.approx(21.0 - 16.5)
    assert parts["train: outside the process (job start/exit)"] == pytest.approx(1.0)
    assert parts["train: not recorded"] == pytest.approx(15.0 - (3 + 6 + 2))
    assert parts["evaluation jobs (final models)"] == pytest.approx(4.0)
    assert parts["idle cores"] == pytest.approx(72.0 - (20 + 22 + 15 + 4))
    assert sum(parts.values()) == pytest.approx(b["core_s"])
    grpo = b["methods"]["grpo"]
    # overhead: start 2 + loading 1 + checkpoints 0.5 + tracking 0.5 + rest 4.5 + outside 1 = 9.5 of 22
    assert grpo["median_overhead_share"] == pytest.approx(9.5 / 22)
    assert b["methods"]["ppo"]["median_overhead_share"] == pytest.approx(4.0 / 15)


def test_a_base_model_cached_earlier_is_not_this_study_s_time(tmp_path):
    root = project(tmp_path)
    job(root, "build_base_model", "tiny-arith", 100.0, 1_000.0)
    run = root / "runs" / "s" / "grpo-seed1"
    run.mkdir(parents=True)
    (run / "summary.json").write_text(json.dumps({"timings_this_invocation": {"wall_s": 5.0, "step_s": 5.0}}))
    job(root, "train_run", "s/grpo-seed1", 5.0, 10_000.0)
    b = TB.breakdown(root, "s", cores=1)
    assert "base-model build" not in b["core_s_by_part"] and b["span_s"] == pytest.approx(5.0)


def test_no_benchmark_files_of_the_study_is_one_line_and_root_not_a_project_exit_2(tmp_path):
    root = project(tmp_path)
    script = str(ROOT / "benchmarks" / "time_breakdown.py")
    r = subprocess.run([sys.executable, script, "--study", "nope", "--root", str(root)],
                       capture_output=True, text=True)
    assert r.returncode != 0 and r.stderr.strip().count("\n") == 0 and "study 'nope'" in r.stderr, r.stderr
    r = subprocess.run([sys.executable, script, "--study", "s", "--root", str(tmp_path)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no configs/defaults.yaml" in r.stderr, r.stderr


def test_runs_of_one_variant_on_several_bases_are_one_method(tmp_path):
    root = project(tmp_path)
    for i, rid in enumerate(["grpo-seed1", "grpo-base2-seed1"]):
        run = root / "runs" / "s" / rid
        run.mkdir(parents=True)
        (run / "summary.json").write_text(json.dumps({"timings_this_invocation": {"wall_s": 5.0, "step_s": 5.0}}))
        job(root, "train_run", f"s/{rid}", 5.0 + i, 10_000.0 + 10 * i)
    b = TB.breakdown(root, "s", cores=1)
    assert list(b["methods"]) == ["grpo"]
