"""vLLM rollout backend (config `rollout.backend=vllm`, extra `gpu`): the same interface as
`grpo_research.rollout.generate`, a vLLM engine colocated with training.

- One in-process engine per trainer (`distributed_executor_backend="external_launcher"`, the
  colocation TRL uses), sharing the GPU with the trainer (`gpu_memory_utilization`).
- Weights: before each rollout, if any trainer parameter changed since the last push (the
  tensors' in-place version counters moved: an optimizer step, a resumed checkpoint), the
  policy's parameters are loaded into the engine (`load_weights`, HF names) and its prefix cache
  is reset. So every update reaches the sampler before it samples again.
- Seeds: the engine's seed is the run seed; each request gets `SamplingParams(seed=...)` derived
  from the `seed` argument (the trainer passes step_seed(run seed, step)) and the prompt's
  index, so a step's samples do not depend on what the engine drew before.
- The sampled distribution: no `generation_config.json` default of the model applies
  (`generation_config="vllm"`), EOS stops a completion, log-probs are the processed ones
  (after temperature / top-p) where the installed vLLM offers it.
- The returned batch is a `SampledRolloutBatch`: a `RolloutBatch` plus `sampler_logprobs`, the
  log-prob of each sampled token under vLLM; `logp_drift` compares them with the trainer's
  (the metric `rollout/logp_drift`).

vLLM is imported only when an engine is built; nothing here runs without it but the pure
helpers (`outputs_to_batch`, `logp_drift`, `request_seeds`), which the CPU tests cover.
"""
from __future__ import annotations

import dataclasses
import math
import os
import socket
from pathlib import Path

import torch

from grpo_research.rollout.batch import SampledRolloutBatch, assemble_batch, completion_mask_from, encode_prompts
from grpo_research.tasks.base import Problem


def request_seeds(seed: int | None, n: int) -> list[int | None]:
    """One sampler seed per completion from the step seed (None: unseeded)."""
    if seed is None:
        return [None] * n
    return [(seed * 1_000_003 + i) % (1 << 63) for i in range(n)]


def logp_drift(sampler_logprobs: torch.Tensor, trainer_logprobs: torch.Tensor, mask: torch.Tensor) -> float:
    """Mean |logp under the sampler - logp under the trainer| over the sampled tokens of `mask`
    (N, T); tokens without a sampler log-prob (NaN) are left out."""
    lp = sampler_logprobs.to(trainer_logprobs.device, trainer_logprobs.dtype)  # (N, T)
    m = mask.bool() & torch.isfinite(lp)  # (N, T)
    if not bool(m.any()):
        return float("nan")
    return (lp - trainer_logprobs.detach()).abs()[m].mean().item()


def _logprob_value(entry, token: int) -> float:
    if entry is None:
        return math.nan
    v = entry.get(token) if hasattr(entry, "get") else None
    if v is None:
        return math.nan
    return float(getattr(v, "logprob", v))


def outputs_to_batch(outputs, problems: list[Problem], n_per_prompt: int, tokenizer, prompt_ids: torch.Tensor,
                     prompt_mask: torch.Tensor, max_new_tokens: int) -> SampledRolloutBatch:
    """vLLM `RequestOutput`s (one per completion, or one per prompt with `n_per_prompt`
    completions; prompt-major order) -> the batch the HF backend would have returned for the same
    tokens, plus the sampler's log-probs."""
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    seqs, lps = [], []
    for out in outputs:
        for comp in out.outputs:
            ids = list(comp.token_ids)[:max_new_tokens]
            logprobs = comp.logprobs or [None] * len(ids)
            vals = [_logprob_value(e, t) for e, t in zip(logprobs, ids)]
            if getattr(comp, "finish_reason", None) == "stop" and (not ids or ids[-1] != eos) and \
                    len(ids) < max_new_tokens and getattr(comp, "stop_reason", None) in (None, eos):
                ids, vals = ids + [eos], vals + [math.nan]  # a stop on EOS that vLLM did not echo
            seqs.append(ids)
            lps.append(vals)
    N = len(seqs)
    T = max((len(s) for s in seqs), default=0)
    completion = torch.full((N, T), pad, dtype=torch.long)  # (N, T)
    sampler = torch.full((N, T), math.nan)  # (N, T)
    for i, (s, v) in enumerate(zip(seqs, lps)):  # building ragged rows into a tensor: one copy per row
        completion[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        sampler[i, : len(v)] = torch.tensor(v, dtype=torch.float32)
    cmask, finished = completion_mask_from(completion, eos)  # (N, T), (N,)
    completion = torch.where(cmask.bool(), completion, torch.full_like(completion, pad))
    sampler = torch.where(cmask.bool(), sampler, torch.full_like(sampler, math.nan))
    p_ids = prompt_ids.repeat_interleave(n_per_prompt, dim=0).cpu()  # (N, P)
    p_mask = prompt_mask.repeat_interleave(n_per_prompt, dim=0).cpu()  # (N, P)
    return assemble_batch(problems, n_per_prompt, tokenizer, p_ids, p_mask, completion, cmask, finished,
                          cls=SampledRolloutBatch, sampler_logprobs=sampler)


def _set_single_process_dist_env() -> None:
    """external_launcher runs vLLM inside this process as rank 0 of a world of 1."""
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])


