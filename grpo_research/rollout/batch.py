"""The rollout batch of every backend (`RolloutBatch`, `SampledRolloutBatch`) and its assembly:
prompt encoding (left padding), the completion mask up to the first EOS, decoding (special
tokens kept), and concatenating rows of several batches (`select_and_concat`)."""
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


@dataclass
class SampledRolloutBatch(RolloutBatch):
    """A `RolloutBatch` from a backend with its own numerics (vLLM), which also reports the
    log-prob of each sampled token as it sampled it: `rollout/logp_drift` compares them with
    the trainer's (see vllm_backend.logp_drift)."""

    sampler_logprobs: torch.Tensor | None = None  # (N, T) NaN where unknown and after EOS


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


def batch_to(batch, device: torch.device):
    """The rollout batch with its tensors on `device` (a no-op when they already are)."""
    import dataclasses

    if batch.input_ids.device == device:
        return batch
    moved = {f.name: getattr(batch, f.name) for f in dataclasses.fields(batch)}
    for k, v in moved.items():
        if isinstance(v, torch.Tensor):
            moved[k] = v.to(device)
    return type(batch)(**moved)
