"""The Snakemake workflow plans correctly: targets, schema validation of the config (a
misspelled key fails before any job with the schema's message), a broken study file, the
SLURM profile's dry run. Dry runs only (`snakemake -n`), in a temp working directory."""
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))


def snakemake(workdir: Path, *args: str, config: dict | None = None, timeout: int = 120):
    cmd = [SNAKEMAKE, "--snakefile", str(ROOT / "Snakefile"), "--directory", str(workdir)]
    cfg = {"studies_dir": str(ROOT / "experiments"), **(config or {})}
    path = workdir / "test-config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    cmd += ["--configfile", str(path), *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=workdir)
    return proc, time.perf_counter() - t0


def jobs(output: str) -> dict[str, int]:
    """The `Job stats` table of a dry run: rule -> count."""
    lines = output.split("Job stats:")[-1].splitlines()
    out = {}
    for line in lines[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        out[parts[0]] = int(parts[1])
    return out


def test_ablations_dry_run_plans_the_default_study(tmp_path):
    proc, seconds = snakemake(tmp_path, "-n", "ablations")
    print(f"snakemake -n ablations planned in {seconds:.2f} s")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    # 4 methods x 3 seeds, and the supervised control at equal samples and at equal wall time x 3 seeds
    assert jobs(out) == {"build_base_model": 1, "train_run": 18, "evaluate_run": 18, "report_study": 1,
                         "render_index": 1, "ablations": 1, "total": 40}
    assert "runs/ppo_vs_grpo/sft_control-wall-seed2/summary.json" in out
    assert "runs/ppo_vs_grpo/ppo-lam0.95-seed1/summary.json" in out
    assert "runs/ppo_vs_grpo/dr_grpo-seed3/eval/arith.json" in out


def test_other_targets_plan(tmp_path):
    proc, _ = snakemake(tmp_path, "-n", "study_beta", "hpo", "--config", "only_methods=[grpo]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    j = jobs(proc.stdout + proc.stderr)
    assert j["train_run"] == 12 and j["search_hpo"] == 2 and j["train_hpo_rerun"] == 12 and j["export_hpo"] == 2
    assert j["report_study"] == 3  # beta, hpo-grpo-arith, hpo-ppo-arith


def test_misspelled_config_key_fails_with_the_schema_message(tmp_path):
    proc, _ = snakemake(tmp_path, "-n", "ablations", config={"studies_dir": str(ROOT / "experiments"),
                                                              "hpo": {"n_trial": 3}})
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    assert "Error validating config file" in err
    assert "Additional properties are not allowed ('n_trial' was unexpected)" in err
    proc, _ = snakemake(tmp_path, "-n", "ablations", "--config", "run_overide=[]")
    assert proc.returncode != 0 and "'run_overide' was unexpected" in proc.stdout + proc.stderr
    assert not (tmp_path / "runs").exists() and not (tmp_path / "results").exists()


def test_broken_study_stops_planning_with_its_message(tmp_path):
    studies = tmp_path / "experiments"
    studies.mkdir()
    (studies / "typo.yaml").write_text(yaml.safe_dump(
        {"budget_samples": 64, "seeds": [1], "methods": ["grpo"], "grid": {"algo.betta": [0.1]}}))
    proc, _ = snakemake(tmp_path, "-n", "study_typo", config={"studies_dir": str(studies)})
    assert proc.returncode != 0
    assert "unknown key 'algo.betta'" in proc.stdout + proc.stderr


@pytest.mark.skipif(importlib.util.find_spec("snakemake_executor_plugin_slurm") is None,
                    reason="snakemake-executor-plugin-slurm not installed")
def test_slurm_profile_dry_run_without_slurm(tmp_path):
    proc, _ = snakemake(tmp_path, "--profile", str(ROOT / "configs" / "profiles" / "slurm"), "-n", "ablations")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert jobs(out)["train_run"] == 18
    assert "gres=gpu:1" in out and "mem_mb=4000" in out and "runtime=120" in out


def test_torchrun_runs_ask_for_a_core_per_process(tmp_path):
    """train.launcher=torchrun: the training job's threads are nproc_per_node x train.threads;
    a study that cannot train data-parallel (PPO, the control) stops while planning."""
    data_parallel = {"only_methods": ["grpo"], "run_overrides": ["train.launcher=torchrun", "rollout.sampler=counter"]}
    proc, _ = snakemake(tmp_path, "-n", "--cores", "8", "study_beta", config=data_parallel)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    train_blocks = [b for b in out.split("rule ") if b.startswith("train_run:")]
    assert len(train_blocks) == 12 and all("threads: 2" in b for b in train_blocks)
    proc, _ = snakemake(tmp_path, "-n", "--cores", "8", "study_beta", config={"only_methods": ["grpo"]})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and not [b for b in out.split("rule ") if b.startswith("train_run:") and "threads:" in b]
    proc, _ = snakemake(tmp_path, "-n", "ablations", config={"run_overrides": data_parallel["run_overrides"]})
    assert proc.returncode != 0 and "does not support method=ppo" in proc.stdout + proc.stderr
