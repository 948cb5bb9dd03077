"""Validity checks of the atlas's claims (issue 34): each check turns a hand-built claim whose
mechanism cannot act into "not testable here" with its measured value, a missing metric into
"rerun needed", and both leave the multiplicity family; measurements stay outside it; Holm's
step-down adjustment by hand and over both directions of a claim."""
from __future__ import annotations

import json
import math

import pytest
import yaml

from grpo_research.analysis.claims import ClaimsError, load_claims
from grpo_research.analysis.stats import holm
from tests.test_atlas import _claim, _run, _study, _table


def _write(exp, claims):
    (exp / "claims.yaml").write_text(yaml.safe_dump({"claims": claims}, sort_keys=False))


def _set_first_row(run, **values):
    """Give the first training row of `run` other values (the base model's samples, step 1)."""
    f = run / "metrics.jsonl"
    rows = [json.loads(l) for l in f.read_text().splitlines()]
    rows[1].update(values)
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture()
def toy(tmp_path):
    """GRPO 0.40/0.42/0.38 against Dr. GRPO 0.30/0.31/0.29: a clear difference, were it testable.
    GRPO's training rows: clip_frac 0 (one update per batch: the ratio is 1), completion_len_std 0
    (fixed lengths), reward/format 1.0 from its first step; Dr. GRPO's clip_frac 0.05."""
    exp, runs = tmp_path / "experiments", tmp_path / "runs"
    _study(exp, "toy", ["grpo", "dr_grpo"])
    for seed, (g, dr) in enumerate([(0.40, 0.30), (0.42, 0.31), (0.38, 0.29)], start=1):
        _run(runs / "toy", "grpo", "grpo", seed, g, train={"clip_frac": 0.0, "completion_len_std": 0.0,
                                                           "reward/format": 1.0})
        _run(runs / "toy", "dr_grpo", "dr_grpo", seed, dr, train={"clip_frac": 0.05, "completion_len_std": 2.0,
                                                                  "reward/format": 0.9})
    return exp, runs


ARMS = [("toy", "grpo"), ("toy", "dr_grpo")]


def test_a_clipping_claim_whose_ratio_never_leaves_one_is_not_testable_here(toy):
    exp, runs = toy
    _write(exp, [_claim("clip", ARMS, validity=[{"check": "train_metric", "metric": "clip_frac", "above": 0.0}]),
                 _claim("plain", ARMS)])
    t = _table(exp, runs, improvement=False)
    row = t.loc["clip"]
    assert row.verdict == "not testable here" and row.p_adjusted == "outside the family"
    assert row.failed_precondition == ("train_metric: clip_frac (mean over a run, mean over runs): "
                                       "toy/grpo 0 not above 0")
    assert math.isnan(row.p_claim_adjusted) and row.family == "outside the family (not testable here)"
    plain = t.loc["plain"]  # the same arms without the check: tested, in the family
    assert plain.verdict == "reproduced" and plain.family == "bh" and float(plain.p_adjusted) <= 0.025


def test_one_arm_s_check_reads_only_that_arm(toy):
    exp, runs = toy
    _write(exp, [_claim("dr-clips", ARMS, validity=[{"check": "train_metric", "metric": "clip_frac", "arm": 1,
                                                     "above": 0.0}])])
    row = _table(exp, runs, improvement=False).loc["dr-clips"]
    clip = row.validity.split("; ")[1]  # after the implicit off_bounds of an accuracy claim
    assert row.verdict == "reproduced" and clip.endswith("toy/dr_grpo 0.05") and "toy/grpo" not in clip


def test_a_length_claim_without_length_spread_is_not_testable_here(toy):
    exp, runs = toy
    _write(exp, [_claim("len", ARMS, validity=[{"check": "train_metric", "metric": "completion_len_std",
                                                "above": 0.5}])])
    row = _table(exp, runs, improvement=False).loc["len"]
    assert row.verdict == "not testable here" and "toy/grpo 0 not above 0.5" in row.failed_precondition


