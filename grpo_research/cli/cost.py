"""`grpo-research cost [--config FILE] [--steps N] [--json] [key=value ...]`: what GRPO and PPO
cost on the same policy, side by side.

Runs `--steps` training steps (default 3) of each method with the same config (the method's
preset applied, as `train` would), each in its own subprocess (peak memory is per process) and
temporary run dir, with W&B disabled and no progress bar, and reports per method:

| key | meaning |
|---|---|
| model_state_mb | parameters + gradients + optimizer state of every model the method holds (MiB) |
| models_mb | the same, per model (policy, reference, critic) |
| peak_mem_mb | peak process memory: high-water RSS on CPU, peak CUDA memory on GPU |
| step_s, rollout_s, update_s | median seconds per step over the steps after the first (warm-up) |
| samples_per_step, samples_per_s | completions per step; per second (median) |
| model_flops_per_step | model FLOPs per step (2 N per forward token, 6 N per trained token), mean |
| mfu | model FLOP/s over the process's measured peak matmul FLOP/s (median) |
| policy_params | parameters of the policy |

A method whose step the up-front memory estimate refuses (`trainers.cost.check_step_memory`)
is a result, not a failure: its entry is `{"refused": "<the one-line refusal with its
estimate>"}` and the other method still runs.

`--json` prints one JSON object `{"grpo": {...}, "ppo": {...}}`. Usage errors print one line
`error: ...` and exit 2; a failed run prints `error: ...` and exits 1.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from grpo_research.cli.common import Parser, quiet_libraries, run_command
from grpo_research.config import config_from_dict, load_config
from grpo_research.errors import UsageError
from grpo_research.files import write_text_atomic

METHODS_COMPARED = ("grpo", "ppo")


def build_parser() -> Parser:
    p = Parser(prog="grpo-research cost", description=__doc__.splitlines()[0])
    p.add_argument("--config", help="YAML config file (defaults < file < key=value), shared by both methods")
    p.add_argument("--steps", type=int, default=3, help="training steps per method (>= 2; default 3)")
    p.add_argument("--json", action="store_true", help='print one JSON object {"grpo": {...}, "ppo": {...}}')
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides (method is set per run)")
    p.set_defaults(func=cmd_cost)
    return p


def method_configs(config: str | None, overrides: list[str], steps: int) -> dict:
    """The validated config of each compared method: same file and overrides, `method` set."""
    forced = [f"train.steps={steps}", "tracking.wandb=disabled", "tracking.progress=false"]
    kept = [o for o in overrides if o.split("=", 1)[0].strip() != "method"]
    return {m: load_config(config, [*kept, *forced, f"method={m}"]) for m in METHODS_COMPARED}


def summarize(rows: list[dict], policy_params: int) -> dict:
    """Per-method summary of the step rows (the first step is warm-up for timings)."""
    timed = rows[1:] or rows
    med = lambda k: statistics.median(r[k] for r in timed)  # noqa: E731
    last = rows[-1]
    models = {}
    for key, value in last.items():
        if key.startswith("cost/") and key.endswith(("_param_mb", "_grad_mb", "_optim_mb")):
            name = key[len("cost/"):].rsplit("_", 2)[0]
            models[name] = models.get(name, 0.0) + value
    return {
        "model_state_mb": last["cost/model_state_mb"],
        "models_mb": models,
        "peak_mem_mb": max(r["cost/peak_mem_mb"] for r in rows),
        "step_s": med("step_s"),
        "rollout_s": med("rollout_s"),
        "update_s": med("update_s"),
        "samples_per_step": rows[0]["samples"],
        "samples_per_s": med("cost/samples_per_s"),
        "model_flops_per_step": statistics.fmean(r["cost/model_flops_per_s"] * r["step_s"] for r in rows),
        "mfu": med("cost/mfu"),
        "policy_params": policy_params,
        "steps": len(rows),
    }


def _worker(config_path: str, model_path: str, run_dir: str, out_path: str) -> int:
    """Run in a fresh process: build the method's trainer and take `train.steps` steps."""
    from grpo_research.trainers import build_trainer
    from grpo_research.typed_config import safe_load

    quiet_libraries()
    from grpo_research.trainers.cost import StepTooLarge

    cfg = config_from_dict(safe_load(Path(config_path).read_text()))
    try:
        trainer = build_trainer(cfg, run_dir, model_path)
    except StepTooLarge as e:
        write_text_atomic(out_path, json.dumps({"refused": str(e)}))
        return 0
    rows = [trainer.train_step() for _ in range(cfg.train.steps)]
    out = summarize(rows, sum(p.numel() for p in trainer.policy.parameters()))
    write_text_atomic(out_path, json.dumps(out))
    return 0


def _table(results: dict) -> str:
    refused = [f"{m}: refused: {r['refused']}" for m, r in results.items() if "refused" in r]
    results = {m: r for m, r in results.items() if "refused" not in r}
    if not results:
        return "\n".join(refused)
    keys = ["model_state_mb", "peak_mem_mb", "step_s", "rollout_s", "update_s", "samples_per_step",
            "samples_per_s", "model_flops_per_step", "mfu"]
    names = sorted({n for r in results.values() for n in r["models_mb"]})
    lines = [f"{'':24s}" + "".join(f"{m:>14s}" for m in results) + f"{'ppo/grpo':>12s}"]

    def fmt(v: float) -> str:
        return f"{v:14.4g}"

    def line(label: str, vals: list[float]) -> str:
        ratio = vals[1] / vals[0] if len(vals) == 2 and vals[0] else float("nan")
        return f"{label:24s}" + "".join(fmt(v) for v in vals) + f"{ratio:12.3f}"

    for k in keys:
        lines.append(line(k, [r[k] for r in results.values()]))
    for n in names:
        lines.append(line(f"  {n}_state_mb", [r["models_mb"].get(n, 0.0) for r in results.values()]))
    return "\n".join(lines + refused)


def cmd_cost(args: argparse.Namespace) -> int:
    if args.steps < 2:
        raise UsageError(f"--steps must be >= 2 (the first step is excluded from timings), got {args.steps}")
    cfgs = method_configs(args.config, args.overrides, args.steps)
    from grpo_research.trainers.sft import ensure_base_model

    quiet_libraries()
    model_path = ensure_base_model(cfgs["grpo"], progress=False)
    results = {}
    env = {**os.environ, "WANDB_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
    with tempfile.TemporaryDirectory(prefix="grpo-research-cost-") as tmp:
        for method, cfg in cfgs.items():
            cfg_path = Path(tmp) / f"{method}.yaml"
            write_text_atomic(cfg_path, cfg.dump())
            run_dir, out = Path(tmp) / method, Path(tmp) / f"{method}.json"
            run_dir.mkdir()
            proc = subprocess.run(
                [sys.executable, "-m", "grpo_research.cli.cost", "--worker", str(cfg_path), str(model_path),
                 str(run_dir), str(out)], env=env, capture_output=True, text=True,
            )
            if proc.returncode != 0 or not out.exists():
                tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                print(f"error: the {method} run failed (exit {proc.returncode}): {tail}", file=sys.stderr)
                return 1
            results[method] = json.loads(out.read_text())
    if args.json:
        print(json.dumps(results))
    else:
        print(_table(results))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run `cost`; argv excludes the word "cost". Returns the exit code."""
    return run_command(build_parser(), sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--worker":
        sys.exit(_worker(*sys.argv[2:]))
    sys.exit(main())
