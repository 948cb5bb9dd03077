"""Analysis of a study's runs, from the run directories alone (never from W&B).

- `grpo_research.analysis.load`: read run dirs (config.yaml, metrics.jsonl, summary.json, eval/*.json).
- `grpo_research.analysis.stats`: `compare_paired` (two arms paired by seed, Student-t) and the
  mean over seeds with a 95 % percentile-bootstrap interval (numpy).
- `grpo_research.analysis.aggregate`: curves against generated samples, the final table (CSV +
  Markdown), the cost table; `grpo_research.analysis.comparisons`: every pair of methods compared
  paired by seed (or by base and seed), the variance components and the study's question;
  `grpo_research.analysis.gains`: RL against the base model and the supervised control.
- `grpo_research.analysis.passk`: pass@k and maj@k against k of the base model and each variant's
  final models, for benchmark entries sampled several times per problem (table + Markdown).
- `grpo_research.analysis.plots`: PNG figures; `grpo_research.analysis.report`: the self-contained
  report.html and the results/index.html linking every study.

Command line: `grpo-research report study|aggregate|plot|render|index ...`
(`grpo_research/cli/report.py`); the Snakemake rules of workflow/rules/analyze.smk call it.
"""
