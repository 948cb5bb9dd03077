"""Shared helpers of the kill-and-resume tests."""
import json
import signal
import subprocess
import time

TIMING = ("step_s", "rollout_s", "update_s", "peak_mem_mb", "eval_s")


def deterministic(rows):
    """Metrics rows without the fields that depend on wall time (timings, cost/)."""
    return [{k: v for k, v in r.items() if k not in TIMING and not k.startswith("cost/")} for r in rows]


def kill_after_step(cmd, metrics, step, env, sig=signal.SIGKILL, timeout=120):
    """Start `cmd`, send `sig` once `metrics` holds a row with step >= `step`; return
    (process, the largest step seen then, or None if the run ended first)."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    seen = None
    while time.time() < deadline and proc.poll() is None:
        if metrics.exists():
            steps = [json.loads(l)["step"] for l in metrics.read_text().splitlines() if l.strip()]
            if steps and max(steps) >= step:
                proc.send_signal(sig)
                seen = max(steps)
                break
        time.sleep(0.002)
    return proc, seen


# The overrides that make a training run take seconds on the tiny test model; a test adds its
# own after them (a later key=value wins).
FAST_RUN = ["train.eval_size=20", "train.threads=1", "rollout.prompts_per_step=2", "algo.group_size=4",
            "rollout.max_new_tokens=10", "tracking.progress=false", "tracking.wandb=disabled"]


def fast_run(*extra: str) -> list[str]:
    """FAST_RUN followed by `extra` overrides."""
    return [*FAST_RUN, *extra]
