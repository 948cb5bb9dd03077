"""Where a model comes from, checked without loading it (torch-free: the pipeline checks the
models of its studies with it while planning, `load_causal_lm` before loading)."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

from grpo_research.errors import ConfigError

_TRUE = ("1", "true", "yes", "on")


def hub_offline() -> bool:
    """Whether Hugging Face downloads are off (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set true)."""
    return any(os.environ.get(v, "").strip().lower() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def datasets_offline() -> bool:
    """Whether dataset downloads are off: downloads off (`hub_offline`) or HF_DATASETS_OFFLINE true."""
    return hub_offline() or os.environ.get("HF_DATASETS_OFFLINE", "").strip().lower() in _TRUE


@contextmanager
def downloads_off_if_asked():
    """While the environment asks for offline datasets now (`datasets_offline`), make
    `huggingface_hub` and `datasets` refuse the network even if they were imported before the
    variable was set: both read it once at import, and a process that imported them online
    would otherwise spend ~25-50 s in download retries before failing."""
    if not datasets_offline():
        yield
        return
    import sys

    mods = [m for m in (sys.modules.get("huggingface_hub.constants"), sys.modules.get("datasets.config")) if m]
    saved = [m.HF_HUB_OFFLINE for m in mods]
    for m in mods:
        m.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        for m, v in zip(mods, saved):
            m.HF_HUB_OFFLINE = v


def check_model_source(path: str | Path, cached_offline: bool = False) -> None:
    """A local path must exist (and, as a directory, hold a checkpoint's config.json); a hub name
    looks like `name` or `org/name` (ConfigError otherwise), so a typo in a path is one line at
    once instead of minutes of hub retries. With `cached_offline`, a hub name must also be in
    the local cache when downloads are off."""
    text = str(path)
    if Path(text).exists():
        if Path(text).is_dir() and not (Path(text) / "config.json").is_file():
            raise ConfigError(f"model.name_or_path={text}: a directory without config.json (not a checkpoint)")
        return
    local = text.startswith(("/", ".", "~")) or text.count("/") > 1 or "\\" in text
    if local:
        raise ConfigError(f"model.name_or_path={text}: no such directory")
    if not all(part and all(c.isalnum() or c in "-_." for c in part) for part in text.split("/")):
        raise ConfigError(f"model.name_or_path={text}: neither a local directory nor a hub name (org/name)")
    if cached_offline and hub_offline():
        from huggingface_hub import try_to_load_from_cache

        if not isinstance(try_to_load_from_cache(text, "config.json"), str):
            raise ConfigError(f"model.name_or_path={text}: not a local directory, and not in the local hub cache "
                              "while downloads are off (HF_HUB_OFFLINE)")
