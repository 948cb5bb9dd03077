"""Pieces every trainer shares: seeding, log-probs, held-out evaluation, optimizer and
schedule, atomic checkpoints, peak memory."""
from __future__ import annotations

import math
import os
import random
import resource
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from grpo_research.errors import ConfigError, UsageError
from grpo_research.files import fsync_path, replace_dir, temp_dir_beside, write_bytes_atomic
from grpo_research.rollout import generate
from grpo_research.tasks.base import Problem, Task


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (1 << 32))
    torch.manual_seed(seed)


def free_cores(window_s: float = 0.2) -> int:
    """Cores this process may run on (its CPU affinity) that were idle over the last
    `window_s` seconds, at least 1: each CPU's busy fraction from psutil, summed."""
    import psutil

    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    per_cpu = psutil.cpu_percent(interval=window_s, percpu=True)
    busy = sum(per_cpu[c] for c in cpus if c < len(per_cpu)) / 100.0
    return max(1, min(len(cpus), round(len(cpus) - busy)))


def resolve_threads(value: int | str) -> int:
    """`train.threads` as a count: auto -> `free_cores()`; N -> N; 0 -> 0 (torch's default)."""
    return free_cores() if value == "auto" else int(value)


def token_logprobs(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, n_completion: int, temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (N, T) of the last `n_completion` tokens of each row in one forward pass,
    from logits / temperature (the distribution that was sampled). Left padding is handled by
    position ids from the attention mask. Entropy (N, T) is computed without gradient."""
    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)  # (N, L)
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                logits_to_keep=n_completion + 1, use_cache=False)
    # (N, T, V): logits predicting each completion token
    return logprobs_from_logits(out.logits[:, :-1], input_ids[:, -n_completion:], temperature, with_entropy)


def logprobs_from_logits(
    logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0, with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log-probs (N, T) of `targets` (N, T), entropy (N, T) or None) under softmax(logits / temperature).

    log p = logit[target] - logsumexp(logits): no (N, T, V) log-softmax tensor is kept for backward
    (autograd keeps the logits, which exist anyway); entropy = logsumexp - sum(p * logits)."""
    logits = logits.float()  # (N, T, V) no copy when already float32
    if temperature != 1.0:
        logits = logits / temperature
    lse = torch.logsumexp(logits, dim=-1)  # (N, T)
    logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse  # (N, T)
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)  # (N, T)
    return logp, entropy


