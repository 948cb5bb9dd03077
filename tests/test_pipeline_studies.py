"""Study expansion (grpo_research/studies.py): run ids, the equal sample budget -> steps, the
grid product, seeds, overrides, and the errors a bad study file gives while planning."""
from pathlib import Path

import pytest
import yaml

from grpo_research.config import load_config
from grpo_research.run_ids import run_id_of, variant_of
from grpo_research.studies import StudyError, expand_study, find_studies, load_study_file, validate_schema

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "study.schema.yaml"


def _cfg(run):
    return load_config(None, run.overrides)


def test_ppo_vs_grpo_runs_ids_and_equal_budget():
    raw = load_study_file(ROOT / "experiments" / "ppo_vs_grpo.yaml", SCHEMA)
    paths = {b: "runs/_base/tiny-arith" + ("" if b == 0 else f"-base{b}") for b in range(5)}
    study = expand_study(raw, "ppo_vs_grpo", model_path="runs/_base/tiny-arith", base_paths=paths, threads=1)
    ids = [r.run_id for r in study.runs]
    assert ids[:3] == ["ppo-lam0.95-seed1", "ppo-lam0.95-base1-seed1", "ppo-lam0.95-base2-seed1"]
    assert {"ppo-lam1.0-seed1", "grpo-base2-seed1", "dr_grpo-base3-seed1", "sft_control-seed1",
            "sft_control-wall-base4-seed1"} <= set(ids)
    assert len(ids) == 35 and len(set(ids)) == 35  # (5 methods + 2 controls) x 5 bases x 1 seed
    assert study.variants == ["ppo-lam0.95", "ppo-lam1.0", "grpo", "dr_grpo", "dpo", "sft_control", "sft_control-wall"]
    assert study.default and study.seeds == [1] and study.base_seeds == [0, 1, 2, 3, 4] and "arith" in study.benchmarks
    assert study.compare == [["grpo", "ppo-lam0.95"], ["grpo", "dr_grpo"], ["grpo", "sft_control"]]
    for run in study.runs:
        if run.wall_match:  # steps are set when it runs, from the matched runs' time
            continue
        cfg = _cfg(run)
        samples = cfg.train.steps * cfg.rollout.prompts_per_step * cfg.algo.group_size
        assert samples == study.budget_samples == 9600
        assert cfg.model.name_or_path == paths[run.base]
        assert cfg.tracking.group == "ppo_vs_grpo" and cfg.train.threads == 1
        assert cfg.seed == run.seed and cfg.method == run.method
    lam = {r.run_id: _cfg(r).ppo.lam for r in study.runs if r.method == "ppo"}
    assert lam["ppo-lam0.95-seed1"] == 0.95 and lam["ppo-lam1.0-base3-seed1"] == 1.0
    assert _cfg(study.run("ppo-lam0.95-seed1")).tracking.tags == ["ppo.lam=0.95"]
    # the Dr. GRPO preset survives the study's overrides
    assert _cfg(study.run("dr_grpo-seed1")).algo.loss_agg == "constant"


def test_group_size_sweep_keeps_samples_equal_and_steps_vary():
    raw = load_study_file(ROOT / "experiments" / "group_size.yaml", SCHEMA)
    study = expand_study(raw, "group_size")
    steps = {r.variant: r.steps for r in study.runs if r.method == "grpo"}
    assert steps == {"grpo-G2": 800, "grpo-G4": 400, "grpo-G8": 200, "grpo-G16": 100}
    evals = {r.variant: _cfg(r).train.eval_every for r in study.runs if r.method == "grpo"}
    assert evals == {"grpo-G2": 80, "grpo-G4": 40, "grpo-G8": 20, "grpo-G16": 10}  # every 1280 samples
    assert _cfg(study.run("grpo-G16-seed2")).tracking.tags == ["algo.group_size=16"]


