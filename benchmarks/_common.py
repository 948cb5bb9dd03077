"""Helpers shared by the benchmark scripts: the model under test, thread settings, RSS."""
from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def set_threads(n: int) -> None:
    """Same thread count in every process: env for OpenMP/MKL (set before torch loads in
    workers, see `worker_env`) and torch's intra-op pool."""
    import torch

    if n > 0:
        torch.set_num_threads(n)


def worker_env(threads: int) -> dict[str, str]:
    env = dict(os.environ)
    if threads > 0:
        for k in THREAD_ENV:
            env[k] = str(threads)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["WANDB_MODE"] = "disabled"
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    env["TRANSFORMERS_VERBOSITY"] = "error"
    env["PYTHONWARNINGS"] = "ignore"
    return env


def default_model_dir(fresh: bool = False) -> Path:
    """The default cached base model (built once by `ensure_base_model`), or with `fresh` a
    freshly initialised tiny char Llama of the default size saved with save_pretrained."""
    if fresh:
        from grpo_research.models import build_char_tokenizer, build_tiny_model

        d = Path(tempfile.mkdtemp(prefix="bench-tiny-"))
        tok = build_char_tokenizer()
        model = build_tiny_model(len(tok), pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                                 eos_token_id=tok.eos_token_id)
        model.save_pretrained(d)
        tok.save_pretrained(d)
        return d
    from grpo_research.config import load_config
    from grpo_research.trainers.sft import ensure_base_model

    return Path(ensure_base_model(load_config(None, []), progress=False))


def peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


def machine_line() -> str:
    import platform

    import torch
    import transformers

    cpu = "?"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "?"
    return (f"{os.cpu_count()} cores ({cpu}), python {platform.python_version()}, torch {torch.__version__}, "
            f"transformers {transformers.__version__}, load avg {load}")


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True).stdout
        return head + ("+dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def median(xs):
    return statistics.median(xs) if xs else float("nan")
