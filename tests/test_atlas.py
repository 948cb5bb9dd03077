"""The replication atlas: one-sided tests, Benjamini-Hochberg, the seed planner (hand-computed and
simulated), claim verdicts on synthetic runs, pre-registration, the CLI and the pipeline target."""
from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from grpo_research.analysis.atlas import build_atlas, claims_commit
from grpo_research.analysis.atlas_report import load_inputs, write_atlas
from grpo_research.analysis.stats import (benjamini_hochberg, compare_paired, p_above, p_below, power_one_sided,
                                          seeds_for_power)
from grpo_research.cli.report import main as report_main

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- statistics, by hand
def test_one_sided_p_values_hand_computed():
    # d = 1, 2, 3: mean 2, sd 1, t = 2 sqrt(3) on 2 dof; the t(2) tail is 1/2 - t / (2 sqrt(2 + t^2))
    assert p_above([1, 2, 3], 0.0) == pytest.approx(0.5 - math.sqrt(3 / 14), abs=1e-12)
    assert p_below([1, 2, 3], 0.0) == pytest.approx(0.5 + math.sqrt(3 / 14), abs=1e-12)
    assert p_above([1, 2, 3], 2.0) == pytest.approx(0.5)  # the mean on the bound
    assert p_below([-1, -2, -3], 0.0) == pytest.approx(0.5 - math.sqrt(3 / 14), abs=1e-12)
    assert (p_above([5, 5, 5], 4.0), p_above([5, 5, 5], 5.0), p_below([5, 5, 5], 6.0)) == (0.0, 1.0, 0.0)
    assert math.isnan(p_above([1.0], 0.0))
    with pytest.raises(ValueError):
        p_above([1.0, float("nan")], 0.0)


def test_one_sided_tests_reject_exactly_where_compare_paired_s_interval_ends():
    d = [0.031, -0.012, 0.054, 0.020, 0.007]
    mean, low, high = compare_paired(d, [0.0] * 5)
    assert p_above(d, low) == pytest.approx(0.025, abs=1e-9)
    assert p_below(d, high) == pytest.approx(0.025, abs=1e-9)
    assert p_above(d, low - 1e-6) < 0.025 < p_above(d, low + 1e-6)


def test_benjamini_hochberg_hand_computed():
    # sorted 0.01, 0.03, 0.04, 0.20 times 4 / rank: 0.04, 0.06, 0.0533, 0.20 -> running minimum from the top
    adj = benjamini_hochberg([0.01, 0.04, 0.03, 0.20, float("nan")])
    assert adj[:4] == pytest.approx([0.04, 0.16 / 3, 0.16 / 3, 0.20])
    assert math.isnan(adj[4])
    assert benjamini_hochberg([0.5]) == [0.5] and benjamini_hochberg([0.9, 0.95]) == pytest.approx([0.95, 0.95])


def test_seeds_for_power_is_the_smallest_n_and_matches_simulation():
    n = seeds_for_power(1.0, 1.0)  # effect = one standard deviation of the per-seed differences
    assert power_one_sided(n, 1.0, 1.0) >= 0.8 > power_one_sided(n - 1, 1.0, 1.0)
    assert n >= math.ceil((1.959964 + 0.841621) ** 2)  # never below the normal approximation (7.85)
    rng = np.random.default_rng(0)
    from scipy.stats import t as student_t

    for size, want in ((n, 0.8), (n - 1, None)):
        x = rng.normal(1.0, 1.0, size=(20_000, size))
        t = x.mean(1) / (x.std(1, ddof=1) / math.sqrt(size))
        rate = float((t > student_t.ppf(0.975, size - 1)).mean())
        assert rate == pytest.approx(power_one_sided(size, 1.0, 1.0), abs=0.015)
    assert seeds_for_power(1.0, 0.0) == 2 and seeds_for_power(0.0, 1.0) is None
    assert seeds_for_power(0.01, 1.0, n_max=50) is None
    assert seeds_for_power(1.0, 1.0, sides=2) > n  # both one-sided tests of an equivalence must reject


