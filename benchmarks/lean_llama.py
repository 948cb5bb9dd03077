"""Issue 16's remaining candidates for a GRPO step >= 2x TRL, measured (none is in the trainer).

The trainer's step at 8 prompts x G = 8, 32 new tokens (benchmarks/rollout.py) is generation,
the reference forward, the policy forward + backward and AdamW. This script holds, for the
Llama-family model of the benchmark, what could still remove time from those passes, checks
that each computes what the trainer computes, and times it against the trainer's own code:

- `parts`: a forward in plain tensor ops over the model's weights (`lean_logprobs`: each prompt
  once, fused q/k/v and gate/up products, no HF masks or cache objects) against the trainer's
  shared-prompt HF forward, for the reference (inference) and the policy (forward + backward);
  a decode loop on a preallocated key/value cache (`LeanDecoder`) against the trainer's lean
  loop on HF's forward. Prints the largest log-prob difference and whether the sampled tokens
  are identical.
- `step`: whole GRPO steps of two trainers built alike, alternating, one with both of the above
  swapped in: the ratio of median step times.
- `sampling-graph`: one pass fewer. At mu = 1 the sampling pass computes the policy's
  log-probs of the sampled tokens; kept with autograd on (HF forward, its DynamicCache), the
  update needs no policy forward of its own. Times decode + backward against decode (inference
  mode) + forward + backward, and checks log-probs and gradients.
- `compile`: `torch.compile` of `lean_logprobs` forward + backward, fixed shapes (first call,
  i.e. compile time, then eager vs compiled), then `dynamic=True` on four rollout batches.

    python benchmarks/lean_llama.py parts|step|sampling-graph|compile [--threads 1] [--rounds 12]

Results: benchmarks/RESULTS.md, "2026-12-05".
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import default_model_dir, git_commit, machine_line  # noqa: E402

G = 8


# ---------------------------------------------------------------- the Llama forward in tensor ops
def _shapes(model) -> tuple[int, int, int]:
    cfg = model.config
    H = cfg.num_attention_heads
    Hkv = getattr(cfg, "num_key_value_heads", None) or H
    return H, Hkv, getattr(cfg, "head_dim", None) or cfg.hidden_size // H


def _rms(x: torch.Tensor, norm) -> torch.Tensor:  # LlamaRMSNorm: float32, weight after the cast back
    h = x.float()
    return norm.weight * (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.variance_epsilon)).to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:  # RoPE, rotate_half
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def _qkv_weight(attn):
    w = torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight])
    b = None if attn.q_proj.bias is None else torch.cat([attn.q_proj.bias, attn.k_proj.bias, attn.v_proj.bias])
    return w, b


def _mlp(x: torch.Tensor, mlp) -> torch.Tensor:  # SwiGLU with gate and up as one product
    gate, up = F.linear(x, torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])).chunk(2, dim=-1)
    return mlp.down_proj(F.silu(gate) * up)


def _rope_table(model, x: torch.Tensor, n: int):
    cos, sin = model.model.rotary_emb(x, torch.arange(n, device=x.device)[None])  # (1, n, d)
    return cos[0], sin[0]


def _attend(q, k, v, mask, scale, n_rep):
    if n_rep > 1:
        k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale)


def lean_logprobs(model, input_ids, attention_mask, T, temperature=1.0, with_entropy=False):
    """The trainer's `token_logprobs_shared_prefix` (rows in whole groups of G sharing a
    left-padded prompt of P = L - T columns) in tensor ops: (log-probs (N, T), entropy or None)."""
    N, L = input_ids.shape
    P, Tq, B = L - T, T - 1, N // G
    H, Hkv, d = _shapes(model)
    Dq, Dkv = H * d, Hkv * d
    trunk, dev = model.model, input_ids.device
    scale = trunk.layers[0].self_attn.scaling
    per_row = functools.partial(torch.repeat_interleave, repeats=G, dim=0)
    p_ids, p_mask = input_ids[::G, :P], attention_mask[::G, :P].bool()  # (B, P)
    p_pos = (p_mask.long().cumsum(1) - 1).clamp(min=0)
    p_attn = ((torch.ones(P, P, dtype=torch.bool, device=dev).tril() & p_mask[:, None, :])
              | torch.eye(P, dtype=torch.bool, device=dev))[:, None]  # every query sees itself: no empty row
    c_pos = per_row(p_pos[:, -1])[:, None] + 1 + torch.arange(Tq, device=dev)  # (N, Tq)
    c_attn = torch.cat([per_row(p_mask)[:, None, :].expand(N, Tq, P),
                        torch.ones(Tq, Tq, dtype=torch.bool, device=dev).tril().expand(N, Tq, Tq)], 2)[:, None]
    hp, hc = trunk.embed_tokens(p_ids), trunk.embed_tokens(input_ids[:, P : L - 1])  # (B, P, D), (N, Tq, D)
    cos, sin = _rope_table(model, hp, int(p_pos.max()) + T + 1)
    pc, ps = cos[p_pos][:, :, None], sin[p_pos][:, :, None]
    cc, cs = cos[c_pos][:, :, None], sin[c_pos][:, :, None]

    def qkv(h, layer, c, s, w, b):
        n, length = h.shape[:2]
        x = F.linear(_rms(h, layer.input_layernorm), w, b)
        qk = _rotate(x[..., : Dq + Dkv].reshape(n, length, H + Hkv, d), c, s)
        v = x[..., Dq + Dkv :].reshape(n, length, Hkv, d)
        return qk[:, :, :H].transpose(1, 2), qk[:, :, H:].transpose(1, 2), v.transpose(1, 2)

    for layer in trunk.layers:
        attn = layer.self_attn
        w, b = _qkv_weight(attn)
        q, k, v = qkv(hp, layer, pc, ps, w, b)
        hp = hp + attn.o_proj(_attend(q, k, v, p_attn, scale, H // Hkv).transpose(1, 2).reshape(B, P, Dq))
        hp = hp + _mlp(_rms(hp, layer.post_attention_layernorm), layer.mlp)
        if Tq:
            q, kc, vc = qkv(hc, layer, cc, cs, w, b)
            o = _attend(q, torch.cat([per_row(k), kc], 2), torch.cat([per_row(v), vc], 2), c_attn, scale, H // Hkv)
            hc = hc + attn.o_proj(o.transpose(1, 2).reshape(N, Tq, Dq))
            hc = hc + _mlp(_rms(hc, layer.post_attention_layernorm), layer.mlp)
    h = per_row(hp[:, -1:])
    h = torch.cat([h, hc], 1) if Tq else h  # (N, T, D)
    logits = model.lm_head(_rms(h, trunk.norm)).float() / temperature
    lse = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, input_ids[:, P:, None]).squeeze(-1) - lse
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return logp, entropy


# ---------------------------------------------------------------- decoders: prefill / step / select
class LeanDecoder:
    """Decode steps in tensor ops on a key/value cache preallocated for the whole completion."""

    def __init__(self, model, max_new_tokens: int):
        self.model, self.max_new = model, max_new_tokens
        self.H, self.Hkv, self.d = _shapes(model)
        self.trunk = model.model
        self.layers = list(self.trunk.layers)
        self.scale = self.layers[0].self_attn.scaling
        self.w_qkv = [_qkv_weight(layer.self_attn) for layer in self.layers]

    def prefill(self, prompt_ids, prompt_mask, group: int) -> torch.Tensor:
        B, P = prompt_ids.shape
        H, Hkv, d = self.H, self.Hkv, self.d
        N, S, dev = B * group, P + self.max_new, prompt_ids.device
        p_mask = prompt_mask.bool()
        p_pos = (prompt_mask.long().cumsum(1) - 1).clamp(min=0)
        h = self.trunk.embed_tokens(prompt_ids)
        self.cos, self.sin = _rope_table(self.model, h, int(p_pos.max()) + self.max_new + 1)
        pc, ps = self.cos[p_pos][:, None], self.sin[p_pos][:, None]
        mask = ((torch.ones(P, P, dtype=torch.bool, device=dev).tril() & p_mask[:, None, :])
                | torch.eye(P, dtype=torch.bool, device=dev))[:, None]
        self.k = [h.new_empty(N, Hkv, S, d) for _ in self.layers]  # only written columns are ever read
        self.v = [h.new_empty(N, Hkv, S, d) for _ in self.layers]
        for i, layer in enumerate(self.layers):
            w, b = self.w_qkv[i]
            q, k, v = F.linear(_rms(h, layer.input_layernorm), w, b).split([H * d, Hkv * d, Hkv * d], dim=-1)
            q = _rotate(q.view(B, P, H, d).transpose(1, 2), pc, ps)
            k = _rotate(k.view(B, P, Hkv, d).transpose(1, 2), pc, ps)
            v = v.view(B, P, Hkv, d).transpose(1, 2)
            self.k[i][:, :, :P], self.v[i][:, :, :P] = k.repeat_interleave(group, 0), v.repeat_interleave(group, 0)
            o = _attend(q, k, v, mask, self.scale, H // Hkv).transpose(1, 2).reshape(B, P, H * d)
            h = h + layer.self_attn.o_proj(o)
            h = h + _mlp(_rms(h, layer.post_attention_layernorm), layer.mlp)
        self.keys = torch.zeros(N, S, dtype=torch.bool, device=dev)
        self.keys[:, :P] = p_mask.repeat_interleave(group, 0)
        self.pos, self.length = p_pos[:, -1].repeat_interleave(group) + 1, P
        return self.model.lm_head(_rms(h[:, -1], self.trunk.norm)).float().repeat_interleave(group, 0)

    def select(self, keep: torch.Tensor) -> None:
        self.k, self.v = [k[keep] for k in self.k], [v[keep] for v in self.v]
        self.keys, self.pos = self.keys[keep], self.pos[keep]

    def step(self, ids: torch.Tensor) -> torch.Tensor:
        n, (H, Hkv, d), t = len(ids), (self.H, self.Hkv, self.d), self.length
        rep = H // Hkv
        self.keys[:, t] = True
        keys = self.keys[:, None, None, : t + 1]
        c, s = self.cos[self.pos][:, None], self.sin[self.pos][:, None]
        h = self.trunk.embed_tokens(ids)
        for i, layer in enumerate(self.layers):
            w, b = self.w_qkv[i]
            q, k, v = F.linear(_rms(h, layer.input_layernorm), w, b).split([H * d, Hkv * d, Hkv * d], dim=-1)
            q = _rotate(q.view(n, H, d), c, s)
            self.k[i][:, :, t], self.v[i][:, :, t] = _rotate(k.view(n, Hkv, d), c, s), v.view(n, Hkv, d)
            K, V = self.k[i][:, :, : t + 1], self.v[i][:, :, : t + 1]
            scores = (q.view(n, Hkv, rep, 1, d) * K[:, :, None]).sum(-1) * self.scale  # one query a row
            p = torch.softmax(scores.masked_fill(~keys, float("-inf")), dim=-1)
            h = h + layer.self_attn.o_proj((p[..., None] * V[:, :, None]).sum(3).reshape(n, H * d))
            h = h + _mlp(_rms(h, layer.post_attention_layernorm), layer.mlp)
        self.length, self.pos = t + 1, self.pos + 1
        return self.model.lm_head(_rms(h, self.trunk.norm)).float()


class HFDecoder:
    """The trainer's decode steps: the model's forward on a DynamicCache (works under autograd)."""

    def __init__(self, model, max_new_tokens: int):
        from transformers import DynamicCache

        from grpo_research.rollout import cache_kwarg

        self.model, self.cache = model, DynamicCache(config=model.config)
        self.ckw = {cache_kwarg(model): self.cache, "use_cache": True}

    def prefill(self, prompt_ids, prompt_mask, group: int) -> torch.Tensor:
        pos = (prompt_mask.long().cumsum(1) - 1).clamp(min=0)
        out = self.model(input_ids=prompt_ids, attention_mask=prompt_mask.long(), position_ids=pos, logits_to_keep=1,
                         **self.ckw)
        self.cache.batch_repeat_interleave(group)
        self.attn, self.pos = prompt_mask.long().repeat_interleave(group, 0), pos[:, -1].repeat_interleave(group) + 1
        return out.logits[:, -1].float().repeat_interleave(group, 0)

    def select(self, keep: torch.Tensor) -> None:
        self.cache.batch_select_indices(keep)
        self.attn, self.pos = self.attn[keep], self.pos[keep]

    def step(self, ids: torch.Tensor) -> torch.Tensor:
        self.attn = torch.cat([self.attn, self.attn.new_ones(len(ids), 1)], 1)
        out = self.model(input_ids=ids[:, None], attention_mask=self.attn, position_ids=self.pos[:, None], **self.ckw)
        self.pos = self.pos + 1
        return out.logits[:, -1].float()


def decode(decoder, prompt_ids, prompt_mask, group, *, max_new_tokens, temperature, top_p, greedy, eos_token_id,
           pad_token_id, with_logp=False, **_):
    """The trainer's loop (`rollout.hf.sample_completions`, torch sampler) on `decoder`: (N, T')
    tokens, and with `with_logp` the (N, T') log-probs of the sampled tokens (with autograd)."""
    from grpo_research.rollout import COMPACT_FRACTION, pick_tokens

    logits = decoder.prefill(prompt_ids, prompt_mask, group)
    N = logits.shape[0]
    tokens = torch.full((N, max_new_tokens), pad_token_id, dtype=torch.long)
    rows, unfinished, full, steps, picked_logp = torch.arange(N), torch.ones(N, dtype=torch.bool), logits, max_new_tokens, []
    for t in range(max_new_tokens):
        picked = pick_tokens(full.detach(), temperature, top_p, greedy)
        picked = torch.where(unfinished, picked, torch.full_like(picked, pad_token_id))
        tokens[:, t] = picked
        if with_logp:
            lsm = torch.log_softmax(logits / temperature, -1)
            picked_logp.append((rows * max_new_tokens + t, lsm.gather(1, picked[rows, None]).squeeze(1)))
        unfinished &= picked != eos_token_id
        alive = unfinished[rows]
        if t == max_new_tokens - 1 or not bool(alive.any()):
            steps = t + 1
            break
        if (len(rows) - int(alive.sum())) >= COMPACT_FRACTION * len(rows):
            keep = alive.nonzero().squeeze(1)
            decoder.select(keep)
            rows = rows[keep]
        logits = decoder.step(tokens[rows, t])
        full = logits if len(rows) == N else logits.new_zeros(N, logits.shape[-1]).index_copy(0, rows, logits.detach())
    if not with_logp:
        return tokens[:, :steps]
    idx = torch.cat([i for i, _ in picked_logp])
    idx = idx // max_new_tokens * steps + idx % max_new_tokens
    logp = torch.cat([v for _, v in picked_logp])
    return tokens[:, :steps], logp.new_zeros(N * steps).index_copy(0, idx, logp).view(N, steps)


@contextlib.contextmanager
def lean_sampling():
    """The trainer's `generate` with its decode loop on `LeanDecoder`."""
    from grpo_research.rollout import hf

    original = hf.sample_completions
    hf.sample_completions = lambda model, ids, mask, group, **kw: decode(
        LeanDecoder(model, kw["max_new_tokens"]), ids, mask, group, **kw)
    try:
        yield
    finally:
        hf.sample_completions = original


# ---------------------------------------------------------------- measurements
def timed(fns: dict, rounds: int, warm: int = 2) -> dict[str, float]:
    ts = {k: [] for k in fns}
    for r in range(warm + rounds):
        for k in list(fns) if r % 2 == 0 else list(fns)[::-1]:
            t0 = time.perf_counter()
            fns[k]()
            if r >= warm:
                ts[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) * 1000 for k, v in ts.items()}


