"""Run ids of a study's runs: naming (`run_id_of`, the variant's `short_names` and `id_value`)
and parsing (`variant_of`, `seed_of`, `base_of`, `kernels_of`), and `base_suffix`, what a base
seed and kernel family add to the name of a base model's dir.

A run id (grpo_research.studies names every run of a study so) names the method entry (its
`name`, else the method), every swept or `set` value with a short key name, the base (other than
0) and the seed: `ppo-lam0.95-seed1`, `grpo-G8-seed2`, `grpo-beta0.04-base3-seed1`. The variant of a run is its id without `[-base<b>]-seed<N>`;
analysis groups runs by variant and pairs them by (base, seed).
"""
from __future__ import annotations

import re
from typing import Any

from grpo_research.provenance import KERNEL_FAMILIES, NATIVE

# short names of swept keys in run ids; any other key uses its last component
SHORT_NAMES = {
    "algo.group_size": "G",
    "algo.beta": "beta",
    "algo.clip_eps": "eps",
    "algo.clip_eps_high": "epshigh",
    "rollout.temperature": "temp",
    "rollout.prompts_per_step": "P",
    "rollout.top_p": "topp",
    "ppo.lam": "lam",
    "ppo.gamma": "gamma",
    "optim.lr": "lr",
    "critic.lr": "vlr",
}
# group 1: the base (absent: 0), 2: the kernel family (absent: native), 3: the seed
SEED_SUFFIX = re.compile(r"(?:-base(\d+))?(?:-k(" + "|".join(re.escape(k) for k in KERNEL_FAMILIES if k != NATIVE)
                         + r"))?-seed(-?\d+)$")


def id_value(value: Any) -> str:
    """A value as it appears in a run id: short, readable, file-name safe."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, float):
        text = repr(value)
    elif isinstance(value, (list, tuple)):
        text = "_".join(id_value(v) for v in value)
    elif isinstance(value, dict):
        text = "_".join(f"{k}{id_value(v)}" for k, v in value.items())
    else:
        text = str(value)
    return re.sub(r"[^A-Za-z0-9._+-]", "", text.replace("/", "_").replace(" ", ""))


def short_names(keys: list[str]) -> dict[str, str]:
    """Key -> short name for run ids; colliding short names fall back to the full key."""
    names = {k: SHORT_NAMES.get(k, k.rsplit(".", 1)[-1]) for k in keys}
    counts: dict[str, int] = {}
    for n in names.values():
        counts[n] = counts.get(n, 0) + 1
    return {k: (n if counts[n] == 1 else k.replace(".", "_")) for k, n in names.items()}


def variant_of(run_id: str) -> str:
    """`ppo-lam0.95-seed1` -> `ppo-lam0.95`; `grpo-base2-seed1` -> `grpo`."""
    return SEED_SUFFIX.sub("", run_id)


def seed_of(run_id: str) -> int | None:
    m = SEED_SUFFIX.search(run_id)
    return int(m.group(3)) if m else None


def kernels_of(run_id: str) -> str:
    """The kernel family of a run id (`native` when the id names none: `grpo-seed1`)."""
    m = SEED_SUFFIX.search(run_id)
    return m.group(2) if m and m.group(2) is not None else NATIVE


def base_of(run_id: str) -> int:
    """The base seed of a run id (0 when the id names none: `grpo-seed1`)."""
    m = SEED_SUFFIX.search(run_id)
    return int(m.group(1)) if m and m.group(1) is not None else 0


def run_id_of(variant: str, base: int, seed: int, kernels: str = NATIVE) -> str:
    """`grpo`, 0, 1 -> `grpo-seed1` (base 0 keeps the ids of studies before base seeds);
    `grpo`, 2, 1 -> `grpo-base2-seed1`; `grpo`, 2, 1, `avx2` -> `grpo-base2-kavx2-seed1`."""
    return f"{variant}{base_suffix(base, kernels)}-seed{seed}"


def base_suffix(base: int, kernels: str = NATIVE) -> str:
    """What base b on kernel family `kernels` adds to the name of its base model dir (and
    base-model evaluation dir): "" for base 0 on native kernels, `-base2`, `-kavx2`, `-base2-kavx2`."""
    return ("" if base == 0 else f"-base{base}") + ("" if kernels == NATIVE else f"-k{kernels}")
