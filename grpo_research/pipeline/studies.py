"""The studies of the workflow: study files read and expanded lazily (grpo_research.studies), the
base models they train from, and which studies each target plans."""
from __future__ import annotations

import re
import sys
from pathlib import Path

from grpo_research import studies as S
from grpo_research.config import load_config
from grpo_research.pipeline.errors import MissingModelPackage, PipelineError
from grpo_research.pipeline.ids import CONFIRM_PREFIX, HPO_PREFIX
from grpo_research.provenance import KERNEL_FAMILIES, NATIVE, kernel_env_prefix
from grpo_research.run_ids import base_suffix, kernels_of


def _marked_default(path: Path) -> bool:
    """Whether a study file says `default: true`, read leniently (for a file that fails checks)."""
    import yaml

    from grpo_research.typed_config import safe_load

    try:
        data = safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("default") is True


class StudyPlan:
    """Pipeline's studies (grpo_research.pipeline.Pipeline): a study by name, its base models, the
    studies of each target."""

    def raw_study(self, name: str) -> dict:
        if name not in self.study_files:
            raise PipelineError(f"unknown study {name!r}; studies in {self.config['studies_dir']}/: "
                                f"{', '.join(self.study_files) or 'none'}")
        if name not in self._raw:
            try:
                self._raw[name] = S.load_study_file(self.study_files[name], self.study_schema)
            except S.StudyError as e:
                raise PipelineError(f"study file invalid: {e}") from None
        return self._raw[name]

    def model_path(self, model: str, base: int = 0, kernels: str = NATIVE) -> str:
        """`model` of a study or search: a base model of `base_models` (built by build_base_model
        into <runs>/_base/<name>, or <runs>/_base/<name>-base<b> for base seed b != 0, with
        `-k<family>` off the native kernels) or a hub name / checkpoint dir given as is."""
        if model in self.config["base_models"]:
            return f"{self.runs}/_base/{model}{base_suffix(base, kernels)}"
        return model

    def base_inputs(self, model: str, base: int = 0, kernels: str = NATIVE) -> list[str]:
        return ([f"{self.model_path(model, base, kernels)}/base_info.json"] if model in self.config["base_models"]
                else [])

    def _base_dir(self, name: str) -> tuple[str, int, str]:
        """(model, base seed, kernel family) of a base model dir name of build_base_model."""
        m = re.fullmatch(r"(?P<model>.+?)(?:-base(?P<base>\d+))?(?:-k(?P<k>[a-z0-9]+))?", name)
        if name in self.config["base_models"]:
            return name, 0, NATIVE
        model, base, kernels = m["model"], int(m["base"] or 0), m["k"] or NATIVE
        if model not in self.config["base_models"]:
            raise PipelineError(f"no base model {model!r} in base_models ({', '.join(self.config['base_models'])})")
        if kernels not in KERNEL_FAMILIES:
            raise PipelineError(f"base model {name!r}: no kernel family {kernels!r} ({', '.join(KERNEL_FAMILIES)})")
        return model, base, kernels

    def base_model_overrides(self, name: str) -> list[str]:
        """`grpo-research sft` overrides of the base model dir `name` of build_base_model:
        `<model>` (its base_models entry) or `<model>-base<b>` (the same, with base.seed=b);
        `-k<family>` changes no override but the kernels it builds on (`base_model_env`)."""
        model, base, _ = self._base_dir(name)
        extra = [S.override("base.seed", base)] if base else []
        return [*(self.config["base_models"][model].get("overrides") or []), *extra]

    def base_model_env(self, name: str) -> str:
        """The shell prefix that builds base model dir `name` on its kernel family ("" if native)."""
        return kernel_env_prefix(self._base_dir(name)[2])

    def run_env(self, study_name: str, run_id: str) -> str:
        """The shell prefix of every job of a run (training, evaluation): its kernel family's variables."""
        return kernel_env_prefix(kernels_of(run_id))

    def study_base_seeds(self, raw: dict) -> list[int] | None:
        """The base seeds of a study: `--config base_seeds` for a study whose base model the pipeline
        builds (other models have only their one base), else the study's own."""
        given = self.config.get("base_seeds") or None
        return given if given and raw.get("model", "tiny-arith") in self.config["base_models"] else None

    def study(self, name: str) -> S.Study:
        """The expanded study (grpo_research.studies.Study); `confirm-<study>`: see `confirm_study`."""
        if name.startswith(CONFIRM_PREFIX) and name not in self.study_files:
            return self.confirm_study(name)
        if name not in self._expanded:
            raw = self.raw_study(name)
            model = raw.get("model", "tiny-arith")
            given = self.study_base_seeds(raw)
            base_seeds = given or raw.get("base_seeds") or [0]
            kernels = [k for k in raw.get("kernels") or [NATIVE] if k in KERNEL_FAMILIES]  # studies checks them
            built = model in self.config["base_models"]
            paths: dict = {b: self.model_path(model, b) for b in base_seeds}
            paths.update({(b, k): self.model_path(model, b, k) for b in base_seeds for k in kernels if k != NATIVE})
            try:
                expanded = S.expand_study(
                    raw, name, path=self.study_files[name], model_path=self.model_path(model),
                    base_paths=paths if built else None,
                    run_overrides=self.config.get("run_overrides") or [], tracking=self.config["tracking"],
                    threads=self.resources["train"]["threads"], only_methods=self.config.get("only_methods") or None,
                    seeds=self.config.get("seeds") or None, base_seeds=given,
                )
            except S.StudyError as e:
                raise PipelineError(f"study {name!r}: {e}") from None
            where = f"study {name!r} ({self.study_files[name]})"
            self.check_model(raw.get("model", "tiny-arith"), f"{where}: model")
            task = load_config(None, expanded.runs[0].overrides).task if expanded.runs else None
            for bench, opts in expanded.benchmarks.items():
                self.check_benchmark(bench, opts, f"{where}: benchmarks.{bench}", task)
            self._expanded[name] = expanded  # only once checked: a second call fails as the first did
        return self._expanded[name]

    def every_study(self) -> list[str]:
        """The studies of `all_studies`: every study file, but those whose model is an optional
        packaged model that is not installed (each named once on stderr, with what to install)."""
        out = []
        for name in self.study_files:
            try:
                self.study(name)
            except MissingModelPackage as e:
                if name not in self._skipped:
                    self._skipped.add(name)
                    print(f"warning: all_studies skips study {name!r} ({self.study_files[name]}): {e.reason}",
                          file=sys.stderr)
                continue
            out.append(name)
        return out

    # ------------------------------------------------------------ the studies of the targets
    def default_studies(self) -> list[str]:
        """Studies marked `default: true`. A broken study file that is not marked default (or
        that cannot be read far enough to tell) does not stop these targets: it is named in a
        warning and left out; targets that name it still stop with its message."""
        out = []
        for s, path in self.study_files.items():
            try:
                raw = self.raw_study(s)
            except PipelineError as e:
                if _marked_default(path):
                    raise
                print(f"warning: study {s!r} left out (not marked default: true): {e}", file=sys.stderr)
                continue
            if raw.get("default", False):
                out.append(s)
        return out

    def selected_studies(self) -> list[str]:
        """Studies of the `report` target: config `studies`, else those marked default."""
        chosen = self.config.get("studies") or self.default_studies()
        for s in chosen:
            self.raw_study(s)  # unknown names fail here
        return list(chosen)

    @property
    def trained_study_names(self) -> list[str]:
        """Studies whose runs `train_run` trains: every study file, and the confirmatory
        `confirm-<study>` of the freeze when there is one."""
        confirm = self.confirm_studies(strict=False) if Path(self.freeze_path).is_file() else []
        return list(self.study_files) + confirm

    @property
    def all_study_names(self) -> list[str]:
        confirm = self.confirm_studies(strict=False) if Path(self.freeze_path).is_file() else []
        return list(self.study_files) + [f"{HPO_PREFIX}{s}" for s in self.searches] + confirm

    def report_path(self, name: str) -> str:
        return f"{self.results}/{name}/report.html"

    @property
    def index_path(self) -> str:
        return f"{self.results}/index.html"