# ---------------------------------------------------------------- synthetic studies
def _run(d: Path, variant: str, method: str, seed: int, final: float, base: float = 0.25, train: dict | None = None,
         benches: dict | None = None, ood: float = 0.0) -> None:
    run = d / f"{variant}-seed{seed}"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": seed, "train": {"eval_size": 1000}}))
    rows = [{"step": 0, "samples": 0, "eval/accuracy": base, "eval/accuracy_ood": 0.0}]
    for s in range(1, 5):
        rows.append({"step": s, "samples": 64 * s, "step_s": 0.1, **(train or {})})
    rows.append({"step": 4, "samples": 256, "eval/accuracy": final, "eval/accuracy_ood": ood})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "summary.json").write_text(json.dumps({"final_accuracy": final, "final_accuracy_ood": ood}))
    (run / "eval").mkdir()
    for name, value in (benches or {}).items():
        (run / "eval" / f"{name}.json").write_text(json.dumps(value))


def _study(exp: Path, name: str, methods: list, seeds=(1, 2, 3)) -> None:
    exp.mkdir(exist_ok=True)
    (exp / f"{name}.yaml").write_text(yaml.safe_dump({"budget_samples": 256, "seeds": list(seeds), "methods": methods,
                                                      "control": False}))


def _claim(id, arms, kind="difference", predicted="greater", metric="heldout", delta=0.02, **more):
    c = {"id": id, "source": {"arxiv": "2402.03300"}, "claim": f"A claim called {id}.", "kind": kind, "metric": metric,
         "budget": "equal_samples", "arms": [{"study": s, "variant": v} for s, v in arms], "smallest_effect": delta,
         "setting": "tiny-1m", **more}
    if kind == "difference":
        c["predicted"] = predicted
    return c


@pytest.fixture()
def atlas_dir(tmp_path):
    exp, runs = tmp_path / "experiments", tmp_path / "runs"
    _study(exp, "toy", ["grpo", "dr_grpo", "rft", {"method": "ppo", "set": {"ppo.lam": 0.95}}])
    # per seed 1, 2, 3: GRPO - PPO = 0.10, 0.11, 0.09 (mean 0.10); Dr. GRPO - GRPO = 0.004, -0.003, 0.002
    for seed, (g, p, dr, rft) in enumerate([(0.40, 0.30, 0.404, 0.20), (0.42, 0.31, 0.417, 0.21),
                                            (0.38, 0.29, 0.382, 0.19)], start=1):
        mem = {"cost/model_state_mb": 20.0}
        sampled = {"pass@1": g - 0.1, "n_problems": 200, "pass@k": {"1": {"value": g - 0.1}, "64": {"value": 0.9}}}
        _run(runs / "toy", "grpo", "grpo", seed, g, train={**mem, "entropy": 0.5 + 0.01 * seed}, benches={"pk": sampled})
        _run(runs / "toy", "ppo-lam0.95", "ppo", seed, p, train={"cost/model_state_mb": 36.0, "entropy": 0.3})
        _run(runs / "toy", "dr_grpo", "dr_grpo", seed, dr, train=mem)
        _run(runs / "toy", "rft", "rft", seed, rft, train=mem)
    base = runs / "toy" / "_base_model" / "eval"
    base.mkdir(parents=True)
    (base / "pk.json").write_text(json.dumps({"pass@1": 0.13, "n_problems": 200,
                                              "pass@k": {"1": {"value": 0.13}, "64": {"value": 0.89}}}))
    claims = [
        _claim("grpo-beats-ppo", [("toy", "grpo"), ("toy", "ppo-lam0.95")]),
        _claim("ppo-beats-grpo", [("toy", "ppo-lam0.95"), ("toy", "grpo")]),
        _claim("dr-equivalent", [("toy", "dr_grpo"), ("toy", "grpo")], kind="equivalence", margin=0.02),
        _claim("ordering", [("toy", "rft"), ("toy", "ppo-lam0.95"), ("toy", "grpo")], kind="ordering"),
        _claim("memory", [("toy", "grpo"), ("toy", "ppo-lam0.95")], predicted="less", ratio=0.6,
               metric="train:cost/model_state_mb", delta=1.0),
        _claim("gain-over-base", [("toy", "grpo"), ("toy", "base model")]),
        _claim("pass64-no-gain", [("toy", "grpo"), ("toy", "base model")], predicted="not_greater",
               metric="pk:pass@64"),
        _claim("entropy", [("toy", "grpo"), ("toy", "dr_grpo")], metric="train:entropy", delta=0.01),
        _claim("later", [("toy", "grpo"), ("toy", "grpo")], needs="a study not written yet"),
    ]
    (exp / "claims.yaml").write_text(yaml.safe_dump({"claims": claims}, sort_keys=False))
    return exp, runs


