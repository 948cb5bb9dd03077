"""The errors of planning: every problem of a workflow config, study or target raises PipelineError
(the workflow, workflow/rules/common.smk, turns it into Snakemake's WorkflowError)."""
from __future__ import annotations


class PipelineError(Exception):
    """A workflow config, study or target that cannot be planned; the message says why."""


class MissingModelPackage(PipelineError):
    """A study's or search's model is an optional packaged model (grpo_research.models.real) whose
    package is not installed; the message names it and its install command (`reason`: that alone)."""

    def __init__(self, where: str, reason: str):
        super().__init__(f"{where}: {reason}")
        self.reason = reason

