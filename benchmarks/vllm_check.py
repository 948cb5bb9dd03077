"""GPU check of the vLLM rollout backend, for a GPU machine with vLLM installed (a separate
environment: `python -m venv .venv-gpu && .venv-gpu/bin/pip install -e '.[gpu,dev]'`, since vLLM
pins its own torch and transformers; the lent GPU machine has no vLLM: benchmarks/gpu_check.sh
checks the HF backend there).

    .venv-gpu/bin/python benchmarks/vllm_check.py [--steps 8] [--cuda-graphs]
    .venv/bin/python benchmarks/vllm_check.py --dry-run-cpu --sft-steps 5 --steps 2   # the loop, no GPU

1. Builds the tiny char Llama (default size) and warms it up on `arith` for `--sft-steps`
   supervised steps on the GPU (seconds), so completions end in EOS and rewards vary.
2. Starts a colocated vLLM engine (`VLLMRollout`) on it, float32 if the installed vLLM runs
   float32, else bfloat16 (printed).
3. Runs `--steps` GRPO steps (G = 8 x 8 prompts, 32 new tokens, beta 0.04, lr 3e-5, mu = 1):
   rollout with vLLM (weights pushed after every update), reward, group advantages, the
   clipped surrogate + k3 KL, one AdamW step; per step the generated tokens per second of the
   rollout and `rollout/logp_drift` (mean |logp vLLM - logp trainer| on the sampled tokens).
4. The same rollout through the HF backend (lean loop) on the GPU, for comparison.

Prints `vllm_tokens_per_s=`, `hf_tokens_per_s=`, `logp_drift=` (medians over the steps after
the first) and `weight_syncs=`.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class _StandInEngine:
    """--dry-run-cpu: the HF backend behind VLLMRollout's interface (sampler log-probs = the
    trainer's), to exercise this script's loop without a GPU."""

    def __init__(self, model_dir, **_):
        self.syncs = 0
        self._version = None

    def generate(self, model, tokenizer, problems, n_per_prompt=1, **kw):
        import torch

        from grpo_research.rollout import SampledRolloutBatch, generate
        from grpo_research.trainers.common import token_logprobs

        version = tuple(p._version for p in model.parameters())
        self.syncs += version != self._version
        self._version = version
        b = generate(model, tokenizer, problems, n_per_prompt, **kw)
        with torch.no_grad():
            lp, _ = token_logprobs(model, b.input_ids, b.attention_mask, b.completion_mask.shape[1])
        fields = {k: getattr(b, k) for k in b.__dataclass_fields__}
        return SampledRolloutBatch(**fields, sampler_logprobs=lp)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--sft-steps", type=int, default=600)
    ap.add_argument("--dtype", default="auto", help="vLLM dtype: auto = float32, else bfloat16 if float32 fails")
    ap.add_argument("--cuda-graphs", action="store_true", help="let vLLM capture CUDA graphs (slower start)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dry-run-cpu", action="store_true",
                    help="check this script without a GPU: CPU, and a stand-in engine on the HF backend")
    args = ap.parse_args()

    import torch

    from grpo_research.algorithms import ADVANTAGES, SURROGATES, aggregate_loss, kl_estimate
    from grpo_research.config import RunConfig
    from grpo_research.models import build_char_tokenizer, build_tiny_model
    from grpo_research.rewards import build_reward
    from grpo_research.rollout import generate
    from grpo_research.rollout.vllm_backend import VLLMRollout, logp_drift
    from grpo_research.tasks import get_task
    from grpo_research.rollout.sampling import step_seed
    from grpo_research.trainers.common import token_logprobs
    from grpo_research.trainers.sft import sft_batch

    if args.dry_run_cpu:
        dev = torch.device("cpu")
        torch.cuda.synchronize = lambda: None
        VLLMRollout = _StandInEngine  # noqa: N806
    else:
        assert torch.cuda.is_available(), "no CUDA device"
        dev = torch.device("cuda")
        print(f"# device {torch.cuda.get_device_name(0)}  torch {torch.__version__}", flush=True)
    t_start = time.perf_counter()
    cfg = RunConfig()
    a = cfg.algo
    G, PROMPTS, MAX_NEW = 8, 8, 32
    torch.manual_seed(args.seed)
    task = get_task("arith")
    tok = build_char_tokenizer()
    model = build_tiny_model(len(tok), seed=args.seed).to(dev)

    # 1. supervised warm-up on the GPU
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
    rng = random.Random(args.seed)
    for _ in range(args.sft_steps):
        ids, mask, labels = (t.to(dev) for t in sft_batch(tok, task.train_problems(rng, 128)))
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    model_dir = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    model.save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    print(f"sft: {args.sft_steps} steps, loss {loss.item():.3f}, {time.perf_counter() - t_start:.0f} s", flush=True)

    # 2. the engine
    dtypes = ["float32", "bfloat16"] if args.dtype == "auto" else [args.dtype]
    engine = None
    for dtype in dtypes:
        try:
            t0 = time.perf_counter()
            engine = VLLMRollout(model_dir, seed=args.seed, dtype=dtype, max_model_len=64,
                                 gpu_memory_utilization=0.25, enforce_eager=not args.cuda_graphs)
            print(f"vllm engine: dtype {dtype}, started in {time.perf_counter() - t0:.0f} s", flush=True)
            break
        except Exception as e:  # noqa: BLE001 - report and try the next dtype
            print(f"vllm engine with dtype {dtype} failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
    if engine is None:
        raise SystemExit("could not start vLLM")

    # 3. GRPO steps with vLLM rollouts
    policy = model.train()
    ref = build_tiny_model(len(tok), seed=args.seed).to(dev)
    ref.load_state_dict(policy.state_dict())
    ref.eval().requires_grad_(False)
    opt = torch.optim.AdamW(policy.parameters(), lr=3e-5, betas=(0.9, 0.99))
    reward_fn = build_reward(task, {"correct": 1.0, "format": 0.2}, {})
    data_rng = random.Random(args.seed)
    tok_s, drifts, rewards = [], [], []
    for step in range(args.steps):
        problems = task.train_problems(data_rng, PROMPTS)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        batch = engine.generate(policy, tok, problems, G, max_new_tokens=MAX_NEW, temperature=1.0,
                                seed=step_seed(args.seed, step))
        t_gen = time.perf_counter() - t0
        rb = reward_fn(batch.problems, batch.completions, batch.finished)
        r = torch.tensor(rb.total, device=dev)
        adv = ADVANTAGES[a.advantage](r, a)
        ids, am = batch.input_ids.to(dev), batch.attention_mask.to(dev)
        mask = batch.completion_mask.to(dev).float()
        T = mask.shape[1]
        with torch.inference_mode():
            ref_lp, _ = token_logprobs(ref, ids, am, T)
        ref_lp = ref_lp.clone()
        logp, _ = token_logprobs(policy, ids, am, T)
        drift = logp_drift(batch.sampler_logprobs, logp.detach(), mask)
        per_token = SURROGATES[a.importance].loss(logp, logp.detach(), adv, mask, a.clip_eps, a.clip_eps) \
            + a.beta * kl_estimate(logp, ref_lp, a.kl_estimator)
        loss = aggregate_loss(per_token, mask, a.loss_agg, max_len=MAX_NEW)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        tok_s.append(batch.completion_tokens / t_gen)
        drifts.append(drift)
        rewards.append(r.mean().item())
        print(f"step {step}: rollout {t_gen * 1000:.0f} ms, {tok_s[-1]:.0f} tok/s, completion_len "
              f"{mask.sum(1).mean().item():.1f}, reward {rewards[-1]:.3f}, rollout/logp_drift {drift:.2e}", flush=True)

    # 4. the HF backend on the same GPU, same batch shape
    hf = []
    for step in range(3):
        problems = task.train_problems(data_rng, PROMPTS)
        policy.eval()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        batch = generate(policy, tok, problems, G, max_new_tokens=MAX_NEW, seed=step_seed(args.seed, 1000 + step))
        torch.cuda.synchronize()
        hf.append(batch.completion_tokens / (time.perf_counter() - t0))
    later = slice(1, None) if args.steps > 1 else slice(None)
    print(f"vllm_tokens_per_s={statistics.median(tok_s[later]):.0f}")
    print(f"hf_tokens_per_s={statistics.median(hf[1:]):.0f}")
    print(f"logp_drift={statistics.median(drifts[later]):.3e}")
    print(f"weight_syncs={engine.syncs} (steps {args.steps}); total {time.perf_counter() - t_start:.0f} s")


if __name__ == "__main__":
    main()
