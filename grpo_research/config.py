"""One typed, validated config per run: defaults < YAML file < command-line `key=value`.

Every field carries its documentation (`help`) and its allowed range (`check`) in its
metadata; `python -m grpo_research.config` prints the key table that the README holds.
Unknown keys and out-of-range values raise `ConfigError` with one line naming the key (or
the file and line), the value and what is allowed. The resolved config is what gets written
to `<run-dir>/config.yaml` and sent to W&B, unchanged.
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import yaml

from grpo_research.errors import ConfigError
from grpo_research.methods import METHODS

__all__ = ["ConfigError", "RunConfig", "config_from_dict", "data_parallel_problem", "key_table", "load_config",
           "load_yaml", "parse_override", "validate"]


# ---------------------------------------------------------------- field helpers
def _f(default: Any, help: str, check: Callable[[Any], str | None] | None = None):
    """A config field with its documentation and an optional range check."""
    kw: dict[str, Any] = {"metadata": {"help": help, "check": check}}
    if isinstance(default, (dict, list)):
        kw["default_factory"] = lambda d=default: type(d)(d)
    else:
        kw["default"] = default
    return field(**kw)


def gt(lo: float):
    return lambda v: None if v > lo else f"must be > {lo}"


def ge(lo: float):
    return lambda v: None if v >= lo else f"must be >= {lo}"


def open_interval(lo: float, hi: float):
    return lambda v: None if lo < v < hi else f"must be in ({lo}, {hi})"


def closed_interval(lo: float, hi: float):
    return lambda v: None if lo <= v <= hi else f"must be in [{lo}, {hi}]"


def one_of(*choices: Any):
    return lambda v: None if v in choices else f"must be one of {', '.join(map(str, choices))}"


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


# ---------------------------------------------------------------- the config
@dataclass
class ModelConfig:
    name_or_path: str = _f(
        "tiny",
        "Policy model: `tiny` builds (once, cached) the offline character-level Llama and its "
        "supervised warm-up (section `base`); otherwise a hub name or a local checkpoint directory.",
    )
    cache_dir: str = _f(
        "~/.cache/grpo-research",
        "Where built base models are cached (env GRPO_RESEARCH_CACHE overrides the default).",
    )
    dtype: str = _f("float32", "Parameter dtype of policy and reference.", one_of("float32", "bfloat16", "float16"))
    device: str = _f("auto", "Where the models train: auto (cuda when available, else cpu), cpu or cuda.",
                     one_of("auto", "cpu", "cuda"))
    hidden_size: int = _f(128, "tiny model: hidden size.", gt(0))
    num_layers: int = _f(4, "tiny model: transformer layers.", gt(0))
    num_heads: int = _f(4, "tiny model: attention heads.", gt(0))
    intermediate_size: int = _f(512, "tiny model: MLP width.", gt(0))
    max_position_embeddings: int = _f(256, "tiny model: context length in characters.", gt(0))


@dataclass
class BaseConfig:
    """The base-model stage: supervised warm-up of the tiny model to partial competence."""

    seed: int = _f(0, "Seed of the base-model stage (independent of the RL `seed`, so seeds share one base).")
    max_steps: int = _f(1500, "Upper bound on supervised steps.", gt(0))
    batch_size: int = _f(128, "Supervised batch size (examples).", gt(0))
    lr: float = _f(1e-3, "Supervised AdamW learning rate.", gt(0))
    eval_every: int = _f(25, "Check held-out greedy accuracy every this many steps (on `check_size` problems).", gt(0))
    check_size: int = _f(200, "Held-out problems per stopping check.", gt(0))
    eval_size: int = _f(1000, "Held-out problems of the final evaluation of the base model.", gt(0))
    stop_accuracy: float = _f(
        0.2,
        "Stop at the first evaluation reaching this held-out accuracy (aim: 20-50 %, room for RL).",
        closed_interval(0.0, 1.0),
    )


@dataclass
class TaskConfig:
    name: str = _f("arith", "Task (prompt source and grader).", _task_check)
    data_path: str = _f("", "Local data file or hub dataset name for benchmark tasks; empty for synthetic tasks.")
    levels: list = _f(
        [1, 2, 3],
        "arith: difficulty levels sampled for training (1-3: digits of the operands).",
        lambda v: None if v and all(x in (1, 2, 3) for x in v) else "must be a non-empty list of 1, 2, 3",
    )
    level_weights: list = _f(
        [0.15, 0.25, 0.6],
        "arith: sampling weight of each entry of `levels` (a curriculum: easier problems keep groups informative).",
        lambda v: None if v and all(isinstance(x, (int, float)) and x >= 0 for x in v) and sum(v) > 0
        else "must be non-negative numbers with a positive sum",
    )
    eval_level: int = _f(3, "arith: difficulty level of the held-out split.", one_of(1, 2, 3))
    options: dict = _f({}, "Extra keyword arguments of the task's constructor (see grpo_research/tasks).")


@dataclass
class RewardConfig:
    weights: dict = _f(
        {"correct": 1.0, "format": 0.2},
        "Reward terms and their weights: total = sum of weight x term (see grpo_research/rewards).",
    )
    options: dict = _f({}, "Per-term options, {term: {option: value}}.")


@dataclass
class RolloutConfig:
    backend: str = _f("hf", "Generation backend: hf (transformers, CPU or GPU) or vllm (a vLLM engine colocated with "
                      "training, GPU, extra `gpu`; logs rollout/logp_drift).", one_of("hf", "vllm"))
    vllm: dict = _f({}, "vllm backend: engine options (gpu_memory_utilization, dtype, max_model_len, enforce_eager, "
                    "any vLLM EngineArgs); see grpo_research/rollout/vllm_backend.py.")
    prompts_per_step: int = _f(8, "Prompts per training step (each sampled `algo.group_size` times).", gt(0))
    temperature: float = _f(1.0, "Sampling temperature (log-probs use the same temperature).", gt(0))
    top_p: float = _f(1.0, "Nucleus sampling threshold.", lambda v: None if 0 < v <= 1 else "must be in (0, 1]")
    max_new_tokens: int = _f(12, "Longest completion; a completion without EOS by then is truncated.", gt(0))
    sampler: str = _f(
        "torch",
        "hf backend's sampler: torch (HF generate's draws for a seed: torch.multinomial over the batch) or counter "
        "(Gumbel-max with noise hashed from (step seed, global row, position, token id): a row draws the same "
        "whatever batch it is in, so train.launcher=torchrun samples what one process samples).",
        one_of("torch", "counter"),
    )


@dataclass
class AlgoConfig:
    group_size: int = _f(8, "G: completions sampled per prompt.", ge(2))
    beta: float = _f(0.04, "KL coefficient to the frozen reference model (0 drops the reference).", ge(0))
    clip_eps: float = _f(0.2, "epsilon: lower clip range of the importance ratio, 1 - eps.", open_interval(0, 1))
    clip_eps_high: float | None = _f(
        None,
        "Upper clip range, 1 + eps_high (DAPO clip-higher); defaults to `clip_eps`.",
        lambda v: None if v is None or 0 < v < 1 else "must be in (0, 1) or null",
    )
    kl_estimator: str = _f("k3", "Per-token KL estimator (Schulman): k1, k2 or k3.", registered("KL_ESTIMATORS"))
    adv_scale: str = _f(
        "group",
        "Advantage std scaling: group (GRPO), batch, none (only centre: Dr. GRPO).",
        one_of("group", "batch", "none"),
    )
    adv_std: str = _f("population", "Std estimator: population (1/G) or unbiased (1/(G-1)).", one_of("population", "unbiased"))
    loss_agg: str = _f(
        "sequence",
        "Loss aggregation: sequence (GRPO), token (DAPO), constant (Dr. GRPO: sum / (batch x max_new_tokens)).",
        registered("AGGREGATIONS"),
    )
    num_iterations: int = _f(1, "mu: policy updates per rollout batch (old log-probs cached; reused when 1).", ge(1))
    advantage: str = _f(
        "group",
        "Advantage estimator: group (GRPO, scaled per `adv_scale`), rloo (leave-one-out baseline), "
        "reinforce_pp (REINFORCE++: batch mean and std).",
        registered("ADVANTAGES"),
    )
    importance: str = _f(
        "token", "Importance ratio: token (PPO/GRPO) or sequence (GSPO: length-normalised sequence ratio).",
        registered("SURROGATES"),
    )
    dynamic_sampling: bool = _f(
        False, "DAPO: drop groups whose rewards are all equal and sample more prompts to refill the batch."
    )
    max_resample_rounds: int = _f(3, "Dynamic sampling: extra rollout rounds at most per step.", ge(0))
    overlong_filter: bool = _f(False, "DAPO: mask truncated completions (no EOS) out of the loss.")
    ref_reset_every: int = _f(
        0, "Reset the reference model to the current policy every this many steps (0: never; DeepSeek-R1: 400).", ge(0)
    )


@dataclass
class OptimConfig:
    lr: float = _f(3e-5, "AdamW peak learning rate.", gt(0))
    weight_decay: float = _f(0.0, "AdamW weight decay.", ge(0))
    beta1: float = _f(0.9, "AdamW beta1.", closed_interval(0, 1))
    beta2: float = _f(0.99, "AdamW beta2.", closed_interval(0, 1))
    warmup_steps: int = _f(0, "Linear warm-up steps.", ge(0))
    schedule: str = _f("constant", "After warm-up: constant or cosine decay to `min_lr_ratio` x lr.", one_of("constant", "cosine"))
    min_lr_ratio: float = _f(0.1, "Cosine floor as a fraction of lr.", closed_interval(0, 1))
    max_grad_norm: float = _f(1.0, "Gradient clipping norm (0 disables).", ge(0))


@dataclass
class TrainConfig:
    steps: int = _f(800, "Training steps (one rollout batch each).", gt(0))
    eval_every: int = _f(100, "Held-out evaluation every this many steps (also at step 0 and at the end).", gt(0))
    eval_size: int = _f(1000, "Held-out problems per evaluation (greedy decoding).", gt(0))
    checkpoint_every: int = _f(100, "Atomic checkpoint every this many steps (and at the end).", gt(0))
    samples_every: int = _f(100, "Write a table of rollout samples to samples/ every this many steps.", gt(0))
    threads: int = _f(0, "torch CPU threads (0: leave torch's default).", ge(0))
    shared_prefix: bool = _f(
        True, "Log-prob forwards compute each group's shared prompt once (benchmarks/RESULTS.md: about 1.5x TRL vs 1.1-1.2x)."
    )
    launcher: str = _f(
        "local",
        "local: one process; torchrun: `grpo-research train` relaunches itself under torchrun with "
        "`nproc_per_node` data-parallel processes (gloo on CPU, NCCL on GPU; each samples its share of the step's "
        "prompts; gradients are all-reduced; rank 0 writes the run dir).",
        one_of("local", "torchrun"),
    )
    nproc_per_node: int = _f(
        2, "train.launcher=torchrun: processes (one GPU each when training on CUDA); `threads` is per process.", gt(0)
    )


@dataclass
class TrackingConfig:
    wandb: str = _f("offline", "Weights & Biases mode: offline (no login), online, or disabled.", one_of("offline", "online", "disabled"))
    project: str = _f("grpo-research", "W&B project.")
    group: str = _f("", "W&B group (a study name).")
    tags: list = _f([], "Extra W&B tags.")
    progress: bool = _f(True, "Show a progress bar on stderr.")


@dataclass
class PPOConfig:
    """method=ppo: PPO with a learned critic (Schulman et al. 2017; InstructGPT; DeepSeekMath section 4.1).
    Policy lr, clip range, KL coefficient and loss aggregation come from `optim` and `algo`."""

    gamma: float = _f(1.0, "ppo: GAE discount gamma over completion tokens.", closed_interval(0, 1))
    lam: float = _f(0.95, "ppo: GAE lambda (1.0: Monte Carlo returns minus the value baseline).", closed_interval(0, 1))
    epochs: int = _f(2, "ppo: passes over each rollout batch (old log-probs and values computed once per batch).", ge(1))
    minibatch_size: int = _f(
        64, "ppo: completions per minibatch (one optimizer step of policy and critic each; the default batch is one).", gt(0)
    )
    vf_coef: float = _f(0.5, "ppo: value-loss coefficient in the total loss.", ge(0))
    value_clip: float | None = _f(
        0.2,
        "ppo: clip of the value prediction around its rollout-time value (null: unclipped value loss).",
        lambda v: None if v is None or v > 0 else "must be > 0 or null",
    )
    ent_coef: float = _f(0.0, "ppo: entropy-bonus coefficient (0: none, as in InstructGPT).", ge(0))
    whiten_advantages: bool = _f(True, "ppo: whiten GAE advantages over the batch's valid tokens (masked mean/std).")
    kl_in_loss: bool = _f(
        False,
        "ppo: put beta x KL (estimator `algo.kl_estimator`) in the loss instead of the per-token reward penalty.",
    )
    reward_kl_estimator: str = _f(
        "k1",
        "ppo: KL estimator of the per-token reward penalty -beta x KL (k1 = log pi/pi_ref: InstructGPT, DeepSeekMath eq. 2).",
        registered("KL_ESTIMATORS"),
    )


@dataclass
class CriticConfig:
    """method=ppo: the value model. AdamW betas, weight decay and grad clipping come from `optim`."""

    shared_trunk: bool = _f(
        False,
        "critic: a scalar value head on the policy's own trunk, instead of the default separate value model "
        "(the policy's architecture and size, initialised from the same base checkpoint: DeepSeekMath section 4.1).",
    )
    lr: float = _f(1e-4, "critic: AdamW learning rate (of the value model, or of the head alone when shared).", gt(0))
    warmup_steps: int = _f(0, "critic: first steps that update only the critic (the policy is left unchanged).", ge(0))


@dataclass
class RunConfig:
    method: str = _f("grpo", "Training method (a registered trainer/variant; see the methods table).", METHODS.check)
    seed: int = _f(0, "One seed for every RNG of the run (python, numpy, torch, data order, sampler).")
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
    critic: CriticConfig = field(default_factory=CriticConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def dump(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


# ---------------------------------------------------------------- loading and validation
def _type_ok(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp in (list, dict, str, bool):
        return isinstance(value, tp)
    return True


def _coerce_float(value: Any, tp: Any) -> Any:
    """Ints and numeric strings such as `1e-3` (a string to YAML 1.1) become floats for float fields."""
    if float not in (tp, *typing.get_args(tp)) or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _type_name(tp: Any) -> str:
    return str(tp).replace("typing.", "").replace("<class '", "").replace("'>", "")


def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _merge(obj: Any, data: dict, where: str, prefix: str = "") -> None:
    """Set fields of dataclass `obj` from `data`, recursively; reject unknown keys and bad types."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: section '{prefix.rstrip('.') or '<root>'}' must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(obj)}
    hints = _hints(type(obj))
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in fields:
            known = ", ".join(prefix + k for k in fields)
            raise ConfigError(f"{where}: unknown key '{full}' (known keys here: {known})")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            _merge(current, value, where, full + ".")
            continue
        tp = hints[key]
        value = _coerce_float(value, tp)
        if not _type_ok(value, tp):
            raise ConfigError(f"{where}: '{full}' = {value!r} has the wrong type (expected {_type_name(tp)})")
        setattr(obj, key, value)


