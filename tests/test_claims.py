"""experiments/claims.yaml: the shipped claims load and name real study variants; a bad claims
file is one line naming the file, the claim and the field."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from grpo_research.analysis.claims import ClaimsError, load_claims

ROOT = Path(__file__).resolve().parents[1]
CLAIMS = ROOT / "experiments" / "claims.yaml"


def test_the_shipped_claims_load_with_at_least_twelve_runnable_ones():
    claims = load_claims(CLAIMS)
    runnable = [c for c in claims if "needs" not in c]
    assert len(runnable) >= 12, [c["id"] for c in runnable]
    assert {c["kind"] for c in claims} == {"difference", "equivalence", "ordering"}
    assert all(c["source"]["arxiv"] is None or c["source"]["arxiv"][4] == "." for c in claims)


def _write(tmp_path, claims, studies=None) -> Path:
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(
        studies or {"budget_samples": 64, "seeds": [1, 2], "methods": ["grpo", "dr_grpo"], "control": False}))
    p = tmp_path / "claims.yaml"
    p.write_text(yaml.safe_dump({"claims": claims}))
    return p


def _claim(**changes):
    c = {"id": "a", "source": {"arxiv": "2402.03300"}, "claim": "GRPO beats Dr. GRPO here.", "kind": "difference",
         "predicted": "greater", "metric": "heldout", "budget": "equal_samples",
         "arms": [{"study": "toy", "variant": "grpo"}, {"study": "toy", "variant": "dr_grpo"}],
         "smallest_effect": 0.02, "setting": "tiny-1m"}
    c.update(changes)
    return c


def test_a_good_toy_claim_loads(tmp_path):
    (c,) = load_claims(_write(tmp_path, [_claim()]))
    assert c["arms"][1]["variant"] == "dr_grpo"
    base = _claim(arms=[{"study": "toy", "variant": "grpo"}, {"study": "toy", "variant": "base model"}])
    assert load_claims(_write(tmp_path, [base]))[0]["arms"][1]["variant"] == "base model"


@pytest.mark.parametrize("claims, needle", [
    ([_claim(), _claim()], "claims[1] (a): id 'a' is used twice"),
    ([_claim(arms=[{"study": "toy", "variant": "grpo"}, {"study": "toy", "variant": "ppo"}])],
     "arms[1]: study 'toy' has no variant 'ppo' (it has: grpo, dr_grpo, or 'base model')"),
    ([_claim(arms=[{"study": "nope", "variant": "grpo"}, {"study": "toy", "variant": "grpo"}])],
     "arms[0]: no study 'nope'"),
    ([{k: v for k, v in _claim().items() if k != "predicted"}], "a difference claim needs `predicted`"),
    ([_claim(kind="equivalence", predicted=None)], "claims.0.predicted"),
    ([{**{k: v for k, v in _claim().items() if k != "predicted"}, "kind": "equivalence"}], "needs `margin`"),
    ([{**{k: v for k, v in _claim().items() if k != "predicted"}, "kind": "ordering"}], "three or more arms"),
    ([_claim(source={"arxiv": "2402-03300"})], "claims.0.source.arxiv"),
    ([_claim(budget="equal_vibes")], "claims.0.budget"),
    ([_claim(arms=[{"study": "toy", "variant": "base model"}, {"study": "toy", "variant": "base model"}])],
     "at most one arm can be 'base model'"),
])
def test_a_bad_claims_file_is_one_line_naming_claim_and_field(tmp_path, claims, needle):
    with pytest.raises(ClaimsError) as e:
        load_claims(_write(tmp_path, claims))
    msg = str(e.value)
    assert needle in msg and "\n" not in msg and str(tmp_path / "claims.yaml") in msg, msg


def test_a_claim_that_needs_a_study_not_yet_written_is_kept_unchecked(tmp_path):
    c = _claim(arms=[{"study": "later", "variant": "x"}, {"study": "later", "variant": "y"}], needs="the study later")
    assert load_claims(_write(tmp_path, [c]))[0]["needs"] == "the study later"
