"""The training and evaluation jobs of a study's runs: their inputs, cores and command arguments."""
from __future__ import annotations

from typing import Any

from grpo_research import studies as S
from grpo_research.config import load_config
from grpo_research.pipeline.errors import PipelineError


class JobPlan:
    """Pipeline's training and evaluation jobs (grpo_research.pipeline.Pipeline)."""

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
