"""The atlas's freeze and its confirmatory phase (issue 34): the family chosen for power at the
level Holm tests it, new base seeds, a freeze written once and refused when the claims changed,
the pipeline's confirm-<study> runs (only the frozen arms, on the frozen bases, after a commit),
and the confirmatory verdicts on those runs alone."""
from __future__ import annotations

import json
import math
import subprocess

import pandas as pd
import pytest
import yaml

from grpo_research.analysis.atlas import ALPHA
from grpo_research.analysis.atlas_report import write_atlas
from grpo_research.analysis.freeze import FreezeError, check_freeze, choose_family, claim_power, freeze
from grpo_research.analysis.stats import power_one_sided
from grpo_research.cli.atlas import main as atlas_main
from tests.test_atlas import ROOT, _claim, _run, _study


def _row(id, sd, delta=0.02, kind="difference (greater)", margin=None, family="bh", between=0.0, **more):
    return {"id": id, "kind": kind, "smallest_effect": delta, "margin": margin, "sd_diff": sd, "between_sd": between,
            "family": family, "verdict": "inconclusive", "failed_precondition": "", "positive_control": False, **more}


def test_claim_power_adds_the_between_base_sd_and_treats_an_equivalence_as_two_tests():
    p, sd = claim_power(_row("a", 0.03, between=0.04), 8, 0.01)
    assert sd == pytest.approx(0.05) and p == pytest.approx(power_one_sided(8, 0.02, 0.05, 0.01))
    one = power_one_sided(8, 0.02, 0.01, 0.01)
    assert claim_power(_row("e", 0.01, kind="equivalence", margin=0.02), 8, 0.01)[0] == pytest.approx(1 - 2 * (1 - one))


def test_the_family_is_the_largest_set_with_power_at_holm_s_first_level():
    rows = [_row("strong", 0.002), _row("good", 0.006), _row("weak", 0.03), _row("untestable", math.nan,
            family="outside the family (not testable here)", verdict="not testable here",
            failed_precondition="off_bounds: heldout mean not inside (0, 1): a 0"),
            _row("control", 0.001, positive_control=True)]
    table = pd.DataFrame(rows)
    family, left = choose_family(table, 8, max_claims=6)
    # k = 3 fails (weak's power at alpha / 6 is low); k = 2: strong and good at alpha / 4
    assert [f["id"] for f in family] == ["strong", "good"]
    assert all(f["level"] == pytest.approx(ALPHA / 4) and f["power"] >= 0.8 for f in family)
    assert power_one_sided(8, 0.02, 0.006, ALPHA / 4) >= 0.8 > power_one_sided(8, 0.02, 0.03, ALPHA / 6)
    why = {x["id"]: x["why"] for x in left}
    assert set(why) == {"weak", "untestable"}  # the positive control is neither chosen nor left out
    assert why["untestable"].startswith("not testable here in the exploratory phase: off_bounds")
    assert why["weak"].startswith("power 0.")
    assert choose_family(table, 8, max_claims=1)[0][0]["id"] == "strong"
    assert choose_family(pd.DataFrame([_row("weak", 0.03)]), 8)[0] == []


@pytest.fixture()
def explored(tmp_path):
    """A toy exploratory atlas: GRPO clearly above Dr. GRPO; RFT tied with Dr. GRPO; a positive control."""
    exp, runs = tmp_path / "experiments", tmp_path / "runs"
    _study(exp, "toy", ["grpo", "dr_grpo", "rft"])
    for seed, (g, dr, rft) in enumerate([(0.40, 0.30, 0.30), (0.41, 0.31, 0.32), (0.40, 0.31, 0.29)], start=1):
        _run(runs / "toy", "grpo", "grpo", seed, g)
        _run(runs / "toy", "dr_grpo", "dr_grpo", seed, dr)
        _run(runs / "toy", "rft", "rft", seed, rft)
    claims = [_claim("big", [("toy", "grpo"), ("toy", "dr_grpo")], delta=0.05),
              _claim("tie", [("toy", "rft"), ("toy", "dr_grpo")]),
              _claim("ctl", [("toy", "grpo"), ("toy", "rft")], positive_control=True)]
    (exp / "claims.yaml").write_text(yaml.safe_dump({"claims": claims}, sort_keys=False))
    write_atlas(exp / "claims.yaml", exp, runs, tmp_path / "results" / "atlas_exploratory", improvement=False)
    return tmp_path, exp, runs