def token_logprobs_shared_prefix(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, n_completion: int, temperature: float = 1.0,
    with_entropy: bool = False, *, group_size: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`token_logprobs` (same result up to float rounding, gradients included) for a batch laid
    out as the rollout returns it: rows in groups of `group_size` that share one prompt. Each
    prompt goes through the model once; its KV cache (with gradient) is repeated over the group,
    then all completions go through one forward on that cache. The prompt's tokens are computed
    once instead of G times (GRPO at G = 8 with 8-token prompts and ~10-token completions: ~40 %
    fewer tokens through the model, forward and backward).
    `functools.partial(token_logprobs_shared_prefix, group_size=G)` is a drop-in for `token_logprobs`.

    Rows that do not come in such groups (a micro-batch cutting a group, PPO's sorted
    minibatches) share each run of consecutive rows with one prompt instead. Falls back to
    `token_logprobs` when no two neighbouring rows share a prompt or the model's forward takes
    no cache."""
    T = n_completion
    logits = shared_prefix_outputs(model, input_ids, attention_mask, T, group_size=group_size)
    if logits is None:
        return token_logprobs(model, input_ids, attention_mask, T, temperature, with_entropy)
    return logprobs_from_logits(logits, input_ids[:, -T:], temperature, with_entropy)


def shared_prefix_outputs(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, n_completion: int, *, group_size: int = 0,
    hidden: bool = False,
) -> torch.Tensor | None:
    """The outputs (N, T, D) at the positions that predict the last T = `n_completion` tokens
    of each row, computing each prompt (the first L - T columns) once per run of consecutive
    rows that share it: logits of a causal LM, or with `hidden` the last hidden states of a bare
    trunk (`AutoModel`, PPO's critic). None when nothing is shared or the model takes no cache
    (the caller runs its plain forward).

    Rows in whole groups of `group_size` repeat each prompt's cache G times (GRPO's layout);
    otherwise each row takes its run's cache by index (gradients summed over the run alike)."""
    from grpo_research.rollout import cache_kwarg, lean_supported

    N, L = input_ids.shape
    T = n_completion
    P = L - T
    if P < 1 or T < 1 or N < 2:
        return None
    if hidden:
        if getattr(model.config, "is_encoder_decoder", False) or "position_ids" not in _params(model) \
                or not ({"cache", "past_key_values"} & _params(model)):
            return None
    elif not lean_supported(model):
        return None
    G = group_size
    first, run_of_row = prompt_runs(input_ids, attention_mask, P, G)
    if len(first) == N:
        return None  # no two neighbouring rows share a prompt
    from transformers import DynamicCache

    position_ids = (attention_mask.cumsum(dim=1) - 1).clamp(min=0)  # (N, L)
    cache = DynamicCache(config=model.config)
    ckw = {cache_kwarg(model): cache, "use_cache": True}
    prompt = dict(input_ids=input_ids[first, :P], attention_mask=attention_mask[first, :P],
                  position_ids=position_ids[first, :P])
    if hidden:
        head = model(**prompt, **ckw).last_hidden_state[:, -1:]  # (B, 1, H): state before the first completion token
    else:
        head = model(**prompt, logits_to_keep=1, **ckw).logits  # (B, 1, V): predicts the first completion token
    if run_of_row is None:
        cache.batch_repeat_interleave(G)  # (N, ...) per layer
        out = head.repeat_interleave(G, dim=0)  # (N, 1, D)
    else:
        cache.batch_select_indices(run_of_row)  # (N, ...) per layer
        out = head[run_of_row]  # (N, 1, D)
    if T > 1:  # completion tokens 1..T-1 predict tokens 2..T
        res = model(input_ids=input_ids[:, P : L - 1], attention_mask=attention_mask[:, : L - 1],
                    position_ids=position_ids[:, P : L - 1], **ckw)
        tail = res.last_hidden_state if hidden else res.logits  # (N, T - 1, D)
        out = torch.cat([out, tail], dim=1)  # (N, T, D)
    return out


def prompt_runs(input_ids: torch.Tensor, attention_mask: torch.Tensor, P: int,
                group_size: int = 0) -> tuple[torch.Tensor, torch.Tensor | None]:
    """How `shared_prefix_outputs` lays out rows whose first P columns are the prompt: (first
    row of each prompt computation (B,), the computation each row takes its cache from (N,),
    or None for whole groups of `group_size`, which repeat each prompt's cache G times)."""
    N = len(input_ids)
    G = group_size
    if G > 1 and N % G == 0:
        p_ids = input_ids[:, :P].reshape(N // G, G, P)  # (B, G, P)
        p_mask = attention_mask[:, :P].reshape(N // G, G, P)  # (B, G, P)
        if bool((p_ids == p_ids[:, :1]).all()) and bool((p_mask == p_mask[:, :1]).all()):
            return torch.arange(0, N, G, device=input_ids.device), None  # (B,)
    same = (input_ids[1:, :P] == input_ids[:-1, :P]).all(1) & (attention_mask[1:, :P] == attention_mask[:-1, :P]).all(1)
    starts = torch.cat([torch.ones(1, dtype=torch.bool, device=input_ids.device), ~same])  # (N,)
    return starts.nonzero().squeeze(1), starts.cumsum(0) - 1  # (B,) first row of each run, (N,) its run


def forward_tokens(input_ids: torch.Tensor, attention_mask: torch.Tensor, n_completion: int, shared: bool,
                   group_size: int = 0) -> int:
    """Tokens a log-prob forward over these rows computes: every row's, or with `shared` what
    `shared_prefix_outputs` computes (each prompt once per `prompt_runs` computation)."""
    if not shared or len(input_ids) < 2:
        return int(attention_mask.sum())
    P = input_ids.shape[1] - n_completion
    first, _ = prompt_runs(input_ids, attention_mask, P, group_size)
    return int(attention_mask[:, P:].sum()) + int(attention_mask[first, :P].sum())


def _params(model) -> set[str]:
    import inspect

    return set(inspect.signature(model.forward).parameters)


def count_correct(model, tokenizer, task: Task, problems: list[Problem], max_new_tokens: int,
                  batch_size: int = 500) -> int:
    """Problems answered correctly, greedy, with the task's own grader."""
    _, grades = greedy_predictions(model, tokenizer, task, problems, max_new_tokens, batch_size)
    return sum(g.correct for g in grades)


@torch.no_grad()
def greedy_predictions(model, tokenizer, task: Task, problems: list[Problem], max_new_tokens: int,
                       batch_size: int = 500) -> tuple[list[dict], list]:
    """Greedy completions of `problems` and their grades (the task's own grader): (predictions
    as `grpo-research eval` writes them, {task_id, completion, finished}; one grade each)."""
    was_training = model.training
    model.eval()
    predictions: list[dict] = []
    grades: list = []
    for i in range(0, len(problems), batch_size):
        chunk = problems[i : i + batch_size]
        batch = generate(model, tokenizer, chunk, 1, max_new_tokens=max_new_tokens, greedy=True)
        grades += task.grade_many(chunk, batch.completions, batch.finished)
        predictions += [{"task_id": p.id, "completion": c, "finished": f}
                        for p, c, f in zip(batch.problems, batch.completions, batch.finished)]
    model.train(was_training)
    return predictions, grades


def evaluate_accuracy(model, tokenizer, task: Task, problems: list[Problem], max_new_tokens: int,
                      batch_size: int = 500) -> float:
    """Greedy held-out accuracy with the task's own grader."""
    return count_correct(model, tokenizer, task, problems, max_new_tokens, batch_size) / max(len(problems), 1)


def make_optimizer(params, lr: float, weight_decay: float, betas: tuple[float, float]) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=betas)


def make_scheduler(opt, warmup_steps: int, total_steps: int, schedule: str, min_lr_ratio: float):
    """Linear warm-up, then constant or cosine decay to min_lr_ratio."""

    def factor(step: int) -> float:
        if warmup_steps and step < warmup_steps:
            return (step + 1) / warmup_steps
        if schedule == "constant":
            return 1.0
        progress = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)


def peak_mem_mb() -> float:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        return torch.cuda.max_memory_allocated() / 2**20
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


# ---------------------------------------------------------------- checkpoints
def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


CHECKPOINTS = ("checkpoint", "checkpoint.prev", "checkpoint.old")  # newest first; .old: older versions' name


class CheckpointDamaged(UsageError):
    """No checkpoint of a run dir can be read (exit 2, with how to start over)."""


def save_checkpoint(run_dir: Path, state: dict[str, Any]) -> None:
    """Write `checkpoint/` atomically: into a temp dir, fsync, then swap by rename. The previous
    checkpoint is kept as `checkpoint.prev` until this one is complete (`load_checkpoint` falls
    back to it when the newest one is damaged)."""
    run_dir = Path(run_dir)
    tmp = run_dir / "checkpoint.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    with open(tmp / "state.pt", "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())
    final, prev = run_dir / "checkpoint", run_dir / "checkpoint.prev"
    if final.exists():
        if prev.exists():
            shutil.rmtree(prev)
        os.replace(final, prev)
    os.replace(tmp, final)
    for legacy in (run_dir / "checkpoint.old",):
        if legacy.exists():
            shutil.rmtree(legacy)
    fsync_path(run_dir)


