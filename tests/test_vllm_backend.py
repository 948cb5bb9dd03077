"""The vLLM rollout backend: its pure parts on CPU (a stand-in for vLLM's outputs), the engine
itself only on a GPU machine with vLLM installed (marked `gpu`, skipped otherwise)."""
import importlib.util
import math
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from grpo_research.config import ConfigError, load_config
from grpo_research.rollout import SampledRolloutBatch, encode_prompts, generate, rollout_backend
from grpo_research.rollout.vllm_backend import logp_drift, outputs_to_batch, request_seeds
from grpo_research.tasks.base import Problem

HAS_VLLM_GPU = torch.cuda.is_available() and importlib.util.find_spec("vllm") is not None


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    t = AutoTokenizer.from_pretrained(tiny_model_dir)
    t.padding_side = "left"
    return t


def _completion(token_ids, finish_reason, logprob=-0.5):
    return SimpleNamespace(token_ids=token_ids, finish_reason=finish_reason, stop_reason=None,
                           logprobs=[{t: SimpleNamespace(logprob=logprob)} for t in token_ids])


def test_outputs_to_batch_matches_the_hf_layout(tok):
    ids = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    eos = tok.eos_token_id
    problems = [Problem(id="a", prompt="1+2="), Problem(id="b", prompt="10+20=")]
    outputs = [  # one request per completion, prompt-major, as VLLMRollout sends them
        SimpleNamespace(outputs=[_completion(ids("3") + [eos], "stop")]),
        SimpleNamespace(outputs=[_completion(ids("12345"), "length")]),  # truncated at max_new_tokens=5
        SimpleNamespace(outputs=[_completion(ids("30"), "stop")]),  # EOS stop not echoed by vLLM
        SimpleNamespace(outputs=[_completion(ids("3<bos>") + [eos], "stop")]),
    ]
    p_ids, p_mask = encode_prompts(tok, [p.prompt for p in problems], torch.device("cpu"))
    b = outputs_to_batch(outputs, problems, 2, tok, p_ids, p_mask, max_new_tokens=5)
    assert isinstance(b, SampledRolloutBatch)
    assert b.completions == ["3", "12345", "30", "3<bos>"]
    assert b.finished == [True, False, True, True]
    assert b.completion_mask.sum(1).tolist() == [2, 5, 3, 3]
    assert b.completion_tokens == 13 and b.prompt_len == 6
    assert b.input_ids.shape == (4, 6 + 5) and torch.equal(b.attention_mask[:, 6:], b.completion_mask)
    assert [p.id for p in b.problems] == ["a", "a", "b", "b"]
    lp = b.sampler_logprobs
    assert lp[0, :2].tolist() == [-0.5, -0.5] and math.isnan(lp[0, 2])  # NaN after EOS
    assert math.isnan(lp[2, 2])  # the EOS vLLM did not report has no log-prob
    assert b.input_ids[0, 6 + 2 :].eq(tok.pad_token_id).all()