def test_freeze_writes_the_family_new_bases_and_hashes_once(explored, capsys):
    tmp, exp, runs = explored
    out = exp / "atlas_freeze.json"
    argv = ["freeze", "--claims", str(exp / "claims.yaml"), "--exploratory",
            str(tmp / "results" / "atlas_exploratory" / "atlas.csv"), "--out", str(out), "--runs", str(runs)]
    assert atlas_main(argv) == 0
    data = json.loads(out.read_text())
    assert [c["id"] for c in data["family"]] == ["big"] and [c["id"] for c in data["positive_controls"]] == ["ctl"]
    assert data["base_seeds"] == list(range(1000, 1008)) and data["seeds"] == [1] and data["procedure"] == "holm"
    assert data["family"][0]["validity"] == [{"check": "off_bounds", "floor": 0.0, "ceiling": 1.0}]
    assert "grpo_research/analysis/atlas.py" in data["analysis_sha256"] and "combined" in data["analysis_sha256"]
    assert {x["id"] for x in data["left_out"]} == {"tie"}
    assert "family of 1 (big)" in capsys.readouterr().out
    before = out.read_text()
    assert atlas_main(argv) == 2  # written once: nothing replaced
    assert out.read_text() == before and "exists: a freeze is written once" in capsys.readouterr().err
    assert check_freeze(data, exp / "claims.yaml") == []
    (exp / "claims.yaml").write_text((exp / "claims.yaml").read_text().replace("0.05", "0.06"))
    with pytest.raises(FreezeError, match="changed after the freeze"):
        check_freeze(data, exp / "claims.yaml")


def test_freeze_refuses_base_seeds_already_used_and_fewer_than_8_bases(explored):
    tmp, exp, runs = explored
    (runs / "_base" / "tiny-arith-base1003").mkdir(parents=True)
    csv = tmp / "results" / "atlas_exploratory" / "atlas.csv"
    with pytest.raises(FreezeError, match=r"base seeds \[1003\] are already used"):
        freeze(exp / "claims.yaml", csv, tmp / "f.json", runs_dir=runs)
    with pytest.raises(FreezeError, match="at least 8 new bases"):
        freeze(exp / "claims.yaml", csv, tmp / "f.json", runs_dir=runs, n_bases=4)
    assert not (tmp / "f.json").exists()


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def test_the_pipeline_runs_only_the_frozen_arms_on_the_frozen_bases_after_the_commit(explored):
    from grpo_research.pipeline import Pipeline, PipelineError

    tmp, exp, runs = explored
    freeze(exp / "claims.yaml", tmp / "results" / "atlas_exploratory" / "atlas.csv", exp / "atlas_freeze.json",
           runs_dir=runs, n_bases=8)
    cfg = yaml.safe_load((ROOT / "configs" / "defaults.yaml").read_text())
    cfg["studies_dir"] = str(exp)
    _git(tmp, "init", "-q")
    _git(tmp, "add", "experiments")
    p = Pipeline(cfg, ROOT)
    with pytest.raises(PipelineError, match="is not committed as it is"):
        p.confirm_studies()
    _git(tmp, "commit", "-qm", "freeze")
    p = Pipeline(cfg, ROOT)
    assert p.confirm_studies() == ["confirm-toy"] and "confirm-toy" in p.trained_study_names
    ids = p.study_runs("confirm-toy")
    # the family's arms (grpo, dr_grpo) and the positive control's (grpo, rft); no supervised control
    assert len(ids) == 8 * 3 and ids[0] == "grpo-base1000-seed1" and "dr_grpo-base1007-seed1" in ids
    assert "rft-base1003-seed1" in ids and not any("sft_control" in i for i in ids)
    args = [str(a) for a in p.atlas_args("confirmatory")]
    assert args[args.index("--phase") + 1] == "confirmatory" and "--freeze" in args
    assert args[args.index("--out") + 1].endswith("/atlas")
    assert f"confirm-toy={','.join(ids)}" in args
    assert p.freeze()["commit"]


