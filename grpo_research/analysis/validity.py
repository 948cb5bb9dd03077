"""Validity checks of the atlas's claims (issue 34): the preconditions under which a claim's
mechanism can act here, measured on the claim's own runs before any test is made.

A claim lists them under `validity:` in experiments/claims.yaml, each `{check: NAME, ...}`, with
its thresholds written down (and frozen with the claims, `grpo-research atlas freeze`). A claim
whose checks fail gets the verdict **not testable here**, naming the failed check and the value
it measured; a check whose metric the claim's runs do not record (run dirs older than the
metric) gives **rerun needed**. Both stay outside the multiplicity family: a claim the setting
cannot test is not a hypothesis the atlas spends its error rate on.

Registered checks (`CHECKS`; `check_spec` validates a spec when the claims file is loaded):

- `off_bounds` (`floor`, `ceiling`; defaults 0 and 1): every arm's mean of the claim's metric
  lies strictly between them. Applied with its defaults to every claim on an accuracy, listed
  or not: an arm at 0 % or 100 % has no room to differ (the 4-digit OOD split of the tiny model:
  every model 0 %). A claim near the ceiling states a lower `ceiling` (a 2-point bound on a
  pass@64 of 92 % needs headroom above both arms).
- `train_metric` (`metric`: a key of metrics.jsonl; `at`: mean, first or last over a run's
  training rows; `arm`: an arm's index or `all`, the default; `above` and/or `below`): the mean
  over the arm's runs of that value is above / below the threshold, for every arm selected. E.g.
  `clip_frac` above 0 for a clipping claim; `completion_len_std` above 0.5 tokens for a length
  claim; `reward/format` at `first` below 0.95 for a format-reward claim (the base model, whose
  samples the first step scores, must have format left to learn); `frac_zero_std_generated`
  below 1 where a claim needs signal.

Each check returns an `Outcome`: `ok` True / False / None (None: the metric is missing), and one
line saying what was measured against what.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from grpo_research.registry import Registry

AT = ("mean", "first", "last")


@dataclass
class Outcome:
    ok: bool | None  # None: the runs lack what the check reads (rerun needed)
    text: str


Check = Callable[..., Outcome]
CHECKS: Registry[Check] = Registry("validity check")
PARAMS: dict[str, set[str]] = {}  # check -> the keys its spec may have (besides `check`)


def _register(name: str, params: set[str]):
    def add(fn: Check) -> Check:
        PARAMS[name] = params
        return CHECKS.register(name, fn)
    return add


def _fmt(v: float) -> str:
    return f"{v:.4g}"


@_register("off_bounds", {"floor", "ceiling"})
def off_bounds(spec: dict[str, Any], arms: list, metric: str) -> Outcome:
    """Every arm's mean of the claim's metric strictly inside (floor, ceiling)."""
    floor, ceiling = float(spec.get("floor", 0.0)), float(spec.get("ceiling", 1.0))
    means = [(a.label, float(np.mean(list(a.values.values())))) for a in arms if a.values]
    if len(means) < len(arms):
        missing = [a.label for a in arms if not a.values]
        return Outcome(None, f"off_bounds: no value of {metric} for {', '.join(missing)}")
    bad = [(lab, m) for lab, m in means if not floor < m < ceiling]
    shown = ", ".join(f"{lab} {_fmt(m)}" for lab, m in means)
    if bad:
        return Outcome(False, f"off_bounds: {metric} mean not inside ({_fmt(floor)}, {_fmt(ceiling)}): "
                              + ", ".join(f"{lab} {_fmt(m)}" for lab, m in bad))
    return Outcome(True, f"off_bounds: {metric} means {shown} inside ({_fmt(floor)}, {_fmt(ceiling)})")


def run_metric(run, key: str, at: str) -> float | None:
    """`key` over a run's training rows: their mean, the first row's or the last row's."""
    xs = [float(r[key]) for r in run.train if r.get(key) is not None]
    if not xs:
        return None
    return {"mean": float(np.mean(xs)), "first": xs[0], "last": xs[-1]}[at]


