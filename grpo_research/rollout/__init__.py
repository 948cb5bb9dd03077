"""Rollout: sample G completions per prompt behind one interface.

The HF backend calls `model.generate` (KV cache, batched, left padding) with seeded sampling;
the sampler is seeded from (run seed, step), so a resumed run draws the same samples. A
completion ends at its first EOS; one that reaches `max_new_tokens` without EOS is marked
truncated (`finished=False`). Completion text is decoded without skipping special tokens, so
`123<bos>` never reads as `123`.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from grpo_research.tasks.base import Problem


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


def encode_prompts(tokenizer, prompts: list[str], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    enc = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


def completion_mask_from(tokens: torch.Tensor, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(mask, finished): mask is 1 up to and including the first EOS of each row of (N, T) tokens."""
    is_eos = tokens == eos_id  # (N, T)
    finished = is_eos.any(dim=1)  # (N,)
    after_eos = (is_eos.cumsum(dim=1) - is_eos.long()) > 0  # (N, T): strictly after the first EOS
    return (~after_eos).long(), finished


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
) -> RolloutBatch:
    """Generate `n_per_prompt` completions for each problem with HF `generate`."""
    device = next(model.parameters()).device
    prompt_ids, prompt_mask = encode_prompts(tokenizer, [p.prompt for p in problems], device)
    prompt_ids = prompt_ids.repeat_interleave(n_per_prompt, dim=0)  # (N, P)
    prompt_mask = prompt_mask.repeat_interleave(n_per_prompt, dim=0)  # (N, P)
    if seed is not None:
        torch.manual_seed(seed)
    eos = tokenizer.eos_token_id
    sampling = {} if greedy else {"temperature": temperature, "top_p": top_p, "top_k": 0}
    out = model.generate(
        input_ids=prompt_ids,
        attention_mask=prompt_mask,
        do_sample=not greedy,
        max_new_tokens=max_new_tokens,
        eos_token_id=eos,
        pad_token_id=tokenizer.pad_token_id,
        use_cache=True,
        **sampling,
    )  # (N, P + T') with T' <= max_new_tokens
    P = prompt_ids.shape[1]
    completion = out[:, P:]  # (N, T')
    cmask, finished = completion_mask_from(completion, eos)
    completion = torch.where(cmask.bool(), completion, torch.full_like(completion, tokenizer.pad_token_id))
    texts = []
    for row, m, fin in zip(completion.tolist(), cmask.sum(dim=1).tolist(), finished.tolist()):
        texts.append(tokenizer.decode(row[: m - 1 if fin else m], skip_special_tokens=False))
    return RolloutBatch(
        problems=[p for p in problems for _ in range(n_per_prompt)],
        input_ids=torch.cat([prompt_ids, completion], dim=1),
        attention_mask=torch.cat([prompt_mask, cmask], dim=1),
        completion_mask=cmask,
        prompt_len=P,
        completions=texts,
        finished=finished.tolist(),
        completion_tokens=int(cmask.sum()),
    )


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
    return RolloutBatch(problems=problems, input_ids=torch.cat(ids), attention_mask=torch.cat(attn),
                        completion_mask=cm, prompt_len=P, completions=completions, finished=finished,
                        completion_tokens=int(cm.sum()))
