"""Run tracking: `metrics.jsonl` always, Weights & Biases when wanted.

`metrics.jsonl` gets one JSON object per line, flushed per line (a kill loses at most the
line being written, and a resume first cuts the file back to the last checkpoint's length).
W&B runs offline by default (no login, no network; `wandb sync <run-dir>/wandb/...` later),
online when `tracking.wandb=online`, and not at all when `disabled` (a do-nothing stand-in).
The resolved config goes to W&B unchanged as the run config.

On resume the W&B run is made to equal metrics.jsonl: the steps W&B's local history of the run
already holds are read from its `.wandb` files (`wandb_offline.logged_through`; a run killed
with SIGKILL loses what W&B had not flushed, often everything since its start), the rows of
metrics.jsonl after them are sent again before training goes on, and later rows W&B holds
already (a killed run's steps after its checkpoint) are not sent twice: W&B's steps only
increase. W&B's own logging is silenced (`quiet_wandb`): a failure it causes (e.g. a full
disk) is reported once, by the trainer, as one line. Rollout sample tables are logged to W&B
as `rollout_samples` (not `samples`, the x-axis metric of the same step).

Metric keys (training rows; evaluation rows carry `step`, `samples`, `eval/accuracy` and, with
train.eval_benchmarks, `eval/<benchmark>/pass@1`, ... : grpo_research/trainers/bench_eval.py):

| key | meaning |
|---|---|
| step | optimizer steps taken (a rollout batch each) |
| samples | completions generated so far |
| tokens | completion tokens generated so far |
| reward_mean, reward_std | total reward over the step's completions |
| reward/<term> | mean of each reward term (unweighted) |
| frac_zero_std | share of the update's groups whose rewards are all equal (no learning signal) |
| frac_zero_std_generated | the same over every group generated in the step, before dynamic sampling drops any (equal to frac_zero_std without it) |
| kl | mean per-token KL estimate to the reference (0 when beta = 0) |
| clip_frac | share of completion tokens where the clipped term is active |
| entropy | mean per-token entropy of the policy on its completions (nats) |
| completion_len | mean completion length in tokens (EOS included) |
| completion_len_std | population standard deviation of the completion lengths in the update (tokens) |
| completion_len/correct, completion_len/incorrect | the same over completions the `correct` term scored 1 / below 1 (absent when none, or without that term) |
| truncated_frac | share of completions that hit max_new_tokens without EOS |
| masked_frac | share of completions a reward term masked (e.g. sandbox errors), left out of the loss |
| dropped_groups, rollout_rounds | dynamic sampling (DAPO): groups dropped for equal rewards, rollout rounds used |
| cost/... | memory, throughput and MFU: see grpo_research/trainers/cost.py |
| value_loss, explained_variance, value_mean, return_mean, adv_mean, adv_std | PPO: critic loss, 1 - Var(returns - values)/Var(returns) (null when returns are constant), means, advantages before whitening |
| pg_loss, approx_kl, kl_penalty, value_clip_frac, critic_grad_norm, critic_lr, critic_only | PPO: policy term, KL(old, new), mean per-token reward penalty, clipped-value share, critic optimizer, critic warm-up step |
| lr, grad_norm | learning rate and gradient norm before clipping |
| loss | the aggregated training loss |
| step_s, rollout_s, update_s | seconds: whole step, generation, log-probs + update |
| peak_mem_mb | peak resident memory of the process (CPU) or peak CUDA memory |
| rollout/logp_drift | rollout.backend=vllm: mean abs(logp under vLLM - logp under the trainer) on the sampled tokens |
"""
from __future__ import annotations

import json
import math
import os
import uuid
from pathlib import Path
from typing import Any

from grpo_research.files import write_text_atomic


class _NoWandb:
    """Stand-in when W&B is disabled: every call does nothing."""

    def log(self, *_a, **_k) -> None:
        pass

    def finish(self) -> None:
        pass


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def quiet_wandb() -> None:
    """No W&B output on the console: its messages, and the failures of its own log file (on a
    full disk, each of its log lines printed as a "--- Logging error ---" traceback, hundreds of
    lines), would bury the one line that says what went wrong. Call before and after
    `wandb.init` (which adds the log file's handler); the log file (`wandb/*/logs/debug.log`)
    is still written while it can be."""
    import logging

    os.environ.setdefault("WANDB_SILENT", "true")
    os.environ.setdefault("WANDB_CONSOLE", "off")
    for handler in logging.getLogger("wandb").handlers:
        handler.handleError = lambda record: None  # type: ignore[method-assign]


def wandb_row(row: dict[str, Any]) -> dict[str, Any]:
    """A metrics row as W&B gets it: numbers only, `step` as W&B's step."""
    return {k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}


