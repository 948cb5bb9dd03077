"""The HF rollout backend (lean decode loop) and the trainer's log-prob forwards.

Equivalence checks against references: the lean loop against HF `generate` (same seed, same
tokens), `pick_tokens` against HF's logits warpers, `token_logprobs` against log_softmax +
gather, `token_logprobs_shared_prefix` against `token_logprobs` (values, entropy, gradients).
The counter sampler (`rollout.sampler=counter`): a row draws the same tokens in any batch
(sub-batch with its row offset, compacted or not, lean loop or HF fallback), and its draws
follow softmax(top_p(logits / temperature)).
"""
import math

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, AutoTokenizer

import grpo_research.rollout as rollout
from grpo_research.rollout import (
    SampledRolloutBatch,
    completion_mask_from,
    counter_gumbel,
    counter_pick_tokens,
    encode_prompts,
    generate,
    hf_generate_completions,
    pick_tokens,
    sample_completions,
    select_and_concat,
)
from grpo_research.tasks.base import Problem
from grpo_research.trainers.common import token_logprobs, token_logprobs_shared_prefix

PROMPTS = ["12+3=", "007+348=", "9+9=", "1="]  # different lengths: left padding


@pytest.fixture(scope="module")
def model_and_tok(tiny_model_dir):
    """The tiny random model with EOS made likely (its tied embedding row scaled): completions
    end at many different lengths, so finished rows get dropped from the decode batch."""
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        model.model.embed_tokens.weight[tok.eos_token_id] *= 20
    model.eval()
    return model, tok


def _prompts(tok):
    return encode_prompts(tok, PROMPTS, torch.device("cpu"))


@pytest.mark.parametrize("greedy,temperature,top_p", [(False, 1.0, 1.0), (False, 0.7, 0.9), (True, 1.0, 1.0)])
def test_lean_loop_draws_what_hf_generate_draws(model_and_tok, greedy, temperature, top_p):
    model, tok = model_and_tok
    ids, mask = _prompts(tok)
    kw = dict(max_new_tokens=16, temperature=temperature, top_p=top_p, greedy=greedy,
              eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    torch.manual_seed(5)
    ref = hf_generate_completions(model, ids, mask, 8, **kw)  # (N, T)
    lengths = completion_mask_from(ref, tok.eos_token_id)[0].sum(1)
    if not greedy:  # the check means something only if rows end at different steps
        assert lengths.min() < 8 and lengths.max() == 16
    for share in (False, True):
        for compact in (False, True):
            torch.manual_seed(5)
            out = sample_completions(model, ids, mask, 8, share_prefix=share, compact=compact, **kw)
            assert out.shape == ref.shape
            same_rows = (out == ref).all(dim=1).float().mean().item()
            if greedy or not (share or compact):
                assert same_rows == 1.0, (share, compact)
            else:  # prefill / decode batch shapes differ from HF's: rows may differ by float rounding only
                assert same_rows >= 0.95, (share, compact, same_rows)


def test_generate_batch_layout(model_and_tok):
    model, tok = model_and_tok
    problems = [Problem(id=str(i), prompt=p) for i, p in enumerate(PROMPTS)]
    b = generate(model, tok, problems, 4, max_new_tokens=12, seed=3)
    N, P = 16, max(len(p) for p in PROMPTS)
    T = b.completion_mask.shape[1]
    assert b.input_ids.shape == b.attention_mask.shape == (N, P + T) and b.prompt_len == P
    assert [p.prompt for p in b.problems] == [p for p in PROMPTS for _ in range(4)]
    comp, cm = b.input_ids[:, P:], b.completion_mask
    assert torch.equal(b.attention_mask[:, P:], cm)
    assert torch.equal(b.attention_mask[:, :P].sum(1), torch.tensor([len(p) for p in PROMPTS]).repeat_interleave(4))
    assert b.completion_tokens == int(cm.sum())
    for i in range(N):  # the loop of the old decoder, as the reference for the batched one
        row, n = comp[i].tolist(), int(cm[i].sum())
        fin = tok.eos_token_id in row[:n]
        assert b.finished[i] == fin
        if fin:
            assert row[n - 1] == tok.eos_token_id and tok.eos_token_id not in row[: n - 1]
        assert all(t == tok.pad_token_id for t in row[n:])
        assert b.completions[i] == tok.decode(row[: n - 1 if fin else n], skip_special_tokens=False)
    assert 0 < sum(b.finished) < N


def test_generate_is_seeded_and_the_fallback_path_agrees(model_and_tok, monkeypatch):
    model, tok = model_and_tok
    problems = [Problem(id=str(i), prompt=p) for i, p in enumerate(PROMPTS)]
    a = generate(model, tok, problems, 4, max_new_tokens=12, seed=11)
    b = generate(model, tok, problems, 4, max_new_tokens=12, seed=11)
    assert torch.equal(a.input_ids, b.input_ids) and a.completions == b.completions
    monkeypatch.setattr(rollout.hf, "lean_supported", lambda model: False)  # model.generate instead
    c = generate(model, tok, problems, 4, max_new_tokens=12, seed=11)
    assert torch.equal(a.input_ids, c.input_ids) and a.completions == c.completions and a.finished == c.finished


def test_decoding_keeps_special_tokens_before_eos(model_and_tok):
    _, tok = model_and_tok
    comp = torch.tensor([[tok.convert_tokens_to_ids("1"), tok.bos_token_id, tok.eos_token_id, tok.pad_token_id]])
    cm, fin = completion_mask_from(comp, tok.eos_token_id)
    assert rollout.decode_completions(tok, comp, cm, fin) == ["1<bos>"]


def test_pick_tokens_matches_hf_warpers():
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    logits = torch.randn(64, 50) * 3
    ids = torch.zeros(64, 1, dtype=torch.long)
    ref = TopPLogitsWarper(0.8)(ids, TemperatureLogitsWarper(0.7)(ids, logits.clone()))
    torch.manual_seed(0)
    expected = torch.multinomial(torch.softmax(ref, -1), 1).squeeze(1)
    torch.manual_seed(0)
    assert torch.equal(pick_tokens(logits, 0.7, 0.8, greedy=False), expected)
    assert torch.equal(pick_tokens(logits, 0.7, 0.8, greedy=True), logits.argmax(-1))


# ---------------------------------------------------------------- log-probs
def _reference_logprobs(model, ids, mask, n, temperature):
    pos = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, -n - 1 : -1].float() / temperature
    logp_all = F.log_softmax(logits, -1)
    return logp_all.gather(-1, ids[:, -n:, None]).squeeze(-1), -(logp_all.exp() * logp_all).sum(-1)


