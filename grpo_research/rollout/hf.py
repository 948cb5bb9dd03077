"""The HF rollout backend (`rollout.backend=hf`): `generate`, the lean decode loop
(`sample_completions`: shared prefix prefill, KV cache, dropping ended rows) and its fallback
`model.generate` (`hf_generate_completions`). See the package docstring (`grpo_research.rollout`).
`generate` looks `lean_supported` and `sample_completions` up here: patch them on this module."""
from __future__ import annotations

import inspect

import torch

from grpo_research.rollout.batch import RolloutBatch, assemble_batch, completion_mask_from, encode_prompts
from grpo_research.rollout.sampling import counter_gumbel, counter_pick_tokens, pick_tokens, warp_logits
from grpo_research.tasks.base import Problem

COMPACT_FRACTION = 0.25  # drop ended rows from the decode batch once this share of it has ended


@torch.no_grad()
def generate(
    model,
    tokenizer,
    problems: list[Problem],
    n_per_prompt: int = 1,
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    greedy: bool = False,
    seed: int | None = None,
    sampler: str = "torch",
    row_offset: int = 0,
) -> RolloutBatch:
    """Generate `n_per_prompt` completions for each problem with the HF model.

    `sampler`: "torch" (seeds the global generator with `seed`) or "counter" (noise hashed from
    `seed` and each row's global id `row_offset + i`; see the module docstring)."""
    device = next(model.parameters()).device
    prompt_ids, prompt_mask = encode_prompts(tokenizer, [p.prompt for p in problems], device)  # (B, P)
    counter = {}
    if sampler == "counter":
        if seed is None:  # unseeded: one draw of the global generator picks the noise
            seed = int(torch.randint(0, 2**62, ()))
        counter = {"counter_seed": seed, "row_offset": row_offset}
    elif sampler != "torch":
        raise ValueError(f"unknown sampler {sampler!r}; known: torch, counter")
    elif seed is not None:
        torch.manual_seed(seed)
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    sample = sample_completions if lean_supported(model) else hf_generate_completions
    with torch.inference_mode():  # ~6 % faster decoding than no_grad alone
        completion = sample(model, prompt_ids, prompt_mask, n_per_prompt, max_new_tokens=max_new_tokens,
                            temperature=temperature, top_p=top_p, greedy=greedy, eos_token_id=eos,
                            pad_token_id=pad, **counter)  # (N, T') with T' <= max_new_tokens
    completion = completion.clone()  # a normal tensor: the trainer's forward saves input ids for backward
    prompt_ids = prompt_ids.repeat_interleave(n_per_prompt, dim=0)  # (N, P)
    prompt_mask = prompt_mask.repeat_interleave(n_per_prompt, dim=0)  # (N, P)
    cmask, finished = completion_mask_from(completion, eos)  # (N, T'), (N,)
    completion = torch.where(cmask.bool(), completion, torch.full_like(completion, pad))
    return assemble_batch(problems, n_per_prompt, tokenizer, prompt_ids, prompt_mask, completion, cmask, finished)


# ---------------------------------------------------------------- the lean decode loop
def _forward_params(model) -> set[str]:
    """The named arguments of the model's forward (of the wrapped model, for a peft model or
    `lora.AdaptersOff`, which pass them through)."""
    if hasattr(model, "get_base_model"):
        model = model.get_base_model()
    return set(inspect.signature(type(model).forward).parameters)


def cache_kwarg(model) -> str:
    """transformers >= 5.2x names the cache argument `cache`; before, `past_key_values`."""
    return "cache" if "cache" in _forward_params(model) else "past_key_values"


def lean_supported(model) -> bool:
    """The lean loop drives decoder-only models whose forward takes position ids, a cache and
    `logits_to_keep` (every causal LM of transformers 5)."""
    if getattr(model.config, "is_encoder_decoder", False):
        return False
    params = _forward_params(model)
    return {"position_ids", "logits_to_keep"} <= params and ("cache" in params or "past_key_values" in params)


