"""Rollout: sample G completions per prompt behind one interface.

Backends (config `rollout.backend`): `hf` (this module, CPU or GPU, any Hugging Face causal
LM) and `vllm` (`grpo_research/rollout/vllm_backend.py`, GPU extra). Both return a
`RolloutBatch`.

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

import inspect
from dataclasses import dataclass

import torch

from grpo_research.tasks.base import Problem

COMPACT_FRACTION = 0.25  # drop ended rows from the decode batch once this share of it has ended


@dataclass
class RolloutBatch:
    problems: list[Problem]  # (N,) one per completion, each prompt repeated G times in a row
    input_ids: torch.Tensor  # (N, P + T) left-padded prompt, then completion, pad after EOS
    attention_mask: torch.Tensor  # (N, P + T) 1 on real prompt tokens and on completion tokens up to EOS
    completion_mask: torch.Tensor  # (N, T) 1 on completion tokens up to and including EOS
    prompt_len: int  # P
    completions: list[str]  # (N,) decoded completion text, without the EOS
    finished: list[bool]  # (N,) ended with EOS
    completion_tokens: int  # generated tokens in the batch (sum of completion_mask)

    @property
    def truncated_frac(self) -> float:
        return 1.0 - sum(self.finished) / max(len(self.finished), 1)


@dataclass
class SampledRolloutBatch(RolloutBatch):
    """A `RolloutBatch` from a backend with its own numerics (vLLM), which also reports the
    log-prob of each sampled token as it sampled it: `rollout/logp_drift` compares them with
    the trainer's (see vllm_backend.logp_drift)."""

    sampler_logprobs: torch.Tensor | None = None  # (N, T) NaN where unknown and after EOS


def rollout_backend(name: str, model_path=None, *, seed: int = 0, **options):
    """The generate function of backend `name` (config `rollout.backend`), with
    `generate`'s signature: `hf` is `generate`; `vllm` builds a colocated engine on
    `model_path` (options: see `vllm_backend.VLLMRollout`) and returns its `generate`."""
    if name == "hf":
        return generate
    if name == "vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
            from grpo_research.config import ConfigError

            raise ConfigError("rollout.backend=vllm needs a CUDA device and vLLM (extra `gpu`, in its own "
                               "environment: see README); use rollout.backend=hf on this machine")
        from grpo_research.rollout.vllm_backend import VLLMRollout

        return VLLMRollout(model_path, seed=seed, **options).generate
    raise ValueError(f"unknown rollout backend {name!r}; known: hf, vllm")