def _table(exp, runs, **kw):
    claims, r, b = load_inputs(exp / "claims.yaml", exp, runs)
    return build_atlas(claims, r, b, **kw).set_index("id")


def test_verdicts_effects_and_intervals_of_every_kind(atlas_dir):
    t = _table(*atlas_dir)
    g = t.loc["grpo-beats-ppo"]
    mean, low, high = compare_paired([0.40, 0.42, 0.38], [0.30, 0.31, 0.29])
    assert (g.effect, g.low, g.high, g.n_seeds) == (pytest.approx(0.10), pytest.approx(low), pytest.approx(high), 3)
    assert g.verdict == "reproduced" and pd.isna(g.seeds_needed)
    assert t.loc["ppo-beats-grpo", "verdict"] == "contradicted"
    assert t.loc["ppo-beats-grpo", "effect"] == pytest.approx(-0.10)
    eq = t.loc["dr-equivalent"]  # differences 0.004, -0.003, 0.002: tiny spread, inside +-0.02
    assert eq.verdict == "reproduced" and eq.effect == pytest.approx(0.001)
    order = t.loc["ordering"]  # rft < ppo (+0.10 on every seed) < grpo (0.10, 0.11, 0.09): the weakest step is ppo -> grpo
    assert order.verdict == "reproduced" and order.effect == pytest.approx(0.10)
    assert "ppo-lam0.95" in order.note
    mem = t.loc["memory"]  # 20 - 0.6 x 36 = -1.6 MiB on every seed: no spread
    assert mem.effect == pytest.approx(-1.6) and mem.verdict == "reproduced" and mem.unit == "MiB"
    base = t.loc["gain-over-base"]  # final - step 0 of the same run: 0.15, 0.17, 0.13
    assert base.effect == pytest.approx(0.15) and base.verdict == "reproduced"
    pk = t.loc["pass64-no-gain"]  # 0.9 - 0.89 on every seed, below the 0.02 bound; the base is one model
    assert pk.effect == pytest.approx(0.01) and pk.verdict == "reproduced" and "one evaluation" in pk.note
    assert math.isnan(pk.p_improvement)  # no probability of improvement against a constant
    ent = t.loc["entropy"]  # mean entropy of GRPO's steps: 0.51, 0.52, 0.53; Dr. GRPO logs none
    assert ent.n_seeds == 0 and ent.verdict == "rerun needed" and "3 of toy/dr_grpo's runs" in ent.failed_precondition
    assert ent.p_adjusted == "outside the family" and ent.family == "outside the family (rerun needed)"
    assert t.loc["later", "verdict"] == "deferred" and "not written yet" in t.loc["later", "note"]
    assert g.p_improvement == pytest.approx(1.0) and 0 <= g.p_improvement_low <= g.p_improvement_high <= 1