@_register("train_metric", {"metric", "at", "arm", "above", "below"})
def train_metric(spec: dict[str, Any], arms: list, metric: str) -> Outcome:
    """The mean over each selected arm's runs of a training metric, against `above` / `below`."""
    key, at = spec["metric"], spec.get("at", "mean")
    which = spec.get("arm", "all")
    chosen = arms if which == "all" else [arms[int(which)]]
    parts, failed = [], []
    for a in chosen:
        vals = [run_metric(r, key, at) for r in a.runs.values()]
        if not a.runs or any(v is None for v in vals):
            lacking = sum(v is None for v in vals)
            return Outcome(None, f"train_metric: {lacking or 'all'} of {a.label}'s runs do not record {key!r} "
                                 "(run dirs older than the metric: rerun them)")
        m = float(np.mean(vals))
        parts.append(f"{a.label} {_fmt(m)}")
        if "above" in spec and not m > float(spec["above"]):
            failed.append(f"{a.label} {_fmt(m)} not above {_fmt(float(spec['above']))}")
        if "below" in spec and not m < float(spec["below"]):
            failed.append(f"{a.label} {_fmt(m)} not below {_fmt(float(spec['below']))}")
    what = f"train_metric: {key} ({at} over a run, mean over runs)"
    if failed:
        return Outcome(False, f"{what}: " + "; ".join(failed))
    return Outcome(True, f"{what}: " + ", ".join(parts))


def check_spec(spec: dict[str, Any], n_arms: int, base_arms: set[int]) -> str | None:
    """None when `spec` is a usable check for a claim with `n_arms` arms (`base_arms`: indices of
    `base model` arms, which have no training runs), else what is wrong, in one phrase."""
    name = spec.get("check")
    if name not in CHECKS:
        return f"unknown check {name!r} (known: {CHECKS.choices()})"
    extra = set(spec) - {"check"} - PARAMS[name]
    if extra:
        return f"check {name}: unknown key(s) {', '.join(sorted(extra))} (it takes: {', '.join(sorted(PARAMS[name]))})"
    for k in PARAMS[name] & {"floor", "ceiling", "above", "below"}:
        if k in spec and (isinstance(spec[k], bool) or not isinstance(spec[k], (int, float)) or not math.isfinite(spec[k])):
            return f"check {name}: {k} must be a number, got {spec[k]!r}"
    if name == "off_bounds" and not float(spec.get("floor", 0.0)) < float(spec.get("ceiling", 1.0)):
        return "check off_bounds: floor must be below ceiling"
    if name == "train_metric":
        if not isinstance(spec.get("metric"), str):
            return "check train_metric needs `metric` (a key of metrics.jsonl, e.g. clip_frac)"
        if spec.get("at", "mean") not in AT:
            return f"check train_metric: at must be one of {', '.join(AT)}, got {spec.get('at')!r}"
        if "above" not in spec and "below" not in spec:
            return "check train_metric needs a threshold: `above` and/or `below`"
        arm = spec.get("arm", "all")
        if arm != "all":
            if isinstance(arm, bool) or not isinstance(arm, int) or not 0 <= arm < n_arms:
                return f"check train_metric: arm must be `all` or an arm's index 0..{n_arms - 1}, got {arm!r}"
            if arm in base_arms:
                return f"check train_metric: arm {arm} is the base model, which has no training runs"
    return None


def evaluate(specs: list[dict[str, Any]], arms: list, metric: str, accuracy: bool) -> tuple[str | None, list[str]]:
    """(None, lines) when every check passes; else ("not testable here" or "rerun needed", lines),
    the first line naming the check that failed and its measured value. An accuracy claim is
    checked with `off_bounds` at its defaults unless it lists its own."""
    specs = list(specs or [])
    if accuracy and not any(s["check"] == "off_bounds" for s in specs):
        specs.insert(0, {"check": "off_bounds"})
    passed, missing, failed = [], [], []
    for s in specs:
        chosen = arms
        if s["check"] == "train_metric" and s.get("arm", "all") == "all":
            chosen = [a for a in arms if not a.is_base]  # the base model has no training runs
        out = CHECKS[s["check"]](s, chosen, metric)
        (passed if out.ok else missing if out.ok is None else failed).append(out.text)
    if missing:
        return "rerun needed", missing + failed
    if failed:
        return "not testable here", failed
    return None, passed
