"""Read a study's run directories (never W&B): config.yaml, metrics.jsonl, summary.json, eval/."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from grpo_research.errors import UsageError
from grpo_research.tracking import read_metrics
from grpo_research.typed_config import safe_load

from grpo_research.provenance import KERNEL_FAMILIES, NATIVE
from grpo_research.run_ids import base_of, kernels_of, seed_of, variant_of  # `<variant>[-base<b>][-k<family>]-seed<N>`


@dataclass
class Run:
    run_id: str
    variant: str  # run_id without [-base<b>]-seed<N>
    seed: int | None
    path: Path
    config: dict[str, Any]
    summary: dict[str, Any]
    train: list[dict[str, Any]]  # metrics rows of training steps (those with step_s)
    evals: list[dict[str, Any]]  # metrics rows with eval/accuracy
    benchmarks: dict[str, dict[str, Any]] = field(default_factory=dict)  # eval/<name>.json summaries
    base: int = 0  # the base seed of the run's base model (grpo_research.studies: base_seeds)
    kernels: str = NATIVE  # the kernel family its jobs ran on (grpo_research.studies: kernels)

    @property
    def unit(self) -> tuple:
        """What pairs runs of two arms: (base, seed), and (base, seed, family) off the native kernels."""
        return (self.base, self.seed) if self.kernels == NATIVE else (self.base, self.seed, self.kernels)

    @property
    def label(self) -> str:
        """The unit as the tables write it (`unit_label`)."""
        return unit_label(self.base, self.seed, self.kernels)

    @property
    def method(self) -> str:
        return self.config.get("method", "?")

    @property
    def wall_budget(self) -> dict[str, Any] | None:
        """An equal-wall-time control's budget (wall_budget.json, grpo_research.study_budget), else None."""
        f = self.path / "wall_budget.json"
        return json.loads(f.read_text()) if f.exists() else None


def unit_label(base: int, seed: int | None, kernels: str = NATIVE) -> str:
    """(base, seed) as a table cell: the seed alone on base 0 (the tables of studies before base
    seeds), `b<base>s<seed>` on another base, `b<base>` for a base model's own evaluation;
    `b<base>k<family>s<seed>` off the native kernels."""
    if kernels != NATIVE:
        return f"b{base}k{kernels}" + ("" if seed is None else f"s{seed}")
    if base == 0:
        return str(seed)
    return f"b{base}" if seed is None else f"b{base}s{seed}"


_LABEL = re.compile(r"b(\d+)(?:k(" + "|".join(re.escape(k) for k in KERNEL_FAMILIES if k != NATIVE)
                    + r"))?(?:s-?\d+)?")


def label_base(label: str) -> int:
    """The base of a `unit_label` cell (the group of the nested tests)."""
    m = _LABEL.fullmatch(label)
    return int(m.group(1)) if m else 0


def label_kernels(label: str) -> str:
    """The kernel family of a `unit_label` cell."""
    m = _LABEL.fullmatch(label)
    return m.group(2) if m and m.group(2) else NATIVE


def _damaged(f: Path, why: str) -> UsageError:
    return UsageError(f"{f}: damaged ({why}); rerun the job that writes it (delete the file first) or leave the run "
                      "out with --include")


def _read(f: Path, parse) -> Any:
    """`parse` of a run file's text; a file that cannot be read or parsed is a UsageError naming it."""
    try:
        return parse(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, yaml.YAMLError) as e:
        raise _damaged(f, " ".join(str(e).split())[:200]) from None


def load_run(path: str | Path) -> Run:
    """A run dir. A finished run's files (summary.json present) must all parse: a damaged one is a
    UsageError naming it, never left out; only an unfinished run's last metrics line (cut by a
    kill) is skipped."""
    path = Path(path)
    finished = (path / "summary.json").exists()
    metrics = path / "metrics.jsonl"
    try:
        rows = read_metrics(metrics, missing_ok=True, skip_bad_lines=not finished)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise _damaged(metrics, " ".join(str(e).split())[:200]) from None
    config = _read(path / "config.yaml", safe_load) if (path / "config.yaml").exists() else {}
    summary = _read(path / "summary.json", json.loads) if finished else {}
    for name, value in (("config.yaml", config), ("summary.json", summary)):
        if not isinstance(value, dict):
            raise _damaged(path / name, f"expected a mapping, got {type(value).__name__}")
    benchmarks = {}
    for f in sorted((path / "eval").glob("*.json")):
        if f.name.endswith((".samples.json", ".predictions.json")):
            continue
        benchmarks[f.stem] = _read(f, json.loads)
    seed = seed_of(path.name)
    return Run(run_id=path.name, variant=variant_of(path.name), seed=config.get("seed") if seed is None else seed,
               path=path, config=config,
               summary=summary, train=[r for r in rows if r.get("step_s") is not None],
               evals=[r for r in rows if r.get("eval/accuracy") is not None], benchmarks=benchmarks,
               base=base_of(path.name), kernels=kernels_of(path.name))


def load_study_runs(study_dir: str | Path, only_finished: bool = True) -> list[Run]:
    """Every run dir of a study (those with summary.json when `only_finished`), sorted by id."""
    study_dir = Path(study_dir)
    runs = []
    for d in sorted(p for p in study_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        if only_finished and not (d / "summary.json").exists():
            continue
        runs.append(load_run(d))
    return runs
