"""One typed, validated config per run: defaults < YAML file < command-line `key=value`.

Every field carries its documentation (`help`) and its allowed range (`check`) in its
metadata; `python -m grpo_research.config` prints the key table that docs/config.md holds.
Unknown keys and out-of-range values raise `ConfigError` with one line naming the key (or
the file and line), the value and what is allowed. The resolved config is what gets written
to `<run-dir>/config.yaml` and sent to W&B, unchanged. The mechanics (field helper, strict
merge, YAML and override parsing) are in grpo_research/typed_config.py.

Every key of a run, with its default, range and documentation, in one file that reads top to
bottom; the checks across keys are in grpo_research/config_checks.py.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from grpo_research.config_checks import validate
from grpo_research.errors import ConfigError
from grpo_research.methods import METHODS
from grpo_research.typed_config import (
    closed_interval,
    doc_field,
    field_rows,
    ge,
    gt,
    load_yaml,
    merge,
    nest,
    one_of,
    open_interval,
    parse_override,
)

__all__ = ["ConfigError", "RunConfig", "config_from_dict", "key_table", "load_config", "load_yaml", "parse_override",
           "validate"]


def registered(registry: str):
    """A check against a registry of grpo_research.algorithms (imported when a config is validated,
    so that importing this module needs no torch): `registered("ADVANTAGES")`."""

    def check(v: Any) -> str | None:
        import grpo_research.algorithms as algorithms

        return getattr(algorithms, registry).check(v)

    return check


def _task_check(v: str) -> str | None:
    from grpo_research.tasks import TASKS

    return TASKS.check(v)


MAX_GROUP_SIZE = 1024  # G beyond this is a typo (published GRPO runs use 4-64)


# ---------------------------------------------------------------- the config
@dataclass
class ModelConfig:
    name_or_path: str = doc_field(
        "tiny",
        "Policy model: `tiny` builds (once, cached) the offline character-level Llama and its "
        "supervised warm-up (section `base`); otherwise a hub name or a local checkpoint directory.",
    )
    cache_dir: str = doc_field(
        "~/.cache/grpo-research",
        "Where built base models are cached (env GRPO_RESEARCH_CACHE overrides the default).",
    )
    dtype: str = doc_field("float32", "Parameter dtype of policy and reference.", one_of("float32", "bfloat16", "float16"))
    device: str = doc_field("auto", "Where the models train: auto (cuda when available, else cpu), cpu or cuda.",
                     one_of("auto", "cpu", "cuda"))
    hidden_size: int = doc_field(128, "tiny model: hidden size.", gt(0))
    num_layers: int = doc_field(4, "tiny model: transformer layers.", gt(0))
    num_heads: int = doc_field(4, "tiny model: attention heads.", gt(0))
    intermediate_size: int = doc_field(512, "tiny model: MLP width.", gt(0))
    max_position_embeddings: int = doc_field(256, "tiny model: context length in characters.", gt(0))
    lora_rank: int = doc_field(
        0, "LoRA rank r (0: full fine-tuning). With LoRA the policy trains adapters on a frozen base, the "
        "reference is that base with the adapters off (no second copy) and the final model is saved as adapters and "
        "merged (grpo_research/models/lora.py; extra `lora`).", ge(0))
    lora_alpha: float = doc_field(16.0, "LoRA alpha (the update is scaled by alpha / r).", gt(0))
    lora_dropout: float = doc_field(0.0, "LoRA dropout on the adapters' input.", closed_interval(0, 0.99))
    lora_targets: list | str = doc_field(
        "all-linear", "Modules that get adapters: all-linear (every linear layer but the LM head) or a list of module "
        "names (e.g. [q_proj, v_proj]).",
        lambda v: None if v == "all-linear" or (isinstance(v, list) and v and all(isinstance(x, str) for x in v))
        else "must be all-linear or a non-empty list of module names")


@dataclass
class BaseConfig:
    """The base-model stage: supervised warm-up of the tiny model to partial competence."""

    seed: int = doc_field(0, "Seed of the base-model stage (independent of the RL `seed`, so seeds share one base).",
                          closed_interval(-(2**63), 2**64 - 1))
    max_steps: int = doc_field(1500, "Upper bound on supervised steps.", gt(0))
    batch_size: int = doc_field(128, "Supervised batch size (examples).", gt(0))
    lr: float = doc_field(1e-3, "Supervised AdamW learning rate.", gt(0))
    eval_every: int = doc_field(25, "Check held-out greedy accuracy every this many steps (on `check_size` problems).", gt(0))
    check_size: int = doc_field(200, "Held-out problems per stopping check.", gt(0))
    eval_size: int = doc_field(1000, "Held-out problems of the final evaluation of the base model.", gt(0))
    stop_accuracy: float = doc_field(
        0.2,
        "Stop at the first evaluation reaching this held-out accuracy (aim: 20-50 %, room for RL).",
        closed_interval(0.0, 1.0),
    )


@dataclass
class TaskConfig:
    name: str = doc_field("arith", "Task (prompt source and grader).", _task_check)
    data_path: str = doc_field("", "Local data file or hub dataset name for benchmark tasks; empty for synthetic tasks.")
    levels: list = doc_field(
        [1, 2, 3],
        "arith, json_schema, tool_call: difficulty levels sampled for training (1-3; arith: digits of the operands; "
        "the structured tasks: see grpo_research/tasks/json_task.py, tool_task.py).",
        lambda v: None if v and all(x in (1, 2, 3) for x in v) else "must be a non-empty list of 1, 2, 3",
    )
    level_weights: list = doc_field(
        [0.15, 0.25, 0.6],
        "arith, json_schema, tool_call: sampling weight of each entry of `levels` (a curriculum: easier problems "
        "keep groups informative).",
        lambda v: None if v and all(isinstance(x, (int, float)) and x >= 0 for x in v) and sum(v) > 0
        else "must be non-negative numbers with a positive sum",
    )
    eval_level: int = doc_field(3, "arith, json_schema, tool_call: difficulty level of the held-out split.",
                                 one_of(1, 2, 3))
    options: dict = doc_field({}, "Extra keyword arguments of the task's constructor (see grpo_research/tasks).")
    prompt_format: str = doc_field(
        "auto", "How a problem is posed: `raw` (the task's prompt text as is), `chat` (as a user turn through the "
        "tokenizer's chat template, ended by its generation prompt) or `auto` (chat when the tokenizer has a chat "
        "template, else raw). Training and evaluation pose it alike (grpo_research/tasks/prompting.py).",
        one_of("auto", "raw", "chat"))
    system_prompt: str = doc_field("", "chat: a system turn before the problem (empty: none).")
    few_shot: int = doc_field(
        0, "Solved training problems shown before each problem (chat: as earlier user/assistant turns).",
        closed_interval(0, 16))


@dataclass
class RewardConfig:
    weights: dict = doc_field(
        {"correct": 1.0, "format": 0.2},
        "Reward terms and their weights: total = sum of weight x term (see grpo_research/rewards).",
    )
    options: dict = doc_field({}, "Per-term options, {term: {option: value}}.")


@dataclass
class RolloutConfig:
    backend: str = doc_field("hf", "Generation backend: hf (transformers, CPU or GPU) or vllm (a vLLM engine colocated with "
                      "training, GPU, extra `gpu`; logs rollout/logp_drift).", one_of("hf", "vllm"))
    vllm: dict = doc_field({}, "vllm backend: engine options (gpu_memory_utilization, dtype, max_model_len, enforce_eager, "
                    "any vLLM EngineArgs); see grpo_research/rollout/vllm_backend.py.")
    prompts_per_step: int = doc_field(8, "Prompts per training step (each sampled `algo.group_size` times).", gt(0))
    temperature: float = doc_field(1.0, "Sampling temperature (log-probs use the same temperature).", gt(0))
    top_p: float = doc_field(1.0, "Nucleus sampling threshold.", lambda v: None if 0 < v <= 1 else "must be in (0, 1]")
    max_new_tokens: int = doc_field(12, "Longest completion; a completion without EOS by then is truncated.", gt(0))
    sampler: str = doc_field(
        "torch",
        "hf backend's sampler: torch (HF generate's draws for a seed: torch.multinomial over the batch) or counter "
        "(Gumbel-max with noise hashed from (step seed, global row, position, token id): a row draws the same "
        "whatever batch it is in, so train.launcher=torchrun samples what one process samples).",
        one_of("torch", "counter"),
    )


@dataclass
class AlgoConfig:
    group_size: int = doc_field(8, "G: completions sampled per prompt.", closed_interval(2, MAX_GROUP_SIZE))
    beta: float = doc_field(0.04, "KL coefficient to the frozen reference model (0 drops the reference).", ge(0))
    clip_eps: float = doc_field(0.2, "epsilon: lower clip range of the importance ratio, 1 - eps.", open_interval(0, 1))
    clip_eps_high: float | None = doc_field(
        None,
        "Upper clip range, 1 + eps_high (DAPO clip-higher); defaults to `clip_eps`.",
        lambda v: None if v is None or 0 < v < 1 else "must be in (0, 1) or null",
    )
    kl_estimator: str = doc_field("k3", "Per-token KL estimator (Schulman): k1, k2 or k3.", registered("KL_ESTIMATORS"))
    adv_scale: str = doc_field(
        "group",
        "Advantage std scaling: group (GRPO), batch, none (only centre: Dr. GRPO).",
        one_of("group", "batch", "none"),
    )
    adv_std: str = doc_field("population", "Std estimator: population (1/G) or unbiased (1/(G-1)).", one_of("population", "unbiased"))
    loss_agg: str = doc_field(
        "sequence",
        "Loss aggregation: sequence (GRPO), token (DAPO), constant (Dr. GRPO: sum / (batch x max_new_tokens)).",
        registered("AGGREGATIONS"),
    )
    num_iterations: int = doc_field(1, "mu: policy updates per rollout batch (old log-probs cached; reused when 1).", ge(1))
    advantage: str = doc_field(
        "group",
        "Advantage estimator: a name registered in grpo_research/algorithms/advantages.py (`ADVANTAGES`; "
        "group is GRPO's, scaled per `adv_scale`); a wrong name is refused with the list.",
        registered("ADVANTAGES"),
    )
    adv_options: dict = doc_field(
        {}, "Options of the advantage estimator (`algo.advantage`), e.g. `algo.adv_options.c=1.0`: each estimator "
        "declares its own, with defaults and ranges (docs/config.md, estimator options); unset ones take their "
        "defaults, which config.yaml then records.")
    importance: str = doc_field(
        "token", "Importance ratio: token (PPO/GRPO) or sequence (GSPO: length-normalised sequence ratio).",
        registered("SURROGATES"),
    )
    dynamic_sampling: bool = doc_field(
        False, "DAPO: drop groups whose rewards are all equal and sample more prompts to refill the batch."
    )
    max_resample_rounds: int = doc_field(3, "Dynamic sampling: extra rollout rounds at most per step.", ge(0))
    overlong_filter: bool = doc_field(False, "DAPO: mask truncated completions (no EOS) out of the loss.")
    ref_reset_every: int = doc_field(
        0, "Reset the reference model to the current policy every this many steps (0: never; DeepSeek-R1: 400).", ge(0)
    )
    is_correction: str = doc_field(
        "none", "GRPO family, a sampler that is not the trainer (rollout.backend=vllm): weigh each token's surrogate "
        "term by rho = trainer / sampler probability of the sampled token(s): none, tis (truncated, min(rho, is_cap)) "
        "or mis (masked, rho where rho <= is_cap, else 0). grpo_research/algorithms/off_policy.py.",
        registered("IS_CORRECTIONS"))
    is_level: str = doc_field(
        "token", "is_correction: rho per token, or per sequence (the product over the completion's tokens: "
        "unbiased without a cap; the token level is not, tests/test_off_policy.py).", one_of("token", "sequence"))
    is_cap: float = doc_field(2.0, "is_correction: the cap C of tis and mis.", gt(0))
    sampler_sync_every: int = doc_field(
        1,
        "rft, online_rft, dpo, online_dpo: which model samples the training data. 1: the current policy, every step "
        "(online); N > 1: a copy of the policy refreshed every N steps (iterative); 0: the frozen base model for the "
        "whole run (offline: the data the base model would give if drawn before training, each sample used once). "
        "The RL methods always sample the current policy.",
        ge(0),
    )
    accept_term: str = doc_field(
        "correct", "rft, online_rft, dpo, online_dpo: the reward term whose score 1 marks a sample correct (kept by "
        "RFT, chosen by DPO; below 1: rejected). `random` with reward.weights={random: 1} gives their random control.")


@dataclass
class OptimConfig:
    lr: float = doc_field(3e-5, "AdamW peak learning rate.", gt(0))
    weight_decay: float = doc_field(0.0, "AdamW weight decay.", ge(0))
    beta1: float = doc_field(0.9, "AdamW beta1.", closed_interval(0, 1))
    beta2: float = doc_field(0.99, "AdamW beta2.", closed_interval(0, 1))
    warmup_steps: int = doc_field(0, "Linear warm-up steps.", ge(0))
    schedule: str = doc_field("constant", "After warm-up: constant or cosine decay to `min_lr_ratio` x lr.", one_of("constant", "cosine"))
    min_lr_ratio: float = doc_field(0.1, "Cosine floor as a fraction of lr.", closed_interval(0, 1))
    max_grad_norm: float = doc_field(1.0, "Gradient clipping norm (0 disables).", ge(0))


@dataclass
class TrainConfig:
    steps: int = doc_field(800, "Training steps (one rollout batch each).", gt(0))
    eval_every: int = doc_field(100, "Held-out evaluation every this many steps (also at step 0 and at the end).", gt(0))
    eval_size: int = doc_field(1000, "Held-out problems per evaluation (greedy decoding).", gt(0))
    eval_benchmarks: dict = doc_field(
        {}, "Benchmarks evaluated at every evaluation point beside the held-out accuracy, e.g. "
        "`{gsm8k: {n: 100, k: 4}}`: the first n problems, k samples each (k = 1: greedy; else at `temperature`, "
        "default 0.7), graded as `grpo-research eval` grades them; logged as eval/<benchmark>/pass@1, pass@k, "
        "maj@k (math) with 95 % intervals. Entry keys: n, k, temperature, data (file or folder; default the "
        "task's), max_new_tokens (default rollout.max_new_tokens), batch_size (default 64).")
    checkpoint_every: int = doc_field(100, "Atomic checkpoint every this many steps (and at the end).", gt(0))
    samples_every: int = doc_field(100, "Write a table of rollout samples to samples/ every this many steps.", gt(0))
    micro_batch_size: int = doc_field(
        0, "Completions per forward/backward pass (0: the whole batch at once); gradients are accumulated over "
        "the step's micro-batches (the same update up to float rounding), bounding activation memory. "
        "A multiple of algo.group_size.", ge(0))
    gradient_checkpointing: bool = doc_field(
        False, "Recompute activations in the backward pass instead of keeping them (less memory, about a third more "
        "compute); turns train.shared_prefix off, since transformers drops the KV cache it needs.")
    threads: int | str = doc_field(
        "auto", "torch CPU threads: auto (the cores this process may use that are idle now, at least 1: "
        "trainers.common.free_cores; benchmarks/RESULTS.md has the measurement behind it), N, or 0 (torch's "
        "own default, every core). The pipeline sets it per job.", lambda v: None if v == "auto" or (
            isinstance(v, int) and v >= 0) else "must be auto or an integer >= 0")
    shared_prefix: bool = doc_field(
        True, "Log-prob forwards (GRPO's; PPO's policy, critic and reference) compute each group's shared prompt once "
        "(faster; measured in benchmarks/RESULTS.md)."
    )
    lock_wait: float = doc_field(
        0.0, "Seconds to wait for another process holding this run dir (e.g. a requeued SLURM job's predecessor) "
        "before refusing with exit 2.", ge(0))
    launcher: str = doc_field(
        "local",
        "local: one process; torchrun: `grpo-research train` relaunches itself under torchrun with "
        "`nproc_per_node` data-parallel processes (gloo on CPU, NCCL on GPU; each samples its share of the step's "
        "prompts; gradients are all-reduced; rank 0 writes the run dir).",
        one_of("local", "torchrun"),
    )
    nproc_per_node: int = doc_field(
        2, "train.launcher=torchrun: processes (one GPU each when training on CUDA); `threads` is per process.", gt(0)
    )


@dataclass
class TrackingConfig:
    wandb: str = doc_field("offline", "Weights & Biases mode: offline (no login), online, or disabled.", one_of("offline", "online", "disabled"))
    project: str = doc_field("grpo-research", "W&B project.")
    group: str = doc_field("", "W&B group (a study name).")
    tags: list = doc_field([], "Extra W&B tags.")
    progress: bool = doc_field(True, "Show a progress bar on stderr.")


@dataclass
class PPOConfig:
    """method=ppo: PPO with a learned critic (Schulman et al. 2017; InstructGPT; DeepSeekMath section 4.1).
    Policy lr, clip range, KL coefficient and loss aggregation come from `optim` and `algo`."""

    gamma: float = doc_field(1.0, "ppo: GAE discount gamma over completion tokens.", closed_interval(0, 1))
    lam: float = doc_field(0.95, "ppo: GAE lambda (1.0: Monte Carlo returns minus the value baseline).", closed_interval(0, 1))
    epochs: int = doc_field(2, "ppo: passes over each rollout batch (old log-probs and values computed once per batch).", ge(1))
    minibatch_size: int = doc_field(
        64, "ppo: completions per minibatch (one optimizer step of policy and critic each; the default batch is one).", gt(0)
    )
    vf_coef: float = doc_field(0.5, "ppo: value-loss coefficient in the total loss.", ge(0))
    value_clip: float | None = doc_field(
        0.2,
        "ppo: clip of the value prediction around its rollout-time value (null: unclipped value loss).",
        lambda v: None if v is None or v > 0 else "must be > 0 or null",
    )
    ent_coef: float = doc_field(0.0, "ppo: entropy-bonus coefficient (0: none, as in InstructGPT).", ge(0))
    whiten_advantages: bool = doc_field(True, "ppo: whiten GAE advantages over the batch's valid tokens (masked mean/std).")
    kl_in_loss: bool = doc_field(
        False,
        "ppo: put beta x KL (estimator `algo.kl_estimator`) in the loss instead of the per-token reward penalty.",
    )
    reward_kl_estimator: str = doc_field(
        "k1",
        "ppo: KL estimator of the per-token reward penalty -beta x KL (k1 = log pi/pi_ref: InstructGPT, DeepSeekMath eq. 2).",
        registered("KL_ESTIMATORS"),
    )
    reuse_first_forward: bool = doc_field(
        True,
        "ppo: when one minibatch holds the whole batch and no micro-batches split it, the first epoch's forward "
        "(with gradient) also gives the rollout-policy log-probs and the old values, instead of a separate pass "
        "without gradient before it (the same parameters, so the same numbers; saves a policy and a critic "
        "forward per step).",
    )


@dataclass
class DPOConfig:
    """method=dpo | online_dpo: the preference loss (grpo_research/algorithms/dpo.py). Pairs are a
    correct and an incorrect sample of one prompt (`algo.sampler_sync_every` says whose samples).
    DPO has no KL term of its own: `algo.beta` stays 0 for it."""

    beta: float = doc_field(
        0.1, "dpo: beta of the DPO loss (the KL coefficient of the objective DPO solves, arXiv 2305.18290). "
        "Earlier versions read it from `algo.beta`; their run dirs still count as the same run.", gt(0))

    loss_type: str = doc_field("sigmoid", "dpo: the loss: sigmoid (arXiv 2305.18290) or ipo (arXiv 2310.12036).",
                               registered("DPO_LOSSES"))
    label_smoothing: float = doc_field(
        0.0, "dpo: probability that a pair's labels are wrong (conservative DPO; sigmoid loss only).",
        lambda v: None if 0 <= v < 0.5 else "must be in [0, 0.5)")


@dataclass
class CriticConfig:
    """method=ppo: the value model. AdamW betas, weight decay and grad clipping come from `optim`."""

    shared_trunk: bool = doc_field(
        False,
        "critic: a scalar value head on the policy's own trunk, instead of the default separate value model "
        "(the policy's architecture and size, initialised from the same base checkpoint: DeepSeekMath section 4.1).",
    )
    lr: float = doc_field(1e-4, "critic: AdamW learning rate (of the value model, or of the head alone when shared).", gt(0))
    warmup_steps: int = doc_field(0, "critic: first steps that update only the critic (the policy is left unchanged).", ge(0))


@dataclass
class RunConfig:
    method: str = doc_field("grpo", "Training method (a registered trainer/variant; see the methods table).", METHODS.check)
    seed: int = doc_field(0, "One seed for every RNG of the run (python, numpy, torch, data order, sampler).",
                          closed_interval(-(2**63), 2**64 - 1))
    model: ModelConfig = field(default_factory=ModelConfig)
    base: BaseConfig = field(default_factory=BaseConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    tracking: TrackingConfig = field(default_factory=TrackingConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    dpo: DPOConfig = field(default_factory=DPOConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def dump(self) -> str:
        from grpo_research.typed_config import safe_dump  # quotes strings such as '1e5'

        return safe_dump(self.to_dict(), sort_keys=False)


# ---------------------------------------------------------------- loading
def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> RunConfig:
    """defaults < the method's preset < YAML file < overrides; validated.

    A method's preset (e.g. `dr_grpo` sets `algo.adv_scale=none`, `algo.loss_agg=constant`) is
    registered with the method; anything the file or the command line sets wins over it.
    """
    file_data = load_yaml(path) if path is not None else {}
    parsed = [parse_override(item) for item in overrides or []]
    method = RunConfig().method
    if "method" in file_data:
        method = file_data["method"]
    for parts, value in parsed:
        if parts == ["method"]:
            method = value
    cfg = RunConfig()
    cfg.method = method
    _apply_preset(cfg)
    if path is not None:
        merge(cfg, file_data, str(path))
    for parts, value in parsed:
        merge(cfg, nest(parts, value), "command line")
    return validate(cfg)


def _apply_preset(cfg: RunConfig) -> None:
    method = METHODS.get(cfg.method) if isinstance(cfg.method, str) else None
    if method is not None and method.preset:
        merge(cfg, method.preset, f"preset of method {cfg.method!r}")


def config_from_dict(data: dict, where: str = "config") -> RunConfig:
    cfg = RunConfig()
    cfg.method = data.get("method", cfg.method)
    _apply_preset(cfg)
    merge(cfg, data, where)
    return validate(cfg)


def key_table() -> str:
    """The Markdown table of every config key (kept in docs/config.md)."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    for key, value, help in field_rows(RunConfig()):
        default = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
        rows.append(f"| `{key}` | `{default}` | {help} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(key_table())