def test_the_confirmatory_atlas_tests_the_frozen_claims_on_the_confirmatory_runs_by_holm(explored):
    tmp, exp, runs = explored
    freeze(exp / "claims.yaml", tmp / "results" / "atlas_exploratory" / "atlas.csv", exp / "atlas_freeze.json",
           runs_dir=runs)
    confirm = runs / "confirm-toy"
    for base in range(1000, 1008):
        for variant, value in (("grpo", 0.40), ("dr_grpo", 0.30 + 0.002 * (base % 3)), ("rft", 0.30)):
            _run(confirm, f"{variant}-base{base}", variant, 1, value)
    # run ids carry the base: the loader reads it from the directory name
    table = write_atlas(exp / "claims.yaml", exp, runs, tmp / "results" / "atlas", improvement=False,
                        phase="confirmatory", freeze_path=exp / "atlas_freeze.json").set_index("id")
    assert list(table.index) == ["big", "ctl"]  # the left-out claim is not tested
    big = table.loc["big"]
    assert big.phase == "confirmatory" and big.family == "holm" and big.n_bases == 8 and big.verdict == "reproduced"
    assert table.loc["ctl"].family == "outside the family (positive control)"
    md = (tmp / "results" / "atlas" / "atlas.md").read_text()
    assert "Confirmatory phase: the family frozen in experiments/atlas_freeze.json" in md
    assert "new base seeds 1000-1007" in md


def test_snakemake_plans_the_confirmatory_atlas_from_the_committed_freeze_and_refuses_without_one(explored):
    import sys
    from pathlib import Path

    tmp, exp, runs = explored
    for f in exp.glob("*.yaml"):  # the toy study, runnable by the pipeline
        if f.name != "claims.yaml":
            f.write_text(yaml.safe_dump({**yaml.safe_load(f.read_text()), "description": "toy", "budget_samples": 64}))
    cfg = tmp / "c.yaml"
    cfg.write_text(yaml.safe_dump({"studies_dir": str(exp)}))
    snakemake = str(Path(sys.executable).with_name("snakemake"))

    def plan():
        proc = subprocess.run([snakemake, "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp),
                               "--configfile", str(cfg), "-n", "-p", "atlas"], capture_output=True, text=True,
                              cwd=tmp, timeout=120)
        return proc.returncode, proc.stdout + proc.stderr

    code, out = plan()
    assert code != 0 and "atlas_freeze.json: no freeze (run `snakemake --cores all atlas_exploratory`" in out
    freeze(exp / "claims.yaml", tmp / "results" / "atlas_exploratory" / "atlas.csv", exp / "atlas_freeze.json",
           runs_dir=runs)
    _git(tmp, "init", "-q")
    _git(tmp, "add", "experiments")
    _git(tmp, "commit", "-qm", "freeze")
    code, out = plan()
    assert code == 0, out[-3000:]
    assert "runs/_base/tiny-arith-base1000/base_info.json" in out and "runs/_base/tiny-arith-base1007" in out
    assert "--run-dir runs/confirm-toy/grpo-base1004-seed1" in out and "--phase confirmatory" in out
    assert "runs/toy/" not in out.replace(str(runs), "")  # no exploratory run is planned