class Tracker:
    def __init__(self, run_dir: Path, config: dict, mode: str = "offline", project: str = "grpo-research",
                 group: str = "", name: str = "", tags: list | None = None, job_type: str = ""):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / "metrics.jsonl"
        self._fh = open(self.path, "a", buffering=1)
        self.wandb: Any = _NoWandb()
        self.wandb_through = -1  # W&B holds every step up to this one already: not sent again
        self.resent = 0  # rows of metrics.jsonl sent to W&B again on resume
        if mode != "disabled":
            quiet_wandb()
            import wandb

            from grpo_research.tracking.wandb_offline import logged_through

            id_file = self.run_dir / "wandb_id.txt"
            if id_file.exists():
                run_id = id_file.read_text().strip()
            else:
                run_id = uuid.uuid4().hex[:12]
                write_text_atomic(id_file, run_id)
            self.wandb_through = logged_through(self.run_dir, run_id)  # before init adds this invocation's run
            self.wandb = wandb.init(
                project=project, group=group or None, name=name or self.run_dir.name, tags=tags or None,
                job_type=job_type or None, config=config, dir=str(self.run_dir), mode=mode, id=run_id,
                resume="allow", settings=wandb.Settings(console="off", silent=True),
            )
            quiet_wandb()
            self._catch_up()

    def _catch_up(self) -> None:
        """Send W&B the rows of metrics.jsonl (as the resumed checkpoint covers them) after the
        last step W&B's local history holds."""
        rows = read_metrics(self.path, missing_ok=True, skip_bad_lines=True)
        for row in rows:
            if isinstance(row.get("step"), int) and row["step"] > self.wandb_through:
                self.wandb.log(wandb_row({k: _clean(v) for k, v in row.items()}), step=row["step"])
                self.resent += 1

    def log(self, row: dict[str, Any]) -> None:
        row = {k: _clean(v) for k, v in row.items()}
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()
        if row["step"] > self.wandb_through:
            self.wandb.log(wandb_row(row), step=row["step"])

    def log_table(self, step: int, rows: list[dict[str, Any]]) -> None:
        """Rollout samples: `samples/step_<step>.jsonl` and a W&B table (`rollout_samples`)."""
        out = self.run_dir / "samples"
        out.mkdir(exist_ok=True)
        write_text_atomic(out / f"step_{step:06d}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        if not isinstance(self.wandb, _NoWandb) and step > self.wandb_through:
            import wandb

            cols = list(rows[0]) if rows else []
            self.wandb.log({"rollout_samples": wandb.Table(columns=cols, data=[[r[c] for c in cols] for r in rows])},
                           step=step)

    def close(self) -> None:
        self._fh.close()
        self.wandb.finish()


class NullTracker:
    """The tracker of data-parallel ranks other than 0 (train.launcher=torchrun): rank 0 alone
    writes metrics.jsonl, samples/ and W&B."""

    def log(self, row: dict[str, Any]) -> None:
        pass

    def log_table(self, step: int, rows: list[dict[str, Any]]) -> None:
        pass

    def close(self) -> None:
        pass


def read_metrics(path: str | Path, *, missing_ok: bool = False, skip_bad_lines: bool = False) -> list[dict[str, Any]]:
    """The rows of a `metrics.jsonl`, in order.

    `missing_ok`: a missing file is no rows (else FileNotFoundError). `skip_bad_lines`: a line
    that is not JSON (the last line of a run killed while writing it) is left out (else
    json.JSONDecodeError)."""
    return read_metrics_since(path, 0, missing_ok=missing_ok, skip_bad_lines=skip_bad_lines,
                              complete_lines_only=False)[0]


def read_metrics_since(path: str | Path, offset: int, *, missing_ok: bool = True, skip_bad_lines: bool = True,
                       complete_lines_only: bool = True) -> tuple[list[dict[str, Any]], int]:
    """(rows after byte `offset`, the offset to read on from): for tailing the metrics of a run
    that is still writing them. `complete_lines_only` leaves a last line without its newline
    (being written) for the next call. A file shorter than `offset` was cut back (a resumed run
    truncates metrics.jsonl to its checkpoint): it is read again from the start. A missing file
    is no rows and offset 0 when `missing_ok`."""
    path = Path(path)
    if missing_ok and not path.exists():
        return [], 0
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        if fh.tell() < offset:
            offset = 0
        fh.seek(offset)
        data = fh.read()
    end = data.rfind(b"\n") + 1 if complete_lines_only else len(data)
    rows = []
    for i, line in enumerate(data[:end].split(b"\n")):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as e:
            if not skip_bad_lines:
                at = f"line {i + 1}" if offset == 0 else f"line {i + 1} after byte {offset}"
                raise json.JSONDecodeError(f"{path}, {at}: not a JSON row ({e.msg})", e.doc, e.pos) from None
    return rows, offset + end
