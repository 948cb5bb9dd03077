"""Where built and converted models are cached, and building one at a time: the cache root
(`model.cache_dir`, or $GRPO_RESEARCH_CACHE under the default), `build_once` (a directory built
by one process while the others wait on its lock), and a packaged real model's converted
checkpoint (grpo_research/models/real.py). Below both the trainers and evaluation."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from grpo_research.locks import DirLock, Locked
from grpo_research.models.real import convert_packaged, gguf_parts

BASE_BUILD_WAIT_S = 6 * 3600.0  # how long a run waits for another process's base-model build


def cache_root(cfg) -> Path:
    default = "~/.cache/grpo-research"
    root = os.environ.get("GRPO_RESEARCH_CACHE") if cfg.model.cache_dir == default else None
    return Path(root or cfg.model.cache_dir).expanduser()


def packaged_checkpoint(cfg) -> Path:
    """The cached HF checkpoint of the packaged model `model.name_or_path`, converted from its
    GGUF on first use (one process converts; a missing package is named with its install command)."""
    name = cfg.model.name_or_path
    path = cache_root(cfg) / name
    if (path / "config.json").exists():
        return path
    parts = gguf_parts(name)  # names what to install when missing
    return build_once(path, "config.json", lambda: convert_packaged(name, parts, path))


def build_once(path: Path, marker: str, build) -> Path:
    """`path`, built by `build()` unless `path/marker` exists; one builder at a time, the others
    wait for it and then load what it built."""
    if (path / marker).exists():
        return path
    lock = DirLock(path.with_name(path.name + ".lock"), f"the model build {path}")
    try:
        lock.acquire()
    except Locked as e:
        print(f"waiting: {e}", file=sys.stderr, flush=True)
        lock.wait_s = BASE_BUILD_WAIT_S
        lock.acquire()
    try:
        if not (path / marker).exists():
            build()
    finally:
        lock.release()
    return path