def encode_prompts(tokenizer, prompts: list[str], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


def assemble_batch(problems: list[Problem], n_per_prompt: int, tokenizer, prompt_ids: torch.Tensor,
                   prompt_mask: torch.Tensor, completion: torch.Tensor, cmask: torch.Tensor, finished: torch.Tensor,
                   cls: type = None, **extra) -> "RolloutBatch":
    """The batch of every backend: (N, P) prompts already repeated per completion, (N, T) completion
    tokens (pad after EOS), their mask and (N,) finished flags; `cls`/`extra` for a backend's subclass."""
    return (cls or RolloutBatch)(
        problems=[p for p in problems for _ in range(n_per_prompt)],
        input_ids=torch.cat([prompt_ids, completion], dim=1),
        attention_mask=torch.cat([prompt_mask, cmask.to(prompt_mask.dtype)], dim=1),
        completion_mask=cmask,
        prompt_len=prompt_ids.shape[1],
        completions=decode_completions(tokenizer, completion, cmask, finished),
        finished=finished.tolist(),
        completion_tokens=int(cmask.sum()),
        **extra,
    )


def completion_mask_from(tokens: torch.Tensor, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(mask, finished): mask is 1 up to and including the first EOS of each row of (N, T) tokens."""
    is_eos = tokens == eos_id  # (N, T)
    finished = is_eos.any(dim=1)  # (N,)
    after_eos = (is_eos.cumsum(dim=1) - is_eos.long()) > 0  # (N, T): strictly after the first EOS
    return (~after_eos).long(), finished


def decode_completions(tokenizer, completion: torch.Tensor, cmask: torch.Tensor, finished: torch.Tensor) -> list[str]:
    """Text of each row up to (without) its EOS, special tokens kept, in one `batch_decode`."""
    lengths = (cmask.sum(dim=1) - finished.long()).tolist()  # (N,) tokens before EOS
    rows = completion.tolist()
    return tokenizer.batch_decode([r[:n] for r, n in zip(rows, lengths)], skip_special_tokens=False)


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


def warp_logits(logits: torch.Tensor, temperature: float, top_p: float) -> torch.Tensor:
    """(N, V) logits / temperature with the tokens outside the top-p nucleus set to -inf, as HF's
    `TemperatureLogitsWarper` then `TopPLogitsWarper` (min_tokens_to_keep=1) compute them."""
    if temperature != 1.0:
        logits = logits / temperature  # TemperatureLogitsWarper
    if top_p < 1.0:  # TopPLogitsWarper (min_tokens_to_keep=1)
        sorted_logits, sorted_idx = torch.sort(logits, descending=False)  # (N, V)
        remove = sorted_logits.softmax(dim=-1).cumsum(dim=-1) <= (1 - top_p)  # (N, V)
        remove[:, -1:] = False
        logits = logits.masked_fill(remove.scatter(1, sorted_idx, remove), -float("inf"))
    return logits


def pick_tokens(logits: torch.Tensor, temperature: float, top_p: float, greedy: bool) -> torch.Tensor:
    """(N,) next tokens from (N, V) float32 logits, as HF `generate` samples them."""
    if greedy:
        return logits.argmax(dim=-1)
    probs = torch.softmax(warp_logits(logits, temperature, top_p), dim=-1)  # (N, V)
    return torch.multinomial(probs, num_samples=1).squeeze(1)  # (N,)


# ---------------------------------------------------------------- the counter-based sampler
_M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2**32 for int64 tensors holding values in [0, 2**32), without int64 overflow
    (the same bits on every device): c = c' + 2**31 b with c' < 2**31, and x 2**31 mod 2**32 is
    (x & 1) << 31."""
    if c < 1 << 31:
        return (x * c) & _M32  # x * c < 2**63
    return (x * (c - (1 << 31)) + ((x & 1) << 31)) & _M32


def _hash32(x: torch.Tensor) -> torch.Tensor:
    """A 32-bit integer mixer (`lowbias32`, C. Wellons' hash-prospector) on int64 tensors
    holding uint32 values: every input bit flips each output bit with probability ~1/2."""
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def counter_gumbel(seed: int, rows: torch.Tensor, position: int, vocab_size: int) -> torch.Tensor:
    """(n, V) float32 standard Gumbel noise, a pure function of (seed, global row id `rows` (n,),
    position, vocabulary id): the same value for a (row, position, id) whatever else is in the
    batch. Keys are chained hashes of (seed, row, position) per row and of the id per column;
    one more hash of their xor gives 32 bits per entry; u = (top 23 bits + 0.5) / 2**23 lies in
    (0, 1) exactly in float32, g = -log(-log(u)). Integer work per token: ~15 elementwise ops
    over (n, V) (negligible on a GPU; ~1 s per token for 64 rows x 150k ids on a slow 2-core CPU)."""
    seed = int(seed) % (1 << 64)
    key = _hash32(torch.tensor([(seed >> 32) & _M32], dtype=torch.long, device=rows.device))  # (1,)
    key = _hash32(key ^ (seed & _M32))  # (1,)
    key = _hash32(_hash32(key ^ (rows.long() & _M32)) ^ (int(position) & _M32))  # (n,) one key per row
    vocab = _hash32(torch.arange(vocab_size, dtype=torch.long, device=rows.device) ^ 0x9E3779B9)  # (V,)
    bits = _hash32(key.unsqueeze(1) ^ vocab.unsqueeze(0))  # (n, V) uint32 in int64
    u = ((bits >> 9).float() + 0.5) * (1.0 / (1 << 23))  # (n, V) in (0, 1)
    return -torch.log(-torch.log(u))  # (n, V)


def counter_pick_tokens(logits: torch.Tensor, temperature: float, top_p: float, greedy: bool, *, seed: int,
                        rows: torch.Tensor, position: int) -> torch.Tensor:
    """(n,) next tokens of the decode rows `rows` (their global row ids, (n,)) from (n, V) float32
    logits: argmax(top_p(logits / temperature) + Gumbel noise), a sample of
    softmax(top_p(logits / temperature)) (the Gumbel-max trick), as `pick_tokens` draws it in law."""
    if greedy:
        return logits.argmax(dim=-1)
    warped = warp_logits(logits, temperature, top_p)  # (n, V) -inf outside the nucleus
    return (warped + counter_gumbel(seed, rows, position, logits.shape[-1])).argmax(dim=-1)  # (n,)


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


def select_and_concat(batches: list[RolloutBatch], rows: list[list[int]], pad_id: int) -> RolloutBatch:
    """Rows `rows[k]` of `batches[k]`, concatenated into one batch (prompts re-left-padded to a
    common length, completions right-padded to a common length)."""
    P = max(b.prompt_len for b in batches)
    T = max(b.completion_mask.shape[1] for b in batches)
    ids, attn, cmask = [], [], []
    problems, completions, finished = [], [], []
    for b, idx in zip(batches, rows):
        if not idx:
            continue
        sel = torch.tensor(idx)
        p_ids, c_ids = b.input_ids[sel, : b.prompt_len], b.input_ids[sel, b.prompt_len :]  # (n, P_b), (n, T_b)
        p_att, c_att = b.attention_mask[sel, : b.prompt_len], b.attention_mask[sel, b.prompt_len :]
        dp, dt = P - b.prompt_len, T - c_ids.shape[1]
        ids.append(torch.cat([torch.full((len(idx), dp), pad_id), p_ids, c_ids, torch.full((len(idx), dt), pad_id)], 1))
        attn.append(torch.cat([torch.zeros(len(idx), dp, dtype=p_att.dtype), p_att, c_att,
                               torch.zeros(len(idx), dt, dtype=c_att.dtype)], 1))
        cm = b.completion_mask[sel]
        cmask.append(torch.cat([cm, torch.zeros(len(idx), dt, dtype=cm.dtype)], 1))
        problems += [b.problems[i] for i in idx]
        completions += [b.completions[i] for i in idx]
        finished += [b.finished[i] for i in idx]
    cm = torch.cat(cmask)
    fields = dict(problems=problems, input_ids=torch.cat(ids), attention_mask=torch.cat(attn), completion_mask=cm,
                  prompt_len=P, completions=completions, finished=finished, completion_tokens=int(cm.sum()))
    if all(getattr(b, "sampler_logprobs", None) is not None for b in batches):
        lps = [torch.cat([b.sampler_logprobs[torch.tensor(idx)],
                          torch.full((len(idx), T - b.sampler_logprobs.shape[1]), float("nan"))], 1)
               for b, idx in zip(batches, rows) if idx]
        return SampledRolloutBatch(**fields, sampler_logprobs=torch.cat(lps))
    return RolloutBatch(**fields)
