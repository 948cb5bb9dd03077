"""A study's `kernels: [native, avx2]` (issue 33): a fixed block crossed with the base models.
Every job of a run on avx2 (its base build, training, evaluations) runs with that family's
variables set; run ids and base dirs carry the family; the analysis pairs by (base, family,
seed), tests on per-base means and reports the difference on each family as well."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_research.provenance import KERNEL_FAMILIES, kernel_env_prefix
from grpo_research.run_ids import base_of, kernels_of, run_id_of, seed_of, variant_of
from grpo_research.studies import StudyError, expand_study

ROOT = Path(__file__).resolve().parents[1]
SPEC = {"description": "x", "budget_samples": 64, "seeds": [1], "control": False, "methods": ["grpo"]}


def test_run_ids_carry_the_kernel_family_and_parse_back():
    for variant, base, seed, k in [("grpo", 0, 1, "native"), ("grpo", 0, 1, "avx2"), ("ppo-lam0.95", 3, 2, "avx2")]:
        rid = run_id_of(variant, base, seed, k)
        assert (variant_of(rid), base_of(rid), seed_of(rid), kernels_of(rid)) == (variant, base, seed, k)
    assert run_id_of("grpo", 2, 1, "avx2") == "grpo-base2-kavx2-seed1" and run_id_of("grpo", 0, 1) == "grpo-seed1"
    assert kernels_of("grpo-kl0.1-seed1") == "native" and variant_of("grpo-kl0.1-seed1") == "grpo-kl0.1"


def test_every_arm_runs_on_every_base_and_family_from_its_own_base_model():
    paths = {0: "b0", 1: "b1", (0, "avx2"): "b0-kavx2", (1, "avx2"): "b1-kavx2"}
    study = expand_study({**SPEC, "base_seeds": [0, 1], "kernels": ["native", "avx2"]}, "k", base_paths=paths)
    ids = [r.run_id for r in study.runs]
    assert ids == ["grpo-seed1", "grpo-kavx2-seed1", "grpo-base1-seed1", "grpo-base1-kavx2-seed1"]
    by_id = {r.run_id: r for r in study.runs}
    assert "model.name_or_path=b1-kavx2" in by_id["grpo-base1-kavx2-seed1"].overrides
    assert by_id["grpo-base1-kavx2-seed1"].kernels == "avx2" and "kernels=avx2" in by_id["grpo-base1-kavx2-seed1"].tags
    assert by_id["grpo-seed1"].kernels == "native" and not any(t.startswith("kernels=") for t in by_id["grpo-seed1"].tags)
    assert study.kernels == ["native", "avx2"]


@pytest.mark.parametrize("changes, message", [
    ({"kernels": ["native", "sse2"]}, "kernels must be distinct kernel families of native, avx2"),
    ({"kernels": ["avx2", "avx2"]}, "kernels must be distinct kernel families"),
])
def test_an_unknown_family_is_one_line(changes, message):
    with pytest.raises(StudyError, match=message):
        expand_study({**SPEC, **changes}, "k", base_paths={0: "b0"})


def test_a_model_the_pipeline_does_not_build_has_only_its_native_kernels():
    with pytest.raises(StudyError, match="cannot be built on another kernel family; drop kernels"):
        expand_study({**SPEC, "model": "HuggingFaceTB/SmolLM2-135M-Instruct", "kernels": ["avx2"]}, "k")


def test_the_schema_names_the_registered_families():
    schema = yaml.safe_load((ROOT / "workflow" / "schemas" / "study.schema.yaml").read_text())
    assert schema["properties"]["kernels"]["items"]["enum"] == list(KERNEL_FAMILIES)


def test_the_prefix_sets_the_variables_a_run_records():
    """The shell prefix of an avx2 job reaches the process: provenance.kernel_settings() there
    reads every variable of the family; native leaves the environment as it is."""
    code = "import json; from grpo_research.provenance import kernel_settings; print(json.dumps(kernel_settings()))"
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_FAMILIES["avx2"]}
    for family in ("native", "avx2"):
        cmd = f"{kernel_env_prefix(family)}{sys.executable} -c '{code}'"
        out = subprocess.run(cmd, shell=True, capture_output=True, text=True, env=env, cwd=ROOT, check=True).stdout
        got = json.loads(out)
        assert got == ("native" if family == "native" else KERNEL_FAMILIES["avx2"])
    with pytest.raises(Exception, match="kernel family 'sse2' is not one of native, avx2"):
        kernel_env_prefix("sse2")


def test_the_pipeline_builds_trains_and_evaluates_each_family_with_its_variables(tmp_path):
    from grpo_research.pipeline import Pipeline

    studies = tmp_path / "experiments"
    studies.mkdir()
    (studies / "k.yaml").write_text(yaml.safe_dump({**SPEC, "base_seeds": [0, 2], "kernels": ["native", "avx2"],
                                                    "benchmark_base": True, "benchmarks": {"arith": {"n": 8}}}))
    cfg = yaml.safe_load((ROOT / "configs" / "defaults.yaml").read_text())
    cfg["studies_dir"] = str(studies)
    p = Pipeline(cfg, ROOT)
    runs = cfg["runs_dir"].rstrip("/")
    assert p.study_runs("k") == ["grpo-seed1", "grpo-kavx2-seed1", "grpo-base2-seed1", "grpo-base2-kavx2-seed1"]
    assert p.run_base_inputs("k", "grpo-base2-kavx2-seed1") == [f"{runs}/_base/tiny-arith-base2-kavx2/base_info.json"]
    assert p.run_base_inputs("k", "grpo-base2-seed1") == [f"{runs}/_base/tiny-arith-base2/base_info.json"]
    avx2 = kernel_env_prefix("avx2")
    assert avx2.startswith("env ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2")
    assert p.run_env("k", "grpo-base2-kavx2-seed1") == avx2 and p.run_env("k", "grpo-base2-seed1") == ""
    assert p.base_model_env("tiny-arith-base2-kavx2") == avx2 and p.base_model_env("tiny-arith-base2") == ""
    assert p.base_model_overrides("tiny-arith-base2-kavx2") == p.base_model_overrides("tiny-arith-base2")
    assert f"{runs}/k/_base_model-base2-kavx2/eval/arith.json" in p.study_outputs("k")
    args = p.base_eval_args("k", "arith", 2, "avx2")
    assert args[args.index("--checkpoint") + 1] == f"{runs}/_base/tiny-arith-base2-kavx2"


def test_the_dry_run_plans_the_avx2_jobs_with_the_variables(tmp_path):
    studies = tmp_path / "experiments"
    studies.mkdir()
    (studies / "k.yaml").write_text(yaml.safe_dump({**SPEC, "kernels": ["native", "avx2"],
                                                    "benchmarks": {"arith": {"n": 8}}}))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"studies_dir": str(studies)}))
    snakemake = str(Path(sys.executable).with_name("snakemake"))
    proc = subprocess.run([snakemake, "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
                           "--configfile", str(cfg), "-n", "-p", "study_k"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "runs/_base/tiny-arith-kavx2/base_info.json" in out
    lines = [line for line in out.splitlines() if "ATEN_CPU_CAPABILITY=avx2" in line]
    assert any(" sft --out " in line and "tiny-arith-kavx2" in line for line in lines)  # the build
    assert any(" train --run-dir " in line and "grpo-kavx2-seed1" in line for line in lines)  # the run
    assert any(" eval --checkpoint " in line and "grpo-kavx2-seed1" in line for line in lines)  # its evaluation
    assert not any("grpo-seed1 " in line or "_base/tiny-arith " in line for line in lines)  # native: none


def _run(d: Path, run_id: str, method: str, final: float) -> None:
    run = d / run_id
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": 1, "train": {"eval_size": 1000}}))
    rows = [{"step": 0, "samples": 0, "eval/accuracy": 0.3}, {"step": 1, "samples": 64, "step_s": 0.1},
            {"step": 1, "samples": 64, "eval/accuracy": final}]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "summary.json").write_text(json.dumps({"final_accuracy": final}))


def test_the_analysis_pairs_by_family_tests_per_base_and_reports_each_family(tmp_path):
    """GRPO - PPO per base (0, 1, 2): native 0.10, 0.02, 0.06; avx2 0.12, 0.04, 0.08. Over both
    families the per-base means are 0.11, 0.03, 0.07: mean 0.07, se sqrt(0.0016 / 3) = 0.023094,
    t(0.975, 2) = 4.302653: +-0.099366 (3 bases, 2 runs each). Native alone: 0.06 +- 0.099366;
    avx2 alone: 0.08 +- 0.099366 (one run per base: no within-base SD)."""
    import pandas as pd

    from grpo_research.analysis.aggregate import final_table
    from grpo_research.analysis.comparisons import variance_table
    from grpo_research.analysis.load import load_study_runs

    diffs = {("native", 0): 0.10, ("native", 1): 0.02, ("native", 2): 0.06,
             ("avx2", 0): 0.12, ("avx2", 1): 0.04, ("avx2", 2): 0.08}
    for (k, b), d in diffs.items():
        ppo = 0.2 + 0.1 * b
        _run(tmp_path, run_id_of("ppo-lam0.95", b, 1, k), "ppo", ppo)
        _run(tmp_path, run_id_of("grpo", b, 1, k), "grpo", ppo + d)
    runs = load_study_runs(tmp_path)
    assert {r.unit for r in runs if r.variant == "grpo"} == {(0, 1), (1, 1), (2, 1), (0, 1, "avx2"), (1, 1, "avx2"),
                                                             (2, 1, "avx2")}
    v = variance_table(final_table(runs), [["grpo", "ppo-lam0.95"]])
    v = v[v.metric == "heldout (trainer)"].set_index("kernels")
    assert list(v.index) == ["all", "native", "avx2"]
    half = 0.099366
    for k, mean, n_seeds in (("all", 0.07, "2"), ("native", 0.06, "1"), ("avx2", 0.08, "1")):
        assert v.loc[k, "n_bases"] == 3 and str(v.loc[k, "n_seeds"]) == n_seeds
        assert (v.loc[k, "mean_diff"], v.loc[k, "low"], v.loc[k, "high"]) == pytest.approx(
            (mean, mean - half, mean + half), abs=1e-5)
    assert "kernel families averaged within each base" in v.loc["all", "note"]
    assert pd.isna(v.loc["native", "within_base_sd"]) and v.loc["all", "within_base_sd"] == pytest.approx(0.014142,
                                                                                                          abs=1e-6)


def test_base_model_evaluations_are_kept_per_family(tmp_path):
    """_base_model-base1-kavx2 is base 1 on avx2, not base 1: the report lists each apart."""
    from grpo_research.analysis.study import base_model_runs

    for name, acc in (("_base_model", 0.20), ("_base_model-base1", 0.25), ("_base_model-base1-kavx2", 0.30)):
        (tmp_path / name / "eval").mkdir(parents=True)
        (tmp_path / name / "eval" / "arith.json").write_text(json.dumps({"pass@1": acc, "n_problems": 100}))
    found = base_model_runs(tmp_path)
    assert list(found) == [0, 1, (1, "avx2")]
    assert found[(1, "avx2")].benchmarks["arith"]["pass@1"] == 0.30 and found[1].benchmarks["arith"]["pass@1"] == 0.25
    assert [r.label for r in found.values()] == ["None", "b1", "b1kavx2"]