def test_grid_product_method_grids_and_seeds():
    raw = {
        "budget_samples": 64, "seeds": [0, 7],
        "methods": ["grpo", {"method": "dr_grpo", "grid": {"algo.beta": [0.0, 0.1]}}],
        "grid": {"rollout.temperature": [0.6, 1.0], "algo.group_size": [2, 4]},
        "overrides": {"rollout.prompts_per_step": 2},
    }
    study = expand_study(raw, "toy")
    # grpo: 2 x 2 grid points; dr_grpo: 2 (beta) x 2 x 2; each x 2 seeds; + 2 controls per seed
    assert len(study.runs) == (4 + 8) * 2 + 2 * 2
    ids = {r.run_id for r in study.runs}
    assert "grpo-temp0.6-G2-seed0" in ids and "dr_grpo-beta0.1-temp1.0-G4-seed7" in ids
    assert all(variant_of(r.run_id) == r.variant for r in study.runs)
    r = study.run("grpo-temp1.0-G4-seed7")
    assert r.steps == 64 // (2 * 4) and _cfg(r).rollout.temperature == 1.0 and r.seed == 7
    # workflow-level overrides: seeds replaced, methods filtered, run_overrides applied
    study = expand_study(raw, "toy", seeds=[3], only_methods=["grpo"], run_overrides=["train.eval_size=10"])
    assert {r.seed for r in study.runs} == {3} and {r.method for r in study.runs} == {"grpo"}
    assert all(_cfg(r).train.eval_size == 10 for r in study.runs)


def test_named_method_entry_and_colliding_short_names():
    raw = {"budget_samples": 64, "seeds": [1], "overrides": {"rollout.prompts_per_step": 2},
           "methods": [{"method": "grpo", "name": "grpo-nokl", "set": {"algo.beta": 0.0}}],
           "grid": {"optim.lr": [1e-5], "critic.lr": [1e-4], "ppo.gamma": [1.0], "algo.kl_estimator": ["k1"]}}
    study = expand_study({**raw, "control": False}, "named")
    assert [r.run_id for r in study.runs] == ["grpo-nokl-lr1e-05-vlr0.0001-gamma1.0-kl_estimatork1-seed1"]
    assert _cfg(study.runs[0]).algo.beta == 0.0


@pytest.mark.parametrize("raw, message", [
    ({"budget_samples": 100, "seeds": [1], "methods": ["grpo"]}, "not a multiple"),
    ({"budget_samples": 64, "seeds": [1], "methods": ["grpo"], "grid": {"algo.betta": [0.1]}}, "unknown key 'algo.betta'"),
    ({"budget_samples": 64, "seeds": [1], "methods": ["grpo"], "overrides": {"algo.beta": -1}}, "must be >= 0"),
    ({"budget_samples": 64, "seeds": [1], "methods": ["no_such_method"]}, "'method' = 'no_such_method'"),
    ({"budget_samples": 64, "seeds": [1, 1], "methods": ["grpo"]}, "distinct"),
    ({"budget_samples": 64, "seeds": [1], "methods": ["grpo", "grpo"]}, "share the id"),
    ({"budget_samples": 64, "seeds": [1], "methods": ["grpo"], "benchmarks": {"arith64": {"samples": 64}}},
     "bad: benchmarks.arith64: unknown benchmark 'arith64'; known: "),
    ({"budget_samples": 64, "seeds": [1], "methods": ["grpo"], "benchmarks": {"a": {"benchmark": "gsm9k"}}},
     "bad: benchmarks.a: unknown benchmark 'gsm9k'"),
    ({"budget_samples": 64, "seeds": [1], "methods": ["grpo"], "benchmarks": {"a": {"benchmark": ["arith"]}}},
     "bad: benchmarks.a.benchmark must be a benchmark name"),
    ({"budget_samples": 64, "seeds": [1], "methods": ["grpo"], "benchmarks": {"a/b": {"benchmark": "arith"}}},
     "bad: benchmarks.a/b: an entry name must be letters, digits and '_'"),
])
def test_bad_studies_fail_while_planning(raw, message):
    with pytest.raises(StudyError, match=message):
        expand_study(raw, "bad")


def test_a_benchmark_entry_names_its_file_and_may_run_another_benchmark():
    from grpo_research.studies import benchmark_of

    raw = {"budget_samples": 64, "seeds": [1], "methods": ["grpo"],
           "benchmarks": {"arith": {"n": 10}, "arith_pass64": {"benchmark": "arith", "samples": 64, "temperature": 1.0},
                          "gsm8k": None}}
    study = expand_study(raw, "s")
    assert list(study.benchmarks) == ["arith", "arith_pass64", "gsm8k"]
    assert [benchmark_of(e, o) for e, o in study.benchmarks.items()] == ["arith", "arith", "gsm8k"]
    validate_schema(raw, yaml.safe_load(SCHEMA.read_text()), "s.yaml")


