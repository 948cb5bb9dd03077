# Shared names of the rules. Everything they compute (paths, run ids, study expansion, HPO
# searches, the arguments of each job) lives in grpo_research/pipeline/ (tested in
# tests/test_pipeline.py); here it is only bound to Snakemake, a PipelineError becoming a
# WorkflowError, which stops planning with its message before any job runs.
import functools
from pathlib import Path

from snakemake.exceptions import WorkflowError

from grpo_research.pipeline import Pipeline, PipelineError
from grpo_research.pipeline.shell import alternation, q
from grpo_research.provenance import KERNEL_FAMILIES, NATIVE, kernel_env_prefix


def planned(fn):
    """`fn` with a PipelineError raised as Snakemake's WorkflowError."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except PipelineError as e:
            raise WorkflowError(str(e))

    return call


P = planned(Pipeline)(config, workflow.basedir)
PY = P.python
RUNS = P.runs
RESULTS = P.results
LOGS = P.logs
BENCH = P.bench
RES = P.resources
STUDY_FILES = P.study_files
SEARCHES = P.searches
ALL_STUDY_NAMES = P.all_study_names
TRAINED_STUDIES = P.trained_study_names  # study files and the freeze's confirm-<study>
CLI = f"{PY} -m grpo_research.cli"  # every job runs `grpo-research <command>` of this interpreter

report_path = P.report_path
base_inputs = P.base_inputs
study = planned(P.study)
default_studies = planned(P.default_studies)
every_study = planned(P.every_study)
selected_studies = planned(P.selected_studies)
search_model = P.search_model
atlas_studies = planned(P.atlas_studies)
confirm_studies = planned(P.confirm_studies)
TUNED_ARMS = P.tuning_arms(strict=False)
tuning_args = planned(P.tuning_args)
tuning_base_inputs = planned(P.tuning_base_inputs)
tuning_paths = planned(P.tuning_paths)
wall_inputs = planned(P.wall_inputs)
train_threads = planned(P.train_threads)
run_base_inputs = planned(P.run_base_inputs)
base_model_overrides = planned(P.base_model_overrides)
base_model_env = planned(P.base_model_env)
run_env = planned(P.run_env)
KERNEL_SUFFIX = "|".join(k for k in KERNEL_FAMILIES if k != NATIVE)  # run ids' and base dirs' -k<family>


@planned
def train_command(study_name, run_id):
    return q(P.train_args(study_name, run_id))


@planned
def eval_args(study_name, benchmark):
    return q(P.eval_args(study_name, benchmark))


@planned
def base_eval_args(study_name, benchmark, base=0, kernels=NATIVE):
    return q(P.base_eval_args(study_name, benchmark, base, kernels))


base_eval_inputs = planned(P.base_eval_inputs)


def base_of_suffix(suffix):
    """`-base3` -> 3, `-base3-kavx2` -> 3, `` -> 0 (the {suffix} of _base_model{suffix}: a base
    seed's evaluations)."""
    return int(suffix.split("-k")[0].removeprefix("-base") or 0)


def kernels_of_suffix(suffix):
    """`-base3-kavx2` -> avx2, `-base3` -> native."""
    return suffix.split("-k")[1] if "-k" in suffix else NATIVE


@planned
def search_args(search):
    return q(P.search_args(search))


def export_args(search):
    return q(P.export_args(search))


@planned
def rerun_inputs(wc):
    return P.rerun_inputs(wc.search, wc.run_id)


@planned
def rerun_args(wc):
    return q(P.rerun_args(wc.search, wc.run_id))


@planned
def report_args(wc):
    return q(P.report_args(wc.study))


@planned
def atlas_args(phase="exploratory"):
    return q(P.atlas_args(phase))


@planned
def report_inputs(wc):
    return P.report_inputs(wc.study)
