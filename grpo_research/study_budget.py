"""Training a run of a study: the `train.steps` of a budget of generated samples
(`budget_overrides`), a run dir holding another config set aside (`set_aside_stale_run`), and
the equal-wall-time supervised control's budget (`wall_budget`, `prepare_wall_run`).

The command line (grpo_research/cli/study.py): `grpo-research study list
experiments/ppo_vs_grpo.yaml` prints the runs; `grpo-research study train-budget --budget-samples N
--run-dir DIR [--config F] [k=v ...]` trains one run at a given budget of samples (used for
Optuna's best-config reruns, whose group size is only known once the search has finished);
`grpo-research study train-wall --match DIR [--match DIR ...] --probe DIR --run-dir D [k=v ...]`
trains the equal-wall-time control: steps = (the longest summed `step_s` of the --match runs) /
(the median `step_s` of the --probe run), evaluated `--evals` times; it first writes
`wall_budget.json` (target seconds, matched runs, steps) into the run dir, which marks the run
as the equal-wall-time control for the analysis.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from grpo_research.studies import StudyError, override

WALL_BUDGET_FILE = "wall_budget.json"  # written into an equal-wall-time control's run dir


def steps_for_budget(budget_samples: int, prompts_per_step: int, group_size: int) -> int:
    per_step = prompts_per_step * group_size
    return max(1, math.floor(budget_samples / per_step))


# ---------------------------------------------------------------- training a run of a study
def budget_overrides(cfg, budget_samples: int, eval_every_samples: int | None = None) -> list[str]:
    """`train.steps` (and `train.eval_every`) overrides that make the run of the resolved config
    `cfg` generate `budget_samples` completions (and evaluate every `eval_every_samples`)."""
    per_step = cfg.rollout.prompts_per_step * cfg.algo.group_size
    extra = [override("train.steps", steps_for_budget(budget_samples, cfg.rollout.prompts_per_step,
                                                      cfg.algo.group_size))]
    if eval_every_samples:
        extra.append(override("train.eval_every", max(1, eval_every_samples // per_step)))
    return extra


def set_aside_stale_run(run_dir: str | Path, config_text: str) -> Path | None:
    """A run dir whose config.yaml is not `config_text` (e.g. a longer search found another best
    config) is renamed to `<dir>.stale-N`, so the run trains afresh; returns the new name, or
    None when there was nothing to set aside."""
    run_dir = Path(run_dir)
    saved = run_dir / "config.yaml"
    if not saved.exists() or saved.read_text() == config_text:
        return None
    n = 1
    while run_dir.with_name(f"{run_dir.name}.stale-{n}").exists():
        n += 1
    stale = run_dir.with_name(f"{run_dir.name}.stale-{n}")
    run_dir.rename(stale)
    return stale


def train_seconds(run_dir: str | Path) -> list[float]:
    """`step_s` of every training step of a run (its metrics.jsonl), in order."""
    from grpo_research.tracking import read_metrics

    path = Path(run_dir) / "metrics.jsonl"
    if not path.exists():
        raise StudyError(f"{path}: missing (the run has not trained)")
    out = [float(row["step_s"]) for row in read_metrics(path) if row.get("step_s") is not None]
    if not out:
        raise StudyError(f"{path}: no training step with step_s")
    return out


def wall_budget(match: list[str | Path], probe: str | Path, evals: int) -> dict[str, Any]:
    """Steps and evaluation interval of an equal-wall-time control (see `train-wall`)."""
    import statistics

    if not match:
        raise StudyError("train-wall: no --match run: the control needs the RL runs whose time it matches")
    times = {Path(m).name: sum(train_seconds(m)) for m in match}
    longest = max(times, key=times.get)
    s_per_step = statistics.median(train_seconds(probe))
    steps = max(1, math.ceil(times[longest] / s_per_step))
    return {"target_s": times[longest], "matched_run": longest, "train_s_of_matched_runs": times,
            "probe_run": Path(probe).name, "probe_median_step_s": s_per_step, "steps": steps,
            "eval_every": max(1, steps // max(1, evals))}


def prepare_wall_run(run_dir: str | Path, match: list[str | Path], probe: str | Path, evals: int) -> dict[str, Any]:
    """The budget of an equal-wall-time control (`wall_budget`), written into a new run dir as
    wall_budget.json first: it marks the run as the equal-wall-time control. An existing file is
    kept: a changed budget changes train.steps, so `train` refuses the run dir (exit 2) and the
    old wall_budget.json stays beside the old config."""
    import json

    from grpo_research.files import write_text_atomic

    budget = wall_budget(match, probe, evals)
    run_dir = Path(run_dir)
    saved = run_dir / WALL_BUDGET_FILE
    if not saved.exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        write_text_atomic(saved, json.dumps(budget, indent=2) + "\n")
    return budget