def trainer_and_batch(threads: int, step: int = 0):
    from rollout import build_trainer

    tr = build_trainer(default_model_dir(), threads, [])
    tr.step = step
    tr.policy.eval()
    batch, _, _ = tr.rollout_and_score()
    tr.policy.train()
    return tr, batch


def parts(args) -> None:
    from grpo_research.rollout import encode_prompts, sample_completions
    from grpo_research.trainers.common import token_logprobs, token_logprobs_shared_prefix

    tr, batch = trainer_and_batch(args.threads)
    ids, am, T = batch.input_ids, batch.attention_mask, batch.completion_mask.shape[1]
    m = batch.completion_mask.bool()
    print(f"batch {tuple(ids.shape)}, {T} completion positions, {int(m.sum())} completion tokens")
    plain, _ = token_logprobs(tr.policy, ids, am, T)
    lean, _ = lean_logprobs(tr.policy, ids, am, T)
    print(f"max |log-prob lean - plain forward| on completion tokens: {(lean - plain)[m].abs().max().item():.2e}")
    hf = functools.partial(token_logprobs_shared_prefix, group_size=G)

    def fwd_bwd(fn):
        def run():
            logp, _ = fn(tr.policy, ids, am, T, 1.0, True)
            logp.sum().backward()
        return run

    def inference(fn):
        def run():
            with torch.inference_mode():
                fn(tr.ref, ids, am, T)
        return run

    problems = tr.task.train_problems(tr.data_rng, 8)
    p_ids, p_mask = encode_prompts(tr.tokenizer, [p.prompt for p in problems], torch.device("cpu"))
    kw = dict(max_new_tokens=32, temperature=1.0, top_p=1.0, greedy=False, eos_token_id=tr.tokenizer.eos_token_id,
              pad_token_id=tr.tokenizer.pad_token_id)
    seed = iter(range(10**6))

    def sampled(lean_loop: bool):
        def run():
            torch.manual_seed(next(seed))
            with torch.inference_mode():
                if lean_loop:
                    return decode(LeanDecoder(tr.policy, 32), p_ids, p_mask, G, **kw)
                return sample_completions(tr.policy, p_ids, p_mask, G, **kw)
        return run

    same = 0
    for s in range(10):
        with torch.inference_mode():
            torch.manual_seed(s)
            a = sample_completions(tr.policy, p_ids, p_mask, G, **kw)
            torch.manual_seed(s)
            b = decode(LeanDecoder(tr.policy, 32), p_ids, p_mask, G, **kw)
        same += torch.equal(a, b)
    print(f"decode: identical token batches {same} of 10 seeds")
    ms = timed({"reference forward, HF (trainer)": inference(hf), "reference forward, lean": inference(lean_logprobs),
                "policy fwd+bwd, HF (trainer)": fwd_bwd(hf), "policy fwd+bwd, lean": fwd_bwd(lean_logprobs),
                "decode, HF forward (trainer)": sampled(False), "decode, lean": sampled(True)}, args.rounds)
    for k, v in ms.items():
        print(f"  {k:34s} median {v:7.1f} ms")
    for a, b in (("reference forward", "reference forward"), ("policy fwd+bwd", "policy fwd+bwd"), ("decode", "decode")):
        hf_ms = next(v for k, v in ms.items() if k.startswith(a) and "trainer" in k)
        lean_ms = next(v for k, v in ms.items() if k.startswith(b) and "lean" in k)
        print(f"{a}: lean speed-up {hf_ms / lean_ms:.2f}x")


