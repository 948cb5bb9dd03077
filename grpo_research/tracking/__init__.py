"""Run tracking: `metrics.jsonl` always, Weights & Biases when wanted.

`metrics.jsonl` gets one JSON object per line, flushed per line (a kill loses at most the
line being written, and a resume first cuts the file back to the last checkpoint's length).
W&B runs offline by default (no login, no network; `wandb sync <run-dir>/wandb/...` later),
online when `tracking.wandb=online`, and not at all when `disabled` (a do-nothing stand-in).
The resolved config goes to W&B unchanged as the run config.

Metric keys (training rows; evaluation rows carry `step`, `samples`, `eval/accuracy`):

| key | meaning |
|---|---|
| step | optimizer steps taken (a rollout batch each) |
| samples | completions generated so far |
| tokens | completion tokens generated so far |
| reward_mean, reward_std | total reward over the step's completions |
| reward/<term> | mean of each reward term (unweighted) |
| frac_zero_std | share of groups whose rewards are all equal (no learning signal) |
| kl | mean per-token KL estimate to the reference (0 when beta = 0) |
| clip_frac | share of completion tokens where the clipped term is active |
| entropy | mean per-token entropy of the policy on its completions (nats) |
| completion_len | mean completion length in tokens (EOS included) |
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


class Tracker:
    def __init__(self, run_dir: Path, config: dict, mode: str = "offline", project: str = "grpo-research",
                 group: str = "", name: str = "", tags: list | None = None, job_type: str = ""):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / "metrics.jsonl"
        self._fh = open(self.path, "a", buffering=1)
        self.wandb: Any = _NoWandb()
        if mode != "disabled":
            import wandb

            id_file = self.run_dir / "wandb_id.txt"
            if id_file.exists():
                run_id = id_file.read_text().strip()
            else:
                run_id = uuid.uuid4().hex[:12]
                id_file.write_text(run_id)
            os.environ.setdefault("WANDB_SILENT", "true")
            self.wandb = wandb.init(
                project=project, group=group or None, name=name or self.run_dir.name, tags=tags or None,
                job_type=job_type or None, config=config, dir=str(self.run_dir), mode=mode, id=run_id,
                resume="allow", settings=wandb.Settings(console="off", silent=True),
            )

    def log(self, row: dict[str, Any]) -> None:
        row = {k: _clean(v) for k, v in row.items()}
        self._fh.write(json.dumps(row) + "\n")
        self._fh.flush()
        self.wandb.log({k: v for k, v in row.items() if k != "step" and isinstance(v, (int, float))}, step=row["step"])

    def log_table(self, step: int, rows: list[dict[str, Any]]) -> None:
        """Rollout samples: `samples/step_<step>.jsonl` and a W&B table."""
        out = self.run_dir / "samples"
        out.mkdir(exist_ok=True)
        write_text_atomic(out / f"step_{step:06d}.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        if not isinstance(self.wandb, _NoWandb):
            import wandb

            cols = list(rows[0]) if rows else []
            self.wandb.log({"samples": wandb.Table(columns=cols, data=[[r[c] for c in cols] for r in rows])}, step=step)

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