def test_an_inconclusive_claim_gets_its_seeds_and_eval_noise_share(tmp_path):
    exp, runs = tmp_path / "experiments", tmp_path / "runs"
    _study(exp, "toy", ["grpo", "dr_grpo"], seeds=(1, 2, 3, 4))
    d = [0.03, -0.02, 0.04, -0.01]
    for seed, diff in enumerate(d, start=1):
        _run(runs / "toy", "grpo", "grpo", seed, 0.30 + diff)
        _run(runs / "toy", "dr_grpo", "dr_grpo", seed, 0.30)
    (exp / "claims.yaml").write_text(yaml.safe_dump({"claims": [_claim("c", [("toy", "grpo"), ("toy", "dr_grpo")])]}))
    row = _table(exp, runs).loc["c"]
    assert row.verdict == "inconclusive"
    sd = float(np.std(d, ddof=1))
    assert row.seeds_needed == seeds_for_power(0.02, sd)
    want = (sum((0.30 + x) * (0.70 - x) for x in d) / 4 / 1000 + 0.3 * 0.7 / 1000) / float(np.var(d, ddof=1))
    assert row.eval_noise_share == pytest.approx(want)


def test_multiplicity_turns_a_claim_significant_alone_inconclusive_among_nulls(tmp_path):
    exp, runs = tmp_path / "experiments", tmp_path / "runs"
    _study(exp, "toy", ["grpo", "dr_grpo", "rft", "rloo"], seeds=(1, 2, 3))
    # GRPO - Dr. GRPO: mean 0.05, sd 0.05 sqrt(3) / 6.965 (t = 6.965 on 2 dof): one-sided p = 0.010 alone
    sd = 0.05 * math.sqrt(3) / 6.965
    marginal = [0.05 - sd, 0.05, 0.05 + sd]
    for seed in (1, 2, 3):
        _run(runs / "toy", "grpo", "grpo", seed, 0.30 + marginal[seed - 1])
        _run(runs / "toy", "dr_grpo", "dr_grpo", seed, 0.30)
        _run(runs / "toy", "rft", "rft", seed, 0.30 + [0.01, -0.01, 0.0][seed - 1])
        _run(runs / "toy", "rloo", "rloo", seed, 0.30 + [-0.01, 0.012, 0.001][seed - 1])
    claims = [_claim("marginal", [("toy", "grpo"), ("toy", "dr_grpo")])]
    claims += [_claim(f"null{i}", [("toy", v), ("toy", "dr_grpo")], delta=0.001)
               for i, v in enumerate(["rft", "rloo"] * 2)]
    (exp / "claims.yaml").write_text(yaml.safe_dump({"claims": claims}))
    t = _table(exp, runs, improvement=False)
    m = t.loc["marginal"]
    assert m.p_claim == pytest.approx(0.010, abs=2e-4) and m.verdict_unadjusted == "reproduced"
    assert m.p_claim_adjusted == pytest.approx(5 * m.p_claim)  # the smallest of 5: p x 5 / 1
    assert m.verdict == "inconclusive" and m.seeds_needed >= 2
    alone = tmp_path / "alone"
    (alone / "experiments").mkdir(parents=True)
    (alone / "experiments" / "toy.yaml").write_text((exp / "toy.yaml").read_text())
    (alone / "experiments" / "claims.yaml").write_text(yaml.safe_dump({"claims": claims[:1]}))
    assert _table(alone / "experiments", runs, improvement=False).loc["marginal", "verdict"] == "reproduced"