@torch.no_grad()
def sample_completions(
    model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, n_per_prompt: int, *, max_new_tokens: int,
    temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False, eos_token_id: int, pad_token_id: int,
    share_prefix: bool = True, compact: bool = True, counter_seed: int | None = None, row_offset: int = 0,
) -> torch.Tensor:
    """(N, T') completion tokens, N = B x n_per_prompt (each prompt's copies in a row), pad after
    EOS; T' = steps until every row ended or `max_new_tokens`.

    `share_prefix`: prefill each distinct prompt once and repeat its KV cache; `compact`: drop
    ended rows from the decode batch (once `COMPACT_FRACTION` of it has ended). Neither changes
    what is sampled beyond float rounding: the sampler still draws for all N rows each step
    (rows not in the batch get dummy logits and their draw is discarded), as HF does.
    `counter_seed`: sample with `counter_pick_tokens` instead (global row ids `row_offset + i`),
    only for the rows still decoding.
    """
    from transformers import DynamicCache

    B, P = prompt_ids.shape
    G, N, device = n_per_prompt, prompt_ids.shape[0] * n_per_prompt, prompt_ids.device
    cache = DynamicCache(config=model.config)
    ckw = {cache_kwarg(model): cache, "use_cache": True}
    prompt_mask = prompt_mask.long()
    if share_prefix and G > 1:
        pos = (prompt_mask.cumsum(dim=1) - 1).clamp(min=0)  # (B, P)
        out = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=pos, logits_to_keep=1, **ckw)
        logits = out.logits[:, -1].float().repeat_interleave(G, dim=0)  # (N, V)
        cache.batch_repeat_interleave(G)
        attn = prompt_mask.repeat_interleave(G, dim=0)  # (N, P)
        next_pos = pos[:, -1].repeat_interleave(G) + 1  # (N,)
    else:
        ids, attn = prompt_ids.repeat_interleave(G, dim=0), prompt_mask.repeat_interleave(G, dim=0)  # (N, P)
        pos = (attn.cumsum(dim=1) - 1).clamp(min=0)  # (N, P)
        logits = model(input_ids=ids, attention_mask=attn, position_ids=pos, logits_to_keep=1, **ckw).logits[:, -1]
        logits = logits.float()  # (N, V)
        next_pos = pos[:, -1] + 1  # (N,)
    tokens = torch.full((N, max_new_tokens), pad_token_id, dtype=torch.long, device=device)  # (N, T)
    rows = torch.arange(N, device=device)  # (n,) the batch row of each decode row
    unfinished = torch.ones(N, dtype=torch.bool, device=device)  # (N,)
    full = logits  # (N, V) logits of every row (dummy for rows not decoded any more)
    steps = max_new_tokens
    counter = counter_seed is not None
    for t in range(max_new_tokens):
        if counter:  # only the decode rows draw; a row's draw depends on its global id, not on the batch
            picked = torch.full((N,), pad_token_id, dtype=torch.long, device=device)  # (N,)
            picked[rows] = counter_pick_tokens(logits, temperature, top_p, greedy, seed=counter_seed,
                                               rows=rows + row_offset, position=t)
        else:
            picked = pick_tokens(full, temperature, top_p, greedy)  # (N,)
        picked = torch.where(unfinished, picked, torch.full_like(picked, pad_token_id))
        tokens[:, t] = picked
        unfinished &= picked != eos_token_id
        if t == max_new_tokens - 1:
            break
        alive = unfinished[rows]  # (n,) decode rows still running
        n_alive = int(alive.sum())
        if n_alive == 0:
            steps = t + 1
            break
        if compact and (len(rows) - n_alive) >= COMPACT_FRACTION * len(rows):
            keep = alive.nonzero().squeeze(1)  # (n',)
            cache.batch_select_indices(keep)
            rows, attn, next_pos = rows[keep], attn[keep], next_pos[keep]
        step_ids = tokens[rows, t].unsqueeze(1)  # (n, 1)
        attn = torch.cat([attn, attn.new_ones(len(rows), 1)], dim=1)  # (n, P + t + 1)
        out = model(input_ids=step_ids, attention_mask=attn, position_ids=next_pos.unsqueeze(1), **ckw)
        next_pos = next_pos + 1
        logits = out.logits[:, -1].float()  # (n, V)
        if counter or len(rows) == N:
            full = logits
        else:
            full = logits.new_zeros(N, logits.shape[-1])
            full[rows] = logits
    return tokens[:, :steps]


@torch.no_grad()
def hf_generate_completions(
    model, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, n_per_prompt: int, *, max_new_tokens: int,
    temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False, eos_token_id: int, pad_token_id: int,
    counter_seed: int | None = None, row_offset: int = 0,
) -> torch.Tensor:
    """The fallback: `model.generate` with an explicit GenerationConfig (no model defaults).
    The counter sampler runs as a logits processor in front of greedy decoding."""
    from transformers import GenerationConfig, LogitsProcessorList

    ids = prompt_ids.repeat_interleave(n_per_prompt, dim=0)  # (N, P)
    mask = prompt_mask.repeat_interleave(n_per_prompt, dim=0)  # (N, P)
    processors = None
    if counter_seed is not None and not greedy:
        rows = torch.arange(ids.shape[0], device=ids.device) + row_offset  # (N,) global row ids
        P = ids.shape[1]

        def gumbel(input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:  # (N, V) -> (N, V)
            warped = warp_logits(scores.float(), temperature, top_p)
            return warped + counter_gumbel(counter_seed, rows, input_ids.shape[1] - P, scores.shape[-1])

        processors, greedy = LogitsProcessorList([gumbel]), True
    sampling = {} if greedy else {"temperature": temperature, "top_p": top_p, "top_k": 0}
    gen_cfg = GenerationConfig(do_sample=not greedy, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id,
                               pad_token_id=pad_token_id, use_cache=True, **sampling)
    out = model.generate(input_ids=ids, attention_mask=mask, generation_config=gen_cfg,
                         logits_processor=processors)  # (N, P + T')
    return out[:, ids.shape[1]:]
