"""benchmarks/lean_llama.py computes what the trainer computes, so its timings compare like with
like: its tensor-op forward gives the plain forward's log-probs (and gradients), its decode loop
draws the trainer's tokens, and the sampling pass's log-probs equal the update forward's."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import lean_llama as LL  # noqa: E402

from grpo_research.models import build_char_tokenizer  # noqa: E402
from grpo_research.rollout import completion_mask_from, encode_prompts, sample_completions  # noqa: E402
from grpo_research.trainers.common import token_logprobs  # noqa: E402

KW = dict(max_new_tokens=12, temperature=1.0, top_p=1.0, greedy=False)


def model_and_prompts(kv_heads: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = build_char_tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=kv_heads, intermediate_size=64, max_position_embeddings=64,
                      pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    model = LlamaForCausalLM(cfg).eval()
    # prompts of different lengths: left padding inside the batch
    ids, mask = encode_prompts(tok, ["12+7=", "3*45-1=", "9="], torch.device("cpu"))
    return model, tok, ids, mask


def rollout(model, tok, ids, mask, seed: int):
    torch.manual_seed(seed)
    with torch.inference_mode():
        toks = sample_completions(model, ids, mask, LL.G, eos_token_id=tok.eos_token_id,
                                  pad_token_id=tok.pad_token_id, **KW)
    toks = toks.clone()
    cm, _ = completion_mask_from(toks, tok.eos_token_id)
    full_ids = torch.cat([ids.repeat_interleave(LL.G, 0), torch.where(cm.bool(), toks, tok.pad_token_id)], 1)
    full_mask = torch.cat([mask.repeat_interleave(LL.G, 0), cm], 1)
    return toks, full_ids, full_mask, cm


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_lean_logprobs_equal_the_plain_forward_with_gradients(kv_heads):
    model, tok, ids, mask = model_and_prompts(kv_heads)
    _, full_ids, full_mask, cm = rollout(model, tok, ids, mask, seed=1)
    T, m = cm.shape[1], cm.bool()
    grads = []
    for fn in (token_logprobs, LL.lean_logprobs):
        model.zero_grad()
        logp, entropy = fn(model, full_ids, full_mask, T, 0.7, True)
        (logp * cm).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        if fn is token_logprobs:
            ref_logp, ref_entropy = logp.detach(), entropy
    assert (logp.detach() - ref_logp)[m].abs().max() < 1e-5
    assert (entropy - ref_entropy)[m].abs().max() < 1e-5
    for a, b in zip(*grads):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_lean_decoder_draws_the_trainer_s_tokens(kv_heads):
    model, tok, ids, mask = model_and_prompts(kv_heads)
    for seed in range(3):
        want, *_ = rollout(model, tok, ids, mask, seed)
        torch.manual_seed(seed)
        with torch.inference_mode():
            got = LL.decode(LL.LeanDecoder(model, KW["max_new_tokens"]), ids, mask, LL.G,
                            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **KW)
        assert torch.equal(got, want)


def test_the_sampling_pass_log_probs_are_the_update_forward_s():
    model, tok, ids, mask = model_and_prompts(4)
    want_toks, full_ids, full_mask, cm = rollout(model, tok, ids, mask, seed=2)
    plain, _ = token_logprobs(model, full_ids, full_mask, cm.shape[1])
    torch.manual_seed(2)
    toks, logp = LL.decode(LL.HFDecoder(model, KW["max_new_tokens"]), ids, mask, LL.G, with_logp=True,
                           eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, **KW)
    assert torch.equal(toks, want_toks)
    assert logp.requires_grad
    assert ((logp.detach() - plain.detach()) * cm).abs().max() < 1e-5