def test_preregistration_reads_the_claims_commit(atlas_dir, tmp_path):
    exp, runs = atlas_dir
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_COMMITTER_DATE": "2001-01-01T00:00:00Z"}
    assert claims_commit(exp / "claims.yaml")["commit"] is None  # not a git checkout
    subprocess.run(["git", "init", "-q", str(exp)], check=True)
    subprocess.run(["git", "add", "claims.yaml"], cwd=exp, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "claims"], cwd=exp, check=True, env=env)
    info = claims_commit(exp / "claims.yaml")
    assert len(info["commit"]) == 40 and info["date"].startswith("2001-01-01") and info["dirty"] is False
    out = tmp_path / "atlas"
    t = write_atlas(exp / "claims.yaml", exp, runs, out, improvement=False).set_index("id")
    assert t.loc["grpo-beats-ppo", "preregistered"] == "yes"  # runs made today, claims committed in 2001
    old = runs / "toy" / "grpo-seed1" / "config.yaml"
    os.utime(old, (0, 0))  # a run from 1970: older than the claims
    t = write_atlas(exp / "claims.yaml", exp, runs, out, improvement=False).set_index("id")
    assert t.loc["grpo-beats-ppo", "preregistered"].startswith("no")
    (exp / "claims.yaml").write_text((exp / "claims.yaml").read_text() + "\n# edited\n")
    t = write_atlas(exp / "claims.yaml", exp, runs, out, improvement=False).set_index("id")
    assert "uncommitted" in t.loc["ppo-beats-grpo", "preregistered"]


def test_cli_writes_the_atlas_and_refuses_bad_input(atlas_dir, tmp_path, capsys):
    exp, runs = atlas_dir
    out = tmp_path / "results" / "atlas"
    assert report_main(["atlas", "--claims", str(exp / "claims.yaml"), "--runs", str(runs), "--out", str(out),
                        "--include", "toy=grpo-seed1,grpo-seed2,ppo-lam0.95-seed1,ppo-lam0.95-seed2"]) == 0
    table = pd.read_csv(out / "atlas.csv").set_index("id")
    assert table.loc["grpo-beats-ppo", "n_seeds"] == 2  # only the included runs
    assert table.loc["dr-equivalent", "n_seeds"] == 0
    page = (out / "report.html").read_text()
    assert "grpo-beats-ppo" in page and "data:image/png;base64," in page and "src='http" not in page
    assert (out / "figures" / "forest.png").stat().st_size > 5000
    assert "| grpo-beats-ppo | " in (out / "atlas.md").read_text()
    assert "atlas (exploratory): 9 claims" in capsys.readouterr().out
    for argv, needle in (
        (["--claims", str(exp / "nope.yaml"), "--runs", str(runs), "--out", str(out)], "no such file"),
        (["--claims", str(exp / "claims.yaml"), "--runs", str(runs), "--out", str(out), "--include", "toy"],
         "expected STUDY=run_id"),
        (["--claims", str(exp / "claims.yaml"), "--runs", str(tmp_path / "empty"), "--out", str(out)],
         "no such directory"),
    ):
        assert report_main(["atlas", *argv]) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err


def test_the_pipeline_plans_the_atlas_over_the_claims_studies():
    from grpo_research.pipeline import Pipeline

    config = yaml.safe_load((ROOT / "configs" / "defaults.yaml").read_text())
    config["studies_dir"] = str(ROOT / "experiments")
    p = Pipeline(config, ROOT)
    studies = p.atlas_studies()
    assert set(studies) == {"ppo_vs_grpo", "paradigm", "controls", "loss_variants", "group_size", "clip_higher",
                            "dynamic_sampling", "beta", "one_shot"}
    args = [str(a) for a in p.atlas_args()]
    include = [a for a, prev in zip(args, ["", *args]) if prev == "--include"]
    assert sorted(i.split("=")[0] for i in include) == studies
    ppo = next(i for i in include if i.startswith("ppo_vs_grpo="))
    assert set(ppo.split("=")[1].split(",")) == set(p.study_runs("ppo_vs_grpo"))


