"""Rollout: sample G completions per prompt behind one interface.

Backends (config `rollout.backend`, built by `rollout_backend`): `hf` (`rollout/hf.py`, CPU or
GPU, any Hugging Face causal LM) and `vllm` (`rollout/vllm_backend.py`, GPU extra). Both return
a `RolloutBatch`.

Modules: `batch` (the batch dataclasses, prompt encoding, batch assembly and decoding,
`select_and_concat`), `sampling` (logit warping, the torch and counter samplers), `hf` (the HF
backend: `generate`, the lean decode loop, the `model.generate` fallback), `backends` (the
factory `rollout_backend`), `vllm_backend`. This package re-exports their public names.

The HF backend decodes with the model's own forward and a `DynamicCache` (KV cache, batched,
left padding), in a loop kept lean for RL, where every prompt is sampled G times:
- the prompt is prefilled once per distinct prompt and its KV cache repeated G times (the G
  copies of a prompt have the same prefill; HF `generate` computes it G times);
- rows that ended (EOS) are dropped from the decode batch once a quarter of it has ended,
  instead of decoding padding until the longest completion ends;
- the sampler is HF's for these settings (logits in float32, / temperature, top-p as
  `TopPLogitsWarper`, softmax, `torch.multinomial` over all N rows every step), so a seed draws
  what HF `generate` draws up to float rounding, and no `generation_config.json` default of the
  model (repetition penalty, top-k, ...) leaks in: the sampled distribution is exactly
  softmax(top_p(logits / temperature)), the one the trainer's log-probs assume;
- completions are decoded with one `batch_decode`.
A model the lean loop cannot drive (encoder-decoder, or a forward without `position_ids`,
`logits_to_keep` and a cache argument) falls back to `model.generate` with an explicit
`GenerationConfig`.

Samplers (config `rollout.sampler`):
- `torch` (default): the HF-equivalent sampler above, `torch.multinomial` over all N rows with
  the global generator seeded once per call: which sample a row draws depends on the rows
  around it (the batch's composition).
- `counter`: Gumbel-max sampling, token = argmax(top_p(logits / temperature) + g), where the
  Gumbel noise g of (row, position, vocabulary id) is a counter-based hash of (seed, global row
  id, completion position, vocabulary id) (`counter_gumbel`: vectorised integer ops, no
  generator state). The global row id is `row_offset` + the row's index in this call, so a
  sub-batch sampled with the right offset (a data-parallel rank sampling its slice of the
  step's prompts) draws exactly the tokens the full batch draws for those rows (up to float
  rounding of the logits), and dropping ended rows from the decode batch changes nothing. Same
  distribution as `torch`: softmax(top_p(logits / temperature)).

The sampler is seeded from (run seed, step), so a resumed run draws the same samples. A
completion ends at its first EOS; one that reaches `max_new_tokens` without EOS is marked
truncated (`finished=False`). Completion text is decoded without skipping special tokens, so
`123<bos>` never reads as `123`.
"""
from __future__ import annotations

from grpo_research.rollout.backends import rollout_backend
from grpo_research.rollout.batch import (
    RolloutBatch,
    SampledRolloutBatch,
    assemble_batch,
    completion_mask_from,
    decode_completions,
    encode_prompts,
    select_and_concat,
)
from grpo_research.rollout.hf import (
    COMPACT_FRACTION,
    cache_kwarg,
    generate,
    hf_generate_completions,
    lean_supported,
    sample_completions,
)
from grpo_research.rollout.sampling import counter_gumbel, counter_pick_tokens, pick_tokens, warp_logits

__all__ = [
    "COMPACT_FRACTION",
    "RolloutBatch",
    "SampledRolloutBatch",
    "assemble_batch",
    "cache_kwarg",
    "completion_mask_from",
    "counter_gumbel",
    "counter_pick_tokens",
    "decode_completions",
    "encode_prompts",
    "generate",
    "hf_generate_completions",
    "lean_supported",
    "pick_tokens",
    "rollout_backend",
    "sample_completions",
    "select_and_concat",
    "warp_logits",
]
