"""Names of runs and studies: a study's run id, an HPO rerun's id, and the prefixes and suffixes
of the studies the pipeline derives (an HPO search's reruns, the confirmatory phase's runs)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from grpo_research.pipeline.errors import PipelineError

HPO_PREFIX = "hpo-"  # the study `hpo-<search>`: a search's reruns of its best config and of the defaults
CONFIRM_PREFIX = "confirm-"  # the study `confirm-<study>`: the frozen confirmatory runs of <study>'s atlas arms
TUNED_SUFFIX = "-lr"  # a tuned claim's arm in the confirmatory phase: <variant>-lr, at its frozen lr
RERUN_KINDS = ("default", "best")


@dataclass(frozen=True)
class RunId:
    """`<variant>-seed<N>`: a run of a study (grpo_research.studies names them so)."""

    variant: str
    seed: int

    PATTERN = re.compile(r"^(?P<variant>.+)-seed(?P<seed>-?\d+)$")

    @classmethod
    def parse(cls, text: str) -> "RunId":
        m = cls.PATTERN.match(text)
        if not m:
            raise PipelineError(f"run id {text!r} is not <variant>-seed<N>")
        return cls(m["variant"], int(m["seed"]))

    def __str__(self) -> str:
        return f"{self.variant}-seed{self.seed}"


@dataclass(frozen=True)
class RerunId:
    """`<method>-<default|best>-seed<N>`: a rerun of an HPO search, with the defaults or the best config."""

    method: str
    kind: str
    seed: int

    PATTERN = re.compile(r"^(?P<method>.+)-(?P<kind>default|best)-seed(?P<seed>-?\d+)$")

    @classmethod
    def parse(cls, text: str) -> "RerunId":
        m = cls.PATTERN.match(text)
        if not m:
            raise PipelineError(f"rerun id {text!r} is not <method>-default-seed<N> or <method>-best-seed<N>")
        return cls(m["method"], m["kind"], int(m["seed"]))

    @property
    def variant(self) -> str:
        return f"{self.method}-{self.kind}"

    def __str__(self) -> str:
        return f"{self.variant}-seed{self.seed}"
