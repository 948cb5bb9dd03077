"""What the Snakemake workflow computes, in Python (the .smk rules only call it): paths, run ids,
the studies' expansion, the HPO searches and the arguments of every job's command.

`Pipeline(config, basedir)` takes Snakemake's `config` dict (configs/defaults.yaml, validated
against workflow/schemas/config.schema.yaml). Studies are read and expanded lazily, when a
target asks for them: a broken study file stops only the targets that need it, with its
message, while the DAG is built (before any job). Every problem raises PipelineError, which the
workflow (workflow/rules/common.smk) turns into Snakemake's WorkflowError.

Every command a job runs is `<python> -m grpo_research.cli <command> ...` (grpo_research/cli/).
"""
from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from grpo_research import studies as S
from grpo_research.config import load_config
from grpo_research.errors import ConfigError
from grpo_research.provenance import KERNEL_FAMILIES, NATIVE, kernel_env_prefix
from grpo_research.run_ids import base_suffix, kernels_of, seed_of

HPO_PREFIX = "hpo-"  # the study `hpo-<search>`: a search's reruns of its best config and of the defaults
CONFIRM_PREFIX = "confirm-"  # the study `confirm-<study>`: the frozen confirmatory runs of <study>'s atlas arms
TUNED_SUFFIX = "-lr"  # a tuned claim's arm in the confirmatory phase: <variant>-lr, at its frozen lr
RERUN_KINDS = ("default", "best")


def _marked_default(path: Path) -> bool:
    """Whether a study file says `default: true`, read leniently (for a file that fails checks)."""
    import yaml

    from grpo_research.typed_config import safe_load

    try:
        data = safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("default") is True


def coerce_config(config: dict[str, Any], command_line: dict[str, Any] | None = None) -> dict[str, Any]:
    """Snakemake's `config` as the project's YAML loader (grpo_research.typed_config.safe_load)
    reads it, before the schema checks it. Snakemake reads config files with YAML 1.1, for which
    `1e-05` is a string: every string of the config that is a YAML 1.2 float becomes that float.
    `--config key=VALUE` (Snakemake's `command_line` = workflow.config_settings.overwrite_config)
    reads the items of a list or mapping VALUE as strings (`seeds='[4, 5]'` gives ['4', '5']):
    each such string is read again as a YAML scalar, so numbers, booleans and null are what they say."""
    from grpo_research.typed_config import yaml11_string_float, yaml12_scalar

    def floats(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: floats(v) for k, v in value.items()}
        if isinstance(value, list):
            return [floats(v) for v in value]
        return float(value) if isinstance(value, str) and yaml11_string_float(value) else value

    def scalars(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: scalars(v) for k, v in value.items()}
        if isinstance(value, list):
            return [scalars(v) for v in value]
        return yaml12_scalar(value) if isinstance(value, str) else value

    def overlay(target: dict, given: dict) -> None:
        for key, value in given.items():
            if isinstance(value, dict) and isinstance(target.get(key), dict):
                overlay(target[key], value)
            else:
                target[key] = scalars(value)

    config.update(floats(config))
    overlay(config, dict(command_line or {}))
    return config


class PipelineError(Exception):
    """A workflow config, study or target that cannot be planned; the message says why."""


class MissingModelPackage(PipelineError):
    """A study's or search's model is an optional packaged model (grpo_research.models.real) whose
    package is not installed; the message names it and its install command (`reason`: that alone)."""

    def __init__(self, where: str, reason: str):
        super().__init__(f"{where}: {reason}")
        self.reason = reason


def q(items: Iterable[Any]) -> str:
    """Shell-quote a list of arguments."""
    return " ".join(shlex.quote(str(x)) for x in items)


def alternation(names: Iterable[str]) -> str:
    """A wildcard constraint matching exactly these names."""
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) or "(?!x)x"


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