def test_probability_of_improvement_hand_computed():
    from grpo_research.analysis.atlas import probability_of_improvement

    # pairs of (1, 2, 3) against (0, 0, 2): 1 beats two, 2 beats two and ties one, 3 beats three: 7.5 of 9
    p, low, high = probability_of_improvement([1, 2, 3], [0, 0, 2], reps=500)
    assert p == pytest.approx(7.5 / 9)
    assert 0.0 <= low <= p <= high <= 1.0
    assert probability_of_improvement([5, 6], [1, 2], reps=200)[0] == 1.0


def test_the_markdown_table_has_one_cell_per_column(atlas_dir, tmp_path):
    exp, runs = atlas_dir
    write_atlas(exp / "claims.yaml", exp, runs, tmp_path / "atlas", improvement=False)
    lines = [l for l in (tmp_path / "atlas" / "atlas.md").read_text().splitlines() if l.startswith("|")]
    assert len(lines) == 2 + 9 and len({l.count("|") for l in lines}) == 1, lines


@pytest.mark.parametrize("value, bound", [(0.0, "floor"), (1.0, "ceiling")])
def test_arms_at_the_accuracy_s_floor_or_ceiling_are_not_testable_here(tmp_path, value, bound):
    # Every model answers none (or all) of the OOD split: zero spread would make both t-tests reject
    # (an exact 0 < 0.02 'contradicted' the greater-claim before), but such a setting cannot separate the arms.
    exp, runs = tmp_path / "experiments", tmp_path / "runs"
    _study(exp, "toy", ["grpo", "rft", "dr_grpo"])
    for seed in (1, 2, 3):
        for variant in ("grpo", "rft", "dr_grpo"):
            _run(runs / "toy", variant, variant, seed, 0.3 + 0.01 * seed, ood=value)
    claims = [_claim("ood", [("toy", "grpo"), ("toy", "rft")], metric="heldout_ood"),
              _claim("ood-order", [("toy", "rft"), ("toy", "dr_grpo"), ("toy", "grpo")], kind="ordering",
                     metric="heldout_ood"),
              _claim("in-dist", [("toy", "grpo"), ("toy", "rft")], predicted="not_greater")]
    (exp / "claims.yaml").write_text(yaml.safe_dump({"claims": claims}))
    t = _table(exp, runs, improvement=False)
    for cid in ("ood", "ood-order"):
        row = t.loc[cid]
        assert row.verdict == "not testable here" and row.verdict_unadjusted == "not testable here", cid
        assert row.failed_precondition.startswith("off_bounds: heldout_ood mean not inside (0, 1)"), cid
        assert f"toy/grpo {value:g}" in row.failed_precondition and row.p_adjusted == "outside the family"
        assert pd.isna(row.seeds_needed) and row.n_seeds == 3
        assert math.isnan(row.p_claim) and math.isnan(row.p_contra_adjusted)
    # the in-distribution claim on the same runs (no spread either, but not at a bound) keeps its verdict
    assert t.loc["in-dist", "verdict"] == "reproduced"


def test_the_atlas_says_where_its_runs_ran_and_warns_on_mixed_machines(atlas_dir, tmp_path):
    exp, runs = atlas_dir
    summaries = sorted(runs.glob("*/*/summary.json"))
    for i, f in enumerate(summaries):
        s = json.loads(f.read_text())
        s["environment"] = {"cpu": "Intel Xeon" if i == 0 else "AMD EPYC", "accelerator": "none",
                            "torch": "2.13.0+cpu", "transformers": "5.25.0", "code": "abc"}
        f.write_text(json.dumps(s))
    write_atlas(exp / "claims.yaml", exp, runs, tmp_path / "atlas", improvement=False)
    md = (tmp_path / "atlas" / "atlas.md").read_text()
    assert f"- AMD EPYC, torch 2.13.0+cpu, transformers 5.25.0: {len(summaries) - 1} run(s), code abc" in md
    assert "**Warning:**" in md
    html = (tmp_path / "atlas" / "report.html").read_text()
    assert "Where the runs ran: AMD EPYC" in html and "<b>Warning:</b>" in html
