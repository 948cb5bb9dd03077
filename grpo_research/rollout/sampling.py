"""Token sampling from float32 logits: HF's logits warpers (`warp_logits`: temperature, then
top-p), the HF-equivalent `torch.multinomial` sampler (`pick_tokens`), and the counter-based
Gumbel-max sampler (`counter_gumbel`, `counter_pick_tokens`) whose noise is a hash of (seed,
global row id, position, vocabulary id). See the package docstring (`grpo_research.rollout`)."""
from __future__ import annotations

import torch


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


def step_seed(seed: int, step: int, stream: int = 0) -> int:
    """A per-step seed, so that a resumed run samples exactly what an uninterrupted one does."""
    return (seed * 1_000_003 + step * 7919 + stream * 104_729) % (1 << 62)
