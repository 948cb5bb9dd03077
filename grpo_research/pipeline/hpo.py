"""The HPO searches of `hpo.searches`: each search's run config, space and `hpo search` / `hpo
export` arguments, and its reruns of the best config and of the defaults (the study `hpo-<search>`)."""
from __future__ import annotations

import json
from typing import Any

from grpo_research import studies as S
from grpo_research.config import load_config
from grpo_research.errors import ConfigError
from grpo_research.pipeline.errors import PipelineError
from grpo_research.pipeline.ids import HPO_PREFIX, RERUN_KINDS, RerunId


class HpoPlan:
    """Pipeline's HPO searches and reruns (grpo_research.pipeline.Pipeline)."""

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
