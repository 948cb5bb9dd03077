"""A run directory and its config (torch-free): a run dir may be new, or hold the same config (the
run resumes, or is done). A run dir written by an earlier version, whose config lacks keys added
since, still counts as the same run when those keys are at their defaults; any real difference
is refused, naming the keys."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from grpo_research.config import RunConfig
from grpo_research.errors import UsageError
from grpo_research.files import write_text_atomic


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(d, dict) or not d or prefix.endswith(("weights.", "options.", "vllm.")):
        return {prefix.rstrip("."): d}
    out: dict[str, Any] = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}{k}."))
    return out


def config_differences(saved: dict, cfg: RunConfig) -> list[str]:
    """`key: saved -> new` for every real difference between a saved config and `cfg`; keys that
    `cfg` has and `saved` lacks count only when `cfg` sets them away from their default."""
    old, new = _flatten(saved), _flatten(cfg.to_dict())
    default = _flatten(RunConfig().to_dict())
    out = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            out.append(f"{key}: {old[key]!r} -> (no such key now)")
        elif key not in old:
            if new[key] != default.get(key):
                out.append(f"{key}: (absent) -> {new[key]!r}")
        elif old[key] != new[key]:
            out.append(f"{key}: {old[key]!r} -> {new[key]!r}")
    return out


def check_run_dir(run_dir: str | Path, cfg: RunConfig) -> None:
    """UsageError unless `run_dir` is new or holds `cfg` (up to keys added since at their defaults)."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise UsageError(f"run dir {run_dir} exists and is not a directory")
    saved = run_dir / "config.yaml"
    if not saved.exists():
        return
    try:
        data = yaml.safe_load(saved.read_text())
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


def write_config(run_dir: str | Path, cfg: RunConfig) -> None:
    """config.yaml of a new run (an existing one, checked by `check_run_dir`, is left as written)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.yaml"
    if not path.exists():
        write_text_atomic(path, cfg.dump())
