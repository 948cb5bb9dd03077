"""Analysis of a study's runs, from the run directories alone (never from W&B).

- `analysis.load`: read run dirs (config.yaml, metrics.jsonl, summary.json, eval/*.json).
- `analysis.stats`: mean over seeds with a 95 % percentile-bootstrap interval (numpy).
- `analysis.aggregate`: curves against generated samples, the final table (CSV + Markdown,
  with the pairs of methods whose intervals overlap), the cost table.
- `analysis.plots`: PNG figures; `analysis.report`: the self-contained report.html and the
  results/index.html linking every study.

Command line: `python -m analysis study|aggregate|plot|render|index ...` (`analysis.cli`);
the Snakemake rules of workflow/rules/analyze.smk call it.
"""
