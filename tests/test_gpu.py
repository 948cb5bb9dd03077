"""The CUDA code path (marked `gpu`; skipped without a CUDA device). benchmarks/gpu_check.sh runs
this file on the lent GPU machine, whose image has torch, transformers and pytest but not wandb,
optuna, snakemake, math-verify, datasets or jsonschema: these tests import nothing else."""
import random

import pytest
import torch

from grpo_research.config import load_config
from grpo_research.tasks import get_task
from grpo_research.trainers import build_trainer
from grpo_research.trainers.common import token_logprobs
from tests.helpers import fast_run

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

BASE = fast_run("reward.weights={overlong: 1.0}", "algo.beta=0.04", "rollout.prompts_per_step=4", "model.device=cuda")


def _trainer(model_dir, run_dir, *overrides):
    cfg = load_config(None, [f"model.name_or_path={model_dir}", *BASE, *overrides])
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("")
    return build_trainer(cfg, run_dir, model_dir)


def test_log_probs_on_cuda_equal_the_cpu_ones(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    torch.backends.cuda.matmul.allow_tf32 = False
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, model.config.vocab_size, (6, 20), generator=g)
    mask = torch.ones_like(ids)
    mask[:2, :5] = 0  # left padding
    with torch.no_grad():
        cpu, _ = token_logprobs(model, ids, mask, 8)
        gpu, _ = token_logprobs(model.cuda(), ids.cuda(), mask.cuda(), 8)
    assert torch.allclose(cpu, gpu.cpu(), atol=1e-4), (cpu - gpu.cpu()).abs().max()


def test_micro_batches_on_cuda_give_the_whole_batch_update(tiny_model_dir, tmp_path):
    grads = []
    for name, mb in (("whole", []), ("micro", ["train.micro_batch_size=8"])):
        t = _trainer(tiny_model_dir, tmp_path / name, *mb)
        assert next(t.policy.parameters()).is_cuda
        t.train_step()
        grads.append([p.grad.detach().cpu() for p in t.policy.parameters()])
    assert sum(g.abs().sum().item() for g in grads[0]) > 1e-3  # a real gradient
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-5, rtol=1e-4)


def test_a_bf16_step_with_gradient_checkpointing_trains_on_cuda(tiny_model_dir, tmp_path):
    t = _trainer(tiny_model_dir, tmp_path / "run", "model.dtype=bfloat16", "train.gradient_checkpointing=true",
                 "train.micro_batch_size=8", "method=ppo")
    assert next(t.policy.parameters()).dtype == torch.bfloat16
    before = [p.detach().clone() for p in t.policy.parameters()]
    row = t.train_step()
    assert all(torch.isfinite(torch.tensor(v)) for k, v in row.items() if isinstance(v, float))
    assert any((p - q).abs().max() > 0 for p, q in zip(t.policy.parameters(), before))
    assert row["peak_mem_mb"] == pytest.approx(torch.cuda.max_memory_allocated() / 2**20, rel=0.5)


def test_seeded_sampling_on_cuda_repeats(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_research.rollout.hf import generate

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).cuda().eval()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    problems = get_task("arith").train_problems(random.Random(0), 4)
    a, b = (generate(model, tok, problems, 4, max_new_tokens=8, seed=7, sampler="counter") for _ in range(2))
    assert a.completions == b.completions and torch.equal(a.completion_mask, b.completion_mask)
