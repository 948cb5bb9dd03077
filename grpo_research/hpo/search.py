"""The Optuna search: space, storage, sampler, pruner, the trial objective, export and plots."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_research.config import load_config
from grpo_research.errors import ConfigError, UsageError
from grpo_research.files import write_text_atomic
from grpo_research.hpo.storage import make_storage, retry_callback
from grpo_research.studies import format_value, override
from grpo_research.study_budget import budget_overrides
from grpo_research.tracking import read_metrics_since
from grpo_research.typed_config import safe_dump

METRIC = "eval/accuracy"
# The defaults of a search, stated once: here and in SearchSpec's fields. The command line
# (`grpo-research hpo search`) and the Snakemake pipeline (grpo_research/pipeline/hpo.py, from
# configs/defaults.yaml `hpo`) pass only the values they set.
DEFAULT_SPACE = {
    "algo.group_size": {"type": "categorical", "choices": [2, 4, 8, 16]},
    "algo.beta": {"type": "float", "low": 0.0, "high": 0.1},
    "algo.clip_eps": {"type": "float", "low": 0.1, "high": 0.3},
    "rollout.temperature": {"type": "float", "low": 0.6, "high": 1.2},
    "optim.lr": {"type": "float", "low": 1e-5, "high": 3e-4, "log": True},
}
DEFAULT_PRUNER = {"type": "median", "n_startup_trials": 5, "n_warmup_samples": 0}


@dataclass
class SearchSpec:
    """Everything one search needs; built from the workflow config or the command line."""

    name: str  # study name in storage, e.g. grpo-arith
    method: str
    storage: str  # RDB URL
    out_dir: Path  # trials.csv, best.yaml, plots/
    runs_dir: Path  # one run dir per trial: <runs_dir>/trial-NNNN
    n_trials: int
    budget_samples: int
    space: dict[str, dict[str, Any]]
    eval_every_samples: int | None = None
    sampler_seed: int = 0
    train_seed: int = 0
    pruner: dict[str, Any] = field(default_factory=lambda: dict(DEFAULT_PRUNER))  # keys missing: DEFAULT_PRUNER
    heartbeat_interval: int = 60
    grace_period: int = 180
    max_retry: int = 2
    # the only worker of its study: trials a killed search left RUNNING are retried at once.
    # Off by default: with several workers on one storage it would fail the others' live trials.
    exclusive: bool = False
    overrides: list[str] = field(default_factory=list)  # fixed run config (model, task, tracking, ...)
    python: str = sys.executable
    train_cmd: list[str] = field(default_factory=lambda: ["-m", "grpo_research.cli", "train"])  # after `python`
    poll_s: float = 0.5


def spec_default(name: str) -> Any:
    """The default of a SearchSpec field (for help texts)."""
    f = next(f for f in dataclasses.fields(SearchSpec) if f.name == name)
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


# ---------------------------------------------------------------- space
SPACE_KEYS = {"categorical": {"type", "choices"}, "int": {"type", "low", "high", "step", "log"},
              "float": {"type", "low", "high", "step", "log"}}


def check_space(space: Any, method: str, overrides: list[str] = (), where: str = "search space") -> None:
    """Refuse, before any trial, a space that cannot be searched: ConfigError naming the entry.
    Each entry is {type: categorical, choices: [...]} or {type: int|float, low, high[, step, log]};
    every key must be a run-config key, and every choice and both bounds valid values of it for
    `method` (checked by building the run config with that value)."""
    import math

    if not isinstance(space, dict) or not space:
        raise ConfigError(f"{where}: expected a non-empty mapping of config key -> range, got {space!r}")
    for key, spec in space.items():
        at = f"{where} entry {key!r}"
        if not isinstance(spec, dict) or spec.get("type") not in SPACE_KEYS:
            raise ConfigError(f"{at}: expected a mapping with type categorical, int or float, got {spec!r}")
        kind = spec["type"]
        unknown = set(spec) - SPACE_KEYS[kind]
        if unknown:
            raise ConfigError(f"{at}: unknown field(s) {', '.join(sorted(map(str, unknown)))} for type {kind} "
                              f"(allowed: {', '.join(sorted(SPACE_KEYS[kind]))})")
        if kind == "categorical":
            values = spec.get("choices")
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{at}: choices must be a non-empty list")
        else:
            missing = [f for f in ("low", "high") if f not in spec]
            if missing:
                raise ConfigError(f"{at}: missing {' and '.join(missing)}")
            low, high = spec["low"], spec["high"]
            number = int if kind == "int" else (int, float)
            for name, v in (("low", low), ("high", high), ("step", spec.get("step", 1))):
                if isinstance(v, bool) or not isinstance(v, number) or not math.isfinite(v):
                    raise ConfigError(f"{at}: {name} must be a finite {'integer' if kind == 'int' else 'number'}, got {v!r}")
            if low > high:
                raise ConfigError(f"{at}: low {low} is above high {high}")
            if spec.get("step") is not None and spec["step"] <= 0:
                raise ConfigError(f"{at}: step must be above 0, got {spec['step']}")
            if not isinstance(spec.get("log", False), bool):
                raise ConfigError(f"{at}: log must be true or false")
            if spec.get("log") and low <= 0:
                raise ConfigError(f"{at}: a log range needs low above 0, got {low}")
            if spec.get("log") and spec.get("step") is not None and kind == "float":
                raise ConfigError(f"{at}: a float range cannot have both step and log")
            values = [low, high]
        for v in values:
            try:
                load_config(None, [override("method", method), *overrides, override(key, v)])
            except ConfigError as e:
                raise ConfigError(f"{at}: the value {v!r} is not a valid run config ({e})") from None


def suggest_overrides(trial, space: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Config key -> suggested value, one Optuna parameter per key (named by the key)."""
    values: dict[str, Any] = {}
    for key, spec in space.items():
        kind = spec["type"]
        if kind == "categorical":
            values[key] = trial.suggest_categorical(key, list(spec["choices"]))
        elif kind == "int":
            values[key] = trial.suggest_int(key, int(spec["low"]), int(spec["high"]), step=int(spec.get("step", 1)),
                                            log=bool(spec.get("log", False)))
        elif kind == "float":
            values[key] = trial.suggest_float(key, float(spec["low"]), float(spec["high"]),
                                              step=spec.get("step"), log=bool(spec.get("log", False)))
        else:
            raise ValueError(f"search space entry {key!r}: unknown type {kind!r}")
    return values


