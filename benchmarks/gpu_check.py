"""GPU check through the real CLI on the HF backend, for the lent GPU machine as it comes.

That machine has torch (2.11, CUDA 13), transformers (5.17), numpy, pyyaml, tqdm, safetensors,
tokenizers, accelerate, pandas, matplotlib, psutil and pytest, and nothing else: no network,
no vLLM, no wandb, optuna, snakemake, math-verify, datasets or jsonschema. Training imports
none of those, so this script runs the package from the checkout (`PYTHONPATH`), with no
install. `benchmarks/gpu_check.sh` runs it; it prints:

(a) the tiny offline default on CUDA: the base model built by `grpo-research sft` (on the CPU,
    as the pipeline builds it), then `grpo-research train` for 20 GRPO steps on `model.device=
    cuda`, and its held-out greedy accuracy at step 0 and at the end (`tiny_accuracy=`);
(b) a randomly initialised Llama of Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14 heads with
    2 KV heads, MLP 4864, vocabulary 151,936, tied embeddings; built from a config alone) with
    `model.dtype=bfloat16`, `train.micro_batch_size`, `train.gradient_checkpointing=true`:
    `grpo-research train` of GRPO and of PPO for a few steps each (8 prompts x G = 8, 128 new
    tokens), and per method the medians over the steps after the first of generated tokens/s,
    MFU twice: `cost/mfu` (the step's model FLOPs over the peak FLOP/s of a 1024-square float32
    matmul the process measured, which on a GPU this size understates the peak) and against
    `--peak-tflops` (default 989: the H200's bfloat16 dense datasheet figure),
    peak memory (`torch.cuda.max_memory_allocated`) and step time (`big_<method>=` lines, and
    `big_ppo_over_grpo=` for the step-time ratio). The tokenizer is the character one, so most
    sampled ids decode to nothing and nearly every completion runs to the token limit: a
    throughput and memory check at full length, not a learning check.
(b') the same two methods with LoRA adapters (rank 16, `model.lora_rank=16`), when peft is
    importable (the GPU image has no peft: the case is skipped there with a line saying so, and
    runs in the CPU dry run), with `big_<method>_lora_over_full=` ratios of model state, peak
    memory and step time;
(c) is `pytest -m gpu`, run by the shell script after this.

`--dry-run-cpu` runs the same commands on the CPU at tiny sizes (a few build and train steps, a
2-layer model of the same vocabulary in float32 without gradient checkpointing), so the test
suite checks this script's code paths on every CI run (tests/test_gpu_check.py).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT, worker_env

# Qwen2.5-0.5B's shape (its config.json), as a Llama (a Qwen2 config would swap the character
# tokenizer's pre-tokenizer in transformers 5; the difference, Qwen2's q/k/v biases, is 0.1 %
# of the parameters)
QWEN25_05B = dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                  num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True, rope_theta=1_000_000.0,
                  rms_norm_eps=1e-6, max_position_embeddings=1024)
# the dry run's stand-in: the same code paths at a size a CPU runs in seconds (a 152 k vocabulary
# alone made its PPO step 25 s: the logits of 64 samples)
DRY_BIG = dict(QWEN25_05B, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, vocab_size=1024)


def _env(threads: int) -> dict[str, str]:
    """The benchmarks' worker environment (threads, offline, W&B off), the checkout importable."""
    env = worker_env(threads)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    return env