def test_a_tuned_claim_searches_each_arm_s_lr_and_its_confirmatory_runs_use_the_frozen_one(explored):
    from grpo_research.pipeline import Pipeline

    tmp, exp, runs = explored
    claims = yaml.safe_load((exp / "claims.yaml").read_text())["claims"]
    claims[0]["tuned"] = True  # big: grpo vs dr_grpo, each at its own lr
    (exp / "claims.yaml").write_text(yaml.safe_dump({"claims": claims}, sort_keys=False))
    cfg = yaml.safe_load((ROOT / "configs" / "defaults.yaml").read_text())
    cfg["studies_dir"] = str(exp)
    p = Pipeline(cfg, ROOT)
    assert p.tuning_arms() == {"lr-toy-grpo": ("toy", "grpo"), "lr-toy-dr_grpo": ("toy", "dr_grpo")}
    search, export = (list(map(str, a)) for a in p.tuning_args("lr-toy-dr_grpo"))
    assert search[search.index("--method") + 1] == "dr_grpo" and search[search.index("--n-trials") + 1] == "8"
    assert json.loads(search[search.index("--space") + 1]) == {"optim.lr": cfg["atlas"]["tuning"]["lr"]}
    assert not any(a.startswith(("seed=", "train.steps=", "tracking.group")) for a in search)
    assert export[export.index("--out") + 1] == search[search.index("--out") + 1]
    csv = tmp / "results" / "atlas_exploratory" / "atlas.csv"
    write_atlas(exp / "claims.yaml", exp, runs, csv.parent, improvement=False)
    assert "confirmatory phase" in pd.read_csv(csv).set_index("id").loc["big", "tuned"]
    with pytest.raises(FreezeError, match="is tuned but .*lr-toy-grpo/best.yaml does not exist"):
        freeze(exp / "claims.yaml", csv, exp / "atlas_freeze.json", runs_dir=runs, tuning_dir=tmp / "tuning")
    for arm, lr in (("grpo", 1.5e-4), ("dr_grpo", 4e-5)):
        (tmp / "tuning" / f"lr-toy-{arm}").mkdir(parents=True)
        (tmp / "tuning" / f"lr-toy-{arm}" / "best.yaml").write_text(yaml.safe_dump({"optim": {"lr": lr}}))
    data = freeze(exp / "claims.yaml", csv, exp / "atlas_freeze.json", runs_dir=runs, tuning_dir=tmp / "tuning")
    assert data["family"][0]["tuned_lr"] == {"toy/grpo": 1.5e-4, "toy/dr_grpo": 4e-5}
    _git(tmp, "init", "-q")
    _git(tmp, "add", "experiments")
    _git(tmp, "commit", "-qm", "freeze")
    p = Pipeline(cfg, ROOT)
    ids = p.study_runs("confirm-toy")  # the tuned arms as <variant>-lr; the control's grpo and rft as they are
    assert "grpo-lr-base1000-seed1" in ids and "dr_grpo-lr-base1000-seed1" in ids and "grpo-base1000-seed1" in ids
    assert "rft-base1000-seed1" in ids and "dr_grpo-base1000-seed1" not in ids
    run = p.study("confirm-toy").run("dr_grpo-lr-base1003-seed1")
    assert run.overrides[-1] == "optim.lr=4.0e-05" and run.variant == "dr_grpo-lr"


def test_at_most_four_arms_are_tuned_over_the_atlas(explored):
    from grpo_research.analysis.claims import ClaimsError, load_claims

    tmp, exp, runs = explored
    _study(exp, "toy", ["grpo", "dr_grpo", "rft", "rloo", "gspo"])
    claims = [_claim("a", [("toy", "grpo"), ("toy", "dr_grpo")], tuned=True),
              _claim("b", [("toy", "rft"), ("toy", "rloo")], tuned=True),
              _claim("c", [("toy", "gspo"), ("toy", "grpo")], tuned=True)]
    (exp / "claims.yaml").write_text(yaml.safe_dump({"claims": claims}))
    with pytest.raises(ClaimsError, match=r"claims\[2\] \(c\): tuned: the claims tune 5 arms; at most 4"):
        load_claims(exp / "claims.yaml", exp)
