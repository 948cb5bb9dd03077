"""Micro A/B benchmarks of the pieces of a GRPO step, alternated in one process (rounds in
A B C / C B A order), medians and ratios to the first variant.

    python benchmarks/micro.py generation   # HF generate variants vs the lean decode loop
    python benchmarks/micro.py logprobs     # log-prob forward variants (fwd+bwd and inference)
    python benchmarks/micro.py numerics     # sdpa vs eager attention, float32 vs bfloat16

Batch: 8 arith prompts x G = 8, 32 new tokens; the log-prob batch is one rollout of it.
"""
from __future__ import annotations

import argparse
import copy
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import default_model_dir, git_commit, machine_line, set_threads  # noqa: E402

G, MAX_NEW = 8, 32


def ab(fns: dict, rounds: int, warm: int = 2) -> None:
    names = list(fns)
    ts = {n: [] for n in names}
    for r in range(warm + rounds):
        for n in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            fns[n]()
            if r >= warm:
                ts[n].append(time.perf_counter() - t0)
    base = names[0]
    for n in names:
        ratio = statistics.median(a / b for a, b in zip(ts[n], ts[base]))
        print(f"  {n:44s} median {statistics.median(ts[n]) * 1000:8.1f} ms   per-round ratio to first {ratio:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["generation", "logprobs", "numerics"])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args()
    set_threads(args.threads)
    import torch
    import torch.nn.functional as F
    from transformers import DynamicCache

    from grpo_research.models import load_causal_lm
    from grpo_research.rollout import cache_kwarg, encode_prompts, generate, sample_completions
    from grpo_research.tasks import get_task
    from grpo_research.trainers.common import token_logprobs, token_logprobs_shared_prefix

    path = default_model_dir(args.fresh)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}  commit {git_commit()}  {machine_line()}")
    print(f"# {args.what}: model {path}  threads {args.threads}  rounds {args.rounds}")
    model, tok = load_causal_lm(path)
    model.eval()
    problems = get_task("arith").train_problems(random.Random(0), 8)
    ids, mask = encode_prompts(tok, [p.prompt for p in problems], torch.device("cpu"))
    eos, pad = tok.eos_token_id, tok.pad_token_id

    if args.what == "generation":
        def hf(**kw):
            torch.manual_seed(1)
            with torch.no_grad():
                model.generate(input_ids=ids.repeat_interleave(G, 0), attention_mask=mask.repeat_interleave(G, 0),
                               do_sample=True, max_new_tokens=MAX_NEW, temperature=1.0, top_p=1.0, top_k=0,
                               eos_token_id=eos, pad_token_id=pad, **kw)

        def hf_shared_cache():
            torch.manual_seed(1)
            with torch.no_grad():
                cache = DynamicCache(config=model.config)
                pos = (mask.cumsum(1) - 1).clamp(min=0)
                model(input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=pos[:, :-1],
                      logits_to_keep=1, use_cache=True, **{cache_kwarg(model): cache})
                cache.batch_repeat_interleave(G)
                model.generate(input_ids=ids.repeat_interleave(G, 0), attention_mask=mask.repeat_interleave(G, 0),
                               past_key_values=cache, do_sample=True, max_new_tokens=MAX_NEW, temperature=1.0,
                               top_p=1.0, top_k=0, eos_token_id=eos, pad_token_id=pad)

        def lean(share, compact):
            def run():
                torch.manual_seed(1)
                sample_completions(model, ids, mask, G, max_new_tokens=MAX_NEW, eos_token_id=eos, pad_token_id=pad,
                                   share_prefix=share, compact=compact)
            return run

        ab({"model.generate (before)": hf,
            "model.generate, static cache": lambda: hf(cache_implementation="static"),
            "model.generate, prompt KV once per prompt": hf_shared_cache,
            "lean loop, no sharing, no compaction": lean(False, False),
            "lean loop, shared prefill": lean(True, False),
            "lean loop, shared prefill + compaction (kept)": lean(True, True)}, args.rounds)
        return

    batch = generate(model, tok, problems, G, max_new_tokens=MAX_NEW, seed=3)
    T = batch.completion_mask.shape[1]
    cm = batch.completion_mask.float()
    b_ids, b_mask = batch.input_ids, batch.attention_mask
    print(f"# log-prob batch {tuple(b_ids.shape)}, prompt {batch.prompt_len}, completion {T}")

    def before(m, with_entropy=False):  # token_logprobs before this change
        pos = (b_mask.cumsum(1) - 1).clamp(min=0)
        out = m(input_ids=b_ids, attention_mask=b_mask, position_ids=pos, logits_to_keep=T + 1, use_cache=False)
        logp_all = F.log_softmax(out.logits[:, :-1].float(), dim=-1)
        logp = logp_all.gather(-1, b_ids[:, -T:, None]).squeeze(-1)
        if with_entropy:
            with torch.no_grad():
                -(logp_all.exp() * logp_all).sum(-1)
        return logp, None

    def fwd_bwd(m, fn):
        def run():
            m.zero_grad(set_to_none=True)
            lp, _ = fn(m)
            (lp * cm).sum().backward()
        return run

    def inference(m, fn):
        def run():
            with torch.inference_mode():
                fn(m)
        return run

    if args.what == "logprobs":
        model.train()
        variants = {
            "log_softmax + gather (before)": lambda m: before(m, True),
            "gather - logsumexp (kept)": lambda m: token_logprobs(m, b_ids, b_mask, T, 1.0, True),
            "shared prefix": lambda m: token_logprobs_shared_prefix(m, b_ids, b_mask, T, 1.0, True, group_size=G),
        }
        print("policy: forward + backward")
        ab({k: fwd_bwd(model, f) for k, f in variants.items()}, args.rounds)
        print("reference: forward under inference_mode")
        ab({k: inference(model, f) for k, f in variants.items()}, args.rounds)
        return

    eager, _ = load_causal_lm(path, attn_implementation="eager")
    bf16 = copy.deepcopy(model).to(torch.bfloat16)
    models = {"sdpa float32 (default)": model, "eager float32": eager, "sdpa bfloat16 weights": bf16}

    def autocast(fn):
        def run():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                fn()
        return run

    lp = lambda m: token_logprobs(m, b_ids, b_mask, T)  # noqa: E731
    for m in models.values():
        m.train()
    print("policy: forward + backward")
    fns = {k: fwd_bwd(m, lp) for k, m in models.items()}
    fns["sdpa float32 weights, bf16 autocast"] = autocast(fwd_bwd(model, lp))
    ab(fns, args.rounds)
    print("reference: forward under inference_mode")
    fns = {k: inference(m, lp) for k, m in models.items()}
    fns["sdpa float32 weights, bf16 autocast"] = autocast(inference(model, lp))
    ab(fns, args.rounds)
    print("generation (lean loop)")

    def gen(m):
        def run():
            m.eval()
            torch.manual_seed(1)
            sample_completions(m, ids, mask, G, max_new_tokens=MAX_NEW, eos_token_id=eos, pad_token_id=pad)
        return run
    ab({k: gen(m) for k, m in models.items()}, args.rounds)


if __name__ == "__main__":
    main()