def cli(args: list[str], threads: int, label: str) -> float:
    """Run `grpo-research ARGS` in a fresh process; its output goes to ours; returns seconds."""
    t0 = time.perf_counter()
    print(f"# {label}: grpo-research {' '.join(args)}", flush=True)
    proc = subprocess.run([sys.executable, "-m", "grpo_research.cli", *args], cwd=ROOT, env=_env(threads),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    tail = "\n".join(proc.stdout.splitlines()[-15:])
    if proc.returncode != 0:
        print(tail, flush=True)
        raise SystemExit(f"gpu_check: {label} failed (exit {proc.returncode})")
    return time.perf_counter() - t0


def rows(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]


def build_random_llama(out: Path, shape: dict, dtype: str) -> int:
    """A randomly initialised LlamaForCausalLM of `shape` with the character tokenizer, saved in
    `dtype`; returns its parameter count."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from grpo_research.models import build_char_tokenizer

    tok = build_char_tokenizer()
    config = LlamaConfig(**shape, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                         eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    with torch.device(device):  # initialising 0.5 B parameters on the GPU takes a fraction of the CPU's time
        model = LlamaForCausalLM(config)
    model.to(getattr(torch, dtype)).save_pretrained(out)
    tok.save_pretrained(out)
    return sum(p.numel() for p in model.parameters())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dry-run-cpu", action="store_true", help="the same commands on the CPU at tiny sizes")
    ap.add_argument("--tiny-steps", type=int, default=20)
    ap.add_argument("--big-steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=8, help="CPU threads of the base-model build")
    ap.add_argument("--peak-tflops", type=float, default=989.0,
                    help="the accelerator's dense bf16 peak for MFU (H200: 989)")
    ap.add_argument("--workdir", default=None, help="default: a fresh temporary folder")
    args = ap.parse_args()
    dry = args.dry_run_cpu
    t_start = time.perf_counter()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    device = "cpu" if dry else "cuda"
    if not dry:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("gpu_check: torch sees no CUDA device (use --dry-run-cpu to check the script on a CPU)")
        print(f"# device {torch.cuda.get_device_name(0)}  torch {torch.__version__}", flush=True)
    import transformers

    print(f"# transformers {transformers.__version__}", flush=True)
    quiet = ["tracking.wandb=disabled", "tracking.progress=false"]

    # (a) the tiny offline default on CUDA
    base = work / "tiny-arith"
    build = ["base.max_steps=20", "base.eval_every=10", "base.check_size=20", "base.eval_size=50"] if dry else []
    s = cli(["sft", "--out", str(base), *build, *quiet], args.threads, "(a) base model (CPU)")
    info = json.loads((base / "base_info.json").read_text())
    print(f"tiny_base: {info['steps']} steps, held-out accuracy {info['heldout_accuracy']:.3f}, {s:.0f} s", flush=True)
    tiny = work / "tiny-grpo"
    steps = 2 if dry else args.tiny_steps
    eval_size = 50 if dry else 1000
    s = cli(["train", "--run-dir", str(tiny), f"model.name_or_path={base}", f"model.device={device}",
             f"train.steps={steps}", f"train.eval_every={steps}", f"train.eval_size={eval_size}",
             "train.threads=1", *quiet], 1, f"(a) {steps} GRPO steps on {device}")
    r = rows(tiny)
    acc = [x["eval/accuracy"] for x in r if "eval/accuracy" in x]
    step_s = statistics.median(x["step_s"] for x in r if "step_s" in x)
    print(f"tiny_accuracy={acc[0]:.3f}->{acc[-1]:.3f} (held-out, greedy, {eval_size} problems; step 0 and {steps}) "
          f"step_s={step_s:.3f} reward_last={[x for x in r if 'reward_mean' in x][-1]['reward_mean']:.3f} "
          f"({s:.0f} s)", flush=True)

    # (b) GRPO vs PPO at Qwen2.5-0.5B's size
    shape = DRY_BIG if dry else QWEN25_05B
    dtype = "float32" if dry else "bfloat16"
    big = work / "llama-0.5b-random"
    t0 = time.perf_counter()
    n = build_random_llama(big, shape, dtype)
    print(f"big_model: random Llama, {n / 1e6:.1f} M parameters, {dtype}, built and saved in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    big_steps = 2 if dry else args.big_steps
    new_tokens = 8 if dry else 128
    common = [f"model.name_or_path={big}", f"model.device={device}", f"model.dtype={dtype}",
              f"train.steps={big_steps}", f"train.eval_every={big_steps}", "train.eval_size=8",
              "rollout.prompts_per_step=8", "algo.group_size=8", f"rollout.max_new_tokens={new_tokens}",
              "train.micro_batch_size=16", f"train.gradient_checkpointing={'false' if dry else 'true'}",
              "train.threads=1", "train.checkpoint_every=1000", *quiet]
    results = {}
    cases = [("grpo", []), ("ppo", [])]
    try:  # (b') the same with LoRA adapters (rank 16) when peft is importable; the GPU image has none
        import peft  # noqa: F401

        cases += [("grpo_lora", ["model.lora_rank=16", "model.lora_alpha=32"]),
                  ("ppo_lora", ["model.lora_rank=16", "model.lora_alpha=32"])]
    except ImportError:
        print("big_lora: skipped: peft is not installed here (the GPU image has none); the CPU dry run of the "
              "test suite runs this case", flush=True)
    for name, extra in cases:
        method = name.split("_")[0]
        run = work / f"big-{name}"
        s = cli(["train", "--run-dir", str(run), f"method={method}", *common, *extra], 1,
                f"(b) {name}, {big_steps} steps")
        steps_rows = [x for x in rows(run) if "step_s" in x]
        later = steps_rows[1:] or steps_rows  # the first step pays CUDA's warm-up

        def med(key):
            return statistics.median(x[key] for x in later)

        results[name] = {"step_s": med("step_s"), "tokens_per_s": med("cost/gen_tokens_per_s"),
                         "mfu": med("cost/mfu"), "flops_per_s": med("cost/model_flops_per_s"),
                         "peak_mem_gb": max(x["peak_mem_mb"] for x in steps_rows) / 1024,
                         "state_gb": steps_rows[-1]["cost/model_state_mb"] / 1024,
                         "rollout_s": med("rollout_s"), "update_s": med("update_s")}
        m = results[name]
        print(f"big_{name}=step_s {m['step_s']:.2f} (rollout {m['rollout_s']:.2f}, update {m['update_s']:.2f}) "
              f"gen_tokens_per_s {m['tokens_per_s']:.0f} mfu {m['mfu']:.4f} "
              f"mfu_vs_peak {m['flops_per_s'] / (args.peak_tflops * 1e12):.4f} peak_mem_gb {m['peak_mem_gb']:.2f} "
              f"model_state_gb {m['state_gb']:.3f} ({s:.0f} s in all)", flush=True)
    print(f"big_ppo_over_grpo={results['ppo']['step_s'] / results['grpo']['step_s']:.2f} (step time)")
    for method in ("grpo", "ppo"):
        if f"{method}_lora" in results:
            lo, full = results[f"{method}_lora"], results[method]
            print(f"big_{method}_lora_over_full=model_state {lo['state_gb'] / full['state_gb']:.2f} "
                  f"peak_mem {lo['peak_mem_gb'] / full['peak_mem_gb']:.2f} step_s {lo['step_s'] / full['step_s']:.2f}",
                  flush=True)
    print(f"gpu_check.py: done in {time.perf_counter() - t_start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
