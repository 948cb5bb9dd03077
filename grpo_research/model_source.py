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
    with downloads_off():
        yield


_REACHABLE: dict[str, str | None] = {}  # endpoint -> why it cannot be reached (None: it can), once per process


def hub_unreachable(timeout: float = 3.0) -> str | None:
    """Why the Hugging Face endpoint (huggingface_hub's ENDPOINT, HF_ENDPOINT) cannot be reached,
    or None when a TCP connection to it opens within `timeout` seconds (asked once per process).
    Behind a proxy (HTTPS_PROXY / https_proxy set) the connection is the proxy's business: None."""
    import socket
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    endpoint = constants.ENDPOINT
    if endpoint not in _REACHABLE:
        if os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy"):
            _REACHABLE[endpoint] = None
        else:
            url = urlsplit(endpoint)
            port = url.port or (443 if url.scheme == "https" else 80)
            try:
                socket.create_connection((url.hostname, port), timeout=timeout).close()
                _REACHABLE[endpoint] = None
            except OSError as e:
                _REACHABLE[endpoint] = f"{endpoint}: {type(e).__name__}: {' '.join(str(e).split())[:80]}"
    return _REACHABLE[endpoint]


def in_hub_cache(name: str) -> bool:
    """Whether hub model `name` has a config.json in the local hub cache."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(name, "config.json"), str)


@contextmanager
def downloads_off():
    """`huggingface_hub`, `transformers` and `datasets` refuse the network inside (the local
    cache only), whenever they were imported."""
    import sys

    import huggingface_hub.constants  # noqa: F401  (the flag the libraries read)

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
        if not in_hub_cache(text):
            raise ConfigError(f"model.name_or_path={text}: not a local directory, and not in the local hub cache "
                              "while downloads are off (HF_HUB_OFFLINE)")



def hub_source_or_refuse(path: str | Path) -> bool:
    """Before loading hub model `path` with downloads on: whether to load it from the local
    cache alone (the hub cannot be reached and it is cached: no download retries). A hub name
    neither cached nor reachable is refused in one line within seconds (`hub_unreachable`),
    instead of ~50 s of download retries ending in the same refusal."""
    text = str(path)
    if Path(text).exists() or hub_offline():
        return False
    why = hub_unreachable()
    if why is None:
        return False
    if not in_hub_cache(text):
        raise ConfigError(f"model.name_or_path={text}: not a local directory, not in the local hub cache, and "
                          f"the hub cannot be reached ({why}); give a local checkpoint or a packaged model")
    return True


def hub_load(path: str | Path):
    """The context to load `path` in with transformers: the local cache alone when
    `hub_source_or_refuse` says so (a cached hub name, the hub unreachable), else as usual."""
    from contextlib import nullcontext

    return downloads_off() if hub_source_or_refuse(path) else nullcontext()