def step(args) -> None:
    from rollout import build_trainer

    A = build_trainer(default_model_dir(), args.threads, [])
    B = build_trainer(default_model_dir(), args.threads, [])
    B.logprobs = lean_logprobs

    def run(tr, lean: bool):
        def go():
            with lean_sampling() if lean else contextlib.nullcontext():
                rows.setdefault(lean, []).append(tr.train_step())
            tr.step += 1
        return go

    rows: dict = {}
    ms = timed({"trainer": run(A, False), "lean forward + lean decode": run(B, True)}, args.rounds)
    for k, v in ms.items():
        print(f"  {k:28s} median step {v:6.1f} ms")
    print(f"loss of the first 4 steps: trainer {[round(r['loss'], 6) for r in rows[False][:4]]}, "
          f"lean {[round(r['loss'], 6) for r in rows[True][:4]]}")
    print(f"step_speedup={ms['trainer'] / ms['lean forward + lean decode']:.3f}")


def sampling_graph(args) -> None:
    from grpo_research.rollout import completion_mask_from, encode_prompts
    from grpo_research.trainers.common import token_logprobs_shared_prefix

    tr, _ = trainer_and_batch(args.threads)
    model, tok = tr.policy, tr.tokenizer
    problems = tr.task.train_problems(tr.data_rng, 8)
    p_ids, p_mask = encode_prompts(tok, [p.prompt for p in problems], torch.device("cpu"))
    kw = dict(max_new_tokens=32, temperature=1.0, top_p=1.0, greedy=False, eos_token_id=tok.eos_token_id,
              pad_token_id=tok.pad_token_id)
    parts_ms: dict[str, list] = {"trainer": [], "sampling graph": []}

    def trainer_way(seed):
        torch.manual_seed(seed)
        t0 = time.perf_counter()
        with torch.inference_mode():
            toks = decode(HFDecoder(model, 32), p_ids, p_mask, G, **kw)
        toks = toks.clone()
        cm, _ = completion_mask_from(toks, tok.eos_token_id)
        ids = torch.cat([p_ids.repeat_interleave(G, 0), torch.where(cm.bool(), toks, tok.pad_token_id)], 1)
        am = torch.cat([p_mask.repeat_interleave(G, 0), cm], 1)
        t1 = time.perf_counter()
        logp, _ = token_logprobs_shared_prefix(model, ids, am, toks.shape[1], group_size=G)
        t2 = time.perf_counter()
        (logp * cm).sum().backward()
        parts_ms["trainer"].append((t1 - t0, t2 - t1, time.perf_counter() - t2))
        return logp.detach(), cm

    def graph_way(seed):
        torch.manual_seed(seed)
        t0 = time.perf_counter()
        with torch.enable_grad():
            toks, logp = decode(HFDecoder(model, 32), p_ids, p_mask, G, with_logp=True, **kw)
        cm, _ = completion_mask_from(toks, tok.eos_token_id)
        t1 = time.perf_counter()
        (logp * cm).sum().backward()
        parts_ms["sampling graph"].append((t1 - t0, 0.0, time.perf_counter() - t1))
        return logp.detach(), cm

    model.zero_grad()
    a, cm = trainer_way(0)
    ga = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    b, cm_b = graph_way(0)
    gb = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    print(f"same tokens {torch.equal(cm, cm_b)}; max |log-prob difference| {((a - b) * cm).abs().max().item():.2e}; "
          f"max |gradient difference| {max((x - y).abs().max().item() for x, y in zip(ga, gb)):.2e} "
          f"(largest gradient entry {max(x.abs().max().item() for x in ga):.1f})")
    seeds = iter(range(1, 10**6))
    for _ in range(2):  # warm-up
        model.zero_grad(set_to_none=True)
        trainer_way(next(seeds))
        model.zero_grad(set_to_none=True)
        graph_way(next(seeds))
    for k in parts_ms:
        parts_ms[k].clear()
    timed({"trainer": lambda: (model.zero_grad(set_to_none=True), trainer_way(next(seeds))),
           "sampling graph": lambda: (model.zero_grad(set_to_none=True), graph_way(next(seeds)))}, args.rounds, warm=0)
    for k, v in parts_ms.items():
        med = [statistics.median(x[i] for x in v) * 1000 for i in range(3)]
        print(f"  {k:15s} decode {med[0]:6.1f} ms  policy forward {med[1]:5.1f} ms  backward {med[2]:5.1f} ms  "
              f"sum {sum(med):6.1f} ms")


