# Shared helpers of the rules: paths, study expansion (grpo_research.studies), HPO searches.
# Studies are read and expanded lazily, when a target asks for them: a broken study file
# stops only the targets that need it, with its message, while the DAG is built (before any job).
import json
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

from grpo_research import studies as S
from grpo_research.config import ConfigError, load_config

BASEDIR = Path(workflow.basedir).resolve()
# `python -m analysis` (a package of this checkout, not installed) from any working directory
WITH_CHECKOUT = f"PYTHONPATH={shlex.quote(str(BASEDIR))}${{PYTHONPATH:+:$PYTHONPATH}}"

PY = config.get("python") or sys.executable
RUNS = config["runs_dir"].rstrip("/")
RESULTS = config["results_dir"].rstrip("/")
LOGS = config["logs_dir"].rstrip("/")
BENCH = config["benchmarks_dir"].rstrip("/")
STUDY_SCHEMA = BASEDIR / "workflow" / "schemas" / "study.schema.yaml"
RES = config["resources"]

STUDY_FILES = S.find_studies(config["studies_dir"])
_EXPANDED = {}
_RAW = {}


def q(items):
    """Shell-quote a list of arguments."""
    return " ".join(shlex.quote(str(x)) for x in items)


def alternation(names):
    """A wildcard constraint matching exactly these names."""
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) or "(?!x)x"


def raw_study(name):
    if name not in STUDY_FILES:
        raise WorkflowError(f"unknown study {name!r}; studies in {config['studies_dir']}/: "
                            f"{', '.join(STUDY_FILES) or 'none'}")
    if name not in _RAW:
        try:
            _RAW[name] = S.load_study_file(STUDY_FILES[name], STUDY_SCHEMA)
        except S.StudyError as e:
            raise WorkflowError(f"study file invalid: {e}")
    return _RAW[name]


def model_path(model):
    """`model` of a study or search: a base model of `base_models` (built by build_base_model
    into <runs>/_base/<name>) or a hub name / checkpoint dir given as is."""
    return f"{RUNS}/_base/{model}" if model in config["base_models"] else model


def base_inputs(model):
    return [f"{RUNS}/_base/{model}/base_info.json"] if model in config["base_models"] else []


def study(name):
    """The expanded study (grpo_research.studies.Study)."""
    if name not in _EXPANDED:
        raw = raw_study(name)
        try:
            _EXPANDED[name] = S.expand_study(
                raw, name, path=STUDY_FILES[name], model_path=model_path(raw.get("model", "tiny-arith")),
                run_overrides=config.get("run_overrides") or [], tracking=config["tracking"],
                threads=RES["train"]["threads"], only_methods=config.get("only_methods") or None,
                seeds=config.get("seeds") or None,
            )
        except S.StudyError as e:
            raise WorkflowError(f"study {name!r}: {e}")
    return _EXPANDED[name]


def default_studies():
    return [s for s in STUDY_FILES if raw_study(s).get("default", False)]


def selected_studies():
    """Studies of the `report` target: config `studies`, else those marked default."""
    chosen = config.get("studies") or default_studies()
    for s in chosen:
        raw_study(s)  # unknown names fail here
    return list(chosen)


# ---------------------------------------------------------------- HPO searches
HPO = config["hpo"]


def _searches():
    out = {}
    for s in HPO["searches"]:
        name = f"{s['method']}-{s['task']}"
        if name in out:
            raise WorkflowError(f"hpo.searches lists {name!r} twice")
        out[name] = s
    return out


SEARCHES = _searches()


def search_model(name):
    s = SEARCHES[name]
    return s.get("model") or f"tiny-{s['task']}"


def search_overrides(name):
    """Run config of every trial and rerun of a search (besides the tuned keys and the seed)."""
    s = SEARCHES[name]
    out = [S.override("model.name_or_path", model_path(search_model(name))), S.override("task.name", s["task"]),
           *(config.get("run_overrides") or []), *(HPO.get("overrides") or []), *(s.get("overrides") or []),
           S.override("train.threads", RES["hpo"]["threads"])]
    for key in ("wandb", "project"):
        if config["tracking"].get(key):
            out.append(S.override(f"tracking.{key}", config["tracking"][key]))
    try:
        load_config(None, [S.override("method", s["method"]), *out])
    except ConfigError as e:
        raise WorkflowError(f"hpo search {name!r}: {e}")
    return out


def storage_url(name):
    return HPO["storage"].format(name=name, results_dir=RESULTS)


def rerun_ids(name):
    m = SEARCHES[name]["method"]
    return [f"{m}-{kind}-seed{seed}" for kind in ("default", "best") for seed in HPO["rerun"]["seeds"]]


# ---------------------------------------------------------------- what a study report needs
def study_kind(name):
    return "hpo" if name.startswith("hpo-") and name[4:] in SEARCHES else "study"


def study_runs(name):
    """Run ids of a study (or of an HPO rerun study `hpo-<search>`)."""
    if study_kind(name) == "hpo":
        return rerun_ids(name[4:])
    return [r.run_id for r in study(name).runs]


def study_benchmarks(name):
    if study_kind(name) == "hpo":
        return HPO["rerun"].get("benchmarks") or {}
    return study(name).benchmarks


def study_variants(name):
    if study_kind(name) == "hpo":
        m = SEARCHES[name[4:]]["method"]
        return [f"{m}-default", f"{m}-best"]
    return study(name).variants