def nest(flat: dict[str, Any]) -> dict[str, Any]:
    """{'algo.beta': 0.1} -> {'algo': {'beta': 0.1}}."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


# ---------------------------------------------------------------- sampler, pruner
def make_pruner(spec: dict[str, Any]):
    import optuna

    allowed = {"type", "n_startup_trials", "n_warmup_samples", "percentile"}
    if not isinstance(spec, dict) or set(spec) - allowed:
        raise ConfigError(f"pruner: expected a mapping of {', '.join(sorted(allowed))}, got {spec!r}")
    spec = {**DEFAULT_PRUNER, **spec}
    kind = spec["type"]
    for key in ("n_startup_trials", "n_warmup_samples"):
        if isinstance(spec[key], bool) or not isinstance(spec[key], int) or spec[key] < 0:
            raise ConfigError(f"pruner: {key} must be an integer of 0 or more, got {spec[key]!r}")
    startup = spec["n_startup_trials"]
    warmup = spec["n_warmup_samples"]
    if kind == "percentile" and not (isinstance(spec.get("percentile", 50.0), (int, float))
                                     and 0 < spec.get("percentile", 50.0) < 100):
        raise ConfigError(f"pruner: percentile must be in (0, 100), got {spec.get('percentile')!r}")
    if kind == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=startup, n_warmup_steps=warmup)
    if kind == "percentile":
        return optuna.pruners.PercentilePruner(float(spec.get("percentile", 50.0)), n_startup_trials=startup,
                                               n_warmup_steps=warmup)
    if kind == "none":
        return optuna.pruners.NopPruner()
    raise ConfigError(f"pruner: unknown type {kind!r} (median, percentile or none)")


def open_study(spec: SearchSpec, create: bool = True):
    import optuna

    pruner = make_pruner(spec.pruner)
    if not create and spec.storage.startswith("sqlite:///") and not Path(spec.storage[len("sqlite:///"):]).is_file():
        raise UsageError(f"--storage {spec.storage}: no such database file (nothing has been searched there)")
    storage = make_storage(spec.storage, spec.heartbeat_interval, spec.grace_period, spec.max_retry)
    sampler = optuna.samplers.TPESampler(seed=spec.sampler_seed)
    if create:
        return optuna.create_study(study_name=spec.name, storage=storage, sampler=sampler,
                                   pruner=pruner, direction="maximize", load_if_exists=True)
    try:
        return optuna.load_study(study_name=spec.name, storage=storage, sampler=sampler, pruner=pruner)
    except KeyError:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise UsageError(f"--storage {spec.storage} holds no study {spec.name!r}; it holds: "
                         f"{', '.join(names) or 'none'}") from None


def finished(study) -> list:
    from optuna.trial import TrialState

    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))


def reclaim_running(study, max_retry: int) -> list[int]:
    """Fail the trials left RUNNING (by a search that was killed) and queue their retries.
    Only for a worker that knows it is the study's only one (`exclusive`)."""
    from optuna.exceptions import UpdateFinishedTrialError
    from optuna.trial import TrialState

    reclaimed = []
    callback = retry_callback(max_retry)
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        try:
            if study._storage.set_trial_state_values(t._trial_id, state=TrialState.FAIL):
                callback(study, study._storage.get_trial(t._trial_id))
                reclaimed.append(t.number)
        except UpdateFinishedTrialError:
            pass
    return reclaimed