def test_schema_rejects_misspelled_study_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"budget_samples": 64, "seeds": [1], "methods": ["grpo"], "benchmark": {}}))
    with pytest.raises(StudyError, match="Additional properties are not allowed .'benchmark' was unexpected"):
        load_study_file(bad, SCHEMA)


def test_every_shipped_study_expands():
    studies = find_studies(ROOT / "experiments")
    assert {"ppo_vs_grpo", "group_size", "beta", "clip_eps", "temperature", "loss_variants", "reward_only",
            "paradigm", "controls", "aa"} <= set(studies)
    assert "claims" not in studies and (ROOT / "experiments" / "claims.yaml").exists()  # not a study
    expected = {"group_size": [2, 4, 8, 16], "beta": [0.0, 0.01, 0.04, 0.1], "clip_eps": [0.1, 0.2, 0.3],
                "temperature": [0.6, 1.0, 1.2]}
    for name, path in studies.items():
        raw = load_study_file(path, SCHEMA)
        study = expand_study(raw, name, base_paths={b: None for b in raw.get("base_seeds") or [0]})
        assert len(study.seeds) * len(study.base_seeds) >= 3
        budget = {_cfg(r).train.steps * _cfg(r).rollout.prompts_per_step * _cfg(r).algo.group_size
                  for r in study.runs if not r.wall_match}
        assert budget == {study.budget_samples}, name
        controls = [r.run_id for r in study.runs if r.method == "sft_control"]
        control = study.raw.get("control", True)  # every study has the control unless it turns it off
        if control == "equal_samples":  # the equal-samples twin alone (no wall-time match)
            assert controls == [run_id_of("sft_control", b, s) for b in study.base_seeds for s in study.seeds], name
        elif control:
            assert controls == [run_id_of(f"sft_control{k}", b, s) for b in study.base_seeds for s in study.seeds
                                for k in ("", "-wall")], name
        else:
            assert not controls, name
        if name in expected:
            (values,) = [list(v) for v in study.raw["grid"].values()]
            assert values == expected[name]
    loss = expand_study(load_study_file(studies["loss_variants"], SCHEMA), "loss_variants")
    assert {r.method for r in loss.runs} == {"grpo", "dr_grpo", "dapo", "gspo", "rloo", "reinforce_pp", "sft_control"}
    assert [s for s in studies if load_study_file(studies[s]).get("default")] == ["ppo_vs_grpo"]
    reward_only = expand_study(load_study_file(studies["reward_only"], SCHEMA), "reward_only")
    assert all(_cfg(r).task.options == {"withhold_solutions": True} for r in reward_only.runs)
    assert not [r for r in reward_only.runs if r.method == "sft_control"]  # nothing to imitate


def test_train_at_budget_sets_steps_and_replaces_a_stale_run(tiny_model_dir, tmp_path):
    from grpo_research.cli.study import main

    run = tmp_path / "grpo-best-seed1"
    common = [f"model.name_or_path={tiny_model_dir}", "rollout.prompts_per_step=1", "train.eval_size=4",
              "rollout.max_new_tokens=6", "tracking.wandb=disabled", "tracking.progress=false", "train.threads=1"]
    assert main(["train-budget", "--budget-samples", "8", "--run-dir", str(run), "algo.group_size=4", *common]) == 0
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["steps"] == 2  # 8 / (1 x 4)
    # a different config (e.g. a new best of a longer search): refused, unless moved aside
    assert main(["train-budget", "--budget-samples", "8", "--run-dir", str(run), "algo.group_size=2", *common]) == 2
    assert main(["train-budget", "--budget-samples", "8", "--run-dir", str(run), "--replace-stale", "algo.group_size=2",
                 *common]) == 0
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["steps"] == 4
    assert yaml.safe_load((tmp_path / "grpo-best-seed1.stale-1" / "config.yaml").read_text())["algo"]["group_size"] == 4


