"""Where a model comes from, checked without loading it (torch-free: the pipeline checks the
models of its studies with it while planning, `load_causal_lm` before loading)."""
from __future__ import annotations

import os
from pathlib import Path

from grpo_research.errors import ConfigError


def hub_offline() -> bool:
    """Whether Hugging Face downloads are off (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set true)."""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


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
