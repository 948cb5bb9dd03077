"""The replication atlas: the studies the claims need, the committed freeze of the confirmatory
phase and its `confirm-<study>` runs, the lr searches of tuned claims' arms, and `report atlas`."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from grpo_research import studies as S
from grpo_research.pipeline.errors import PipelineError
from grpo_research.pipeline.ids import CONFIRM_PREFIX, TUNED_SUFFIX


class AtlasPlan:
    """Pipeline's atlas targets (grpo_research.pipeline.Pipeline)."""

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
