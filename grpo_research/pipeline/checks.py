"""Inputs checked while planning: a study's or search's model and every benchmark entry, so that a
missing model or benchmark stops the DAG with its message before any job runs."""
from __future__ import annotations

from pathlib import Path

from grpo_research import studies as S
from grpo_research.errors import ConfigError
from grpo_research.pipeline.errors import MissingModelPackage, PipelineError


class InputChecks:
    """Pipeline's checks of models and benchmarks (grpo_research.pipeline.Pipeline)."""

    def check_model(self, model: str, where: str) -> None:
        """A study's or search's `model`: a base model of `base_models`, a checkpoint directory or a
        hub name (which, offline, must be in the local cache)."""
        if model in self.config["base_models"]:
            return
        from grpo_research.models.real import PACKAGED_MODELS, gguf_parts

        if model in PACKAGED_MODELS:  # converted and cached by the first run that needs it
            try:
                gguf_parts(model)  # installed? (names the package otherwise)
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

        from grpo_research.model_source import datasets_offline

        offline = datasets_offline()
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