def validate(cfg: RunConfig) -> RunConfig:
    """Range-check every field; raise ConfigError naming the first bad key."""

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                walk(value, f"{prefix}{f.name}.")
                continue
            check = f.metadata.get("check")
            msg = check(value) if check else None
            if msg:
                raise ConfigError(f"'{prefix}{f.name}' = {value!r} {msg}")

    walk(cfg, "")
    _check_task_options(cfg.task)
    if len(cfg.task.level_weights) != len(cfg.task.levels):
        raise ConfigError(
            f"'task.level_weights' has {len(cfg.task.level_weights)} entries but 'task.levels' has {len(cfg.task.levels)}"
        )
    if cfg.rollout.sampler == "counter" and cfg.rollout.backend != "hf":
        raise ConfigError("'rollout.sampler' = 'counter' needs rollout.backend=hf (vLLM samples with its own sampler)")
    if cfg.train.launcher == "torchrun":
        problem = data_parallel_problem(cfg, cfg.train.nproc_per_node)
        if problem:
            raise ConfigError(problem)
    from grpo_research.rewards import REWARDS

    for name, w in cfg.reward.weights.items():
        if name not in REWARDS:
            raise ConfigError(f"'reward.weights' names unknown reward term {name!r} (known: {', '.join(sorted(REWARDS))})")
        if not _type_ok(w, float):
            raise ConfigError(f"'reward.weights.{name}' = {w!r} must be a number")
    return cfg


