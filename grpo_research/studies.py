"""Study expansion: one experiment YAML -> the list of runs the pipeline trains.

A study (`experiments/<name>.yaml`, schema `workflow/schemas/study.schema.yaml`) names

- `methods`: method entries, each a method name (`grpo`) or a mapping
  `{method: ppo, name: ..., set: {ppo.lam: 0.95}, grid: {key: [values]}}`;
- `grid`: config keys with lists of values, crossed with every method entry;
- `seeds`: the RL seeds (each run's `seed`), nested in the base models of `base_seeds`;
- `base_seeds` (default `[0]`): the base models every arm runs on, a replicated random factor:
  base b is the study's base model built with `base.seed=b` (its own initialisation and data
  order) into `<runs>/_base/<model>` for b = 0 and `<runs>/_base/<model>-base<b>` otherwise,
  shared by every study that asks for it. Runs pair by (base, seed). Only a base model the
  pipeline builds (`base_models` of the workflow config) has base seeds;
- `compare` (optional): the study's primary comparisons, pairs of its variants
  `[[grpo, ppo-lam0.95], ...]`, fixed before its runs; its report opens with them;
- `kernels` (default `[native]`): kernel families (grpo_research.provenance.KERNEL_FAMILIES),
  a fixed block crossed with the bases: every arm runs on every (base, family), and every job
  of a run on family `avx2` (its base model's build into `<model>[-base<b>]-kavx2`, training,
  evaluations) runs with that family's variables set, recorded in its `environment`; run ids
  of a family other than native carry it (`grpo-base2-kavx2-seed1`). Runs pair by (base,
  family, seed); the tests stay on per-base means (the families averaged within a base: the
  base seed is the random factor) and the report gives the difference on each family too;
- `within_base_sd` (optional): a pilot's within-base SD in points per compared pair,
  `{from: "<where it was measured>", "grpo - ppo-lam0.95": 1.7}`; the report uses it for the
  variance components of a pair whose own runs cannot estimate one (one seed per base) and
  says so;
- `budget_samples`: generated completions per run, the same for every run, converted per run
  to `train.steps = budget_samples / (rollout.prompts_per_step x algo.group_size)` from the
  run's resolved config (method presets included), so G sweeps compare at equal samples;
- `overrides`: config values shared by every run; `eval_every_samples`: held-out evaluation
  every this many samples (converted to `train.eval_every` per run like the budget);
- `benchmarks`: final-model evaluations, `{entry: {benchmark, data, n, samples, temperature,
  max_new_tokens}}`; the entry names the eval file (`eval/<entry>.json`) and is the benchmark
  run unless `benchmark` names another, so one benchmark can be evaluated twice:
  `{arith: {n: 1000}, arith_pass64: {benchmark: arith, n: 200, samples: 64, temperature: 1.0}}`
  (greedy pass@1 on 1000 problems, and pass@k / maj@k up to 64 on 200);
- `model`: a base model of the workflow config (`base_models`), or a hub name / checkpoint;
- `default`: whether the `ablations` target includes the study;
- `control` (default true): add the supervised control (`method=sft_control`, continued SFT
  of the same base model on the same prompts with their reference solutions) twice per seed,
  not crossed with the grid: `sft_control-seed<N>` at the study's sample budget, and
  `sft_control-wall-seed<N>`, trained for as long (summed step seconds, evaluation excluded) as
  the longest RL run of that seed trained (`train-wall`, grpo_research/study_budget.py). Turn it
  off for tasks that withhold reference solutions, where there is nothing to imitate;
  `equal_samples` keeps the first alone (for models whose RL steps are too slow to match in wall
  time as well);
- `benchmark_seeds` (default: every seed): the seeds whose runs are evaluated on `benchmarks`
  (benchmarks of a large model are costly; the trainer's held-out accuracy covers every run);
- `benchmark_base` (default false): evaluate the base model itself on `benchmarks` too, into
  `<runs>/<study>/_base_model/eval/` (the report lists it as the row `base model`).

Every run's config is resolved and validated here (`load_config`), so a misspelled config key
or an out-of-range value in a study stops the pipeline while it plans, before any job runs.

Run ids (`ppo-lam0.95-seed1`, `grpo-beta0.04-base3-seed1`): grpo_research/run_ids.py. Training a
run at a budget of samples and the equal-wall-time control's budget, with the command line
`grpo-research study train-budget | train-wall`: grpo_research/study_budget.py.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_research.config import load_config, load_yaml
from grpo_research.errors import ConfigError
from grpo_research.provenance import KERNEL_FAMILIES, NATIVE
from grpo_research.run_ids import SEED_SUFFIX, id_value, run_id_of, short_names
from grpo_research.typed_config import safe_dump, safe_load

CONTROL_METHOD = "sft_control"
BASE_EVAL_DIR = "_base_model"  # <runs>/<study>/_base_model/eval/<benchmark>.json: the base model's evaluations
STUDY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
BENCHMARK_ENTRY = re.compile(r"^[A-Za-z0-9_]+$")  # as the evaluate rules' {benchmark} wildcard


class StudyError(ValueError):
    """A study file that cannot be expanded; the message names the file and the problem."""


@dataclass
class RunSpec:
    """One training run of a study."""

    study: str
    run_id: str  # e.g. ppo-lam0.95-seed1
    variant: str  # run_id without -seed<N>
    method: str
    seed: int
    swept: dict[str, Any]  # the values that name this variant (set + grid), in run-id order
    overrides: list[str]  # key=value overrides for `grpo-research train`, in order
    steps: int
    samples_per_step: int
    model: str  # the study's `model` entry (base model name or hub name / path)
    tags: list[str] = field(default_factory=list)
    base: int = 0  # the base seed: the run trains from base model `base` of the study's model
    kernels: str = NATIVE  # the kernel family of every job of the run (and of its base model's build)
    # equal-wall-time control: trains as long as the longest of these runs (same study) trained,
    # at the seconds per step its equal-samples twin `wall_probe` measured (see `train-wall`)
    wall_match: list[str] = field(default_factory=list)
    wall_probe: str | None = None


@dataclass
class Study:
    name: str
    path: Path | None
    description: str
    default: bool
    model: str
    budget_samples: int
    seeds: list[int]
    benchmarks: dict[str, dict]  # entry (the eval file's name) -> options; `benchmark_of` gives the benchmark
    runs: list[RunSpec]
    raw: dict[str, Any]
    benchmark_seeds: list[int] = field(default_factory=list)  # runs of these seeds are evaluated on `benchmarks`
    benchmark_base: bool = False  # the base model is evaluated on `benchmarks` too
    base_seeds: list[int] = field(default_factory=lambda: [0])  # every arm runs on each of these bases
    compare: list[list[str]] = field(default_factory=list)  # the primary comparisons (pairs of variants)
    within_base_sd: dict[str, float] = field(default_factory=dict)  # a pilot's, points, by "a - b"
    kernels: list[str] = field(default_factory=lambda: [NATIVE])  # kernel families, a fixed block

    def run(self, run_id: str) -> RunSpec:
        for r in self.runs:
            if r.run_id == run_id:
                return r
        raise KeyError(f"study {self.name!r} has no run {run_id!r}")

    @property
    def variants(self) -> list[str]:
        return list(dict.fromkeys(r.variant for r in self.runs))


# ---------------------------------------------------------------- formatting
def format_value(value: Any) -> str:
    """A config value as it appears on the command line (YAML flow style, one line)."""
    text = safe_dump(value, default_flow_style=True, width=10**6).strip()
    return text.removesuffix("...").strip()


def override(key: str, value: Any) -> str:
    return f"{key}={format_value(value)}"


# ---------------------------------------------------------------- loading
NOT_STUDIES = ("claims",)  # experiments/claims.yaml: the atlas's claims (grpo_research/analysis/claims.py)


def find_studies(directory: str | Path) -> dict[str, Path]:
    """Study name (file stem) -> path, for every `*.yaml` in `directory` but the claims file
    (`NOT_STUDIES`: `study_claims` is therefore no study name)."""
    d = Path(directory)
    return {p.stem: p for p in sorted(d.glob("*.yaml")) if p.stem not in NOT_STUDIES} if d.is_dir() else {}


def load_study_file(path: str | Path, schema: str | Path | dict | None = None) -> dict[str, Any]:
    """Parse a study YAML; with `schema`, validate it (jsonschema) and name the offending key."""
    path = Path(path)
    try:
        data = load_yaml(path)
    except ConfigError as e:
        raise StudyError(str(e)) from None
    if schema is not None:
        validate_schema(data, schema, where=str(path))
    return data


def validate_schema(data: Any, schema: str | Path | dict, where: str) -> None:
    import jsonschema

    if not isinstance(schema, dict):
        schema = safe_load(Path(schema).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        at = ".".join(str(p) for p in e.absolute_path) or "<top level>"
        raise StudyError(f"{where}: {at}: {e.message}")


def _method_entries(raw: dict, where: str) -> list[dict]:
    entries = []
    for i, m in enumerate(raw.get("methods") or []):
        if isinstance(m, str):
            m = {"method": m}
        if not isinstance(m, dict) or "method" not in m:
            raise StudyError(f"{where}: methods[{i}] must be a method name or a mapping with 'method'")
        entries.append({"method": m["method"], "name": m.get("name"), "set": dict(m.get("set") or {}),
                        "grid": dict(m.get("grid") or {})})
    if not entries:
        raise StudyError(f"{where}: 'methods' lists no method")
    return entries


def _grid_points(grid: dict[str, list], where: str) -> list[dict[str, Any]]:
    for k, v in grid.items():
        if not isinstance(v, list) or not v:
            raise StudyError(f"{where}: grid key {k!r} must map to a non-empty list of values")
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def expand_study(
    raw: dict[str, Any],
    name: str,
    *,
    path: str | Path | None = None,
    model_path: str | None = None,
    base_paths: dict[int, str] | None = None,
    run_overrides: list[str] | None = None,
    tracking: dict[str, Any] | None = None,
    threads: int | None = None,
    only_methods: list[str] | None = None,
    seeds: list[int] | None = None,
    base_seeds: list[int] | None = None,
) -> Study:
    """Expand a parsed study into runs, resolving and validating each run's config.

    `model_path` is the `model.name_or_path` given to every run (the built base model's dir);
    `run_overrides` (workflow config) apply over the study's `overrides` and under swept
    values; `tracking` sets `tracking.wandb` / `tracking.project`; `only_methods` keeps only
    those methods (e.g. while one is not registered yet); `seeds` replaces the study's seeds,
    `base_seeds` its base seeds; `base_paths` maps each base seed to the `model.name_or_path` of
    its runs (the pipeline's `<runs>/_base/<model>[-base<b>]`; without it every base uses
    `model_path`, which only base 0 may).
    """
    where = str(path or name)
    if not STUDY_NAME.match(name) or name.startswith("hpo-"):
        raise StudyError(f"{where}: study name {name!r} must be a file-name-safe word not starting with 'hpo-'")
    budget = raw.get("budget_samples")
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        raise StudyError(f"{where}: budget_samples must be a positive integer (generated completions per run)")
    seed_list = list(seeds if seeds is not None else raw.get("seeds") or [])
    if not seed_list or len(set(seed_list)) != len(seed_list):
        raise StudyError(f"{where}: seeds must be a non-empty list of distinct integers")
    base_list = list(base_seeds if base_seeds is not None else raw.get("base_seeds") or [0])
    if not base_list or len(set(base_list)) != len(base_list) or \
            not all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in base_list):
        raise StudyError(f"{where}: base_seeds must be a non-empty list of distinct integers >= 0, got {base_list}")
    if base_list != [0] and base_paths is None:
        raise StudyError(f"{where}: base_seeds {base_list}: model {raw.get('model', 'tiny-arith')!r} is not a base "
                         "model the pipeline builds (base_models of the workflow config), so it has no base seeds "
                         "other than 0; drop base_seeds")
    kernel_list = list(raw.get("kernels") or [NATIVE])
    unknown = [k for k in kernel_list if k not in KERNEL_FAMILIES]
    if unknown or len(set(kernel_list)) != len(kernel_list):
        raise StudyError(f"{where}: kernels must be distinct kernel families of {', '.join(KERNEL_FAMILIES)}, got "
                         f"{kernel_list}")
    if kernel_list != [NATIVE] and base_paths is None:
        raise StudyError(f"{where}: kernels {kernel_list}: model {raw.get('model', 'tiny-arith')!r} is not a base "
                         "model the pipeline builds (base_models of the workflow config), so it cannot be built on "
                         "another kernel family; drop kernels")
    # base model of each (base seed, kernel family): base_paths keys b (native) or (b, family)
    paths = {(b, k): (base_paths or {}).get(b if k == NATIVE else (b, k), model_path if k == NATIVE else None)
             for b in base_list for k in kernel_list}
    entries = _method_entries(raw, where)
    if only_methods:
        entries = [e for e in entries if e["method"] in only_methods]
        if not entries:
            raise StudyError(f"{where}: no method of the study is in only_methods={only_methods}")
    study_grid = dict(raw.get("grid") or {})
    fixed = dict(raw.get("overrides") or {})
    eval_every_samples = raw.get("eval_every_samples")
    model = str(raw.get("model", "tiny-arith"))
    tracking = tracking or {}

    runs: list[RunSpec] = []
    seen: dict[str, str] = {}

    def make_run(method: str, variant: str, base_seed: int, kernels: str, seed: int, settings: dict[str, Any],
                 point: dict[str, Any], **extra: Any) -> RunSpec:
        run_id = run_id_of(variant, base_seed, seed, kernels)
        if run_id in seen or SEED_SUFFIX.sub("", run_id) != variant:
            raise StudyError(f"{where}: two runs would share the id {run_id!r}; give a method entry a 'name'")
        seen[run_id] = run_id
        base = [override("method", method), override("seed", seed)]
        if paths[base_seed, kernels] is not None:
            base.append(override("model.name_or_path", paths[base_seed, kernels]))
        base += [override(k, v) for k, v in fixed.items()]
        base += list(run_overrides or [])
        base += [override(k, v) for k, v in settings.items()]
        base += [override(k, v) for k, v in point.items()]
        try:
            cfg = load_config(None, base)
        except ConfigError as e:
            raise StudyError(f"{where}: run {run_id}: {e}") from None
        per_step = cfg.rollout.prompts_per_step * cfg.algo.group_size
        if budget % per_step:
            raise StudyError(
                f"{where}: run {run_id}: budget_samples {budget} is not a multiple of "
                f"prompts_per_step x group_size = {per_step}; choose a budget every run divides"
            )
        steps = budget // per_step
        tail = [override("train.steps", steps)]
        if eval_every_samples:
            tail.append(override("train.eval_every", max(1, eval_every_samples // per_step)))
        if threads:
            tail.append(override("train.threads", threads))
        tags = [f"{k}={format_value(v)}" for k, v in {**settings, **point}.items()] + list(extra.pop("tags", []))
        if base_seed != 0:  # base 0's config stays what it was before base seeds (its run dirs still count)
            tags.append(f"base={base_seed}")
        if kernels != NATIVE:
            tags.append(f"kernels={kernels}")
        tail += [override("tracking.group", name), override("tracking.tags", tags),
                 override("tracking.progress", False)]
        for key in ("wandb", "project"):
            if tracking.get(key):
                tail.append(override(f"tracking.{key}", tracking[key]))
        overrides = base + tail
        try:
            load_config(None, overrides)
        except ConfigError as e:
            raise StudyError(f"{where}: run {run_id}: {e}") from None
        return RunSpec(study=name, run_id=run_id, variant=variant, method=method, seed=seed,
                       swept={**settings, **point}, overrides=overrides, steps=steps, samples_per_step=per_step,
                       model=model, tags=tags, base=base_seed, kernels=kernels, **extra)

    for entry in entries:
        overlap = set(entry["set"]) & (set(entry["grid"]) | set(study_grid)) or set(entry["grid"]) & set(study_grid)
        if overlap:
            raise StudyError(f"{where}: key(s) {sorted(overlap)} are both set/swept in more than one place")
        for point in _grid_points({**entry["grid"], **study_grid}, where):
            swept = {**({} if entry["name"] else entry["set"]), **point}
            names = short_names(list(swept))
            label = entry["name"] or entry["method"]
            variant = "-".join([id_value(label), *(f"{names[k]}{id_value(v)}" for k, v in swept.items())])
            for b, k, seed in itertools.product(base_list, kernel_list, seed_list):
                runs.append(make_run(entry["method"], variant, b, k, seed, entry["set"], point))

    # The supervised control (issue: RL gains must be read against it): continued SFT from the
    # same base model, not crossed with the study's grid (it samples nothing), once at the
    # study's sample budget and once for the wall time of the longest RL run of the same seed.
    control = raw.get("control", True)
    if control not in (True, False, "equal_samples"):
        raise StudyError(f"{where}: control must be true, false or equal_samples")
    listed = any(e["method"] == CONTROL_METHOD for e in entries)
    if control and not listed and (not only_methods or CONTROL_METHOD in only_methods):
        rl_runs = list(runs)
        for b, k, seed in itertools.product(base_list, kernel_list, seed_list):
            twin = make_run(CONTROL_METHOD, CONTROL_METHOD, b, k, seed, {}, {}, tags=["control=equal_samples"])
            runs.append(twin)
            if control == "equal_samples":
                continue
            runs.append(make_run(CONTROL_METHOD, f"{CONTROL_METHOD}-wall", b, k, seed, {}, {},
                                 tags=["control=equal_wall_time"],
                                 wall_match=[r.run_id for r in rl_runs
                                             if r.seed == seed and r.base == b and r.kernels == k],
                                 wall_probe=twin.run_id))
    benchmarks = {k: dict(v or {}) for k, v in (raw.get("benchmarks") or {}).items()}
    for entry, opts in benchmarks.items():
        check_benchmark_entry(entry, opts, where)
    bench_seeds = raw.get("benchmark_seeds")
    if bench_seeds is not None:
        if not set(bench_seeds) <= set(raw.get("seeds") or []):
            raise StudyError(f"{where}: benchmark_seeds {bench_seeds} must be some of the study's seeds "
                             f"{raw.get('seeds')}")
        # seeds replaced from the workflow config: as many of the new seeds, the first ones
        bench_seeds = [s for s in seed_list if s in bench_seeds] or seed_list[:len(bench_seeds)]
    variants = list(dict.fromkeys(r.variant for r in runs))
    compare = [list(pair) for pair in raw.get("compare") or []]
    for i, pair in enumerate(compare):
        if len(pair) != 2 or pair[0] == pair[1]:
            raise StudyError(f"{where}: compare[{i}]: {pair} must name two different variants")
        unknown = [v for v in pair if v not in variants]
        if unknown and not only_methods:  # only_methods may leave a compared variant out
            raise StudyError(f"{where}: compare[{i}]: {', '.join(map(repr, unknown))} is not a variant of the "
                             f"study ({', '.join(variants)})")
    within = dict(raw.get("within_base_sd") or {})
    within.pop("from", None)
    named = {f"{a} - {b}" for a, b in compare}
    for key in within:
        if key not in named:
            raise StudyError(f"{where}: within_base_sd: {key!r} is not a compared pair (compare: "
                             f"{', '.join(sorted(named)) or 'none'})")
    compare = [p for p in compare if all(v in variants for v in p)]
    return Study(name=name, path=Path(path) if path else None, description=str(raw.get("description", "")).strip(),
                 default=bool(raw.get("default", False)), model=model, budget_samples=budget, seeds=seed_list,
                 benchmarks=benchmarks, runs=runs, raw=raw,
                 benchmark_seeds=list(bench_seeds) if bench_seeds is not None else list(seed_list),
                 benchmark_base=bool(raw.get("benchmark_base", False)), base_seeds=base_list, compare=compare,
                 within_base_sd={k: float(v) for k, v in within.items()}, kernels=kernel_list)


def benchmark_of(entry: str, opts: dict | None) -> str:
    """The benchmark (task name) a `benchmarks` entry runs: its `benchmark`, else its own name."""
    return (opts or {}).get("benchmark") or entry


def check_benchmark_entry(entry: str, opts: dict | None, where: str) -> None:
    """An entry of `benchmarks`: a name fit for a file name (its eval file, a Snakemake wildcard)
    and a registered benchmark to run (StudyError naming the file and the entry)."""
    from grpo_research.tasks import TASKS

    if not BENCHMARK_ENTRY.match(entry):
        raise StudyError(f"{where}: benchmarks.{entry}: an entry name must be letters, digits and '_' "
                         "(it names the eval file)")
    bench = (opts or {}).get("benchmark")
    if bench is not None and not isinstance(bench, str):
        raise StudyError(f"{where}: benchmarks.{entry}.benchmark must be a benchmark name, got {bench!r}")
    name = benchmark_of(entry, opts)
    if name not in TASKS:
        hint = "" if bench is not None else " (an entry named otherwise says which it runs: `benchmark: NAME`)"
        raise StudyError(f"{where}: benchmarks.{entry}: unknown benchmark {name!r}; known: "
                         f"{', '.join(sorted(TASKS))}{hint}")


def studies_table(directory: str | Path) -> str:
    """The Markdown table of the shipped studies (kept in docs/pipeline.md): what each compares
    (the first sentence of its description), its target, its runs and samples per run."""
    rows = ["| study | target | what it compares | runs | samples per run |", "|---|---|---|---|---|"]
    for name, path in find_studies(directory).items():
        raw = load_study_file(path)
        bases = {b: f"tiny-base{b}" for b in raw.get("base_seeds") or []}
        runs = len(expand_study(raw, name, path=path, model_path="tiny", base_paths=bases or None).runs)
        text = " ".join(str(raw.get("description", "")).split())
        first = re.split(r"(?<!\bDr)(?<!e\.g)(?<!i\.e)\. ", text)[0].rstrip(".") + "."  # "Dr. GRPO" is one name
        rows.append(f"| `{name}` | `study_{name}` | {first} | {runs} | {raw.get('budget_samples', '-'):,} |")
    return "\n".join(rows)
