"""The atlas's freeze (issue 34): what the confirmatory phase will test, fixed before it runs.

The exploratory atlas (`snakemake atlas_exploratory`) tests every claim on the bases its studies
already use, and says per claim what a decision would need. `grpo-research atlas freeze` then
writes `experiments/atlas_freeze.json` (`freeze`), to be committed before any confirmatory run:

- `claims_sha256` and `analysis_sha256` (each file of grpo_research/analysis/ and the combined
  hash): the claims and the code the verdicts come from;
- the confirmatory `family`: at most `max_claims` claims (default 6) chosen by `choose_family` for
  >= 80 % power at their smallest effect on `n_bases` new bases x 1 seed, at the level each test
  has under the family's multiplicity procedure (Holm over both directions of every claim: its
  first step rejects at alpha / 2k, which the power is computed at, so the chosen claims keep
  their power whichever claim Holm tests first); per claim its kind, bound, metric, arms and
  validity checks (an accuracy's implicit `off_bounds` written out), with the planning SD and
  the power behind the choice. The planning SD of a per-base difference is
  sqrt(between_sd^2 + sd_diff^2) from the exploratory row (its measured within-base spread and
  the between-base SD, measured or the pilot's);
- the positive controls, run beside the family and tested alone;
- for a claim with `tuned: true`, `tuned_lr`: each arm's best lr from its exploratory search
  (results/atlas_tuning/lr-<study>-<variant>/best.yaml); its confirmatory runs use it, as
  `<variant>-lr`;
- `base_seeds` and `seeds`: new base models (none used by any study file or present under the
  runs dir) with one RL seed each, and the claims left out with the reason.

`check_freeze` reads it back: a claims file that changed since the freeze is refused; analysis
code that changed is reported (allowed only when atlas.csv over the frozen runs stays identical:
the report names the changed files so that it can be checked).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_research.analysis.atlas import ACCURACY, ALPHA, POWER, PROCEDURES, metric_unit
from grpo_research.analysis.stats import power_one_sided
from grpo_research.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
ANALYSIS_DIR = ROOT / "grpo_research" / "analysis"
VERSION = 1


class FreezeError(UsageError):
    """A freeze that cannot be written or used (exit 2), in one line."""


def sha256_file(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def analysis_hashes(root: Path = ANALYSIS_DIR) -> dict[str, str]:
    """sha256 of every Python file of the analysis package (vendored code included), by path
    relative to the repository, and `combined`: the sha256 of those lines."""
    files = {str(p.relative_to(root.parents[1])): sha256_file(p) for p in sorted(root.rglob("*.py"))}
    files["combined"] = hashlib.sha256("".join(f"{k} {v}\n" for k, v in files.items()).encode()).hexdigest()
    return files


def claim_power(row: dict[str, Any], n_bases: int, alpha: float) -> tuple[float, float]:
    """(power, planning SD) of a claim's decisive test on `n_bases` new bases x 1 seed at `alpha`:
    the truth at the planning point (greater/less: the smallest effect beyond 0; not_greater /
    not_less: 0, the smallest effect inside the bound; equivalence: 0, both one-sided tests at
    the margin: 1 - 2 (1 - one))."""
    sd_w, sd_b = float(row.get("sd_diff", math.nan)), float(row.get("between_sd", math.nan))
    if not math.isfinite(sd_w):
        return math.nan, math.nan
    sd = math.sqrt(sd_w ** 2 + (sd_b if math.isfinite(sd_b) else 0.0) ** 2)
    if str(row["kind"]).startswith("equivalence"):
        one = power_one_sided(n_bases, float(row["margin"]), sd, alpha)
        return max(0.0, 1.0 - 2.0 * (1.0 - one)), sd
    return power_one_sided(n_bases, float(row["smallest_effect"]), sd, alpha), sd


def choose_family(table: pd.DataFrame, n_bases: int, max_claims: int = 6, power: float = POWER,
                  alpha: float = ALPHA) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(family, left out): the largest k <= max_claims such that the k claims of highest power at
    alpha / 2k all reach `power`; candidates are the exploratory rows in the family (tested, not
    a positive control), left-out rows say why. Ties in power keep the claims file's order."""
    rows = [r for _, r in table.iterrows()]
    candidates, out = [], []
    for r in rows:
        if r.get("positive_control") is True or str(r.get("positive_control")) == "True":
            continue
        if r["family"] not in PROCEDURES:
            out.append({"id": r["id"], "why": f"{r['verdict']} in the exploratory phase"
                        + (f": {r['failed_precondition']}" if isinstance(r.get("failed_precondition"), str)
                           and r["failed_precondition"] else "")})
            continue
        candidates.append(r)
    for k in range(min(max_claims, len(candidates)), 0, -1):
        level = alpha / (2 * k)
        scored = sorted(((claim_power(r, n_bases, level), i, r) for i, r in enumerate(candidates)),
                        key=lambda x: (-(x[0][0] if math.isfinite(x[0][0]) else -1.0), x[1]))
        top = scored[:k]
        if all(math.isfinite(p) and p >= power for (p, _), _, _ in top):
            chosen = {id(r) for _, _, r in top}
            family = [{"id": r["id"], "power": p, "planning_sd": sd, "level": level} for (p, sd), _, r in top]
            for (p, _), _, r in scored[k:]:
                out.append({"id": r["id"], "why": f"power {p:.2f} at {n_bases} bases x 1 seed (level {level:.3g})"})
            assert len(chosen) == k
            return family, out
    level = alpha / 2
    for r in candidates:
        p, _ = claim_power(r, n_bases, level)
        out.append({"id": r["id"], "why": f"power {p:.2f} at {n_bases} bases x 1 seed even alone (level {level:.3g})"})
    return [], out


