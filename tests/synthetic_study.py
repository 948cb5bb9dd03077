"""A synthetic study's run dirs, shaped like the pipeline's (methods x seeds, the supervised
control at equal samples and at equal wall time, noisy per-step training metrics, a few
held-out evaluations, a benchmark file per run): for report tests that need no training."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

METHODS = {"grpo": 0.45, "ppo": 0.40, "dr_grpo": 0.44}  # final held-out accuracy of each method


def write_run(d: Path, method: str, seed: int, final: float, steps: int, per_step: int = 64, step_s: float = 0.15,
              evals: int = 5, rng=None, rl: bool = True) -> None:
    rng = rng or np.random.default_rng(seed)
    d.mkdir(parents=True)
    (d / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": seed}))
    rows = []
    eval_steps = sorted({round(i * steps / evals) for i in range(evals + 1)})
    for s in eval_steps:
        acc = 0.26 + (final - 0.26) * (s / steps) ** 0.7 + rng.normal(0, 0.01)
        rows.append({"step": s, "samples": s * per_step, "eval/accuracy": float(np.clip(acc, 0, 1))})
    for s in range(1, steps + 1):
        row = {"step": s, "samples": s * per_step, "step_s": step_s * (1 + 0.05 * rng.normal()),
               "rollout_s": step_s * 0.6, "update_s": step_s * 0.4, "cost/peak_mem_mb": 400.0 + s * 0.01,
               "cost/model_state_mb": 12.0, "cost/gen_tokens_per_s": 2000.0, "cost/samples_per_s": 400.0,
               "cost/mfu": 0.004}
        if rl:  # a noisy reward around a slow trend (what the training-reward panel shows)
            row.update({"reward_mean": float(0.3 + 0.15 * s / steps + rng.normal(0, 0.08)),
                        "kl": float(0.002 * s / steps + abs(rng.normal(0, 0.0005))),
                        "entropy": float(0.5 - 0.1 * s / steps + rng.normal(0, 0.02)),
                        "completion_len": float(4.0 + rng.normal(0, 0.1)),
                        "frac_zero_std": float(np.clip(0.6 + rng.normal(0, 0.05), 0, 1))})
        rows.append(row)
    rows.sort(key=lambda r: (r["step"], "eval/accuracy" not in r))
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    last = [r for r in rows if "eval/accuracy" in r][-1]["eval/accuracy"]
    (d / "summary.json").write_text(json.dumps({"method": method, "seed": seed, "steps": steps,
                                                "samples": steps * per_step, "initial_accuracy": rows[0]["eval/accuracy"],
                                                "final_accuracy": last}))
    (d / "eval").mkdir()
    (d / "eval" / "arith.json").write_text(json.dumps({"benchmark": "arith", "pass@1": last, "n_tasks": 1000}))


def write_study(runs: Path, seeds=(1, 2, 3), steps: int = 200, wall_factor: int = 5) -> Path:
    """runs/<name>: METHODS x seeds, sft_control (equal samples) and sft_control-wall (trains
    `wall_factor` times as many steps in the same time)."""
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for method, final in METHODS.items():
            write_run(runs / f"{method}-seed{seed}", method, seed, final + rng.normal(0, 0.01), steps, rng=rng)
        write_run(runs / f"sft_control-seed{seed}", "sft_control", seed, 0.40 + rng.normal(0, 0.01), steps,
                  rng=rng, rl=False, step_s=0.15 / wall_factor)
        wall = runs / f"sft_control-wall-seed{seed}"
        write_run(wall, "sft_control", seed, 0.55 + rng.normal(0, 0.01), steps * wall_factor, rng=rng, rl=False,
                  step_s=0.15 / wall_factor, evals=6)
        (wall / "wall_budget.json").write_text(json.dumps({"target_s": steps * 0.15, "steps": steps * wall_factor,
                                                           "matched_run": f"grpo-seed{seed}"}))
    return runs
