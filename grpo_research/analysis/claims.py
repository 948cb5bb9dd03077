"""The replication atlas's claims (`experiments/claims.yaml`, issue 17): published findings
written down before the runs that test them.

`load_claims(path, studies_dir)` parses the file, validates it against
`workflow/schemas/claims.schema.yaml` (jsonschema), and checks what the schema cannot: unique
ids; the fields each kind needs (`difference`: `predicted`; `equivalence`: `margin`;
`ordering`: three or more arms and no `predicted`); and, for every claim without `needs`, that
each arm's study exists under `studies_dir` and has the variant (or is `base model`, the
step-0 evaluation of the other arm's runs); every `validity` check is a registered one with
its parameters (grpo_research.analysis.validity.check_spec); the claims with `tuned: true`
tune at most MAX_TUNED arms. The first problem is a `ClaimsError` naming the
file, the claim and the field. Verdicts: grpo_research.analysis.atlas (`snakemake atlas`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from grpo_research.analysis import validity
from grpo_research.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow" / "schemas" / "claims.schema.yaml"
BASE_ARM = "base model"
MAX_TUNED = 4  # arms with an lr search of their own (claims with `tuned: true`), over the whole atlas


class ClaimsError(UsageError):
    """A claims file that cannot be used (exit 2); the message names the file, claim and field."""


def load_claims(path: str | Path, studies_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """The claims of `path`, checked (see the module docstring)."""
    from grpo_research.config import load_yaml
    from grpo_research.errors import ConfigError
    from grpo_research.studies import StudyError, expand_study, find_studies, load_study_file, validate_schema

    path = Path(path)
    try:
        data = load_yaml(path)
        validate_schema(data, SCHEMA, where=str(path))
    except (ConfigError, StudyError) as e:
        raise ClaimsError(str(e)) from None
    studies_dir = Path(studies_dir) if studies_dir is not None else path.parent
    claims = data["claims"]
    files = find_studies(studies_dir)
    seen: set[str] = set()
    tuned: set[tuple[str, str]] = set()
    variants: dict[str, list[str]] = {}
    for i, c in enumerate(claims):
        where = f"{path}: claims[{i}] ({c['id']})"
        if c["id"] in seen:
            raise ClaimsError(f"{where}: id {c['id']!r} is used twice")
        seen.add(c["id"])
        kind = c["kind"]
        if kind == "difference" and "predicted" not in c:
            raise ClaimsError(f"{where}: a difference claim needs `predicted` (greater, less, not_greater, not_less)")
        if kind == "equivalence" and "margin" not in c:
            raise ClaimsError(f"{where}: an equivalence claim needs `margin`")
        if kind == "ordering" and (len(c["arms"]) < 3 or "predicted" in c):
            raise ClaimsError(f"{where}: an ordering claim lists three or more arms, lowest first, and no `predicted`")
        if kind != "difference" and "ratio" in c:
            raise ClaimsError(f"{where}: `ratio` belongs to a difference claim")
        for k, spec in enumerate(c.get("validity") or []):
            bad = validity.check_spec(spec, len(c["arms"]), {j for j, a in enumerate(c["arms"]) if a["variant"] == BASE_ARM})
            if bad:
                raise ClaimsError(f"{where}: validity[{k}]: {bad}")
        if c.get("tuned"):
            for a in c["arms"]:
                if a["variant"] != BASE_ARM:
                    tuned.add((a["study"], a["variant"]))
            if len(tuned) > MAX_TUNED:
                raise ClaimsError(f"{where}: tuned: the claims tune {len(tuned)} arms; at most {MAX_TUNED} Optuna "
                                  "searches serve the whole atlas")
        if c.get("measurement") and kind == "ordering":
            raise ClaimsError(f"{where}: `measurement` belongs to a difference or equivalence claim")
        if "needs" in c:
            continue
        for j, arm in enumerate(c["arms"]):
            study, variant = arm["study"], arm["variant"]
            if study not in variants:
                file = files.get(study)
                if file is None:
                    raise ClaimsError(f"{where}: arms[{j}]: no study {study!r} ({studies_dir / (study + '.yaml')} "
                                      "does not exist); add it, or say what is missing under `needs`")
                try:
                    raw = load_study_file(file)
                    variants[study] = expand_study(raw, study, path=file, base_paths={
                        b: None for b in raw.get("base_seeds") or [0]}).variants
                except StudyError as e:
                    raise ClaimsError(f"{where}: arms[{j}]: {e}") from None
            if variant != BASE_ARM and variant not in variants[study]:
                raise ClaimsError(f"{where}: arms[{j}]: study {study!r} has no variant {variant!r} "
                                  f"(it has: {', '.join(variants[study])}, or {BASE_ARM!r})")
        if sum(arm["variant"] == BASE_ARM for arm in c["arms"]) > 1:
            raise ClaimsError(f"{where}: at most one arm can be {BASE_ARM!r} (it pairs with the other arm's runs)")
    return claims