def used_base_seeds(studies_dir: str | Path, runs_dir: str | Path | None) -> set[int]:
    """Base seeds any study file names, and those of base models built under `runs_dir`/_base."""
    import re

    from grpo_research.config import load_yaml
    from grpo_research.studies import find_studies

    used = {0}
    for path in find_studies(studies_dir).values():
        used |= set(load_yaml(path).get("base_seeds") or [])
    base = Path(runs_dir) / "_base" if runs_dir else None
    if base is not None and base.is_dir():
        for d in base.iterdir():
            m = re.search(r"-base(\d+)(?:-k[a-z0-9]+)?$", d.name)
            if m:
                used.add(int(m.group(1)))
    return used


def _claim_entry(claim: dict[str, Any], chosen: dict[str, Any] | None, tuning_dir=None) -> dict[str, Any]:
    keep = ("id", "kind", "predicted", "margin", "ratio", "metric", "budget", "arms", "smallest_effect", "setting")
    entry = {k: claim[k] for k in keep if k in claim}
    checks = [dict(c) for c in claim.get("validity") or []]
    if metric_unit(claim["metric"]) == ACCURACY and not any(c["check"] == "off_bounds" for c in checks):
        checks.insert(0, {"check": "off_bounds", "floor": 0.0, "ceiling": 1.0})
    entry["validity"] = checks
    if claim.get("tuned"):
        entry["tuned_lr"] = tuned_lrs(claim, tuning_dir or Path(ROOT / "results" / "atlas_tuning"))
    if chosen:
        entry.update(power=round(chosen["power"], 4), planning_sd=round(chosen["planning_sd"], 6),
                     test_level=chosen["level"])
    return entry


def freeze(claims_path: str | Path, exploratory_csv: str | Path, out: str | Path, *, studies_dir: str | Path | None = None,
           runs_dir: str | Path | None = "runs", n_bases: int = 8, seeds: list[int] | None = None,
           base_seed_start: int = 1000, max_claims: int = 6, tuning_dir: str | Path | None = None) -> dict[str, Any]:
    """Write the freeze to `out` (refusing to replace one) and return it (module docstring)."""
    from grpo_research.analysis.claims import load_claims
    from grpo_research.files import write_text_atomic

    out = Path(out)
    if out.exists():
        raise FreezeError(f"{out} exists: a freeze is written once, before the confirmatory runs (remove it only if "
                          "no confirmatory run has started, and say so in the commit)")
    if n_bases < 8:
        raise FreezeError(f"--bases {n_bases}: the confirmatory family runs on at least 8 new bases")
    if not Path(exploratory_csv).is_file():
        raise FreezeError(f"{exploratory_csv}: no exploratory atlas (run `snakemake --cores all atlas_exploratory`)")
    claims = load_claims(claims_path, studies_dir)
    table = pd.read_csv(exploratory_csv)
    if "family" not in table or "sd_diff" not in table:
        raise FreezeError(f"{exploratory_csv}: not an exploratory atlas of this version (no family / sd_diff column)")
    known = {c["id"] for c in claims}
    stale = sorted(set(table["id"]) ^ known)
    if stale:
        raise FreezeError(f"{exploratory_csv} and {claims_path} list different claims ({', '.join(stale)}): "
                          "rerun the exploratory atlas")
    family, left = choose_family(table, n_bases, max_claims)
    by_id = {c["id"]: c for c in claims}
    picked = {f["id"]: f for f in family}
    used = used_base_seeds(studies_dir or Path(claims_path).parent, runs_dir)
    bases = list(range(base_seed_start, base_seed_start + n_bases))
    clash = sorted(set(bases) & used)
    if clash:
        raise FreezeError(f"base seeds {clash} are already used (a study file or {runs_dir}/_base): choose another "
                          "--base-seed-start")
    data = {
        "version": VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "claims_file": str(claims_path), "claims_sha256": sha256_file(claims_path),
        "analysis_sha256": analysis_hashes(),
        "exploratory_atlas_sha256": sha256_file(exploratory_csv),
        "procedure": "holm", "alpha": ALPHA,
        "promise": (f"family-wise error rate <= {100 * ALPHA:.1f} %: the probability that any verdict of the family "
                    "(reproduced or contradicted) is false, under any dependence between the claims (Holm over both "
                    "one-sided tests of every claim)"),
        "base_seeds": bases, "seeds": list(seeds or [1]),
        "family": [_claim_entry(by_id[f["id"]], picked[f["id"]], tuning_dir) for f in family],
        "positive_controls": [_claim_entry(c, None) for c in claims if c.get("positive_control")],
        "left_out": left,
    }
    write_text_atomic(out, json.dumps(data, indent=2, sort_keys=False) + "\n")
    return data


