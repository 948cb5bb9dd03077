"""The checks of a whole run config that no single field can make: options the chosen task,
reward term or advantage estimator does not take, settings that contradict each other, and
what data-parallel training refuses. `validate(cfg)` runs them after every field's own range
check; each raises `ConfigError` with one line naming the key. (The config's fields, their
defaults and ranges are in grpo_research/config.py; this module never imports it: it takes
the config it is given.)"""
from __future__ import annotations

from grpo_research.errors import ConfigError
from grpo_research.methods import GRPO_TRAINER, METHODS
from grpo_research.typed_config import check_ranges, type_ok

MAX_COMPLETIONS_PER_STEP = 65536  # rows of one rollout batch


def validate(cfg):
    """Range-check every field; raise ConfigError naming the first bad key."""

    check_ranges(cfg)
    _check_task_options(cfg.task)
    if len(cfg.task.level_weights) != len(cfg.task.levels):
        raise ConfigError(
            f"'task.level_weights' has {len(cfg.task.level_weights)} entries but 'task.levels' has {len(cfg.task.levels)}"
        )
    if cfg.rollout.sampler == "counter" and cfg.rollout.backend != "hf":
        raise ConfigError("'rollout.sampler' = 'counter' needs rollout.backend=hf (vLLM samples with its own sampler)")
    _check_advantage_options(cfg.algo)
    _check_eval_benchmarks(cfg.train)
    if cfg.model.lora_rank:
        if cfg.algo.ref_reset_every:
            raise ConfigError("'algo.ref_reset_every' with model.lora_rank > 0: the reference is the frozen base with the "
                              "adapters off, which a reset cannot move (set algo.ref_reset_every=0)")
        if cfg.rollout.backend != "hf":
            raise ConfigError("'model.lora_rank' > 0 needs rollout.backend=hf (pushing adapters into a vLLM engine "
                              "is not implemented)")
    if cfg.algo.is_correction != "none":
        if METHODS[cfg.method].trainer != GRPO_TRAINER:
            raise ConfigError(f"'algo.is_correction' = {cfg.algo.is_correction!r} applies to the GRPO family's loss; "
                              f"method {cfg.method!r} does not take it")
        if cfg.rollout.backend != "vllm":
            raise ConfigError(f"'algo.is_correction' = {cfg.algo.is_correction!r} needs the sampler's log-probs, which "
                              "only rollout.backend=vllm records (the hf backend samples with the trainer's own model)")
    if cfg.train.launcher == "torchrun":
        problem = data_parallel_problem(cfg, cfg.train.nproc_per_node)
        if problem:
            raise ConfigError(problem)
    mb, G = cfg.train.micro_batch_size, cfg.algo.group_size
    if mb and mb % G:
        raise ConfigError(f"'train.micro_batch_size' = {mb} must be a multiple of algo.group_size={G} "
                          "(a micro-batch holds whole groups)")
    rows = cfg.rollout.prompts_per_step * cfg.algo.group_size
    if rows > MAX_COMPLETIONS_PER_STEP:
        raise ConfigError(f"rollout.prompts_per_step x algo.group_size = {cfg.rollout.prompts_per_step} x "
                          f"{cfg.algo.group_size} = {rows} completions per step, more than the limit of "
                          f"{MAX_COMPLETIONS_PER_STEP}")
    _check_reward(cfg.reward)
    _check_sample_source(cfg)
    return cfg


def _check_advantage_options(a) -> None:
    """`algo.adv_options` may set only the options the chosen estimator declares, each within
    its range; the ones left unset are filled in with their defaults (config.yaml records them)."""
    from grpo_research.algorithms import ADVANTAGES

    declared = ADVANTAGES[a.advantage].options
    for key, value in a.adv_options.items():
        if key not in declared:
            raise ConfigError(f"'algo.adv_options.{key}' is not an option of advantage estimator {a.advantage!r} "
                              f"(its options: {', '.join(declared) or 'none'})")
        problem = declared[key].problem(value)
        if problem:
            raise ConfigError(f"'algo.adv_options.{key}' = {value!r} {problem}")
    a.adv_options = {**{k: o.default for k, o in declared.items()}, **a.adv_options}


# train.eval_benchmarks entry keys: (type, default, the check's problem or None)
_BENCH_KEYS = {
    "n": (int, None, lambda v: None if v >= 1 else "must be at least 1"),
    "k": (int, 1, lambda v: None if v >= 1 else "must be at least 1 (1: greedy)"),
    "temperature": (float, 0.7, lambda v: None if v > 0 else "must be above 0 (k = 1 decodes greedily)"),
    "data": (str, "", lambda v: None),
    "max_new_tokens": (int, 0, lambda v: None if v >= 0 else "must be 0 (rollout.max_new_tokens) or more"),
    "batch_size": (int, 64, lambda v: None if v >= 1 else "must be at least 1"),
}


