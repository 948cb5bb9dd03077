import torch

from grpo_research.trainers.cost import CostMeter, forward_flops, model_state_bytes, train_flops


def test_model_state_bytes_counts_params_grads_and_adam_moments():
    model = torch.nn.Linear(10, 5)  # 55 float32 parameters = 220 bytes
    opt = torch.optim.AdamW(model.parameters())
    assert model_state_bytes(model) == {"param": 220, "grad": 0, "optim": 0}
    assert model_state_bytes(model, opt) == {"param": 220, "grad": 220, "optim": 440}
    model(torch.ones(1, 10)).sum().backward()
    opt.step()
    b = model_state_bytes(model, opt)
    assert b["param"] == 220 and b["grad"] == 220 and b["optim"] >= 440  # two moments (+ step counters)


def test_cost_meter_row():
    meter = CostMeter()
    assert meter.peak_flops > 1e6
    model = torch.nn.Linear(4, 4)
    meter.register("policy", model, torch.optim.AdamW(model.parameters()))
    meter.register("reference", None)
    row = meter.step_metrics(step_s=2.0, rollout_s=0.5, update_s=1.5, samples=10, generated_tokens=100,
                             model_flops=4.0e6)
    assert row["cost/samples_per_s"] == 5.0
    assert row["cost/gen_tokens_per_s"] == 200.0
    assert row["cost/model_flops_per_s"] == 2.0e6
    assert row["cost/mfu"] == 2.0e6 / meter.peak_flops
    assert row["cost/model_state_mb"] == (80 + 80 + 160) / 2**20  # params, grads, two AdamW moments
    assert "cost/reference_param_mb" not in row


def test_flop_conventions():
    assert forward_flops(1000, 3) == 6000
    assert train_flops(1000, 3) == 18000