def load_freeze(path: str | Path) -> dict[str, Any]:
    """The freeze at `path`, checked for the keys the confirmatory phase reads."""
    path = Path(path)
    if not path.is_file():
        raise FreezeError(f"{path}: no freeze (run `snakemake --cores all atlas_exploratory`, then "
                          "`grpo-research atlas freeze`, and commit the file before the confirmatory runs)")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise FreezeError(f"{path}: not JSON ({e.msg}, line {e.lineno})") from None
    missing = [k for k in ("version", "claims_sha256", "analysis_sha256", "family", "positive_controls", "base_seeds",
                           "seeds", "procedure") if k not in data]
    if missing:
        raise FreezeError(f"{path}: a freeze needs {', '.join(missing)}")
    return data


def check_freeze(data: dict[str, Any], claims_path: str | Path) -> list[str]:
    """Refuse a claims file changed since the freeze; return the analysis files that changed."""
    now = sha256_file(claims_path)
    if now != data["claims_sha256"]:
        raise FreezeError(f"{claims_path} changed after the freeze (sha256 {now[:12]} against the frozen "
                          f"{data['claims_sha256'][:12]}): the confirmatory phase tests the claims as frozen")
    current = analysis_hashes()
    return sorted(k for k in set(current) | set(data["analysis_sha256"])
                  if k != "combined" and current.get(k) != data["analysis_sha256"].get(k))


TUNED_SUFFIX = "-lr"  # grpo_research.pipeline.ids.TUNED_SUFFIX


def frozen_studies(data: dict[str, Any]) -> dict[str, dict[str, float | None]]:
    """study -> {variant: None, or its frozen lr as `<variant>-lr`} that the frozen family and
    positive controls run (the base-model arm is evaluated with the study's base models)."""
    from grpo_research.analysis.claims import BASE_ARM

    out: dict[str, dict[str, float | None]] = {}
    for c in [*data["family"], *data["positive_controls"]]:
        lrs = c.get("tuned_lr") or {}
        for a in c["arms"]:
            if a["variant"] == BASE_ARM:
                continue
            lr = lrs.get(f"{a['study']}/{a['variant']}")
            name = a["variant"] + (TUNED_SUFFIX if lr is not None else "")
            out.setdefault(a["study"], {})[name] = lr
    return out


def tuned_lrs(claim: dict[str, Any], tuning_dir: str | Path) -> dict[str, float]:
    """`study/variant` -> the best lr of each non-base arm's search (tuning_dir/lr-<study>-<variant>/best.yaml)."""
    from grpo_research.analysis.claims import BASE_ARM
    from grpo_research.config import load_yaml

    out = {}
    for a in claim["arms"]:
        if a["variant"] == BASE_ARM:
            continue
        best = Path(tuning_dir) / f"lr-{a['study']}-{a['variant']}" / "best.yaml"
        if not best.is_file():
            raise FreezeError(f"claim {claim['id']!r} is tuned but {best} does not exist (run `snakemake --cores all "
                              "atlas_tuning`)")
        lr = (load_yaml(best).get("optim") or {}).get("lr")
        if not isinstance(lr, (int, float)):
            raise FreezeError(f"{best}: no optim.lr")
        out[f"{a['study']}/{a['variant']}"] = float(lr)
    return out