def _check_eval_benchmarks(t) -> None:
    """Each `train.eval_benchmarks` entry names a registered task and sets only the keys above,
    each of its type and range (`n` required); the others are filled in with their defaults."""
    from grpo_research.tasks import TASKS

    filled = {}
    for name, entry in t.eval_benchmarks.items():
        where = f"'train.eval_benchmarks.{name}'"
        key_of = lambda key: f"'train.eval_benchmarks.{name}.{key}'"  # noqa: E731
        problem = TASKS.check(name)
        if problem:
            raise ConfigError(f"{where}: {problem}")
        if not isinstance(entry, dict):
            raise ConfigError(f"{where} must be a mapping such as {{n: 100, k: 4}}, got {entry!r}")
        unknown = sorted(set(entry) - set(_BENCH_KEYS))
        if unknown:
            raise ConfigError(f"{key_of(unknown[0])} is not a key of a benchmark entry (keys: {', '.join(_BENCH_KEYS)})")
        if "n" not in entry:
            raise ConfigError(f"{where} needs n, the number of problems to evaluate")
        for key, value in entry.items():
            tp, _, check = _BENCH_KEYS[key]
            if not type_ok(value, tp):
                raise ConfigError(f"{key_of(key)} = {value!r} must be of type {tp.__name__}")
            problem = check(value)
            if problem:
                raise ConfigError(f"{key_of(key)} = {value!r} {problem}")
        filled[name] = {**{k: d for k, (_, d, _) in _BENCH_KEYS.items() if k != "n"}, **entry}
    t.eval_benchmarks = filled


def _check_sample_source(cfg) -> None:
    """The methods that train on verified samples (rft, dpo, ...) need their accepting reward
    term, and only they take another sampler than the current policy."""
    from grpo_research.methods import SAMPLE_SOURCE_TRAINERS

    m = METHODS[cfg.method]
    if m.trainer not in SAMPLE_SOURCE_TRAINERS:
        if cfg.algo.sampler_sync_every != 1:
            raise ConfigError(f"'algo.sampler_sync_every' = {cfg.algo.sampler_sync_every}: method={cfg.method} always "
                              "samples the current policy (the option is for rft, online_rft, dpo, online_dpo)")
        return
    term = cfg.algo.accept_term
    if term not in cfg.reward.weights:
        raise ConfigError(f"'algo.accept_term' = {term!r}: method={cfg.method} keeps the samples that reward term "
                          f"scores 1, but it is not a term of 'reward.weights' ({', '.join(cfg.reward.weights)})")
    if cfg.algo.sampler_sync_every != 1 and cfg.rollout.backend != "hf":
        raise ConfigError(f"'algo.sampler_sync_every' = {cfg.algo.sampler_sync_every} samples a model other than the "
                          f"policy, which needs rollout.backend=hf (not {cfg.rollout.backend})")
    if m.trainer == SAMPLE_SOURCE_TRAINERS[1] and cfg.algo.beta != 0:
        raise ConfigError(f"'algo.beta' = {cfg.algo.beta}: method={cfg.method} has no KL term (algo.beta must be 0); "
                          f"DPO's own beta is dpo.beta (now {cfg.dpo.beta})")


def _check_reward(r) -> None:
    """Reward terms and their options must exist; a reward of no terms is refused."""
    import inspect

    from grpo_research.rewards import REWARDS

    if not r.weights:
        raise ConfigError("'reward.weights' is empty: the reward would be 0 for every completion")
    for name, w in r.weights.items():
        if name not in REWARDS:
            raise ConfigError(f"'reward.weights' names unknown reward term {name!r} (known: {REWARDS.choices()})")
        if not type_ok(w, float):
            raise ConfigError(f"'reward.weights.{name}' = {w!r} must be a finite number")
    if all(w == 0 for w in r.weights.values()):
        raise ConfigError(f"'reward.weights' = {dict(r.weights)} are all 0: the reward would be 0 for every completion")
    for name, opts in r.options.items():
        if name not in r.weights:
            raise ConfigError(f"'reward.options.{name}': {name!r} is not a term of reward.weights "
                              f"({', '.join(r.weights)})")
        if not isinstance(opts, dict):
            raise ConfigError(f"'reward.options.{name}' = {opts!r} must be a mapping of option: value")
        params = inspect.signature(REWARDS[name]).parameters
        if any(p.kind is p.VAR_KEYWORD for p in params.values()):
            continue
        known = [k for k in params if k != "task"]
        for key in opts:
            if key not in known:
                raise ConfigError(f"'reward.options.{name}.{key}' is not an option of reward term {name!r} "
                                  f"(its options: {', '.join(known) or 'none'})")


def _check_task_options(t) -> None:
    """Options that the chosen task does not take are refused, like unknown keys: a `task.*`
    field away from its default, and every key of `task.options`."""
    from grpo_research.tasks import task_parameters

    params, takes_all = task_parameters(t.name)
    if takes_all:
        return
    default = type(t)()  # the task section's defaults
    for name in TASK_FIELDS:
        if getattr(t, name) != getattr(default, name) and name not in params:
            raise ConfigError(f"'task.{name}' = {getattr(t, name)!r} is not an option of task {t.name!r} "
                              f"(its options: {', '.join(sorted(params)) or 'none'})")
    for name in t.options:
        if name not in params or name in TASK_FIELDS:
            raise ConfigError(f"'task.options.{name}' is not an option of task {t.name!r} "
                              f"(its options: {', '.join(sorted(set(params) - set(TASK_FIELDS))) or 'none'})")


TASK_FIELDS = ("levels", "level_weights", "eval_level", "data_path")  # task.* fields a task factory may take


def data_parallel_problem(cfg, world: int, source: str = "train.nproc_per_node") -> str | None:
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
