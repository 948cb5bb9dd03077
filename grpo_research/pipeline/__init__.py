"""What the Snakemake workflow computes, in Python (the .smk rules only call it): paths, run ids,
the studies' expansion, the HPO searches and the arguments of every job's command.

`Pipeline(config, basedir)` takes Snakemake's `config` dict (configs/defaults.yaml, validated
against workflow/schemas/config.schema.yaml). Studies are read and expanded lazily, when a
target asks for them: a broken study file stops only the targets that need it, with its
message, while the DAG is built (before any job). Every problem raises PipelineError, which the
workflow (workflow/rules/common.smk) turns into Snakemake's WorkflowError.

Every command a job runs is `<python> -m grpo_research.cli <command> ...` (grpo_research/cli/).

`Pipeline` gathers its methods by concern: `studies` (study files, base models, the studies of
each target), `checks` (models and benchmarks checked while planning), `atlas` (claims, freeze,
confirmatory runs, tuned arms), `hpo` (searches and reruns), `reports` (what a study report
needs), `jobs` (training and evaluation commands). Run ids and study-name prefixes are in `ids`,
shell quoting and wildcard constraints in `shell`, the config's YAML reading in `workflow_config`.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from grpo_research import studies as S
from grpo_research.pipeline.atlas import AtlasPlan
from grpo_research.pipeline.checks import InputChecks
from grpo_research.pipeline.errors import PipelineError
from grpo_research.pipeline.hpo import HpoPlan
from grpo_research.pipeline.jobs import JobPlan
from grpo_research.pipeline.reports import ReportPlan
from grpo_research.pipeline.studies import StudyPlan

__all__ = ["Pipeline", "PipelineError"]


class Pipeline(StudyPlan, InputChecks, AtlasPlan, HpoPlan, ReportPlan, JobPlan):
    """The plan of the workflow for one Snakemake `config`."""

    def __init__(self, config: dict[str, Any], basedir: str | Path):
        self.config = config
        self.basedir = Path(basedir).resolve()
        self.python = config.get("python") or sys.executable
        self.runs = config["runs_dir"].rstrip("/")
        self.results = config["results_dir"].rstrip("/")
        self.logs = config["logs_dir"].rstrip("/")
        self.bench = config["benchmarks_dir"].rstrip("/")
        self.resources = config["resources"]
        self.study_schema = self.basedir / "workflow" / "schemas" / "study.schema.yaml"
        self.study_files = S.find_studies(config["studies_dir"])
        self.hpo = config["hpo"]
        self.searches = self._searches()
        self._raw: dict[str, dict] = {}
        self._expanded: dict[str, S.Study] = {}
        self._checked_benchmarks: set[tuple] = set()
        self._skipped: set[str] = set()  # studies every_study left out (named once)
        self._freeze: dict[str, Any] | None = None
