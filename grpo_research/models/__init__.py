"""Models: the tiny offline character-level Llama and loading of any causal LM.

The tiny model is an ordinary Hugging Face checkpoint: a `LlamaConfig` model and a
character-level tokenizer built with the `tokenizers` library, both written with
`save_pretrained`, so `AutoModelForCausalLM` / `AutoTokenizer.from_pretrained(dir)` load it
like any hub model. A Llama config (not Qwen2) is used on purpose: with a Qwen2 config,
transformers 5 swaps the saved pre-tokenizer and silently drops spaces.
"""
from __future__ import annotations

import string
from pathlib import Path

import torch
from safetensors import SafetensorError
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from grpo_research.errors import ConfigError
from grpo_research.model_source import check_model_source, hub_load

SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHARS = [c for c in string.printable if c not in "\x0b\x0c\r"]  # 97 printable ASCII incl. space, \t, \n


def build_char_tokenizer(chars: list[str] = CHARS) -> PreTrainedTokenizerFast:
    """One token per character; special tokens <pad> <bos> <eos> <unk>."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + list(dict.fromkeys(chars)))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        unk_token="<unk>",
        padding_side="left",
        model_max_length=1 << 16,
    )


def build_tiny_model(
    vocab_size: int,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    intermediate_size: int = 512,
    max_position_embeddings: int = 256,
    pad_token_id: int = 0,
    bos_token_id: int = 1,
    eos_token_id: int = 2,
    seed: int = 0,
) -> LlamaForCausalLM:
    """A randomly initialised Llama (about 1 M parameters with the defaults)."""
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=pad_token_id,
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def load_causal_lm(path: str | Path, dtype: str = "float32", attn_implementation: str | None = None):
    """Load a causal LM and its tokenizer from a local directory or a hub name.
    `attn_implementation` None keeps transformers' default.
    """
    check_model_source(path)
    try:
        with hub_load(path):  # a cached hub name while the hub cannot be reached: the cache alone
            tokenizer = AutoTokenizer.from_pretrained(str(path))
            kwargs = {"attn_implementation": attn_implementation} if attn_implementation else {}
            model = AutoModelForCausalLM.from_pretrained(str(path), dtype=DTYPES[dtype], **kwargs)
    except (OSError, ValueError, SafetensorError) as e:  # not a checkpoint, damaged weights, or offline
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"model.name_or_path={path}: cannot load a model from it ({first[:200]})") from None
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
