"""The Snakemake workflow plans correctly: targets, schema validation of the config (a
misspelled key fails before any job with the schema's message), a broken study file, the
SLURM profile's dry run. Dry runs only (`snakemake -n`), in a temp working directory."""
import importlib.util
import json
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


# ---------------------------------------------------------------- grpo_research/pipeline.py
from grpo_research.pipeline import Pipeline, PipelineError, RerunId, RunId, alternation, q  # noqa: E402


def pipeline(**changes) -> Pipeline:
    cfg = yaml.safe_load((ROOT / "configs" / "defaults.yaml").read_text())
    cfg["studies_dir"] = str(ROOT / "experiments")
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return Pipeline(cfg, ROOT)


def test_run_ids_parse_with_a_clear_error():
    assert RunId.parse("ppo-lam0.95-seed1") == RunId("ppo-lam0.95", 1)
    assert RunId.parse("grpo-seed-3") == RunId("grpo", -3) and str(RunId("grpo-G8", 2)) == "grpo-G8-seed2"
    assert RerunId.parse("grpo-best-seed101") == RerunId("grpo", "best", 101)
    assert RerunId.parse("dr_grpo-default-seed7").variant == "dr_grpo-default"
    for bad in ("grpo", "grpo-seedx", "grpo-seed1-extra"):
        with pytest.raises(PipelineError, match="is not <variant>-seed<N>"):
            RunId.parse(bad)
    with pytest.raises(PipelineError, match="is not <method>-default-seed<N>"):
        RerunId.parse("grpo-worst-seed1")


def test_helpers_quote_and_constrain():
    assert q(["a b", 1, "x=y"]) == "'a b' 1 x=y"
    assert alternation(["ab", "abc"]) == "abc|ab" and alternation([]) == "(?!x)x"


def test_study_jobs_paths_and_train_commands():
    p = pipeline()
    assert p.default_studies() == ["ppo_vs_grpo"] and p.selected_studies() == ["ppo_vs_grpo"]
    assert p.report_path("beta") == "results/beta/report.html" and p.index_path == "results/index.html"
    runs = p.study_runs("ppo_vs_grpo")
    assert len(runs) == 18 and "sft_control-wall-seed2" in runs
    assert p.train_args("ppo_vs_grpo", "grpo-seed1")[:3] == ["train", "--run-dir", "runs/ppo_vs_grpo/grpo-seed1"]
    wall = p.train_args("ppo_vs_grpo", "sft_control-wall-seed1")
    assert wall[:4] == ["study", "train-wall", "--probe", "runs/ppo_vs_grpo/sft_control-seed1"]
    assert wall.count("--match") == 4 and "runs/ppo_vs_grpo/grpo-seed1" in wall
    assert p.wall_inputs("ppo_vs_grpo", "sft_control-wall-seed1")[-1] == "runs/ppo_vs_grpo/sft_control-seed1/summary.json"
    assert p.wall_inputs("ppo_vs_grpo", "grpo-seed1") == []
    assert p.train_threads("ppo_vs_grpo", "grpo-seed1") == 1
    assert p.eval_args("ppo_vs_grpo", "arith") == ["--n", 1000]
    with pytest.raises(PipelineError, match="lists no benchmark 'gsm8k'"):
        p.eval_args("ppo_vs_grpo", "gsm8k")
    with pytest.raises(PipelineError, match="unknown study 'nope'"):
        p.study("nope")
    args = p.report_args("ppo_vs_grpo")
    assert args[:6] == ["--runs", "runs/ppo_vs_grpo", "--out", "results/ppo_vs_grpo", "--study", "ppo_vs_grpo"]
    assert args[-2:] == ["--study-file", p.study_files["ppo_vs_grpo"]]
    assert len(p.report_inputs("ppo_vs_grpo")["runs"]) == 36  # 18 summaries + 18 evaluations


