"""What a study's report needs: its runs, variants and benchmarks (of a study file, `confirm-<study>`
or `hpo-<search>`), every file it aggregates, the base model's evaluations, and `report study`."""
from __future__ import annotations

from typing import Any

from grpo_research import studies as S
from grpo_research.config import load_config
from grpo_research.pipeline.errors import PipelineError
from grpo_research.pipeline.ids import CONFIRM_PREFIX, RERUN_KINDS
from grpo_research.provenance import NATIVE
from grpo_research.run_ids import base_suffix, seed_of


class ReportPlan:
    """Pipeline's study reports (grpo_research.pipeline.Pipeline)."""

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