def study_outputs(name):
    """Every file the report of a study aggregates: summaries and benchmark evaluations."""
    out = []
    for run_id in study_runs(name):
        out.append(f"{RUNS}/{name}/{run_id}/summary.json")
        out += [f"{RUNS}/{name}/{run_id}/eval/{b}.json" for b in study_benchmarks(name)]
    return out


def report_path(name):
    return f"{RESULTS}/{name}/report.html"


ALL_STUDY_NAMES = list(STUDY_FILES) + [f"hpo-{s}" for s in SEARCHES]


# ---------------------------------------------------------------- used by train.smk
def wall_inputs(study_name, run_id):
    """An equal-wall-time control waits for the runs whose training time it matches."""
    spec = study(study_name).run(run_id)
    if not spec.wall_match:
        return []
    return [f"{RUNS}/{study_name}/{r}/summary.json" for r in [*spec.wall_match, spec.wall_probe]]


def train_threads(study_name, run_id):
    """Cores of a training job: `train.threads`, times `train.nproc_per_node` processes when the run
    trains data-parallel (`train.launcher=torchrun`)."""
    cfg = load_config(None, study(study_name).run(run_id).overrides)
    per_process = cfg.train.threads or RES["train"]["threads"]
    return per_process * (cfg.train.nproc_per_node if cfg.train.launcher == "torchrun" else 1)


def train_command(study_name, run_id):
    """`-m ...` arguments of a training job: `grpo_research.cli train`, or `grpo_research.studies
    train-wall` for an equal-wall-time control."""
    spec = study(study_name).run(run_id)
    run_dir = f"{RUNS}/{study_name}/{run_id}"
    if spec.wall_match:
        args = ["grpo_research.studies", "train-wall", "--probe", f"{RUNS}/{study_name}/{spec.wall_probe}"]
        for r in spec.wall_match:
            args += ["--match", f"{RUNS}/{study_name}/{r}"]
        args += ["--run-dir", run_dir, *spec.overrides]
    else:
        args = ["grpo_research.cli", "train", "--run-dir", run_dir, *spec.overrides]
    return q(args)


# ---------------------------------------------------------------- used by evaluate.smk
def eval_args(study_name, benchmark):
    opts = study_benchmarks(study_name).get(benchmark)
    if opts is None and benchmark not in study_benchmarks(study_name):
        raise WorkflowError(f"study {study_name!r} lists no benchmark {benchmark!r}")
    opts = opts or {}
    args = []
    for key, flag in (("data", "--data"), ("n", "--n"), ("samples", "--samples"), ("temperature", "--temperature"),
                      ("max_new_tokens", "--max-new-tokens")):
        if opts.get(key) is not None:
            args += [flag, opts[key]]
    return q(args)


# ---------------------------------------------------------------- used by hpo.smk
def search_space():
    """hpo.space without the keys set to null (config files merge mappings: null removes a key)."""
    space = {k: v for k, v in HPO["space"].items() if v is not None}
    if not space:
        raise WorkflowError("hpo.space has no parameter left to search")
    return space


def rerun_inputs(wc):
    out = base_inputs(search_model(wc.search))
    if "-best-seed" in wc.run_id:
        out.append(f"{RESULTS}/hpo/{wc.search}/best.yaml")
    return out


def rerun_args(wc):
    if wc.run_id not in rerun_ids(wc.search):
        raise WorkflowError(f"{wc.run_id!r} is not a rerun of search {wc.search!r}: {rerun_ids(wc.search)}")
    rr = HPO["rerun"]
    seed = int(wc.run_id.rsplit("-seed", 1)[1])
    args = ["--budget-samples", rr["budget_samples"], "--run-dir", f"{RUNS}/hpo-{wc.search}/{wc.run_id}"]
    if rr.get("eval_every_samples"):
        args += ["--eval-every-samples", rr["eval_every_samples"]]
    if "-best-seed" in wc.run_id:  # a new best config (a longer search) retrains; the old dir is kept aside
        args += ["--config", f"{RESULTS}/hpo/{wc.search}/best.yaml", "--replace-stale"]
    kind = "best" if "-best-seed" in wc.run_id else "default"
    args += [S.override("method", SEARCHES[wc.search]["method"]), S.override("seed", seed),
             *search_overrides(wc.search), S.override("tracking.group", f"hpo-{wc.search}"),
             S.override("tracking.tags", [f"config={kind}"]), "tracking.progress=false"]
    return q(args)


# ---------------------------------------------------------------- used by analyze.smk
def report_args(wc):
    args = ["--runs", f"{RUNS}/{wc.study}", "--out", f"{RESULTS}/{wc.study}", "--study", wc.study,
            "--variants", ",".join(study_variants(wc.study)), "--include", ",".join(study_runs(wc.study)),
            "--n-boot", config["analysis"]["bootstrap"], "--seed", config["analysis"]["seed"],
            "--smooth", config["analysis"]["smooth_steps"]]
    if study_kind(wc.study) == "study":
        args += ["--study-file", STUDY_FILES[wc.study]]
    else:
        s = wc.study[4:]
        args += ["--title", f"{wc.study}: Optuna's best config vs the defaults",
                 "--extra", f"Optuna search {s}={RESULTS}/hpo/{s}/plots",
                 "--extra-text", f"best.yaml={RESULTS}/hpo/{s}/best.yaml"]
    return q(args)


def report_inputs(wc):
    out = {"runs": study_outputs(wc.study)}
    if study_kind(wc.study) == "hpo":
        out["hpo_plots"] = f"{RESULTS}/hpo/{wc.study[4:]}/plots"
        out["best"] = f"{RESULTS}/hpo/{wc.study[4:]}/best.yaml"
    return out