def test_logp_drift_is_the_mean_absolute_difference_on_sampled_tokens():
    sampler = torch.tensor([[-1.0, -2.0, math.nan], [-0.5, math.nan, math.nan]])
    trainer = torch.tensor([[-1.5, -2.0, -9.0], [-0.25, -9.0, -9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    assert logp_drift(sampler, trainer, mask) == pytest.approx((0.5 + 0.0 + 0.25) / 3)
    assert math.isnan(logp_drift(sampler, trainer, torch.zeros_like(mask)))


def test_request_seeds_are_derived_and_distinct():
    assert request_seeds(None, 3) == [None, None, None]
    a = request_seeds(123, 64)
    assert a == request_seeds(123, 64) and len(set(a)) == 64 and a != request_seeds(124, 64)


def test_backend_registry():
    assert rollout_backend("hf") is generate
    with pytest.raises(ValueError, match="unknown rollout backend"):
        rollout_backend("sglang")
    if not HAS_VLLM_GPU:
        with pytest.raises(ConfigError, match="needs a CUDA device and vLLM"):
            rollout_backend("vllm", "unused", seed=0)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_VLLM_GPU, reason="needs CUDA and vllm")
def test_vllm_engine_samples_syncs_and_drifts_little(tiny_model_dir, tok):
    from grpo_research.rollout.vllm_backend import VLLMRollout
    from grpo_research.trainers.common import token_logprobs

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).cuda().eval()
    try:
        engine = VLLMRollout(tiny_model_dir, seed=0, dtype="float32", max_model_len=64, gpu_memory_utilization=0.2,
                             enforce_eager=True)
        bound = 0.01
    except Exception:  # a vLLM whose attention backends do not run float32
        engine = VLLMRollout(tiny_model_dir, seed=0, dtype="bfloat16", max_model_len=64, gpu_memory_utilization=0.2,
                             enforce_eager=True)
        bound = 0.1
    problems = [Problem(id=str(i), prompt=p) for i, p in enumerate(["1+2=", "10+20=", "7="])]
    b = engine.generate(model, tok, problems, 4, max_new_tokens=16, seed=5)
    assert len(b.completions) == 12 and engine.syncs == 1
    again = engine.generate(model, tok, problems, 4, max_new_tokens=16, seed=5)
    assert torch.equal(b.input_ids, again.input_ids) and engine.syncs == 1  # same seed, no new weights
    T = b.completion_mask.shape[1]
    with torch.no_grad():
        lp, _ = token_logprobs(model, b.input_ids.cuda(), b.attention_mask.cuda(), T)
    assert logp_drift(b.sampler_logprobs, lp, b.completion_mask.cuda()) < bound
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
    greedy = engine.generate(model, tok, problems, 1, max_new_tokens=16, greedy=True)
    hf = generate(model, tok, problems, 1, max_new_tokens=16, greedy=True)
    assert engine.syncs == 2
    if bound < 0.05:  # float32 on both sides: greedy decoding agrees
        assert greedy.completions == hf.completions


def test_trainer_logs_logp_drift_of_a_sampling_backend(tiny_model_dir, tmp_path):
    """The trainer's wiring on CPU: a backend that returns the sampler's log-probs (here the HF
    sampler, with the log-probs shifted by a known 0.25 on every sampled token) gets
    rollout/logp_drift logged; the HF backend gets none."""
    import dataclasses

    from grpo_research.trainers import common
    from grpo_research.trainers.grpo import GRPOTrainer

    cfg = load_config(None, [f"model.name_or_path={tiny_model_dir}", "rollout.prompts_per_step=2",
                             "algo.group_size=4", "rollout.max_new_tokens=8", "train.eval_size=4"])
    run = tmp_path / "r"
    run.mkdir()
    t = GRPOTrainer(cfg, run, tiny_model_dir)
    assert "rollout/logp_drift" not in t.train_step()

    def sampling_backend(model, tokenizer, problems, n_per_prompt=1, **kw):
        b = generate(model, tokenizer, problems, n_per_prompt, **kw)
        with torch.no_grad():
            lp, _ = common.token_logprobs(model, b.input_ids, b.attention_mask, b.completion_mask.shape[1],
                                          kw["temperature"])
        lp = torch.where(b.completion_mask.bool(), lp + 0.25, torch.full_like(lp, float("nan")))
        return SampledRolloutBatch(**{f.name: getattr(b, f.name) for f in dataclasses.fields(b)}, sampler_logprobs=lp)

    t.generate = sampling_backend
    row = t.train_step()
    assert row["rollout/logp_drift"] == pytest.approx(0.25, abs=1e-4)


def test_cuda_device_without_cuda_is_a_usage_error(tiny_model_dir, tmp_path, capsys):
    from grpo_research.cli import main

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    rc = main(["train", "--run-dir", str(tmp_path / "r"), f"model.name_or_path={tiny_model_dir}", "model.device=cuda"])
    err = capsys.readouterr().err
    assert rc == 2 and "model.device=cuda" in err and len(err.strip().splitlines()) == 1
    rc = main(["train", "--run-dir", str(tmp_path / "v"), f"model.name_or_path={tiny_model_dir}", "rollout.backend=vllm"])
    err = capsys.readouterr().err
    assert rc == 2 and "rollout.backend=vllm" in err and len(err.strip().splitlines()) == 1