def load_checkpoint(run_dir: Path, warn=None) -> dict[str, Any] | None:
    """The newest readable checkpoint, or None when there is none. A damaged one (cut short,
    overwritten) is named through `warn` (default: a line on stderr) and the previous one used;
    when every checkpoint present is damaged, `CheckpointDamaged` says which files and how to
    start over."""
    run_dir = Path(run_dir)
    warn = warn or (lambda msg: print(msg, file=sys.stderr, flush=True))
    damaged = []
    for name in CHECKPOINTS:
        path = run_dir / name / "state.pt"
        if not path.exists():
            continue
        try:
            state = torch.load(path, weights_only=False)
            if not isinstance(state, dict) or "step" not in state:
                raise ValueError("not a training checkpoint")
        except Exception as e:  # noqa: BLE001 (torch.load raises many kinds on a damaged file)
            damaged.append(f"{path} ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else 'unreadable'})")
            continue
        for d in damaged:
            warn(f"warning: checkpoint {d} is damaged; resuming from {path} (step {state['step']})")
        return state
    if damaged:
        raise CheckpointDamaged(
            f"checkpoint {damaged[0]} is damaged and no earlier checkpoint of {run_dir} is usable; "
            f"to start the run over, delete {run_dir}/checkpoint* and {run_dir}/metrics.jsonl")
    return None