def test_control_is_added_once_per_seed_not_crossed_and_matched_in_wall_time():
    raw = {"budget_samples": 64, "seeds": [1, 2], "methods": ["grpo", "ppo"], "overrides": {"rollout.prompts_per_step": 2},
           "grid": {"algo.group_size": [2, 4]}}
    study = expand_study(raw, "ctl")
    ctl = {r.run_id: r for r in study.runs if r.method == "sft_control"}
    assert sorted(ctl) == ["sft_control-seed1", "sft_control-seed2", "sft_control-wall-seed1", "sft_control-wall-seed2"]
    twin = ctl["sft_control-seed2"]
    assert twin.swept == {} and not twin.wall_match and twin.tags == ["control=equal_samples"]
    assert twin.steps * twin.samples_per_step == 64  # equal samples (default G = 8 x 2 prompts per step)
    wall = ctl["sft_control-wall-seed2"]
    assert wall.wall_probe == "sft_control-seed2"
    assert wall.wall_match == ["grpo-G2-seed2", "grpo-G4-seed2", "ppo-G2-seed2", "ppo-G4-seed2"]
    assert "sft_control" in study.variants and "sft_control-wall" in study.variants
    assert not [r for r in expand_study({**raw, "control": False}, "ctl").runs if r.method == "sft_control"]
    twins = [r.run_id for r in expand_study({**raw, "control": "equal_samples"}, "ctl").runs if r.method == "sft_control"]
    assert twins == ["sft_control-seed1", "sft_control-seed2"]  # no wall-time match
    # a study that lists the control itself gets no second one
    listed = expand_study({**raw, "methods": ["grpo", "sft_control"]}, "ctl")
    assert [r.run_id for r in listed.runs if r.method == "sft_control"] == [
        "sft_control-G2-seed1", "sft_control-G2-seed2", "sft_control-G4-seed1", "sft_control-G4-seed2"]
    with pytest.raises(StudyError, match="control must be true, false or equal_samples"):
        expand_study({**raw, "control": "yes"}, "ctl")


def _metrics(d, step_s, steps):
    import json

    d.mkdir(parents=True)
    rows = [{"step": 0, "eval/accuracy": 0.1}] + [{"step": i + 1, "step_s": step_s} for i in range(steps)]
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d


def test_wall_budget_matches_the_longest_run_at_the_probe_speed(tmp_path):
    from grpo_research.study_budget import wall_budget

    a = _metrics(tmp_path / "grpo-seed1", 0.5, 20)  # 10 s
    b = _metrics(tmp_path / "ppo-seed1", 1.25, 20)  # 25 s, the longest
    probe = _metrics(tmp_path / "sft_control-seed1", 0.1, 7)  # median 0.1 s per step
    got = wall_budget([a, b], probe, evals=6)
    assert got["matched_run"] == "ppo-seed1" and got["target_s"] == pytest.approx(25.0)
    assert got["steps"] == 250 and got["eval_every"] == 41
    with pytest.raises(StudyError, match="no training step"):
        wall_budget([a], _metrics(tmp_path / "empty", 0.1, 0), evals=6)
    with pytest.raises(StudyError, match="missing"):
        wall_budget([a], tmp_path / "never-ran", evals=6)


def test_base_seeds_nest_the_seeds_and_base_0_keeps_todays_runs():
    """base_seeds: every arm on every base, RL seeds nested in bases, run ids of bases other than
    0 carry the base, each base's runs train from its own base model dir; base 0 is exactly the
    study without base_seeds (same ids, same overrides), so its run dirs still count as done."""
    raw = {"budget_samples": 64, "seeds": [1, 2], "methods": ["grpo", "ppo"], "overrides": {"rollout.prompts_per_step": 2}}
    paths = {0: "runs/_base/m", 3: "runs/_base/m-base3"}
    study = expand_study({**raw, "base_seeds": [0, 3]}, "b", model_path="runs/_base/m", base_paths=paths)
    ids = [r.run_id for r in study.runs]
    assert ids[:4] == ["grpo-seed1", "grpo-seed2", "grpo-base3-seed1", "grpo-base3-seed2"]
    assert len(ids) == 2 * 2 * 4 and study.base_seeds == [0, 3]  # (2 methods + 2 controls) x 2 bases x 2 seeds
    r = study.run("ppo-base3-seed2")
    assert (r.variant, r.base, r.seed) == ("ppo", 3, 2)
    cfg = _cfg(r)
    assert cfg.model.name_or_path == "runs/_base/m-base3" and cfg.seed == 2 and "base=3" in cfg.tracking.tags
    # the equal-wall-time control of base 3 matches only base 3's runs of its seed
    assert study.run("sft_control-wall-base3-seed1").wall_match == ["grpo-base3-seed1", "ppo-base3-seed1"]
    assert study.run("sft_control-wall-base3-seed1").wall_probe == "sft_control-base3-seed1"
    before = expand_study(raw, "b", model_path="runs/_base/m")
    assert {x.run_id: x.overrides for x in before.runs} == {x.run_id: x.overrides for x in study.runs if x.base == 0}
    assert before.base_seeds == [0]
    # --config base_seeds replaces the study's
    again = expand_study({**raw, "base_seeds": [0, 3]}, "b", base_paths={5: "p5"}, base_seeds=[5])
    assert sorted({x.base for x in again.runs}) == [5] and _cfg(again.run("grpo-base5-seed1")).model.name_or_path == "p5"


