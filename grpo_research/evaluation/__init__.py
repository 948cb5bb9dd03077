"""Evaluation: pass@k (unbiased estimator) and maj@k (majority voting) with confidence intervals,
and scoring of predictions.

`grpo_research.evaluation.score` holds the `grpo-research score` command; it is not imported
here so that `import grpo_research.evaluation` stays cheap.
"""
from grpo_research.evaluation.metrics import (CI_METHOD, aggregate_maj_at_k, aggregate_pass_at_k, answer_key, maj_at_k,
                                              maj_ks, majority_correct, mean_ci95, pass_at_k)

__all__ = ["CI_METHOD", "aggregate_maj_at_k", "aggregate_pass_at_k", "answer_key", "maj_at_k", "maj_ks",
           "majority_correct", "mean_ci95", "pass_at_k"]
