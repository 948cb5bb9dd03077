"""One number per arm and (base, seed) unit of an atlas claim (grpo_research.analysis.atlas):
the claim's metric read from each finished run (`metric_value`), the base-model arm paired with
the other arm's runs (`arm_values`), and each metric's unit (`metric_unit`). See the atlas
module's docstring for what each metric means."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from grpo_research.analysis.aggregate import TRAINER_HELDOUT, TRAINER_OOD, run_scores
from grpo_research.analysis.load import Run
from grpo_research.analysis.claims import BASE_ARM
from grpo_research.errors import UsageError
ACCURACY = "accuracy"  # metrics in [0, 1], shown in points
UNITS = {"cost/model_state_mb": "MiB", "cost/peak_mem_mb": "MiB", "entropy": "nats", "kl": "nats",
         "completion_len": "tokens", "completion_len/incorrect": "tokens", "completion_len/correct": "tokens",
         "frac_zero_std": "share of groups", "step_s": "s"}


@dataclass
class ArmValues:
    """One arm's values by seed (`one_model`: the same base-model value stands for every seed)."""

    label: str
    values: dict[int, float]
    n_problems: dict[int, int] = field(default_factory=dict)  # accuracies: problems behind each value
    one_model: bool = False
    is_base: bool = False  # the `base model` arm (no training runs of its own)
    missing: int = 0  # runs of the arm's variant that do not record the metric
    created: list[float] = field(default_factory=list)  # creation times (s since epoch) of the runs
    runs: dict[int, Run] = field(default_factory=dict)  # seed -> the run behind each value


def metric_unit(metric: str) -> str:
    """`accuracy` for metrics in [0, 1] read as points; else the training metric's unit."""
    if metric == "heldout_per_update":
        return "accuracy per update"
    if metric.startswith("train:"):
        return UNITS.get(metric[len("train:"):], "metric units")
    return ACCURACY


def _bench_value(summary: dict[str, Any], which: str | None) -> tuple[float | None, int | None]:
    n = summary.get("n_problems")
    if which is None:
        return summary.get("pass@1"), n
    kind, _, k = which.partition("@")
    table = summary.get(f"{kind}@k") or {}
    cell = table.get(k)
    return (cell.get("value") if isinstance(cell, dict) else None), n


def metric_value(run: Run, metric: str) -> tuple[float | None, int | None]:
    """(value, problems behind it or None) of `metric` for a finished run (see the module docstring)."""
    if metric in ("heldout", "heldout_ood"):
        label = TRAINER_HELDOUT if metric == "heldout" else TRAINER_OOD
        return run_scores(run).get(label), (run.config.get("train") or {}).get("eval_size")
    if metric == "heldout_per_update":  # (final - step-0 held-out accuracy) / policy updates taken
        final, start = run_scores(run).get(TRAINER_HELDOUT), base_value(run, "heldout")
        steps = max((r.get("step") or 0 for r in run.train), default=0)
        if final is None or start is None or not steps:
            return None, None
        return (final - start) / steps, None
    if metric.startswith("train:"):
        key = metric[len("train:"):]
        xs = [r[key] for r in run.train if r.get(key) is not None]
        return (float(np.mean(xs)) if xs else None), None
    entry, _, which = metric.partition(":")
    summary = run.benchmarks.get(entry)
    if summary is None:
        return None, None
    return _bench_value(summary, which or None)


def base_value(run: Run, metric: str) -> float | None:
    """The base model's value paired with `run`: its own step-0 evaluation (heldout, heldout_ood)."""
    key = {"heldout": "eval/accuracy", "heldout_ood": "eval/accuracy_ood"}.get(metric)
    if key is None:
        raise UsageError(f"metric {metric!r} has no base-model value per run (use heldout, heldout_ood or a "
                         "benchmark entry the study evaluates the base model on)")
    first = run.evals[0] if run.evals else None
    return first.get(key) if first is not None and first.get("step") == 0 else None


def _created(run: Run) -> float | None:
    f = run.path / "config.yaml"
    return f.stat().st_mtime if f.exists() else None


def arm_values(arm: dict[str, str], metric: str, runs: dict[str, list[Run]], bases: dict[str, dict[int, Run]],
               partner: ArmValues | None = None) -> ArmValues:
    """An arm's values by (base, seed). `runs`: study -> its finished runs; `bases`: study -> base
    seed -> that base model's evaluations (analysis.study.base_model_runs). `partner`: the values
    of the claim's other arm, which a `base model` arm pairs with (its runs' step-0 evaluations,
    or the evaluation of each run's own base model)."""
    study, variant = arm["study"], arm["variant"]
    label = f"{study}/{variant}"
    if variant != BASE_ARM:
        out = ArmValues(label, {})
        for r in runs.get(study, []):
            if r.variant != variant or r.seed is None:
                continue
            v, n = metric_value(r, metric)
            out.missing += v is None
            if v is not None:
                out.values[r.unit], out.runs[r.unit] = float(v), r  # paired by (base, seed)
                if n:
                    out.n_problems[r.unit] = int(n)
                out.created += [t for t in [_created(r)] if t is not None]
        return out
    if partner is None:
        raise UsageError(f"{label}: a `base model` arm needs another arm to pair with")
    if metric in ("heldout", "heldout_ood"):
        vals = {s: base_value(r, metric) for s, r in partner.runs.items()}
        vals = {s: float(v) for s, v in vals.items() if v is not None}
        return ArmValues(label, vals, {s: n for s, n in partner.n_problems.items() if s in vals}, is_base=True)
    found = bases.get(study) or {}
    entry, _, which = metric.partition(":")
    vals, counts = {}, {}
    for u in partner.values:  # each run pairs with the evaluation of its own base model
        base = found.get(u[0] if len(u) == 2 else (u[0], u[2]))  # its base seed's, on its kernel family
        if base is None or entry not in base.benchmarks:
            continue
        v, n = _bench_value(base.benchmarks[entry], which or None)
        if v is not None:
            vals[u] = float(v)
            if n:
                counts[u] = int(n)
    return ArmValues(label, vals, counts, one_model=True, is_base=True)