@pytest.mark.parametrize("changes, kwargs, message", [
    ({"base_seeds": [0, 1]}, {}, r"base_seeds \[0, 1\]: model 'tiny-arith' is not a base model the pipeline builds"),
    ({"base_seeds": [1, 1]}, {"base_paths": {1: "p"}}, "base_seeds must be a non-empty list of distinct integers >= 0"),
    ({"base_seeds": [-1]}, {"base_paths": {-1: "p"}}, "base_seeds must be a non-empty list of distinct integers >= 0"),
    ({"compare": [["grpo", "grpo"]]}, {}, r"compare\[0\]: \['grpo', 'grpo'\] must name two different variants"),
    ({"compare": [["grpo", "ppo-lam9"]]}, {}, r"compare\[0\]: 'ppo-lam9' is not a variant of the study \(grpo, ppo,"),
])
def test_bad_base_seeds_and_compare_are_one_line(changes, kwargs, message):
    raw = {"budget_samples": 64, "seeds": [1], "methods": ["grpo", "ppo"], **changes}
    with pytest.raises(StudyError, match=message) as e:
        expand_study(raw, "b", **kwargs)
    assert "\n" not in str(e.value)


def test_compare_names_the_primary_pairs():
    raw = {"budget_samples": 64, "seeds": [1], "methods": ["grpo", {"method": "ppo", "set": {"ppo.lam": 0.95}}],
           "compare": [["grpo", "ppo-lam0.95"]]}
    assert expand_study(raw, "b").compare == [["grpo", "ppo-lam0.95"]]
    assert expand_study({**raw, "methods": ["grpo"]}, "b", only_methods=["grpo"]).compare == []


def test_run_ids_with_and_without_a_base():
    from grpo_research.run_ids import base_of, run_id_of, seed_of

    for variant, base, seed in [("grpo", 0, 1), ("ppo-lam0.95", 2, 3), ("grpo-G8", 11, -1)]:
        rid = run_id_of(variant, base, seed)
        assert (variant_of(rid), base_of(rid), seed_of(rid)) == (variant, base, seed)
    assert run_id_of("grpo", 0, 1) == "grpo-seed1" and run_id_of("grpo", 2, 1) == "grpo-base2-seed1"


def test_study_list_and_claims_read_a_study_with_base_seeds(tmp_path, capsys):
    from grpo_research.cli.study import main

    f = tmp_path / "bs.yaml"
    f.write_text(yaml.safe_dump({"budget_samples": 64, "seeds": [1], "base_seeds": [0, 2], "methods": ["grpo"],
                                 "control": False}))
    assert main(["list", str(f), "--model-path", "runs/_base/m"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["grpo-seed1", "grpo-base2-seed1"]
    assert "model.name_or_path=runs/_base/m-base2 " in lines[1] and "model.name_or_path=runs/_base/m " in lines[0]


def test_the_studies_table_gives_each_study_its_first_sentence_target_and_size(tmp_path):
    from grpo_research.studies import studies_table

    (tmp_path / "cmp.yaml").write_text(yaml.safe_dump({
        "description": "GRPO against Dr. GRPO at equal samples. The second sentence is left out.",
        "budget_samples": 1280, "seeds": [1, 2], "methods": ["grpo", "dr_grpo"]}))
    (tmp_path / "claims.yaml").write_text("claims: []\n")  # not a study
    rows = studies_table(tmp_path).splitlines()
    # 2 methods x 2 seeds + the two supervised controls per seed
    assert rows[2:] == ["| `cmp` | `study_cmp` | GRPO against Dr. GRPO at equal samples. | 8 | 1,280 |"]
