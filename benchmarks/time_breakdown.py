"""Where a finished pipeline run's wall time went: process start and imports, model loading,
rollout, update, evaluation, checkpoints, tracking, the jobs' time outside their process, and
idle cores.

    python benchmarks/time_breakdown.py --study ppo_vs_grpo            # after `snakemake ... ablations`
    python benchmarks/time_breakdown.py --study paradigm --root /tmp/fresh --json

Sources: Snakemake's `benchmark:` file of every job of the study (wall seconds `s`; its
modification time is the job's end) and each training run's own
`summary.json` `timings_this_invocation` (written by the trainer; runs trained before it
existed fall back to the sums of `rollout_s`, `update_s`, `step_s` and `eval_s` in
metrics.jsonl, the rest of their process shown as "not recorded"). A resumed run's timings
cover its last invocation only: the script says so when the job's wall time and the run's
disagree by more than the job could have spent outside its process.

The span is from the first job's start (end minus `s`) to the last job's end; core-seconds are
span x --cores; a job occupies its rule's threads (configs/defaults.yaml `resources`, a run's
own `train.threads`). Idle = core-seconds minus the jobs' occupied core-seconds (DAG waits,
Snakemake's scheduling, and rules without benchmark files such as the report).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import yaml

from grpo_research.run_ids import variant_of

# component of a training process -> the summary timings it sums
TRAIN_PARTS = {
    "process start, imports, config": ("startup_s",),
    "model and data loading": ("load_s", "resume_s"),
    "rollout": ("rollout_s",),
    "update": ("update_s",),
    "rest of the step": ("step_s", "-rollout_s", "-update_s"),
    "evaluation in the run": ("eval_s",),
    "checkpoints and final model": ("checkpoint_s", "save_model_s"),
    "tracking (W&B, sample tables)": ("tracking_s", "samples_s"),
}
OVERHEAD = ("process start, imports, config", "model and data loading", "checkpoints and final model",
            "tracking (W&B, sample tables)", "rest of the process", "outside the process (job start/exit)",
            "not recorded")


def read_tsv(path: Path) -> float:
    lines = path.read_text().splitlines()
    if len(lines) < 2:
        raise SystemExit(f"error: {path}: not a Snakemake benchmark file (no data row)")
    head, row = lines[0].split("\t"), lines[1].split("\t")
    try:
        return float(row[head.index("s")])
    except (ValueError, IndexError) as e:
        raise SystemExit(f"error: {path}: no wall-time column `s` ({e})") from None


def run_timings(run_dir: Path) -> tuple[dict[str, float], bool]:
    """The run's timings (seconds) and whether they came from summary.json (else metrics.jsonl)."""
    summary = json.loads((run_dir / "summary.json").read_text())
    t = summary.get("timings_this_invocation")
    if t:
        return {k: float(v) for k, v in t.items()}, True
    sums = defaultdict(float)
    with open(run_dir / "metrics.jsonl") as f:
        for line in f:
            row = json.loads(line)
            for k in ("rollout_s", "update_s", "step_s", "eval_s"):
                sums[k] += float(row.get(k, 0.0) or 0.0)
    return dict(sums), False


def split_train(job_s: float, t: dict[str, float], recorded: bool) -> dict[str, float]:
    parts = {}
    for name, keys in TRAIN_PARTS.items():
        parts[name] = sum(-t.get(k[1:], 0.0) if k.startswith("-") else t.get(k, 0.0) for k in keys)
    parts["rest of the step"] = max(parts["rest of the step"], 0.0)
    inside = sum(parts.values())
    if recorded:
        wall = t.get("wall_s", inside)
        parts["rest of the process"] = max(wall - inside, 0.0)
        parts["outside the process (job start/exit)"] = max(job_s - wall, 0.0)
    else:
        parts["not recorded"] = max(job_s - inside, 0.0)
    return parts


def thread_counts(cfg: dict) -> dict[str, int]:
    res = cfg.get("resources", {})
    return {"build_base_model": res.get("base_model", {}).get("threads", 1),
            "evaluate_run": res.get("evaluate", {}).get("threads", 1),
            "evaluate_base": res.get("evaluate", {}).get("threads", 1)}