def compiled(args) -> None:
    tr, batch = trainer_and_batch(args.threads)

    def fwd_bwd(fn, b=batch):
        logp, _ = fn(tr.policy, b.input_ids, b.attention_mask, b.completion_mask.shape[1])
        logp.sum().backward()

    cf = torch.compile(lean_logprobs, dynamic=False)
    t0 = time.perf_counter()
    fwd_bwd(cf)
    print(f"fixed shapes: first call (compile) {time.perf_counter() - t0:.1f} s")
    ms = timed({"eager": lambda: fwd_bwd(lean_logprobs), "compiled": lambda: fwd_bwd(cf)}, args.rounds)
    print(f"  eager {ms['eager']:.1f} ms, compiled {ms['compiled']:.1f} ms: {ms['eager'] / ms['compiled']:.2f}x")
    batches = [trainer_and_batch(args.threads, step=s)[1] for s in range(1, 5)]
    cd = torch.compile(lean_logprobs, dynamic=True)
    try:
        for b in batches:
            t0 = time.perf_counter()
            fwd_bwd(cd, b)
            print(f"dynamic shapes {tuple(b.input_ids.shape)}: first call {time.perf_counter() - t0:.1f} s")
    except Exception as e:  # noqa: BLE001 (report what the compiler raised)
        print(f"dynamic shapes: torch.compile failed: {type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["parts", "step", "sampling-graph", "compile"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=12)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  commit {git_commit()}  {machine_line()}  threads {args.threads}")
    {"parts": parts, "step": step, "sampling-graph": sampling_graph, "compile": compiled}[args.what](args)


if __name__ == "__main__":
    main()