def test_a_format_reward_claim_on_a_base_already_in_the_format_is_not_testable_here(toy):
    exp, runs = toy
    for seed in (1, 2, 3):  # later steps in the format less often: only the first step is read
        _set_first_row(runs / "toy" / f"grpo-seed{seed}", **{"reward/format": 0.97})
    check = {"check": "train_metric", "metric": "reward/format", "at": "first", "arm": 0, "below": 0.95}
    _write(exp, [_claim("format", ARMS, validity=[check]),
                 _claim("format-mean", ARMS, validity=[{**check, "at": "last", "below": 1.01}])])
    t = _table(exp, runs, improvement=False)
    assert t.loc["format"].verdict == "not testable here"
    assert "reward/format (first over a run" in t.loc["format"].failed_precondition
    assert "toy/grpo 0.97 not below 0.95" in t.loc["format"].failed_precondition
    assert t.loc["format-mean"].verdict == "reproduced"


def test_an_accuracy_near_a_stated_ceiling_is_not_testable_here(toy):
    exp, runs = toy
    _write(exp, [_claim("ceil", ARMS, validity=[{"check": "off_bounds", "ceiling": 0.4}]),
                 _claim("room", ARMS, validity=[{"check": "off_bounds", "floor": 0.1, "ceiling": 0.9}])])
    t = _table(exp, runs, improvement=False)
    assert t.loc["ceil"].verdict == "not testable here"
    assert t.loc["ceil"].failed_precondition == "off_bounds: heldout mean not inside (0, 0.4): toy/grpo 0.4"
    assert t.loc["room"].verdict == "reproduced" and "inside (0.1, 0.9)" in t.loc["room"].validity


def test_runs_that_do_not_record_a_check_s_metric_need_a_rerun(toy):
    exp, runs = toy
    _write(exp, [_claim("zs", ARMS, validity=[{"check": "train_metric", "metric": "frac_zero_std_generated",
                                               "below": 1.0}]),
                 _claim("zs-metric", ARMS, metric="train:frac_zero_std_generated", delta=0.05)])
    t = _table(exp, runs, improvement=False)
    assert t.loc["zs"].verdict == "rerun needed"
    assert "do not record 'frac_zero_std_generated'" in t.loc["zs"].failed_precondition
    z = t.loc["zs-metric"]  # the claim's own metric absent: not guessed as 'fewer than 2 seeds'
    assert z.verdict == "rerun needed" and z.failed_precondition == (
        "3 of toy/grpo's runs and 3 of toy/dr_grpo's runs do not record train:frac_zero_std_generated")


def test_a_measurement_is_reported_outside_the_family(toy):
    exp, runs = toy
    _write(exp, [_claim("m", ARMS, predicted="greater", measurement=True), _claim("t", ARMS)])
    t = _table(exp, runs, improvement=False)
    m = t.loc["m"]
    assert m.verdict == "reproduced" and m.p_adjusted == "outside the family"
    assert m.family == "outside the family (a measurement)"
    assert (m.low, m.high) == (pytest.approx(0.09), pytest.approx(0.11))  # the range over runs, not an interval
    assert t.loc["t"].family == "bh"


@pytest.mark.parametrize("spec, message", [
    ({"check": "nope"}, "unknown check 'nope' (known: off_bounds, train_metric)"),
    ({"check": "off_bounds", "top": 1}, "check off_bounds: unknown key(s) top"),
    ({"check": "off_bounds", "floor": 0.5, "ceiling": 0.5}, "floor must be below ceiling"),
    ({"check": "train_metric", "metric": "clip_frac"}, "needs a threshold"),
    ({"check": "train_metric", "metric": "clip_frac", "above": "0"}, "above must be a number"),
    ({"check": "train_metric", "metric": "clip_frac", "above": 0, "at": "median"}, "at must be one of mean, first, last"),
    ({"check": "train_metric", "metric": "clip_frac", "above": 0, "arm": 1}, "arm 1 is the base model"),
    ({"check": "train_metric", "metric": "clip_frac", "above": 0, "arm": 2}, "an arm's index 0..1"),
])
def test_a_bad_check_is_one_line_naming_the_claim_and_the_check(toy, spec, message):
    exp, _ = toy
    _write(exp, [_claim("c", [("toy", "grpo"), ("toy", "base model")], validity=[spec])])
    with pytest.raises(ClaimsError) as e:
        load_claims(exp / "claims.yaml", exp)
    assert "claims[0] (c): validity[0]: " in str(e.value) and message in str(e.value)
    assert "\n" not in str(e.value)


