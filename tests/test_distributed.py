"""Data-parallel training under torchrun (`train.launcher=torchrun`, gloo on CPU): two processes
reach the parameters and metrics of one process with the whole batch (`rollout.sampler=counter`),
rank 0 alone writes the run dir, configs that cannot shard exit 2 with one line, and SIGTERM
gives a checkpoint, exit 75 and a resume that ends where one uninterrupted process ends.
The counter sampler's batch-composition invariance is tested in test_rollout.py."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grpo_research.algorithms import AGGREGATIONS, aggregate_loss
from grpo_research.cli import main
from grpo_research.tracking import read_metrics
from grpo_research.trainers.common import EXIT_PREEMPTED, load_checkpoint
from grpo_research.trainers.distributed import shard_bounds, shard_loss_scale
from tests.helpers import deterministic, kill_after_step

EXE = str(Path(sys.executable).with_name("grpo-research"))
ENV = {**os.environ, "WANDB_MODE": "disabled"}
# Completion lengths vary (EOS made likely below), so the overlong penalty gives real advantages.
SMALL = ["rollout.sampler=counter", "rollout.prompts_per_step=4", "algo.group_size=4", "rollout.max_new_tokens=8",
         "train.eval_size=8", "train.threads=1", "tracking.wandb=disabled", "tracking.progress=false",
         "optim.lr=3e-3", "reward.weights={overlong: 1.0, format: 0.2}",
         "reward.options={overlong: {max_len: 8, cache: 7}}",
         "train.eval_benchmarks={arith: {n: 6, k: 2, temperature: 1.0}}"]  # each process samples its share
TORCHRUN = ["train.launcher=torchrun", "train.nproc_per_node=2"]
COMPARED = ("samples", "tokens", "reward_mean", "reward_std", "reward/overlong", "reward/format", "frac_zero_std", "frac_zero_std_generated",
            "loss", "kl", "entropy", "clip_frac", "grad_norm", "lr", "completion_len", "completion_len_std", "truncated_frac",
            "masked_frac", "eval/accuracy", "eval/arith/pass@1", "eval/arith/pass@2", "eval/arith/maj@2")


@pytest.fixture(scope="module")
def eos_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny random model with EOS made likely (tied embedding row scaled, as in test_rollout)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("eos_model")
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        model.model.embed_tokens.weight[tok.eos_token_id] *= 20
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


def _args(model_dir, run_dir, *extra):
    return ["train", "--run-dir", str(run_dir), f"model.name_or_path={model_dir}", *SMALL, *extra]


def _max_diff(a: dict, b: dict) -> float:
    return max((a[k] - b[k]).abs().max().item() for k in a)


def _assert_rows_match(rows, ref_rows):
    assert [r["step"] for r in rows] == [r["step"] for r in ref_rows]
    for r, ref in zip(rows, ref_rows):
        for k in COMPARED:
            if k in ref:
                assert r[k] == pytest.approx(ref[k], rel=1e-4, abs=1e-6), (r["step"], k)


# ---------------------------------------------------------------- the pure pieces
def test_shard_loss_scale_makes_the_sum_over_ranks_the_one_process_loss():
    torch.manual_seed(0)
    per_token = torch.randn(8, 6)  # (N, T)
    mask = (torch.rand(8, 6) < 0.7).long()
    mask[5] = 0  # a row without a valid token
    for mode in AGGREGATIONS:
        whole = aggregate_loss(per_token, mask, mode, max_len=8)
        for world in (2, 4):
            parts = [shard_bounds(8, r, world) for r in range(world)]
            total = float(mask.sum())
            summed = sum(shard_loss_scale(mode, world, float(mask[lo:hi].sum()), total)
                         * aggregate_loss(per_token[lo:hi], mask[lo:hi], mode, max_len=8) for lo, hi in parts)
            torch.testing.assert_close(summed, whole, rtol=1e-6, atol=1e-7)
    assert [shard_bounds(10, r, 3) for r in range(3)] == [(0, 3), (3, 6), (6, 10)]


# ---------------------------------------------------------------- two processes = one process
@pytest.fixture(scope="module", params=["sequence", "token-mu2", "lora"])
def runs(request, eos_model_dir, tmp_path_factory):
    """(1-process run dir, 2-process run dir, launcher stdout) of the same 2-step config."""
    extra = ["train.steps=2", "train.eval_every=2", "train.samples_every=2"]
    if request.param == "token-mu2":
        extra += ["algo.loss_agg=token", "algo.num_iterations=2"]
    if request.param == "lora":  # the adapters alone train; their gradients are what the ranks sum
        extra += ["model.lora_rank=4", "model.lora_alpha=8"]
    root = tmp_path_factory.mktemp(f"dp_{request.param}")
    one, two = root / "one", root / "two"
    assert main(_args(eos_model_dir, one, *extra)) == 0
    res = subprocess.run([EXE, *_args(eos_model_dir, two, *extra, *TORCHRUN)], env=ENV, capture_output=True,
                         text=True, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    return one, two, res.stdout


def test_two_processes_reach_the_one_process_parameters_and_metrics(runs, eos_model_dir):
    one, two, _ = runs
    base = load_file(eos_model_dir / "model.safetensors")
    a, b = load_file(one / "model/model.safetensors"), load_file(two / "model/model.safetensors")
    diff = _max_diff(a, b)
    print(f"max |param difference| 1 vs 2 processes: {diff:.3g}; largest change from base: {_max_diff(a, base):.3g}")
    assert diff < 1e-5
    assert _max_diff(a, base) > 1e-3  # training moved the parameters: the comparison means something
    if (one / "adapter").is_dir():  # with LoRA the adapters both processes saved are the same too
        ad = [load_file(run / "adapter/adapter_model.safetensors") for run in (one, two)]
        assert ad[0].keys() == ad[1].keys() and _max_diff(*ad) < 1e-5
    rows, ref = read_metrics(two / "metrics.jsonl"), read_metrics(one / "metrics.jsonl")
    assert next(r for r in ref if r["step"] == 1)["reward_std"] > 0  # real advantages, not rounding noise
    _assert_rows_match(rows, ref)
    # the samples of both runs are the same completions (the counter sampler draws per global row)
    s1 = [json.loads(l) for l in (one / "samples/step_000002.jsonl").read_text().splitlines()]
    s2 = [json.loads(l) for l in (two / "samples/step_000002.jsonl").read_text().splitlines()]
    assert len(s2) == 16
    assert [(r["prompt"], r["completion"], r["finished"]) for r in s2] == \
        [(r["prompt"], r["completion"], r["finished"]) for r in s1]
    assert [r["reward"] for r in s2] == pytest.approx([r["reward"] for r in s1])
    # train.eval_benchmarks: the shares sampled by two processes are the one process's completions
    kept = [run / "bench_eval/arith/step000002.predictions.jsonl" for run in (one, two)]
    assert len(kept[1].read_text().splitlines()) == 12 and kept[1].read_text() == kept[0].read_text()


def test_rank_zero_alone_writes_the_run_dir(runs):
    one, two, stdout = runs
    adapter = ["adapter"] if (one / "adapter").is_dir() else []  # LoRA: the adapters beside the merged model
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir()) == \
        [".lock", *adapter, "bench_eval", "checkpoint", "config.yaml", "final_eval", "metrics.jsonl", "model", "prompt.json",
         "samples", "summary.json"]
    # the last evaluation's file: every process's share, in problem order, as one process writes it
    rec_one, rec_two = (json.loads((d / "final_eval" / "heldout.json").read_text()) for d in (one, two))
    assert rec_two["n_predictions"] == rec_one["n_predictions"] == 8 and rec_two["pass@1"] == rec_one["pass@1"]
    assert (two / "final_eval" / "heldout.predictions.jsonl").read_text() == \
        (one / "final_eval" / "heldout.predictions.jsonl").read_text()
    assert [p.name for p in (two / "samples").iterdir()] == ["step_000002.jsonl"]
    rows = read_metrics(two / "metrics.jsonl")
    assert [r["step"] for r in rows if "reward_mean" in r] == [1, 2]  # each row once
    assert [r["step"] for r in rows if "eval/accuracy" in r] == [0, 2]
    assert [l for l in stdout.splitlines() if l.startswith("{")] == [stdout.splitlines()[-1]]  # one summary
    summary = json.loads((two / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["samples"] == 32  # global counts
    assert load_checkpoint(two)["step"] == 2


# ---------------------------------------------------------------- configs that cannot shard
@pytest.mark.parametrize("extra, needle", [
    (["rollout.prompts_per_step=3"], "(train.nproc_per_node=2): rollout.prompts_per_step=3 is not divisible"),
    (["method=ppo"], "does not support method=ppo"),
    (["method=sft_control"], "does not support method=sft_control"),
    (["algo.dynamic_sampling=true"], "algo.dynamic_sampling=true"),
    (["method=reinforce_pp"], "algo.advantage=reinforce_pp"),
    (["algo.adv_scale=batch"], "algo.adv_scale=batch"),
    (["method=nsr", "algo.adv_scale=batch"], "algo.adv_scale=batch"),  # NSR builds on the group estimator
])
def test_launcher_refuses_what_cannot_shard_with_one_line(extra, needle, eos_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(_args(eos_model_dir, run, *TORCHRUN, *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and needle in err, err
    assert not run.exists()  # refused before anything was launched or written


def test_counter_sampler_needs_the_hf_backend(capsys):
    assert main(["config", "rollout.sampler=counter", "rollout.backend=vllm"]) == 2
    assert "rollout.backend=hf" in capsys.readouterr().err


# ---------------------------------------------------------------- preemption
def test_sigterm_under_torchrun_checkpoints_exits_75_and_resumes(eos_model_dir, tmp_path):
    extra = ["train.steps=10", "train.eval_every=5", "train.checkpoint_every=1000"]
    ref = tmp_path / "ref"
    assert main(_args(eos_model_dir, ref, *extra)) == 0  # one process, uninterrupted
    run = tmp_path / "run"
    cmd = [EXE, *_args(eos_model_dir, run, *extra, *TORCHRUN)]
    proc, seen = kill_after_step(cmd, run / "metrics.jsonl", 2, ENV, sig=signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert seen is not None, "the run ended before SIGTERM"
    assert proc.returncode == EXIT_PREEMPTED, err[-3000:]
    assert "rerun the same command to resume" in err
    assert 2 <= load_checkpoint(run)["step"] < 10  # written when SIGTERM arrived, not at a scheduled step
    assert not (run / "summary.json").exists()
    res = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=180)  # same command: resumes
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in rows if "reward_mean" in r] == list(range(1, 11))
    _assert_rows_match(deterministic(rows), deterministic(read_metrics(ref / "metrics.jsonl")))
    assert _max_diff(load_file(run / "model/model.safetensors"), load_file(ref / "model/model.safetensors")) < 1e-5


def test_world_of_one_is_the_identity():
    from grpo_research.trainers.distributed import DataParallel

    dp = DataParallel()
    cols = torch.tensor([[0.1, 0.2], [1.0, 0.0]], dtype=torch.float64)
    out, sums = dp.gather_step(cols, [3, 7.5])
    assert out is cols and sums == [3, 7.5]
    # a combined mean at world 1 is the local mean, not (mean x weight) / weight with its rounding
    m, w = 0.1, 3.0
    assert dp.combine_mean(m, m * w, w) == m
    assert dp.shard(8) == (0, 8) and dp.sum_values([5]) == [5] and dp.loss_scale(torch.ones(2, 2), "token") == 1.0
    g = torch.ones(3)
    assert dp.all_reduce_grads([], g) is g
