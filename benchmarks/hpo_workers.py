"""Optuna trials per minute with 1 and with 2 `grpo-research hpo search` workers sharing one
study in PostgreSQL (issue #7): real training runs of the default tiny base model.

    eval "$(bash scripts/start_postgres.sh)"      # sets GRPO_RESEARCH_PG_URL
    .venv/bin/python benchmarks/hpo_workers.py [--trials 8] [--budget-samples 640]

Each setting runs a fresh study to `--trials` COMPLETE trials (no pruning, one torch thread per
trial) and prints the wall time and trials per minute; the last line is
`speedup_2_workers=<2-worker trials/min over 1-worker trials/min>`.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path


def run(n_workers: int, trials: int, budget: int, model: Path, url: str, root: Path) -> float:
    import optuna
    from optuna.trial import TrialState

    name = f"bench-{n_workers}w-{uuid.uuid4().hex[:6]}"
    out = root / name
    cmd = [sys.executable, "-m", "grpo_research.cli", "hpo", "search", "--name", name, "--method", "grpo",
           "--out", str(out), "--runs", str(out / "trials"), "--storage", url, "--n-trials", str(trials),
           "--budget-samples", str(budget), "--eval-every-samples", str(budget // 2), "--pruner", "{type: none}",
           "--space", "{optim.lr: {type: float, low: 0.00001, high: 0.0003, log: true}, "
                      "algo.beta: {type: float, low: 0.0, high: 0.1}}",
           "--heartbeat-interval", "5", "--grace-period", "20",
           f"model.name_or_path={model}", "train.eval_size=200", "train.threads=1", "tracking.wandb=disabled"]
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(n_workers)]
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise SystemExit(f"worker failed ({p.returncode}): {err[-2000:]}")
    wall = time.perf_counter() - t0
    study = optuna.load_study(study_name=name, storage=url)
    done = len(study.get_trials(states=(TrialState.COMPLETE,)))
    optuna.delete_study(study_name=name, storage=url)
    per_min = 60.0 * done / wall
    print(f"{n_workers} worker(s): {done} trials in {wall:.1f} s -> {per_min:.2f} trials/min", flush=True)
    return per_min


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--budget-samples", type=int, default=640, help="generated samples per trial (64 per step)")
    args = ap.parse_args()
    url = os.environ.get("GRPO_RESEARCH_PG_URL")
    if not url:
        raise SystemExit('GRPO_RESEARCH_PG_URL is not set: eval "$(bash scripts/start_postgres.sh)"')
    from grpo_research.config import load_config
    from grpo_research.trainers.sft import ensure_base_model

    model = ensure_base_model(load_config(None, []), progress=False)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  {os.cpu_count()} cores  load {os.getloadavg()[0]:.2f}  "
          f"model {model}  {args.trials} trials x {args.budget_samples} samples", flush=True)
    root = Path(tempfile.mkdtemp(prefix="hpo-bench-"))
    try:
        one = run(1, args.trials, args.budget_samples, model, url, root)
        two = run(2, args.trials, args.budget_samples, model, url, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"speedup_2_workers={two / one:.2f}")


if __name__ == "__main__":
    main()