# ---------------------------------------------------------------- the objective
class Objective:
    """Train one run in a subprocess; report its held-out accuracy; prune by killing it."""

    def __init__(self, spec: SearchSpec, log=None):
        self.spec = spec
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))

    def run_overrides(self, params: dict[str, Any]) -> list[str]:
        spec = self.spec
        base = [override("method", spec.method), override("seed", spec.train_seed), *spec.overrides,
                *(override(k, v) for k, v in params.items())]
        cfg = load_config(None, base)
        extra = budget_overrides(cfg, spec.budget_samples, spec.eval_every_samples)
        tags = [f"{k}={format_value(v)}" for k, v in params.items()]
        extra += [override("tracking.group", f"hpo-{spec.name}"), override("tracking.tags", tags),
                  override("tracking.progress", False)]
        return base + extra

    def __call__(self, trial) -> float:
        import optuna

        params = suggest_overrides(trial, self.spec.space)
        # a retried trial keeps its original's user attrs, so it resumes the same run dir
        run_name = trial.user_attrs.get("run_dir") or f"trial-{trial.number:04d}"
        trial.set_user_attr("run_dir", run_name)
        run_dir = self.spec.runs_dir / run_name
        run_dir.mkdir(parents=True, exist_ok=True)
        cmd = [self.spec.python, *self.spec.train_cmd, "--run-dir", str(run_dir),
               *self.run_overrides(params)]
        self.log(f"trial {trial.number} ({run_name}): " + " ".join(f"{k}={format_value(v)}" for k, v in params.items()))
        metrics = run_dir / "metrics.jsonl"
        reported: set[int] = set()
        last: float | None = None
        with open(run_dir / "train.log", "ab") as log_fh:
            proc = subprocess.Popen(cmd, stdout=log_fh, stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=_terminate_with_parent)
            try:
                offset = 0
                while True:
                    rc = proc.poll()
                    rows, offset = read_metrics_since(metrics, offset)
                    for row in rows:
                        if METRIC not in row or row[METRIC] is None:
                            continue
                        last = float(row[METRIC])
                        step = int(row.get("samples", row["step"]))
                        if step in reported:
                            continue
                        reported.add(step)
                        trial.report(last, step)
                        if trial.should_prune():
                            _stop(proc)
                            self.log(f"trial {trial.number} pruned at {step} samples ({METRIC} = {last:.3f})")
                            raise optuna.TrialPruned(f"{METRIC} = {last:.3f} at {step} samples")
                    if rc is not None:
                        break
                    time.sleep(self.spec.poll_s)
            except BaseException:
                _stop(proc)
                raise
        if proc.returncode != 0:
            tail = (run_dir / "train.log").read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"trial {trial.number}: training exited with {proc.returncode}: {' | '.join(tail)}")
        summary = json.loads((run_dir / "summary.json").read_text())
        value = summary.get("final_accuracy", last)
        if value is None:
            raise RuntimeError(f"trial {trial.number}: the run logged no {METRIC}")
        trial.set_user_attr("samples", summary.get("samples"))
        trial.set_user_attr("steps", summary.get("steps"))
        self.log(f"trial {trial.number} finished: {METRIC} = {value:.3f}")
        return float(value)