@pytest.fixture(scope="module")
def rollout_batch(model_and_tok):
    model, tok = model_and_tok
    problems = [Problem(id=str(i), prompt=p) for i, p in enumerate(PROMPTS)]
    return generate(model, tok, problems, 4, max_new_tokens=10, seed=2)


def test_token_logprobs_matches_log_softmax_gather(model_and_tok, rollout_batch):
    model, _ = model_and_tok
    b = rollout_batch
    T = b.completion_mask.shape[1]
    ref_lp, ref_ent = _reference_logprobs(model, b.input_ids, b.attention_mask, T, 0.7)
    lp, ent = token_logprobs(model, b.input_ids, b.attention_mask, T, 0.7, with_entropy=True)
    m = b.completion_mask.bool()
    torch.testing.assert_close(lp[m], ref_lp[m], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ent[m], ref_ent[m], atol=1e-5, rtol=1e-5)
    assert token_logprobs(model, b.input_ids, b.attention_mask, T)[1] is None


def _grads(model, fn, mask):
    model.zero_grad(set_to_none=True)
    lp, ent = fn()
    (lp * mask).sum().backward()
    return lp.detach(), ent, [p.grad.clone() for p in model.parameters()]


def test_shared_prefix_logprobs_equal_one_forward_with_gradients(model_and_tok, rollout_batch):
    model, _ = model_and_tok
    b = rollout_batch
    T, m = b.completion_mask.shape[1], b.completion_mask.float()
    one = _grads(model, lambda: token_logprobs(model, b.input_ids, b.attention_mask, T, 0.9, True), m)
    shared = _grads(model, lambda: token_logprobs_shared_prefix(model, b.input_ids, b.attention_mask, T, 0.9, True,
                                                                group_size=4), m)
    mb = m.bool()
    torch.testing.assert_close(shared[0][mb], one[0][mb], atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(shared[1][mb], one[1][mb], atol=2e-5, rtol=1e-5)
    for gs, go in zip(shared[2], one[2]):
        torch.testing.assert_close(gs, go, atol=1e-6, rtol=1e-4)
    with torch.inference_mode():  # the reference model's path
        lp, _ = token_logprobs_shared_prefix(model, b.input_ids, b.attention_mask, T, 0.9, group_size=4)
    torch.testing.assert_close(lp[mb], one[0][mb], atol=2e-5, rtol=1e-5)


def test_shared_prefix_logprobs_of_partial_groups_equal_one_forward_with_gradients(model_and_tok, rollout_batch):
    """A micro-batch or a sorted PPO minibatch cuts groups: runs of 3, 2, 1 and 4 rows."""
    model, _ = model_and_tok
    b = rollout_batch
    rows = torch.tensor([0, 1, 2, 5, 6, 9, 12, 13, 14, 15])
    ids, am = b.input_ids[rows], b.attention_mask[rows]
    T, m = b.completion_mask.shape[1], b.completion_mask[rows].float()
    one = _grads(model, lambda: token_logprobs(model, ids, am, T, 0.9, True), m)
    shared = _grads(model, lambda: token_logprobs_shared_prefix(model, ids, am, T, 0.9, True, group_size=4), m)
    mb = m.bool()
    torch.testing.assert_close(shared[0][mb], one[0][mb], atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(shared[1][mb], one[1][mb], atol=2e-5, rtol=1e-5)
    for gs, go in zip(shared[2], one[2]):
        torch.testing.assert_close(gs, go, atol=1e-6, rtol=1e-4)
    with torch.no_grad():  # and it did share: the prompt forward saw one row per run
        calls = []
        hook = model.register_forward_pre_hook(lambda mod, args, kw: calls.append(kw["input_ids"].shape),
                                               with_kwargs=True)
        try:
            token_logprobs_shared_prefix(model, ids, am, T, group_size=4)
        finally:
            hook.remove()
    assert calls[0][0] == 4 and calls[1][0] == len(rows), calls


def test_shared_prefix_hidden_states_of_a_bare_trunk_equal_one_forward(tiny_model_dir, rollout_batch):
    """PPO's critic (a bare AutoModel trunk): last hidden states before each completion token."""
    from transformers import AutoModel

    from grpo_research.trainers.common import shared_prefix_outputs

    trunk = AutoModel.from_pretrained(tiny_model_dir)
    b = rollout_batch
    T = b.completion_mask.shape[1]
    w = torch.randn(trunk.config.hidden_size)

    def grads(fn):
        trunk.zero_grad(set_to_none=True)
        h = fn()  # (N, T, H)
        ((h @ w) * b.completion_mask).sum().backward()
        return h.detach(), [p.grad.clone() for p in trunk.parameters()]

    def plain():
        pos = (b.attention_mask.cumsum(1) - 1).clamp(min=0)
        out = trunk(input_ids=b.input_ids, attention_mask=b.attention_mask, position_ids=pos, use_cache=False)
        return out.last_hidden_state[:, -(T + 1) : -1]

    h1, g1 = grads(plain)
    h2, g2 = grads(lambda: shared_prefix_outputs(trunk, b.input_ids, b.attention_mask, T, group_size=4, hidden=True))
    m = b.completion_mask.bool()
    torch.testing.assert_close(h2[m], h1[m], atol=2e-5, rtol=1e-5)
    for a, c in zip(g2, g1):  # float rounding of sums of many terms: relative to the gradient's size
        torch.testing.assert_close(a, c, atol=1e-5 * max(1.0, c.abs().max().item()), rtol=1e-4)


def test_shared_prefix_falls_back_when_rows_are_not_grouped(model_and_tok, rollout_batch):
    model, _ = model_and_tok
    b = rollout_batch
    T = b.completion_mask.shape[1]
    perm = torch.arange(16).view(4, 4).t().reshape(-1)  # groups interleaved: no run of 4 equal prompts
    ids, mask = b.input_ids[perm], b.attention_mask[perm]
    with torch.no_grad():
        a, _ = token_logprobs_shared_prefix(model, ids, mask, T, group_size=4)
        c, _ = token_logprobs(model, ids, mask, T)
    assert torch.equal(a, c)


def test_select_and_concat_carries_sampler_logprobs(rollout_batch):
    b = rollout_batch
    N, T = b.completion_mask.shape
    lp = torch.where(b.completion_mask.bool(), -torch.rand(N, T), torch.full((N, T), math.nan))
    sb = SampledRolloutBatch(**{k: getattr(b, k) for k in b.__dataclass_fields__}, sampler_logprobs=lp)
    out = select_and_concat([sb, sb], [[0, 1, 2, 3], [8, 9, 10, 11]], pad_id=0)
    assert isinstance(out, SampledRolloutBatch)
    assert torch.equal(out.sampler_logprobs.nan_to_num(7.0), torch.cat([lp[:4], lp[8:12]]).nan_to_num(7.0))
    plain = select_and_concat([b], [[0, 1]], pad_id=0)
    assert type(plain) is rollout.RolloutBatch


# ---------------------------------------------------------------- the counter sampler
def test_counter_sampler_rows_draw_the_same_in_a_sub_batch(model_and_tok):
    """Prompts 2..3 sampled alone with row offset 8 (what data-parallel rank 1 of 2 samples) draw
    exactly what the full batch draws for its rows 8..15."""
    model, tok = model_and_tok
    problems = [Problem(id=str(i), prompt=p) for i, p in enumerate(PROMPTS)]
    kw = dict(max_new_tokens=16, temperature=0.8, top_p=0.95, seed=7, sampler="counter")
    full = generate(model, tok, problems, 4, **kw)
    head = generate(model, tok, problems[:2], 4, **kw)
    tail = generate(model, tok, problems[2:], 4, row_offset=8, **kw)
    assert 0 < sum(full.finished) < 16 and len(set(full.completions)) > 4  # rows end at different steps
    assert head.completions + tail.completions == full.completions
    assert head.finished + tail.finished == full.finished
    shifted = generate(model, tok, problems[2:], 4, **kw)  # without the offset: other rows' noise
    assert shifted.completions != tail.completions
    other_seed = generate(model, tok, problems, 4, **{**kw, "seed": 8})
    assert other_seed.completions != full.completions


def test_counter_sampler_ignores_compaction_prefix_sharing_and_the_fallback(model_and_tok, monkeypatch):
    model, tok = model_and_tok
    ids, mask = _prompts(tok)
    kw = dict(max_new_tokens=16, temperature=1.0, top_p=1.0, eos_token_id=tok.eos_token_id,
              pad_token_id=tok.pad_token_id, counter_seed=11, row_offset=3)
    ref = sample_completions(model, ids, mask, 8, share_prefix=False, compact=False, **kw)  # (32, T)
    assert completion_mask_from(ref, tok.eos_token_id)[1].float().mean() < 1  # some rows decode to the end
    for share in (False, True):
        for compact in (False, True):
            assert torch.equal(sample_completions(model, ids, mask, 8, share_prefix=share, compact=compact, **kw), ref)
    torch.manual_seed(0)  # the global generator plays no part
    assert torch.equal(hf_generate_completions(model, ids, mask, 8, **kw), ref)


def test_counter_sampler_follows_the_warped_softmax():
    """Empirical frequencies of 40,000 draws (one per global row, fixed seed) against
    softmax(top_p(logits / T)): Pearson chi-square far below a bound it would exceed only if
    the noise were wrong (dof <= 9: the 99.99 % quantile is ~33)."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopPLogitsWarper

    logits = torch.tensor([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0, -3.0, 0.2, -8.0])
    n = 40_000
    rows = torch.arange(n)
    for temperature, top_p in [(1.0, 1.0), (0.7, 0.9)]:
        x = logits.expand(n, -1)
        ids = torch.zeros(1, 1, dtype=torch.long)
        warped = TopPLogitsWarper(top_p)(ids, TemperatureLogitsWarper(temperature)(ids, logits[None].clone()))
        p = torch.softmax(warped[0], -1)  # (V,)
        picks = counter_pick_tokens(x, temperature, top_p, False, seed=1234, rows=rows, position=5)  # (n,)
        counts = torch.bincount(picks, minlength=len(logits)).double()
        assert counts[p == 0].sum() == 0  # never outside the nucleus
        keep = p > 0
        expected = n * p[keep].double()
        chi2 = ((counts[keep] - expected) ** 2 / expected).sum().item()
        assert chi2 < 40, (temperature, top_p, chi2, counts, expected)
    # the noise is a function of (seed, row, position, id): same inputs, same values; new position, new values
    g = counter_gumbel(5, torch.tensor([0, 1, 2]), 0, 7)
    assert torch.equal(g, counter_gumbel(5, torch.tensor([0, 1, 2]), 0, 7))
    assert torch.equal(g[1:], counter_gumbel(5, torch.tensor([1, 2]), 0, 7))
    assert not torch.equal(g, counter_gumbel(5, torch.tensor([0, 1, 2]), 1, 7))
    assert counter_pick_tokens(x[:4], 1.0, 1.0, True, seed=1, rows=rows[:4], position=0).eq(0).all()  # greedy