def breakdown(root: Path, study: str, cores: int, include_base: bool = True) -> dict:
    cfg = yaml.safe_load((root / "configs" / "defaults.yaml").read_text())
    bench = root / cfg["benchmarks_dir"]
    runs = root / cfg["runs_dir"] / study
    threads = thread_counts(cfg)
    jobs = []  # (rule, name, path, seconds, threads)
    for rule_dir in sorted(p for p in bench.iterdir() if p.is_dir()) if bench.is_dir() else []:
        rule = rule_dir.name
        if rule == "build_base_model":
            if include_base:
                jobs += [(rule, p.stem, p, read_tsv(p), threads[rule]) for p in sorted(rule_dir.glob("*.tsv"))]
            continue
        for p in sorted((rule_dir / study).rglob("*.tsv")) if (rule_dir / study).is_dir() else []:
            name = str(p.relative_to(rule_dir / study).with_suffix(""))
            n = threads.get(rule, 1)
            if rule == "train_run":
                conf = yaml.safe_load((runs / name / "config.yaml").read_text()) if (runs / name / "config.yaml").exists() else {}
                n = int((conf.get("train") or {}).get("threads") or 1)
            jobs.append((rule, name, p, read_tsv(p), n))
    if not any(rule != "build_base_model" for rule, *_ in jobs):
        raise SystemExit(f"error: no benchmark files of study {study!r} under {bench}/<rule>/{study}/ "
                         "(has `snakemake` run it here? is --root the project folder?)")
    # the base model counts when it was built for this invocation: it ended when the first job
    # of the study started (a base cached by an earlier study is not part of this one's time)
    first = min(os.path.getmtime(p) - s for rule, _, p, s, _ in jobs if rule != "build_base_model")
    jobs = [j for j in jobs if j[0] != "build_base_model" or os.path.getmtime(j[2]) >= first - 120]
    ends = [os.path.getmtime(p) for _, _, p, _, _ in jobs]
    starts = [e - s for e, (_, _, _, s, _) in zip(ends, jobs)]
    span = max(ends) - min(starts)
    core_s = span * cores
    shares: dict[str, float] = defaultdict(float)
    per_method: dict[str, list[dict[str, float]]] = defaultdict(list)
    notes = []
    for rule, name, _, s, n in jobs:
        if rule != "train_run":
            label = {"build_base_model": "base-model build", "evaluate_run": "evaluation jobs (final models)",
                     "evaluate_base": "evaluation jobs (base model)"}.get(rule, rule)
            shares[label] += s * n
            continue
        t, recorded = run_timings(runs / name)
        parts = split_train(s, t, recorded)
        if recorded and t.get("wall_s", 0.0) > s + 1.0:
            notes.append(f"{name}: its process ran {t['wall_s']:.1f} s, its job {s:.1f} s (clock or resume mismatch)")
        for k, v in parts.items():
            shares[f"train: {k}"] += v * n
        method = variant_of(name)  # <variant>[-base<b>]-seed<N>
        per_method[method].append({**parts, "job_s": s})
    busy = sum(shares.values())
    shares["idle cores"] = max(core_s - busy, 0.0)
    methods = {}
    for m, rows in sorted(per_method.items()):
        job = statistics.median(r["job_s"] for r in rows)
        over = statistics.median(sum(r.get(k, 0.0) for k in OVERHEAD) / r["job_s"] for r in rows)
        methods[m] = {"runs": len(rows), "median_job_s": job, "median_overhead_share": over,
                      **{f"median {k}": statistics.median(r.get(k, 0.0) for r in rows)
                         for k in list(TRAIN_PARTS) + ["rest of the process", "outside the process (job start/exit)",
                                                       "not recorded"] if any(k in r for r in rows)}}
    return {"study": study, "jobs": len(jobs), "span_s": span, "cores": cores, "core_s": core_s,
            "core_s_by_part": dict(shares), "methods": methods, "notes": notes}


def print_report(b: dict) -> None:
    print(f"study {b['study']}: {b['jobs']} jobs with benchmark files, span {b['span_s']:.0f} s "
          f"on {b['cores']} cores = {b['core_s']:.0f} core-s")
    print(f"{'part':48s} {'core-s':>9s} {'share':>7s}")
    for k, v in sorted(b["core_s_by_part"].items(), key=lambda kv: -kv[1]):
        print(f"{k:48s} {v:9.1f} {100 * v / b['core_s']:6.1f}%")
    print("\nper method (medians over seeds; overhead = start, loading, checkpoints, tracking, outside the process):")
    for m, r in b["methods"].items():
        parts = ", ".join(f"{k[7:]} {v:.1f}" for k, v in r.items() if k.startswith("median ") and v > 0.05)
        print(f"  {m}: {r['runs']} runs, job {r['median_job_s']:.1f} s, overhead {100 * r['median_overhead_share']:.0f}% "
              f"({parts})")
    for n in b["notes"]:
        print(f"note: {n}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--study", required=True, help="study name (experiments/<study>.yaml)")
    ap.add_argument("--root", default=".", help="the project folder the pipeline ran in (default .)")
    ap.add_argument("--cores", type=int, default=os.cpu_count(), help="cores Snakemake had (default: this machine's)")
    ap.add_argument("--no-base", action="store_true", help="leave the base-model build out even when it ran "
                    "just before the study's first job")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args(argv)
    root = Path(a.root)
    if not (root / "configs" / "defaults.yaml").exists():
        print(f"error: --root {root}: no configs/defaults.yaml (not the project folder)", file=sys.stderr)
        return 2
    b = breakdown(root, a.study, a.cores, include_base=not a.no_base)
    if a.json:
        print(json.dumps(b, indent=2))
    else:
        print_report(b)
    return 0


if __name__ == "__main__":
    sys.exit(main())
