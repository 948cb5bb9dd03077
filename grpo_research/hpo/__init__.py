"""Hyper-parameter search with Optuna: one study per (method, task), each trial an ordinary run.

- Search space: config keys with ranges (`space`, default `DEFAULT_SPACE`), e.g. G categorical
  over powers of two, beta, eps, temperature and lr (log scale). Every default of a search is
  stated once, in search.py (`SearchSpec`, `DEFAULT_SPACE`, `DEFAULT_PRUNER`).
- Sampler: seeded TPE. Pruner: median (default), percentile or none, on the intermediate
  held-out accuracy `eval/accuracy`, reported at step = generated samples.
- Storage: an RDB URL (SQLite file by default; PostgreSQL when many workers share one study)
  through `optuna.storages.RDBStorage` with heartbeats: a trial whose worker died is failed
  after `grace_period` seconds and retried (same parameters, same run dir, so the run resumes
  from its checkpoint). `exclusive` (one worker) retries trials a killed search left RUNNING
  at once instead of after the grace period.
- A trial (an ordinary run, nothing special to the search) launches `grpo-research train` on its own run dir
  (`<runs>/trial-NNNN`) in a subprocess, tails its `metrics.jsonl` for evaluation rows, reports
  them and kills the run when pruned; the objective is the run's last `eval/accuracy`. W&B
  logging is the run's own tracker (group `hpo-<name>`, a tag per parameter).
- Resumable: `n_trials` counts COMPLETE + PRUNED trials already in storage.
- Every trial generates the same number of samples: `train.steps = budget_samples /
  (rollout.prompts_per_step x algo.group_size)`.
- Export: `best.yaml` (method + best parameters, a config file for `grpo-research train
  --config`), `trials.csv`, and PNG plots (optuna.visualization.matplotlib).

Command line: `grpo-research hpo search|export ...` (grpo_research/cli/hpo.py).
"""
from grpo_research.hpo.search import DEFAULT_PRUNER, DEFAULT_SPACE, SearchSpec, export_study, run_search, suggest_overrides
from grpo_research.hpo.storage import make_storage

__all__ = ["DEFAULT_PRUNER", "DEFAULT_SPACE", "SearchSpec", "export_study", "make_storage", "run_search",
           "suggest_overrides"]
