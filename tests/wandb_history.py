"""The W&B history of a run dir as its local `.wandb` files hold it, against metrics.jsonl (for
the tracking tests): read from W&B's own records (grpo_research/tracking/wandb_offline.py)."""
from grpo_research.tracking import read_metrics
from grpo_research.tracking.wandb_offline import offline_runs, read_offline_run

WANDB_ONLY = {"_runtime", "_timestamp"}  # W&B's own bookkeeping keys besides _step


def merged_by_step(rows):
    """metrics.jsonl as W&B records it: rows of one step merged (an evaluation row and the training
    row of the same step are one W&B history row), numbers only, `step` as W&B's `_step`."""
    out = {}
    for r in rows:
        row = out.setdefault(r["step"], {"_step": r["step"]})
        row.update({k: v for k, v in r.items() if k != "step" and isinstance(v, (int, float))})
    return [out[s] for s in sorted(out)]


def wandb_history(run_dir):
    """Every history row of the run's offline W&B runs (one per invocation), oldest first."""
    return [{k: v for k, v in row.items() if k not in WANDB_ONLY}
            for wb in offline_runs(run_dir) for row in read_offline_run(wb)["history"]]


def metrics_as_wandb(run_dir):
    return merged_by_step(read_metrics(run_dir / "metrics.jsonl"))