def _check_task_options(t: TaskConfig) -> None:
    """Options that the chosen task does not take are refused, like unknown keys: a `task.*`
    field away from its default, and every key of `task.options`."""
    from grpo_research.tasks import task_parameters

    params, takes_all = task_parameters(t.name)
    if takes_all:
        return
    default = TaskConfig()
    for name in TASK_FIELDS:
        if getattr(t, name) != getattr(default, name) and name not in params:
            raise ConfigError(f"'task.{name}' = {getattr(t, name)!r} is not an option of task {t.name!r} "
                              f"(its options: {', '.join(sorted(params)) or 'none'})")
    for name in t.options:
        if name not in params or name in TASK_FIELDS:
            raise ConfigError(f"'task.options.{name}' is not an option of task {t.name!r} "
                              f"(its options: {', '.join(sorted(set(params) - set(TASK_FIELDS))) or 'none'})")


TASK_FIELDS = ("levels", "level_weights", "eval_level", "data_path")  # task.* fields a task factory may take


def data_parallel_problem(cfg: RunConfig, world: int, source: str = "train.nproc_per_node") -> str | None:
    """Why `cfg` cannot train data-parallel over `world` processes exactly as one process would
    (one line naming the setting), or None. Each process samples a contiguous share of the step's
    prompts and computes its groups' advantages, so anything that looks across groups is refused.
    `source`: what set the number of processes (the config key, or WORLD_SIZE under torchrun)."""
    if world <= 1:
        return None
    from grpo_research.algorithms import ADVANTAGES

    where = f"data-parallel training over {world} processes ({source}={world})"
    if not METHODS[cfg.method].data_parallel:
        supported = ", ".join(sorted(m for m, spec in METHODS.items() if spec.data_parallel))
        return f"{where} does not support method={cfg.method} (supported: {supported}); use train.launcher=local"
    if cfg.rollout.prompts_per_step % world:
        return (f"{where}: rollout.prompts_per_step={cfg.rollout.prompts_per_step} is not divisible by "
                f"the {world} processes")
    a = cfg.algo
    if a.dynamic_sampling:
        return f"{where}: algo.dynamic_sampling=true refills the batch across all processes' groups; set it false"
    reason = ADVANTAGES[a.advantage].cross_group(a)
    if reason:
        return f"{where}: {reason}"
    if cfg.rollout.backend != "hf":
        return f"{where}: rollout.backend={cfg.rollout.backend} is not supported; use rollout.backend=hf"
    return None


