"""The base-model stage: supervised warm-up of the tiny model on the task's reference
solutions, to partial competence (by default the first evaluation at >= 20 % held-out
accuracy), so that RL has room to improve.

Loss on the solution and EOS only (the prompt is context); AdamW with betas (0.9, 0.98) and
gradient clipping at 1.0 (with the default betas (0.9, 0.999) and no clipping, the default
model had not left 1 % after 800 steps; with these it crosses 12 % -> 29 % -> 61 % between
steps 600 and 700). Deterministic for a seed. The
result is an ordinary HF checkpoint directory with `base_info.json` (accuracy, steps, time).
"""
from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from grpo_research.config import RunConfig
from grpo_research.errors import UsageError
from grpo_research.files import replace_dir, temp_dir_beside
from grpo_research.models import build_char_tokenizer, build_tiny_model
from grpo_research.models.cache import build_once, cache_root, packaged_checkpoint  # noqa: F401 (cache_root: cli.train)
from grpo_research.models.real import PACKAGED_MODELS
from grpo_research.provenance import environment
from grpo_research.tasks import build_task
from grpo_research.tasks.base import Problem
from grpo_research.trainers import common
from grpo_research.trainers.update import Loss, OptimGroup, update


def sft_batch(tokenizer, problems: list[Problem]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask, labels), right-padded; labels -100 except on solution + EOS."""
    rows, labels = [], []
    for p in problems:
        prompt = tokenizer(p.prompt, add_special_tokens=False)["input_ids"]
        answer = tokenizer(p.solution, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(prompt + answer)
        labels.append([-100] * len(prompt) + answer)
    L = max(map(len, rows))
    pad = tokenizer.pad_token_id
    ids = torch.tensor([r + [pad] * (L - len(r)) for r in rows])  # (B, L)
    mask = torch.tensor([[1] * len(r) + [0] * (L - len(r)) for r in rows])  # (B, L)
    lab = torch.tensor([lb + [-100] * (L - len(lb)) for lb in labels])  # (B, L)
    return ids, mask, lab


POSING_KEYS = ("prompt_format", "system_prompt", "few_shot")  # TaskConfig keys of tasks/prompting.py
EVAL_ONLY_OPTIONS = ("ood_level",)  # task.options that only add an evaluation split


def base_model_key(cfg: RunConfig) -> str:
    """Cache key: everything that determines the base model."""
    m = cfg.model
    spec = {"model": {"hidden": m.hidden_size, "layers": m.num_layers, "heads": m.num_heads,
                      "mlp": m.intermediate_size, "ctx": m.max_position_embeddings},
            "base": cfg.base.__dict__, "max_new_tokens": cfg.rollout.max_new_tokens,
            # how RL poses prompts does not touch the build (it trains on the task's raw prompts);
            # left out, so adding those keys kept every cached base model
            "task": {k: ({o: x for o, x in v.items() if o not in EVAL_ONLY_OPTIONS} if k == "options" else v)
                     for k, v in cfg.task.__dict__.items() if k not in POSING_KEYS},
            "version": 1}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def build_dir(out_dir: str | Path) -> Path:
    """Where an unfinished build of `out_dir` keeps its checkpoint (beside it, removed when done)."""
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + ".build")


def _save_build_state(work: Path, state: dict[str, Any]) -> None:
    work.mkdir(parents=True, exist_ok=True)
    common.save_checkpoint(work, state)


def train_base_model(cfg: RunConfig, out_dir: str | Path, progress: bool = True) -> dict[str, Any]:
    """Build the tiny model from scratch and warm it up; write it to `out_dir` atomically.

    The build checkpoints at every check (`base.eval_every` steps) into `<out_dir>.build/` and a
    rerun resumes from there, ending with the same model as an uninterrupted build."""
    out_dir = Path(out_dir)
    work = build_dir(out_dir)
    b, m = cfg.base, cfg.model
    common.seed_everything(b.seed)
    task = build_task(cfg.task)
    tokenizer = build_char_tokenizer()
    model = build_tiny_model(len(tokenizer), m.hidden_size, m.num_layers, m.num_heads, m.intermediate_size,
                             m.max_position_embeddings, tokenizer.pad_token_id, tokenizer.bos_token_id,
                             tokenizer.eos_token_id, seed=b.seed)
    opt = torch.optim.AdamW(model.parameters(), lr=b.lr, betas=(0.9, 0.98))
    groups = {"model": OptimGroup(list(model.parameters()), opt)}
    rng = random.Random(b.seed)
    heldout = task.heldout_problems(b.eval_size)
    t0 = time.perf_counter()
    history = []
    step = 0
    acc = 0.0
    earlier_s = 0.0  # build seconds before a resume
    key = base_model_key(cfg)
    state = common.load_checkpoint(work) if work.exists() else None
    if state is not None and state.get("key", key) != key:
        raise UsageError(f"{work} holds an unfinished build of a different base-model config; rerun with the "
                         "overrides it was started with, or delete it to start over")
    if state is not None:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        rng.setstate(state["data_rng"])
        common.set_rng_state(state["rng"])
        step, acc, history, earlier_s = state["step"], state["acc"], state["history"], state["seconds"]
        print(f"base model: resuming the build from step {step} ({work})", flush=True)
    bar = tqdm(total=b.max_steps, initial=step, desc="base model (supervised warm-up)", disable=not progress,
               dynamic_ncols=True)
    while step < b.max_steps:
        ids, mask, labels = sft_batch(tokenizer, task.train_problems(rng, b.batch_size))
        loss = update(lambda _: Loss(model(input_ids=ids, attention_mask=mask, labels=labels).loss), [None], [1.0],
                      groups, max_norm=1.0).loss
        step += 1
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", acc=f"{acc:.3f}", refresh=False)
        if step % b.eval_every == 0 or step == b.max_steps:
            # a cheap check on the first `check_size` held-out problems decides when to stop
            acc = common.evaluate_accuracy(model, tokenizer, task, heldout[: b.check_size], cfg.rollout.max_new_tokens)
            history.append({"step": step, "loss": loss.item(), "check_accuracy": acc})
            if not progress:  # logs (the pipeline's build_base_model) get a line per check instead of a bar
                print(f"base model: step {step}/{b.max_steps}  loss {loss.item():.3f}  check accuracy {acc:.3f}  "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
            if acc >= b.stop_accuracy:
                break
            _save_build_state(work, {"key": key, "step": step, "acc": acc, "history": history, "model": model.state_dict(),
                                     "optimizer": opt.state_dict(), "data_rng": rng.getstate(),
                                     "rng": common.rng_state(), "seconds": earlier_s + time.perf_counter() - t0})
    bar.close()
    acc = common.evaluate_accuracy(model, tokenizer, task, heldout, cfg.rollout.max_new_tokens)
    info = {"steps": step, "heldout_accuracy": acc, "seconds": earlier_s + time.perf_counter() - t0, "history": history,
            "parameters": sum(p.numel() for p in model.parameters()), "task": cfg.task.name, "base_seed": b.seed,
            "environment": environment(next(model.parameters()).device)}  # a base model differs across CPUs (grpo_research.provenance)
    tmp = temp_dir_beside(out_dir)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "base_info.json").write_text(json.dumps(info, indent=2) + "\n")
    replace_dir(tmp, out_dir)
    if work.exists():
        shutil.rmtree(work)
    return info


def ensure_base_model(cfg: RunConfig, progress: bool = True) -> Path:
    """The policy's starting checkpoint: a hub name / local path as given, a packaged real model
    (grpo_research/models/real.py, converted from its GGUF once and cached), or the cached tiny
    base model (built now if it is not cached yet)."""
    name = cfg.model.name_or_path
    if name in PACKAGED_MODELS:
        return packaged_checkpoint(cfg)
    if name != "tiny":
        return Path(name) if Path(name).exists() else name
    path = cache_root(cfg) / f"tiny-{cfg.task.name}-{base_model_key(cfg)}"
    return build_once(path, "base_info.json", lambda: train_base_model(cfg, path, progress=progress))