def _terminate_with_parent() -> None:
    """In the trial's process, before exec: SIGTERM when the worker dies (Linux prctl
    PR_SET_PDEATHSIG), so a killed worker's run checkpoints and stops instead of training on
    as an orphan while the survivor retries the trial in the same run dir."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG


def _stop(proc: subprocess.Popen) -> None:
    """Terminate the training process group (it checkpoints atomically, so a kill is safe)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


# ---------------------------------------------------------------- search and export
def run_search(spec: SearchSpec, log=None) -> Any:
    """Run trials until `n_trials` are COMPLETE or PRUNED in storage; return the study."""
    import optuna
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    study = open_study(spec)
    study.set_user_attr("method", spec.method)
    study.set_user_attr("budget_samples", spec.budget_samples)
    if spec.exclusive:
        again = reclaim_running(study, spec.max_retry)
        if again:
            log(f"retrying trial(s) {again} left running by an interrupted search")
    done = len(finished(study))
    remaining = spec.n_trials - done
    log(f"study {spec.name}: {done} finished trial(s) in storage, {max(remaining, 0)} to run")
    if remaining > 0:
        study.optimize(Objective(spec, log), n_trials=remaining, gc_after_trial=True,
                       callbacks=[MaxTrialsCallback(spec.n_trials, states=(TrialState.COMPLETE, TrialState.PRUNED))])
    return study


def best_config(study, method: str) -> dict[str, Any]:
    return {"method": method, **nest(dict(study.best_trial.params))}


def export_study(spec: SearchSpec, log=None) -> dict[str, Path]:
    """trials.csv, best.yaml and the plots of a search (from storage alone)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = open_study(spec, create=False)
    out = Path(spec.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"trials": out / "trials.csv", "best": out / "best.yaml"}
    write_text_atomic(paths["trials"], study.trials_dataframe().to_csv(index=False))
    best = study.best_trial
    header = (f"# Best trial {best.number} of Optuna study {spec.name!r}: {METRIC} = {best.value:.4f} after "
              f"{best.user_attrs.get('samples', spec.budget_samples)} generated samples (seed {spec.train_seed}).\n"
              f"# {len(finished(study))} finished trials. Use: grpo-research train --config best.yaml --run-dir DIR\n")
    write_text_atomic(paths["best"], header + safe_dump(best_config(study, spec.method), sort_keys=False))
    from grpo_research.hpo.plots import save_study_plots

    paths.update(save_study_plots(study, out / "plots", title=spec.name))
    return paths