def test_holm_hand_computed():
    # sorted 0.01, 0.03, 0.04, 0.20 times 4, 3, 2, 1: 0.04, 0.09, 0.08, 0.20 -> running maximum
    adj = holm([0.01, 0.04, 0.03, 0.20, float("nan")])
    assert adj[:4] == pytest.approx([0.04, 0.09, 0.09, 0.20])
    assert math.isnan(adj[4]) and holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])


def test_holm_counts_both_directions_of_every_claim(toy):
    exp, runs = toy
    _write(exp, [_claim("a", ARMS), _claim("b", ARMS, predicted="less")])
    t = _table(exp, runs, improvement=False, procedure="holm", phase="confirmatory")
    ps = [t.loc["a"].p_claim, t.loc["b"].p_claim, t.loc["a"].p_contra, t.loc["b"].p_contra]
    want = holm(ps)
    assert [t.loc["a"].p_claim_adjusted, t.loc["b"].p_claim_adjusted, t.loc["a"].p_contra_adjusted,
            t.loc["b"].p_contra_adjusted] == pytest.approx(want)
    assert t.loc["a"].verdict == "reproduced" and t.loc["b"].verdict == "contradicted"
    assert set(t["phase"]) == {"confirmatory"} and set(t["family"]) == {"holm"}


def test_a_positive_control_is_tested_alone_and_a_failed_one_says_the_setting_is_broken(toy, tmp_path):
    from grpo_research.analysis.atlas_report import control_text

    exp, runs = toy
    _write(exp, [_claim("works", ARMS, positive_control=True), _claim("broken", ARMS, predicted="less",
                                                                     positive_control=True), _claim("c", ARMS)])
    t = _table(exp, runs, improvement=False)
    assert t.loc["works"].verdict == "reproduced" and t.loc["works"].family == "outside the family (positive control)"
    assert math.isnan(t.loc["works"].p_claim_adjusted)  # not in the adjustment: the family is claim c alone
    assert t.loc["c"].p_claim_adjusted == pytest.approx(t.loc["c"].p_claim)
    assert t.loc["broken"].verdict == "contradicted"
    assert control_text(t.reset_index()).startswith("POSITIVE CONTROL FAILED (broken)")
    assert "reproduced" in control_text(t.reset_index().iloc[[0, 2]])


def test_a_decision_plan_from_one_base_uses_the_pilot_s_between_base_sd(toy):
    from grpo_research.analysis.atlas import PILOT_BETWEEN_SD
    from grpo_research.analysis.stats import bases_for_power

    exp, runs = toy
    _write(exp, [_claim("c", ARMS)])
    row = _table(exp, runs, improvement=False).loc["c"]
    sd = float(__import__("numpy").std([0.10, 0.11, 0.09], ddof=1))
    assert row.sd_diff == pytest.approx(sd) and row.between_sd == PILOT_BETWEEN_SD
    assert row.between_source == "pilot (issue 33)"
    assert row.bases_needed == bases_for_power(0.02, PILOT_BETWEEN_SD, sd, 1)
    # 4 training rows of 0.1 s per run in each arm: 0.8 s of training per base
    assert row.core_hours_needed == pytest.approx(row.bases_needed * 0.8 / 3600)
