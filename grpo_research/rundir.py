"""A run directory and its config (torch-free): a run dir may be new, or hold the same config (the
run resumes, or is done). A run dir written by an earlier version, whose config lacks keys added
since, still counts as the same run when those keys are at their defaults, and one whose keys
were renamed since is read in today's terms (`upgrade_saved`: DPO's beta was `algo.beta`); any
real difference is refused, naming the keys.

Operational keys (`OPERATIONAL_KEYS`) are not part of a run's identity: they say how this
invocation runs (how long to wait for the lock, how many threads, how often to checkpoint,
where and whether to log to W&B), not what it computes, so a run dir resumes when only they
changed; config.yaml then takes their new values (what W&B is sent).

What is refused before anything is computed or written, each with one line (`UsageError`,
exit 2): an empty `--run-dir` (it would train into the current directory), a name longer
than the file system allows, a path through a file, a run dir that cannot be written
(read-only file system, permissions), an existing non-empty directory that holds no
config.yaml (not a run dir: its files would be mixed with the run's), and a run dir whose
files are of the wrong kind (e.g. metrics.jsonl a directory)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from grpo_research.config import RunConfig
from grpo_research.errors import UsageError
from grpo_research.files import environment_error, is_environment_error, write_text_atomic  # noqa: F401 (re-exported)
from grpo_research.typed_config import safe_load

# Config keys that cannot change a run's numbers (metrics.jsonl, checkpoints, the model): left
# out of the run-dir comparison. A key ending in "." is a whole section. Each with why.
OPERATIONAL_KEYS: dict[str, str] = {
    "train.lock_wait": "how long this invocation waits for another process holding the run dir",
    "train.threads": "torch CPU threads (the default, auto, already differs between invocations)",
    "train.checkpoint_every": "how often a checkpoint is written; the numbers do not depend on it "
                              "(a resumed run ends with the same numbers as an uninterrupted one)",
    "train.samples_every": "how often a table of rollout samples is written to samples/ and W&B "
                           "(not metrics.jsonl)",
    "tracking.": "W&B mode, project, group, tags and the progress bar: where the numbers are shown, "
                 "not what they are (on resume W&B is sent the rows it lacks)",
}

# What other parts of the project put in a run dir before its first `train` writes config.yaml:
# the lock (`train` itself), the equal-wall-time control's budget (grpo_research/study_budget.py) and
# an HPO trial's log (grpo_research/hpo/search.py). A directory holding anything else and no
# config.yaml is not a run dir.
PRE_RUN_FILES = frozenset({".lock", "wall_budget.json", "train.log"})

# The entries of a run dir and what kind each must be.
RUN_FILES = ("config.yaml", "metrics.jsonl", "summary.json", "prompt.json", "wandb_id.txt")
RUN_DIRS = ("checkpoint", "checkpoint.prev", "samples", "model", "wandb", "final_eval")


def is_operational(key: str) -> bool:
    """Whether a flattened config key (`train.threads`) is in OPERATIONAL_KEYS."""
    return any(key == k or (k.endswith(".") and key.startswith(k)) for k in OPERATIONAL_KEYS)


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict) or not d or prefix.endswith(("weights.", "options.", "vllm.")):
        return {prefix.rstrip("."): d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}{k}."))
    return out


def upgrade_saved(saved: dict) -> dict:
    """A saved config written by an earlier version, in today's keys (a copy; `saved` itself
    is left as it is): DPO's beta, once `algo.beta`, is `dpo.beta`, and DPO's `algo.beta` is 0
    (it has no KL term)."""
    from grpo_research.methods import DPO_TRAINER, METHODS

    method = METHODS.get(saved.get("method")) if isinstance(saved.get("method"), str) else None
    algo, dpo = saved.get("algo"), saved.get("dpo")
    if (method is None or method.trainer != DPO_TRAINER or not isinstance(algo, dict) or "beta" not in algo
            or (isinstance(dpo, dict) and "beta" in dpo)):
        return saved
    return {**saved, "algo": {**algo, "beta": 0.0}, "dpo": {**(dpo if isinstance(dpo, dict) else {}),
                                                           "beta": algo["beta"]}}


def config_differences(saved: dict, cfg: RunConfig, operational: bool = False) -> list[str]:
    """`key: saved -> new` for every real difference between a saved config (`upgrade_saved`
    first) and `cfg`; keys that `cfg` has and `saved` lacks count only when `cfg` sets them away
    from their default. Operational keys are left out, or (`operational=True`) are the only ones
    listed."""
    old, new = _flatten(upgrade_saved(saved)), _flatten(cfg.to_dict())
    default = _flatten(RunConfig().to_dict())
    out = []
    for key in sorted(set(old) | set(new)):
        if is_operational(key) != operational:
            continue
        if key not in new:
            out.append(f"{key}: {old[key]!r} -> (no such key now)")
        elif key not in old:
            if new[key] != default.get(key):
                out.append(f"{key}: (absent) -> {new[key]!r}")
        elif old[key] != new[key]:
            out.append(f"{key}: {old[key]!r} -> {new[key]!r}")
    return out


def _name_max(path: Path) -> int:
    try:
        return os.pathconf(path, "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:  # e.g. a name too long: checked by the caller
        return False


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_dir_path(path: str | os.PathLike, what: str, file_ok: bool = False) -> Path:
    """Refuse, before anything is written, a directory path that cannot be made or written:
    empty, a name longer than the file system allows, a path through a file, or on a read-only
    file system / without permission. `what` names it in the message (e.g. "--run-dir").
    `file_ok`: the path itself being a file is left to the caller to refuse. Returns it as a
    Path; nothing is created."""
    text = os.fspath(path)
    if not text.strip():
        raise UsageError(f"{what} is empty (that would be the current directory): give a directory")
    p = Path(text)
    limit = _name_max(next((q for q in p.parents if _exists(q)), Path(".")))
    for part in p.parts:
        if len(os.fsencode(part)) > limit:
            raise UsageError(f"{what} {text[:60]}...: the name {part[:20]}... is {len(os.fsencode(part))} bytes "
                             f"long, more than the {limit} the file system allows")
    existing = next((q for q in (p, *p.parents) if _exists(q) or q.is_symlink()), Path("."))
    if file_ok and existing == p and not p.is_dir():
        return p
    if not existing.is_dir():
        raise UsageError(f"{what} {text}: {existing} is {'a file' if existing.exists() else 'a broken link'}, "
                         "not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        why = "read-only file system" if _read_only(existing) else "permission denied"
        raise UsageError(f"{what} {text}: cannot write in {existing} ({why})")
    return p


def check_run_dir(run_dir: str | Path, cfg: RunConfig) -> list[str]:
    """UsageError unless `run_dir` is new (or empty, or holds only PRE_RUN_FILES) or holds
    `cfg` up to keys added since at their defaults and up to operational keys; returns the
    operational keys that differ (`key: saved -> new`)."""
    run_dir = check_dir_path(run_dir, "--run-dir")
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"run dir {run_dir} exists and is not a directory")
    for name in RUN_FILES:
        if (run_dir / name).is_dir():
            raise UsageError(f"run dir {run_dir}: {run_dir / name} is a directory, not a file; "
                             "move it away or use another --run-dir")
    for name in RUN_DIRS:
        q = run_dir / name
        if (q.exists() or q.is_symlink()) and not q.is_dir():
            raise UsageError(f"run dir {run_dir}: {q} is a file, not a directory; move it away or use another --run-dir")
    saved = run_dir / "config.yaml"
    if not saved.exists():
        other = sorted(set(os.listdir(run_dir)) - PRE_RUN_FILES) if run_dir.is_dir() else []
        if other:
            shown = ", ".join(other[:3]) + (f" and {len(other) - 3} more" if len(other) > 3 else "")
            raise UsageError(f"run dir {run_dir} is not empty ({shown}) and holds no config.yaml: not a run dir; "
                             "give a new or empty directory")
        return []
    try:
        data = safe_load(saved.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise UsageError(f"run dir {run_dir}: its config.yaml cannot be read ({type(e).__name__}); "
                         "use another --run-dir") from None
    if not isinstance(data, dict):
        raise UsageError(f"run dir {run_dir}: its config.yaml is not a config; use another --run-dir")
    diff = config_differences(data, cfg)
    if diff:
        more = f" and {len(diff) - 4} more" if len(diff) > 4 else ""
        raise UsageError(f"run dir {run_dir} already holds a different config ({'; '.join(diff[:4])}{more}); "
                         "use another --run-dir or the same config to resume")
    return config_differences(data, cfg, operational=True)


def write_config(run_dir: str | Path, cfg: RunConfig) -> None:
    """config.yaml of a new run. An existing one (checked by `check_run_dir`) is left as written,
    unless operational keys changed: then it is rewritten with their new values."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.yaml"
    if not path.exists():
        write_text_atomic(path, cfg.dump())
        return
    data = safe_load(path.read_text())
    if isinstance(data, dict) and config_differences(data, cfg, operational=True):
        write_text_atomic(path, cfg.dump())
