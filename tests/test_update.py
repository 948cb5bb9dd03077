"""The update engine (grpo_research/trainers/update.py): micro-batch accumulation equals one
batch, the non-finite skip, clipping, groups stepped or not, and that nothing else in the
package steps an optimizer or clips gradients."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from grpo_research.trainers.update import Loss, OptimGroup, micro_batch_scales, micro_batches, update

ROOT = Path(__file__).resolve().parents[1]


def _setup(seed=0, lr=0.1):
    torch.manual_seed(seed)
    w = torch.nn.Parameter(torch.randn(3))
    opt = torch.optim.SGD([w], lr=lr)
    return w, {"w": OptimGroup([w], opt)}


X = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 1.0], [2.0, 0.0, 0.0], [1.0, 1.0, 1.0]])  # (4, 3)


def test_micro_batches_accumulate_to_the_whole_batch_step():
    # loss = mean over rows of (x . w)^2: two micro-batches of 2 rows, scale 1/2 each, give the one-batch step
    def loss_fn(w):
        return lambda s: Loss(((X[s] @ w) ** 2).mean(), stats={"rows": torch.tensor(float(len(X[s])))})

    w1, g1 = _setup()
    one = update(loss_fn(w1), [slice(0, 4)], [1.0], g1, max_norm=0)
    w2, g2 = _setup()
    two = update(loss_fn(w2), micro_batches(4, 2), [0.5, 0.5], g2, max_norm=0)
    assert two.finite and one.finite
    assert torch.allclose(w1, w2, atol=1e-7) and not torch.equal(w1, _setup()[0])
    assert torch.allclose(one.loss, two.loss)
    assert two.stats["rows"].item() == pytest.approx(2.0)  # each micro-batch's 2 rows x 1/2, summed
    assert torch.allclose(one.grad_norm["w"], two.grad_norm["w"])


def test_hand_computed_sgd_step_and_clipping():
    # loss = w . x with x = (3, 4): gradient (3, 4), norm 5; max_norm 1 scales it to (0.6, 0.8); lr 0.1
    w = torch.nn.Parameter(torch.zeros(2))
    groups = {"w": OptimGroup([w], torch.optim.SGD([w], lr=0.1))}
    out = update(lambda _: Loss(w @ torch.tensor([3.0, 4.0])), [None], [1.0], groups, max_norm=1.0)
    assert out.grad_norm["w"].item() == pytest.approx(5.0)  # the norm before clipping
    assert w.tolist() == pytest.approx([-0.06, -0.08])
    assert out.lr == {"w": 0.1}


def test_a_non_finite_loss_skips_the_update_and_zeroes_gradients():
    w, groups = _setup()
    before = w.detach().clone()
    calls = []

    def loss_fn(s):
        calls.append(s)
        x = X[s] @ w
        return Loss(x.mean() * (float("nan") if s.start == 2 else 1.0))

    out = update(loss_fn, micro_batches(4, 2), [0.5, 0.5], groups, max_norm=1.0)
    assert not out.finite and out.grad_norm == {} and len(calls) == 2
    assert torch.equal(w.detach(), before) and w.grad is None


def test_only_the_named_groups_step_and_each_schedule_steps():
    a, b = torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))
    oa, ob = torch.optim.SGD([a], lr=1.0), torch.optim.SGD([b], lr=1.0)
    sa = torch.optim.lr_scheduler.LambdaLR(oa, lambda k: 0.5 ** k)
    groups = {"a": OptimGroup([a], oa, sa), "b": OptimGroup([b], ob)}
    out = update(lambda _: Loss((a * b).sum()), [None], [1.0], groups, max_norm=0, step=["b"])
    assert a.item() == 1.0 and b.item() == 0.0  # b moved by its gradient a = 1; a did not move
    assert set(out.grad_norm) == {"b"} and sa.get_last_lr() == [1.0]
    update(lambda _: Loss((a * b).sum() + a.sum()), [None], [1.0], groups, max_norm=0)
    assert sa.get_last_lr() == [0.5]  # a's schedule stepped once, with a's step


def test_micro_batch_scales_follow_the_aggregation_normaliser():
    mask = torch.tensor([[1, 1, 1], [1, 0, 0], [1, 1, 0], [0, 0, 0]], dtype=torch.float32)  # 6 valid tokens
    parts = micro_batches(4, 2)
    assert micro_batch_scales(parts, mask, "sequence") == [0.5, 0.5]  # rows / rows
    assert micro_batch_scales(parts, mask, "token") == [4 / 6, 2 / 6]  # valid tokens / valid tokens
    assert micro_batch_scales(parts, mask, "token", share=0.5) == [2 / 6, 1 / 6]
    assert micro_batches(5, 0) == [slice(0, 5)] and micro_batches(5, 2)[-1] == slice(4, 5)


def test_mismatched_parts_and_scales_are_refused():
    w, groups = _setup()
    with pytest.raises(ValueError, match="2 micro-batches but 1 scales"):
        update(lambda s: Loss(w.sum()), [0, 1], [1.0], groups, max_norm=0)


def _calls(path: Path) -> list[tuple[int, str]]:
    """(line, what) for each `<x>.step()` on an optimizer-looking name, and each clip_grad_norm_."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr, owner = node.func.attr, node.func.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if attr.startswith("clip_grad_norm"):
            out.append((node.lineno, attr))
        elif attr == "step" and ("opt" in name.lower() or "sched" in name.lower()):
            out.append((node.lineno, f"{name}.step"))
    return out


def test_only_the_update_engine_steps_optimizers_and_clips():
    engine = ROOT / "grpo_research/trainers/update.py"
    found = {p: _calls(p) for p in sorted((ROOT / "grpo_research").rglob("*.py"))}
    outside = {str(p.relative_to(ROOT)): c for p, c in found.items() if c and p != engine}
    assert outside == {}, outside
    assert {what for _, what in found[engine]} == {"clip_grad_norm_", "opt.step", "sched.step"}  # the check sees them