def load_yaml(path: str | Path) -> dict:
    """Parse a YAML config file; malformed YAML names the file and line."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{where}: malformed YAML ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of keys, got {type(data).__name__}")
    return data


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b=c` -> (['a', 'b'], yaml-parsed c)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like key=value (e.g. algo.beta=0.04)")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r} has an empty key")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key.split("."), value


def _nest(parts: list[str], value: Any) -> dict:
    out: Any = value
    for p in reversed(parts):
        out = {p: out}
    return out


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
        _merge(cfg, file_data, str(path))
    for parts, value in parsed:
        _merge(cfg, _nest(parts, value), "command line")
    return validate(cfg)


def _apply_preset(cfg: RunConfig) -> None:
    method = METHODS.get(cfg.method) if isinstance(cfg.method, str) else None
    if method is not None and method.preset:
        _merge(cfg, method.preset, f"preset of method {cfg.method!r}")


def config_from_dict(data: dict, where: str = "config") -> RunConfig:
    cfg = RunConfig()
    cfg.method = data.get("method", cfg.method)
    _apply_preset(cfg)
    _merge(cfg, data, where)
    return validate(cfg)


def key_table() -> str:
    """The Markdown table of every config key (kept in the README)."""
    rows = ["| key | default | meaning |", "|---|---|---|"]

    def walk(obj: Any, prefix: str) -> None:
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if dataclasses.is_dataclass(value):
                walk(value, f"{prefix}{f.name}.")
                continue
            default = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
            rows.append(f"| `{prefix}{f.name}` | `{default}` | {f.metadata['help']} |")

    walk(RunConfig(), "")
    return "\n".join(rows)


if __name__ == "__main__":
    print(key_table())