class Pipeline:
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

    # ------------------------------------------------------------ studies
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

    # ------------------------------------------------------------ inputs, checked while planning
    def check_model(self, model: str, where: str) -> None:
        """A study's or search's `model`: a base model of `base_models`, a checkpoint directory or a
        hub name (which, offline, must be in the local cache)."""
        if model in self.config["base_models"]:
            return
        from grpo_research.models.real import PACKAGED_MODELS, gguf_file

        if model in PACKAGED_MODELS:  # converted and cached by the first run that needs it
            try:
                gguf_file(model)  # installed? (names the package otherwise)
            except ConfigError as e:
                raise MissingModelPackage(where, str(e)) from None
            return
        from grpo_research.model_source import check_model_source

        known = ", ".join(self.config["base_models"]) or "none"
        if "/" not in model and not Path(model).exists():
            raise PipelineError(f"{where}: {model!r} is neither a base model of the config ({known}) nor a directory "
                                "(a hub model is named org/name)")
        try:
            check_model_source(model, cached_offline=True)
        except ConfigError as e:
            raise PipelineError(f"{where}: {e} (base models of the config: {known})") from None

    def check_benchmark(self, entry: str, opts: dict | None, where: str, run_task=None) -> None:
        """A benchmark entry of a study or of the HPO reruns: a known task (the entry's
        `benchmark`, else its name) whose data loads, with options `grpo-research eval` accepts.
        `run_task` (the runs' `task` config) builds the runs' own task when the benchmark is it
        and no `data` is given, as `eval` does."""
        from grpo_research.tasks import TASKS, build_task, get_task
        from grpo_research.tasks.base import TooFewProblems, heldout_or_refuse
        from grpo_research.tasks.loading import DataError

        opts = opts or {}
        name = S.benchmark_of(entry, opts)
        if name not in TASKS:
            raise PipelineError(f"{where}: unknown benchmark {name!r}; known: {', '.join(sorted(TASKS))}")
        samples, temperature = opts.get("samples", 1), opts.get("temperature")
        if samples > 1 and temperature is None:
            raise PipelineError(f"{where}: samples {samples} needs a temperature (above 0)")
        if samples == 1 and temperature is not None:
            raise PipelineError(f"{where}: temperature applies only with samples > 1 (samples 1 decodes greedily)")
        key = (name, opts.get("data"), None if opts.get("data") or run_task is None or run_task.name != name
               else repr(run_task))
        if key in self._checked_benchmarks:
            return
        import os

        from grpo_research.model_source import hub_offline

        offline = hub_offline() or os.environ.get("HF_DATASETS_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        saved = os.environ.get("HF_DATASETS_OFFLINE")
        os.environ["HF_DATASETS_OFFLINE"] = "1"  # while planning, never wait on the network
        try:
            if key[2] is not None:
                task = build_task(run_task)
            else:
                task = get_task(name, **({"data_path": opts["data"]} if opts.get("data") else {}))
            if opts.get("n"):  # the split's own limit (arith's level 3 holds 49,998, its default 2,000)
                heldout_or_refuse(task, int(opts["n"]), f"n {opts['n']}")
        except TooFewProblems as e:
            raise PipelineError(f"{where}: {e}") from None
        except DataError as e:
            if "cannot load dataset" in str(e) and not offline:
                return  # a hub dataset not cached yet: its job downloads it (not checkable offline)
            hint = " (set GRPO_RESEARCH_BENCHMARKS or the benchmark's data)" if "cannot load dataset" in str(e) else ""
            raise PipelineError(f"{where}: {' '.join(str(e).split())[:300]}{hint}") from None
        except (OSError, TypeError, ConfigError) as e:
            raise PipelineError(f"{where}: {' '.join(str(e).split())}") from None
        finally:
            if saved is None:
                os.environ.pop("HF_DATASETS_OFFLINE", None)
            else:
                os.environ["HF_DATASETS_OFFLINE"] = saved
        self._checked_benchmarks.add(key)

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

    # ------------------------------------------------------------ the replication atlas
    @property
    def claims_path(self) -> str:
        return f"{self.config['studies_dir'].rstrip('/')}/claims.yaml"

    def atlas_studies(self) -> list[str]:
        """The studies whose runs the claims' arms use (claims with `needs` are deferred)."""
        from grpo_research.analysis.claims import ClaimsError, load_claims

        try:
            claims = load_claims(self.claims_path, self.config["studies_dir"])
        except ClaimsError as e:
            raise PipelineError(str(e)) from None
        return sorted({a["study"] for c in claims if "needs" not in c for a in c["arms"]})

    @property
    def freeze_path(self) -> str:
        return f"{self.config['studies_dir'].rstrip('/')}/atlas_freeze.json"

    def freeze(self) -> dict[str, Any]:
        """The committed freeze of the confirmatory phase (grpo_research.analysis.freeze): refused
        when missing, uncommitted or changed since its commit, or when the claims file changed after it."""
        if self._freeze is None:
            from grpo_research.analysis.freeze import FreezeError, check_freeze, load_freeze
            from grpo_research.provenance import git

            try:
                data = load_freeze(self.freeze_path)
                check_freeze(data, self.claims_path)
            except FreezeError as e:
                raise PipelineError(str(e)) from None
            where = Path(self.freeze_path).resolve()
            committed = git(where.parent, "log", "-1", "--format=%H", "--", where.name)
            if git(where.parent, "rev-parse", "--git-dir") and (
                    not committed or git(where.parent, "status", "--porcelain", "--", where.name)):
                raise PipelineError(f"{self.freeze_path} is not committed as it is: commit the freeze before any "
                                    "confirmatory run (git log must show it first)")
            data["commit"] = committed or None
            self._freeze = data
        return self._freeze

    # ------------------------------------------------------------ per-arm lr searches of tuned claims
    def tuning_arms(self, strict: bool = True) -> dict[str, tuple[str, str]]:
        """`lr-<study>-<variant>` -> (study, variant) for every non-base arm of a `tuned: true` claim;
        `strict=False` (the rules' wildcard names, read while parsing) gives none for a missing or
        broken claims file, which the atlas targets then report."""
        from grpo_research.analysis.claims import BASE_ARM, ClaimsError, load_claims

        if not strict and not Path(self.claims_path).is_file():
            return {}
        try:
            claims = load_claims(self.claims_path, self.config["studies_dir"])
        except ClaimsError as e:
            if not strict:
                return {}
            raise PipelineError(str(e)) from None
        return {f"lr-{a['study']}-{a['variant']}": (a["study"], a["variant"])
                for c in claims if c.get("tuned") and "needs" not in c for a in c["arms"] if a["variant"] != BASE_ARM}

    def tuning_path(self, name: str) -> str:
        return f"{self.results}/atlas_tuning/{name}/best.yaml"

    def tuning_paths(self) -> list[str]:
        return [self.tuning_path(n) for n in self.tuning_arms()]

    def _tuned_run(self, name: str) -> S.RunSpec:
        if name not in self.tuning_arms():
            raise PipelineError(f"no tuned arm {name!r} (tuned: {', '.join(self.tuning_arms()) or 'none'})")
        study, variant = self.tuning_arms()[name]
        runs = [r for r in self.study(study).runs if r.variant == variant and r.base == 0]
        if not runs:
            raise PipelineError(f"tuned arm {name!r}: study {study!r} has no run of {variant!r} on base 0")
        return runs[0]

    def tuning_base_inputs(self, name: str) -> list[str]:
        r = self._tuned_run(name)
        return self.base_inputs(r.model, r.base, r.kernels)

    def tuning_args(self, name: str) -> tuple[list[Any], list[Any]]:
        """(`hpo search` args, `hpo export` args) of a tuned arm's lr search: the arm's run config on
        base 0 (its first seed's, without the keys the search sets), lr only over atlas.tuning.lr."""
        t = (self.config.get("atlas") or {}).get("tuning")
        if not t:
            raise PipelineError("claims with tuned: true need atlas.tuning in the workflow config")
        r = self._tuned_run(name)
        skip = ("method=", "seed=", "train.steps=", "train.eval_every=", "train.threads=", "tracking.")
        keep = [o for o in r.overrides if not o.startswith(skip)]
        out, storage = f"{self.results}/atlas_tuning/{name}", f"sqlite:///{self.results}/atlas_tuning/{name}/optuna.db"
        search: list[Any] = ["--name", name, "--method", r.method, "--out", out, "--runs", f"{self.runs}/_tune/{name}",
                             "--storage", storage, "--n-trials", t["n_trials"], "--budget-samples", t["budget_samples"],
                             "--space", json.dumps({"optim.lr": t["lr"]}), "--exclusive"]
        if t.get("eval_every_samples"):
            search += ["--eval-every-samples", t["eval_every_samples"]]
        search += [*keep, S.override("train.threads", self.resources["hpo"]["threads"]),
                   S.override("tracking.wandb", "disabled"), S.override("tracking.progress", False)]
        return search, ["--name", name, "--method", r.method, "--out", out, "--storage", storage]

    def confirm_studies(self, strict: bool = True) -> list[str]:
        """`confirm-<study>` for every study whose variants the frozen family and controls use;
        `strict=False` (the rules' wildcard names) reads the file without the commit checks."""
        from grpo_research.analysis.freeze import FreezeError, frozen_studies, load_freeze

        if strict:
            data = self.freeze()
        else:
            try:
                data = load_freeze(self.freeze_path)
            except FreezeError:
                return []  # the strict read, when a confirmatory target asks for it, says what is wrong
        return [f"{CONFIRM_PREFIX}{s}" for s in sorted(frozen_studies(data))]

    def confirm_study(self, name: str) -> S.Study:
        """The confirmatory runs of study <s> (`confirm-<s>`): its file's runs on the frozen base
        seeds and RL seeds, native kernels, only the variants the frozen claims use; run dirs under
        <runs>/confirm-<s>/, apart from every exploratory run."""
        if name not in self._expanded:
            from grpo_research.analysis.freeze import frozen_studies

            source = name[len(CONFIRM_PREFIX):]
            wanted = frozen_studies(self.freeze()).get(source)  # variant -> its frozen lr (tuned) or None
            if wanted is None:
                raise PipelineError(f"study {name!r}: the freeze ({self.freeze_path}) runs nothing of study {source!r}")
            raw = {k: v for k, v in self.raw_study(source).items()
                   if k not in ("kernels", "compare", "within_base_sd", "benchmark_seeds")}
            raw.update(base_seeds=list(self.freeze()["base_seeds"]), seeds=list(self.freeze()["seeds"]))
            model = raw.get("model", "tiny-arith")
            if model not in self.config["base_models"]:
                raise PipelineError(f"study {source!r}: model {model!r} is not built by the pipeline, so it has no new "
                                    "base models for the confirmatory phase")
            try:
                expanded = S.expand_study(
                    raw, name, path=self.study_files[source], model_path=self.model_path(model),
                    base_paths={b: self.model_path(model, b) for b in raw["base_seeds"]},
                    run_overrides=self.config.get("run_overrides") or [], tracking=self.config["tracking"],
                    threads=self.resources["train"]["threads"])
            except S.StudyError as e:
                raise PipelineError(f"study {name!r}: {e}") from None
            plain = {v: v.removesuffix(TUNED_SUFFIX) if lr is not None else v for v, lr in wanted.items()}
            missing = [v for v in plain.values() if v not in expanded.variants]
            if missing:
                raise PipelineError(f"study {name!r}: the freeze names variant(s) {', '.join(missing)} that "
                                    f"{self.study_files[source]} no longer has")
            runs = []
            for v, lr in wanted.items():  # a tuned arm: its variant's runs at the frozen lr, named <variant>-lr
                for r in expanded.runs:
                    if r.variant != plain[v] or r.wall_match:
                        continue
                    if lr is not None:
                        r = replace(r, run_id=v + r.run_id[len(r.variant):], variant=v,
                                    overrides=[*r.overrides, S.override("optim.lr", lr)],
                                    tags=[*r.tags, S.override("optim.lr", lr)])
                    runs.append(r)
            expanded.runs = runs
            self._expanded[name] = expanded
        return self._expanded[name]

    def atlas_args(self, phase: str = "exploratory") -> list[Any]:
        """Arguments of `grpo-research report atlas`: every atlas study's current runs only, into
        results/atlas_exploratory (the exploratory phase) or results/atlas (the confirmatory one)."""
        out = f"{self.results}/atlas" if phase == "confirmatory" else f"{self.results}/atlas_exploratory"
        args: list[Any] = ["--claims", self.claims_path, "--studies-dir", self.config["studies_dir"],
                           "--runs", self.runs, "--out", out, "--phase", phase]
        if phase == "confirmatory":
            args += ["--freeze", self.freeze_path]
            for s in self.confirm_studies():
                args += ["--include", f"{s}={','.join(self.study_runs(s))}"]
            return args
        for s in self.atlas_studies():
            args += ["--include", f"{s}={','.join(self.study_runs(s))}"]
        return args

    # ------------------------------------------------------------ HPO searches
    def _searches(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for s in self.hpo["searches"]:
            name = f"{s['method']}-{s['task']}"
            if name in out:
                raise PipelineError(f"hpo.searches lists {name!r} twice")
            out[name] = s
        return out

    def search_of(self, study_name: str) -> str | None:
        """The search whose reruns the study `hpo-<search>` is, else None (an ordinary study)."""
        if study_name.startswith(HPO_PREFIX) and study_name[len(HPO_PREFIX):] in self.searches:
            return study_name[len(HPO_PREFIX):]
        return None

    def search_model(self, name: str) -> str:
        s = self.searches[name]
        return s.get("model") or f"tiny-{s['task']}"

    def search_overrides(self, name: str) -> list[str]:
        """Run config of every trial and rerun of a search (besides the tuned keys and the seed)."""
        s = self.searches[name]
        out = [S.override("model.name_or_path", self.model_path(self.search_model(name))),
               S.override("task.name", s["task"]), *(self.config.get("run_overrides") or []),
               *(self.hpo.get("overrides") or []), *(s.get("overrides") or []),
               S.override("train.threads", self.resources["hpo"]["threads"])]
        for key in ("wandb", "project"):
            if self.config["tracking"].get(key):
                out.append(S.override(f"tracking.{key}", self.config["tracking"][key]))
        try:
            load_config(None, [S.override("method", s["method"]), *out])
        except ConfigError as e:
            raise PipelineError(f"hpo search {name!r}: {e}") from None
        return out

    def check_search(self, name: str) -> None:
        """A search's model and space, checked while planning (`hpo.space` over DEFAULT_SPACE)."""
        from grpo_research.hpo.search import check_space, make_pruner

        self.check_model(self.search_model(name), f"hpo search {name!r}: model")
        try:
            make_pruner(self.hpo.get("pruner") or {})
            check_space(self.search_space(), self.searches[name]["method"], self.search_overrides(name),
                        f"hpo.space (search {name!r})")
        except ConfigError as e:
            raise PipelineError(str(e)) from None

    def storage_url(self, name: str) -> str:
        return self.hpo["storage"].format(name=name, results_dir=self.results)

    def search_space(self) -> dict[str, dict]:
        """The search space: hpo.space over grpo_research.hpo.search.DEFAULT_SPACE, without the keys
        set to null (config files merge mappings: null removes a key)."""
        from grpo_research.hpo.search import DEFAULT_SPACE

        merged = {**DEFAULT_SPACE, **(self.hpo.get("space") or {})}
        space = {k: v for k, v in merged.items() if v is not None}
        if not space:
            raise PipelineError("hpo.space has no parameter left to search")
        return space

    def search_args(self, name: str) -> list[Any]:
        """Arguments of `grpo-research hpo search` for a search: the values hpo sets; the rest are
        the defaults of grpo_research.hpo.search.SearchSpec."""
        self.check_search(name)
        h = self.hpo
        args: list[Any] = ["--name", name, "--method", self.searches[name]["method"],
                           "--out", f"{self.results}/hpo/{name}", "--runs", f"{self.runs}/_hpo/{name}",
                           "--storage", self.storage_url(name), "--n-trials", h["n_trials"],
                           "--budget-samples", h["budget_samples"]]
        if h.get("eval_every_samples"):
            args += ["--eval-every-samples", h["eval_every_samples"]]
        args += ["--space", json.dumps(self.search_space())]
        if h.get("pruner"):
            args += ["--pruner", json.dumps(h["pruner"])]
        for key in ("sampler_seed", "train_seed", "heartbeat_interval", "grace_period", "max_retry"):
            if h.get(key) is not None:
                args += [f"--{key.replace('_', '-')}", h[key]]
        if h.get("exclusive"):
            args.append("--exclusive")
        return args + self.search_overrides(name)

    def export_args(self, name: str) -> list[Any]:
        return ["--name", name, "--method", self.searches[name]["method"], "--out", f"{self.results}/hpo/{name}",
                "--storage", self.storage_url(name)]

    def rerun_ids(self, name: str) -> list[str]:
        m = self.searches[name]["method"]
        return [str(RerunId(m, kind, seed)) for kind in RERUN_KINDS for seed in self.hpo["rerun"]["seeds"]]

    def rerun(self, search: str, run_id: str) -> RerunId:
        """The rerun `run_id` of `search` (PipelineError when the search has no such rerun)."""
        if run_id not in self.rerun_ids(search):
            raise PipelineError(f"{run_id!r} is not a rerun of search {search!r}: {self.rerun_ids(search)}")
        return RerunId.parse(run_id)

    def best_path(self, search: str) -> str:
        return f"{self.results}/hpo/{search}/best.yaml"

    def plots_path(self, search: str) -> str:
        return f"{self.results}/hpo/{search}/plots"

    def rerun_inputs(self, search: str, run_id: str) -> list[str]:
        out = self.base_inputs(self.search_model(search))
        if RerunId.PATTERN.match(run_id) and RerunId.parse(run_id).kind == "best":
            out.append(self.best_path(search))
        return out

    def rerun_args(self, search: str, run_id: str) -> list[Any]:
        """Arguments of `grpo-research study train-budget` for a rerun of a search."""
        rerun = self.rerun(search, run_id)
        rr = self.hpo["rerun"]
        args: list[Any] = ["--budget-samples", rr["budget_samples"],
                           "--run-dir", f"{self.runs}/{HPO_PREFIX}{search}/{run_id}"]
        if rr.get("eval_every_samples"):
            args += ["--eval-every-samples", rr["eval_every_samples"]]
        if rerun.kind == "best":  # a new best config (a longer search) retrains; the old dir is kept aside
            args += ["--config", self.best_path(search), "--replace-stale"]
        args += [S.override("method", self.searches[search]["method"]), S.override("seed", rerun.seed),
                 *self.search_overrides(search), S.override("tracking.group", f"{HPO_PREFIX}{search}"),
                 S.override("tracking.tags", [f"config={rerun.kind}"]), "tracking.progress=false"]
        return args

    # ------------------------------------------------------------ what a study report needs
    def study_runs(self, name: str) -> list[str]:
        """Run ids of a study (or of an HPO rerun study `hpo-<search>`)."""
        search = self.search_of(name)
        if search is not None:
            return self.rerun_ids(search)
        return [r.run_id for r in self.study(name).runs]

    def study_benchmarks(self, name: str) -> dict[str, dict | None]:
        search = self.search_of(name)
        if search is not None:
            benchmarks = self.hpo["rerun"].get("benchmarks") or {}
            task = load_config(None, [S.override("method", self.searches[search]["method"]),
                                      *self.search_overrides(search)]).task
            for bench, opts in benchmarks.items():
                self.check_benchmark(bench, opts, f"hpo.rerun.benchmarks.{bench}", task)
            return benchmarks
        return self.study(name).benchmarks

    def study_variants(self, name: str) -> list[str]:
        search = self.search_of(name)
        if search is not None:
            m = self.searches[search]["method"]
            return [f"{m}-{kind}" for kind in RERUN_KINDS]
        return self.study(name).variants

    def study_outputs(self, name: str) -> list[str]:
        """Every file the report of a study aggregates: summaries and benchmark evaluations (of
        the runs of `benchmark_seeds`, and of the base model with `benchmark_base`)."""
        out = []
        benchmarks = self.study_benchmarks(name)
        study = None if self.search_of(name) is not None else self.study(name)
        for run_id in self.study_runs(name):
            out.append(f"{self.runs}/{name}/{run_id}/summary.json")
            if study is None or seed_of(run_id) in study.benchmark_seeds:  # on every base
                out += [f"{self.runs}/{name}/{run_id}/eval/{b}.json" for b in benchmarks]
        if study is not None and study.benchmark_base:
            out += [self.base_eval_path(name, b, base, k) for base in study.base_seeds for k in study.kernels
                    for b in benchmarks]
        return out

    def base_eval_path(self, name: str, benchmark: str, base: int = 0, kernels: str = NATIVE) -> str:
        """<runs>/<study>/_base_model[-base<b>][-k<family>]/eval/<benchmark>.json: base model b's evaluation."""
        return f"{self.runs}/{name}/{S.BASE_EVAL_DIR}{base_suffix(base, kernels)}/eval/{benchmark}.json"

    def base_eval_args(self, name: str, benchmark: str, base: int = 0, kernels: str = NATIVE) -> list[Any]:
        """`grpo-research eval` of a study's base model on a benchmark, posed as its runs pose
        their prompts (the first run's task.prompt_format, system prompt and examples) and, unless
        the benchmark sets max_new_tokens, generating as long as its runs' evaluations do (the
        first run's rollout.max_new_tokens: a base model dir has no run config to read it from)."""
        study = self.study(name)
        if not study.benchmark_base:
            raise PipelineError(f"study {name!r} does not evaluate its base model (benchmark_base: false)")
        cfg = load_config(None, study.runs[0].overrides)
        t = cfg.task
        if base not in study.base_seeds:
            raise PipelineError(f"study {name!r} has no base seed {base} (base_seeds {study.base_seeds})")
        if kernels not in study.kernels:
            raise PipelineError(f"study {name!r} has no kernel family {kernels!r} (kernels {study.kernels})")
        model = self.model_path(study.model, base, kernels)
        own = (self.study_benchmarks(name).get(benchmark) or {}).get("max_new_tokens") is not None
        length = [] if own else ["--max-new-tokens", cfg.rollout.max_new_tokens]
        return ["--checkpoint", model, "--prompt-format", t.prompt_format, "--system-prompt", t.system_prompt,
                "--few-shot", t.few_shot, *length, *self.entry_args(name, benchmark)]

    def base_eval_inputs(self, name: str, base: int = 0, kernels: str = NATIVE) -> list[str]:
        return self.base_inputs(self.study(name).model, base, kernels)

    def run_base_inputs(self, study_name: str, run_id: str) -> list[str]:
        """The base model a run of a study trains from (its base seed's, on its kernel family)."""
        spec = self.study(study_name).run(run_id)
        return self.base_inputs(spec.model, spec.base, spec.kernels)

    def report_args(self, name: str) -> list[Any]:
        """Arguments of `grpo-research report study` for a study."""
        a = self.config["analysis"]
        args: list[Any] = ["--runs", f"{self.runs}/{name}", "--out", f"{self.results}/{name}", "--study", name,
                           "--variants", ",".join(self.study_variants(name)),
                           "--include", ",".join(self.study_runs(name)),
                           "--n-boot", a["bootstrap"], "--seed", a["seed"], "--smooth", a["smooth_steps"]]
        search = self.search_of(name)
        if search is None:
            source = name[len(CONFIRM_PREFIX):] if name not in self.study_files and name.startswith(CONFIRM_PREFIX) else name
            args += ["--study-file", self.study_files[source]]
        else:
            args += ["--title", f"{name}: Optuna's best config vs the defaults",
                     "--extra", f"Optuna search {search}={self.plots_path(search)}",
                     "--extra-text", f"best.yaml={self.best_path(search)}"]
        return args

    def report_inputs(self, name: str) -> dict[str, Any]:
        out: dict[str, Any] = {"runs": self.study_outputs(name)}
        search = self.search_of(name)
        if search is not None:
            out["hpo_plots"] = self.plots_path(search)
            out["best"] = self.best_path(search)
        return out

    # ------------------------------------------------------------ training and evaluation jobs
    def wall_inputs(self, study_name: str, run_id: str) -> list[str]:
        """An equal-wall-time control waits for the runs whose training time it matches."""
        spec = self.study(study_name).run(run_id)
        if not spec.wall_match:
            return []
        return [f"{self.runs}/{study_name}/{r}/summary.json" for r in [*spec.wall_match, spec.wall_probe]]

    def train_threads(self, study_name: str, run_id: str) -> int:
        """Cores of a training job: `train.threads`, times `train.nproc_per_node` processes when
        the run trains data-parallel (`train.launcher=torchrun`)."""
        cfg = load_config(None, self.study(study_name).run(run_id).overrides)
        per_process = cfg.train.threads if isinstance(cfg.train.threads, int) and cfg.train.threads > 0 \
            else self.resources["train"]["threads"]
        return per_process * (cfg.train.nproc_per_node if cfg.train.launcher == "torchrun" else 1)

    def train_args(self, study_name: str, run_id: str) -> list[Any]:
        """Arguments of `grpo-research` for a training job: `train`, or `study train-wall` for an
        equal-wall-time control."""
        spec = self.study(study_name).run(run_id)
        run_dir = f"{self.runs}/{study_name}/{run_id}"
        if spec.wall_match:
            args = ["study", "train-wall", "--probe", f"{self.runs}/{study_name}/{spec.wall_probe}"]
            for r in spec.wall_match:
                args += ["--match", f"{self.runs}/{study_name}/{r}"]
            return [*args, "--run-dir", run_dir, *spec.overrides]
        return ["train", "--run-dir", run_dir, *spec.overrides]

    def eval_args(self, study_name: str, benchmark: str) -> list[Any]:
        """`grpo-research eval` arguments of a run's evaluation on a benchmark entry: the entry's
        options and, for a greedy evaluation without other data, `--reuse-final-eval` (eval copies
        the run's own last held-out evaluation when it is exactly this one, else generates:
        grpo_research/evaluation/final.py)."""
        args = self.entry_args(study_name, benchmark)
        opts = self.study_benchmarks(study_name).get(benchmark) or {}
        return [*args, "--reuse-final-eval"] if opts.get("samples") in (None, 1) and not opts.get("data") else args

    def entry_args(self, study_name: str, benchmark: str) -> list[Any]:
        """The study's options of a benchmark entry as `grpo-research eval` arguments, from
        `--benchmark` (the entry's `benchmark`, else its name; the eval file is named by the entry)."""
        benchmarks = self.study_benchmarks(study_name)
        if benchmark not in benchmarks:
            raise PipelineError(f"study {study_name!r} lists no benchmark {benchmark!r}")
        opts = benchmarks.get(benchmark) or {}
        args: list[Any] = ["--benchmark", S.benchmark_of(benchmark, opts)]
        for key, flag in (("data", "--data"), ("n", "--n"), ("samples", "--samples"),
                          ("temperature", "--temperature"), ("max_new_tokens", "--max-new-tokens")):
            if opts.get(key) is not None:
                args += [flag, opts[key]]
        return args