def test_hpo_searches_reruns_and_their_report():
    p = pipeline()
    assert list(p.searches) == ["grpo-arith", "ppo-arith"]
    assert p.search_of("hpo-grpo-arith") == "grpo-arith" and p.search_of("hpo-other") is None
    assert p.search_of("ppo_vs_grpo") is None
    assert p.rerun_ids("grpo-arith") == [f"grpo-{k}-seed{s}" for k in ("default", "best") for s in (101, 102, 103)]
    assert p.study_variants("hpo-grpo-arith") == ["grpo-default", "grpo-best"]
    assert p.rerun_inputs("grpo-arith", "grpo-best-seed101")[-1] == "results/hpo/grpo-arith/best.yaml"
    assert p.rerun_inputs("grpo-arith", "grpo-default-seed101") == ["runs/_base/tiny-arith/base_info.json"]
    best = p.rerun_args("grpo-arith", "grpo-best-seed102")
    assert best[:4] == ["--budget-samples", 12800, "--run-dir", "runs/hpo-grpo-arith/grpo-best-seed102"]
    assert "--replace-stale" in best and "seed=102" in best and "tracking.tags=[config=best]" in best
    assert "--replace-stale" not in p.rerun_args("grpo-arith", "grpo-default-seed101")
    with pytest.raises(PipelineError, match="is not a rerun of search 'grpo-arith'"):
        p.rerun_args("grpo-arith", "grpo-best-seed1")
    report = p.report_args("hpo-ppo-arith")
    assert "--extra" in report and "Optuna search ppo-arith=results/hpo/ppo-arith/plots" in report
    assert set(p.report_inputs("hpo-ppo-arith")) == {"runs", "hpo_plots", "best"}
    with pytest.raises(PipelineError, match="lists 'grpo-arith' twice"):
        pipeline(hpo={"searches": [{"method": "grpo", "task": "arith"}] * 2})


def test_search_args_pass_only_what_the_config_sets():
    """Defaults of a search live in grpo_research.hpo.search alone: the pipeline passes the
    values of `hpo` and nothing else, and the CLI's spec equals the one those values give."""
    from grpo_research.cli.hpo import build_parser, make_spec
    from grpo_research.hpo.search import DEFAULT_SPACE, make_pruner

    p = pipeline()
    args = [str(a) for a in p.search_args("grpo-arith")]
    assert "--exclusive" in args and "--sampler-seed" not in args and "--max-retry" not in args
    assert json.loads(args[args.index("--space") + 1]) == DEFAULT_SPACE
    spec = make_spec(build_parser().parse_args(["search", *args]))
    assert spec.exclusive is True and spec.eval_every_samples == 1280 and spec.n_trials == 20
    assert (spec.sampler_seed, spec.train_seed, spec.heartbeat_interval, spec.grace_period, spec.max_retry) == \
        (0, 0, 60, 180, 2)
    pruner = make_pruner(spec.pruner)
    assert (pruner._n_startup_trials, pruner._n_warmup_steps) == (5, 1280)
    # a config may drop a key of the default space, or set one the defaults leave out
    dropped = pipeline(hpo={"space": {"algo.beta": None}, "exclusive": False, "sampler_seed": 3})
    args = [str(a) for a in dropped.search_args("ppo-arith")]
    assert "algo.beta" not in json.loads(args[args.index("--space") + 1])
    assert "--exclusive" not in args and args[args.index("--sampler-seed") + 1] == "3"
    spec = make_spec(build_parser().parse_args(["export", "--name", "x", "--method", "grpo", "--out", "o"]))
    assert spec.exclusive is False and spec.space == DEFAULT_SPACE


def test_pipeline_errors_become_workflow_errors_in_the_rules():
    text = (ROOT / "workflow" / "rules" / "common.smk").read_text()
    assert "except PipelineError" in text and "raise WorkflowError" in text
    for rule in (ROOT / "workflow" / "rules").glob("*.smk"):  # the rules compute nothing themselves
        body = rule.read_text()
        assert "rsplit(" not in body and "[4:]" not in body and "-m analysis" not in body, rule.name