class VLLMRollout:
    """A colocated vLLM engine behind `generate`'s interface."""

    def __init__(self, model_path: str | Path, *, seed: int, dtype: str = "auto", max_model_len: int | None = None,
                 gpu_memory_utilization: float = 0.3, enforce_eager: bool = False, **engine_kwargs):
        _set_single_process_dist_env()
        from vllm import LLM
        from vllm.engine.arg_utils import EngineArgs

        fields = {f.name for f in dataclasses.fields(EngineArgs)}
        optional = {"generation_config": "vllm", "logprobs_mode": "processed_logprobs",
                    "enable_prefix_caching": True, "distributed_executor_backend": "external_launcher",
                    "skip_tokenizer_init": True}
        kwargs = {k: v for k, v in optional.items() if k in fields}
        kwargs.update(engine_kwargs)
        self.llm = LLM(model=str(model_path), seed=seed, dtype=dtype, max_model_len=max_model_len,
                       gpu_memory_utilization=gpu_memory_utilization, enforce_eager=enforce_eager, **kwargs)
        self._synced: tuple[int, ...] | None = None
        self.syncs = 0

    # ------------------------------------------------------------ weights
    def _engine_model(self):
        executor = self.llm.llm_engine.model_executor
        worker = executor.driver_worker
        for path in ("model_runner.model", "worker.model_runner.model"):
            obj = worker
            try:
                for attr in path.split("."):
                    obj = getattr(obj, attr)
                return obj
            except AttributeError:
                continue
        raise RuntimeError("cannot reach the vLLM model to load weights into (unsupported vLLM version)")

    def sync_weights(self, model: torch.nn.Module, force: bool = False) -> bool:
        """Push the policy's parameters into the engine if any changed since the last push."""
        version = tuple(p._version for p in model.parameters())
        if not force and version == self._synced:
            return False
        engine_model = self._engine_model()
        with torch.no_grad():
            engine_model.load_weights((name, p.detach()) for name, p in model.named_parameters())
        self.llm.reset_prefix_cache()  # cached KV was computed with the old weights
        self._synced = version
        self.syncs += 1
        return True

    # ------------------------------------------------------------ sampling
    @torch.no_grad()
    def generate(self, model, tokenizer, problems: list[Problem], n_per_prompt: int = 1, *, max_new_tokens: int,
                 temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                 seed: int | None = None) -> SampledRolloutBatch:
        """`grpo_research.rollout.generate`, sampled by vLLM with `model`'s current weights."""
        from vllm import SamplingParams

        self.sync_weights(model)
        prompt_ids, prompt_mask = encode_prompts(tokenizer, [p.prompt for p in problems], torch.device("cpu"))
        # one request per completion (n=1, its own seed): prefix caching shares the prompt's KV
        prompts = [{"prompt_token_ids": ids[m.bool()].tolist()} for ids, m in zip(prompt_ids, prompt_mask)
                   for _ in range(n_per_prompt)]
        params = [
            SamplingParams(n=1, temperature=0.0 if greedy else temperature, top_p=1.0 if greedy else top_p,
                           max_tokens=max_new_tokens, logprobs=0, seed=s, stop_token_ids=[tokenizer.eos_token_id],
                           detokenize=False)
            for s in request_seeds(seed, len(prompts))
        ]
        outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=False)
        return outputs_to_batch(outputs, problems, n_per_prompt, tokenizer, prompt_ids, prompt_mask, max_new_tokens)