def restore_metrics(path: Path, state: dict[str, Any] | None, warn=None) -> None:
    """Make metrics.jsonl hold exactly the rows the resumed checkpoint covers: rows written after
    it are cut off; a file cut or damaged inside that part is rewritten from the copy the
    checkpoint holds (`metrics_text`; for checkpoints without it, cut back to `metrics_bytes`
    and to the last complete line). No checkpoint: an empty file."""
    path = Path(path)
    warn = warn or (lambda msg: print(msg, file=sys.stderr, flush=True))
    current = path.read_bytes() if path.exists() else b""
    if state is None:
        if current:
            truncate_file(path, 0)
        return
    want = state.get("metrics_text")
    if want is None:  # a checkpoint of an earlier version: its length only
        keep = current[: state["metrics_bytes"]]
        keep = keep[: keep.rfind(b"\n") + 1]  # drop a partial last line
        if keep != current:
            write_bytes_atomic(path, keep)
        return
    if current.startswith(want):
        truncate_file(path, len(want))
        return
    rows = want.count(b"\n")
    warn(f"warning: {path} does not match its checkpoint (cut or damaged); restored the "
         f"{rows} rows the checkpoint at step {state['step']} covers")
    write_bytes_atomic(path, want)


def truncate_file(path: Path, size: int) -> None:
    """Cut a log file back to `size` bytes (its length at the checkpoint being resumed)."""
    if path.exists() and path.stat().st_size > size:
        with open(path, "r+b") as fh:
            fh.truncate(size)


def save_model_atomic(model, tokenizer, out: Path) -> None:
    """save_pretrained into a temp dir beside `out`, then swap it in by rename."""
    tmp = temp_dir_beside(out)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    replace_dir(tmp, out)


EXIT_PREEMPTED = 75  # EX_TEMPFAIL: checkpoint written, rerun the same command to resume


class Preempted(Exception):
    """Raised after SIGTERM once the checkpoint is written."""

    def __init__(self, step: int):
        super().__init__(f"preempted at step {step}")
        self.step = step


class StopFlag:
    """Catches SIGTERM and SIGINT while training: the loop finishes its step, checkpoints and
    stops (exit 75). A second SIGINT (Ctrl-C twice) stops at once with KeyboardInterrupt.
    `raised`: a signal arrived already (before the loop, e.g. while loading)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self, raised: bool = False):
        self.raised = raised
        self._previous: dict[int, Any] = {}
        for sig in self.SIGNALS:
            try:
                self._previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread (e.g. inside some launchers): no handler
                pass

    def _handle(self, signum, frame) -> None:
        if signum == signal.SIGINT and self.raised:
            raise KeyboardInterrupt
        if signum == signal.SIGINT:
            print("\ninterrupted: finishing the step and writing a checkpoint (Ctrl-C again to stop at once)",
                  file=sys.stderr, flush=True)
        self.raised = True

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)


def enable_activation_checkpointing(model) -> None:
    """Recompute activations in backward (transformers >= 5.x names it activation checkpointing;
    earlier 5.x releases only have the gradient_checkpointing_* names)."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def activation_checkpointing(model) -> bool:
    """Whether `enable_activation_checkpointing` is on for `model`."""
    if hasattr(type(model), "is_activation_checkpointing"):
        return bool(model.is_activation_checkpointing)
    return bool(model.is_gradient_checkpointing)


def resolve_device(name: str) -> torch.device:
    """Config `model.device`: auto is cuda when a CUDA device is visible, else cpu."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("model.device=cuda but no CUDA device is visible; use model.device=auto or cpu")
    return torch.device(name)


def since_process_start() -> float:
    """Seconds since this process was created (the kernel's start time: interpreter start and
    imports included)."""
    import psutil

    return time.time() - psutil.Process().create_time()
