"""Benchmark tasks: `gsm8k`, `math500`, `humaneval`, `mbpp`, `mbpp_sanitized`.

Data comes from a local file given as `data_path` (.jsonl, .jsonl.gz, .json array, .parquet,
or a folder holding the benchmark's usual file name), or from a Hugging Face dataset name
loaded with `datasets.load_dataset` (the default when no `data_path` is given; with the
environment variable GRPO_RESEARCH_BENCHMARKS set, `$GRPO_RESEARCH_BENCHMARKS/<benchmark>`
is used instead, so offline runs never reach the hub). A malformed record raises
`DataError` naming the file, the 1-based line (or record) and the field.

Modules: `grpo_research.tasks.loading` (records, `DataError`, the `Benchmark` base),
`grpo_research.tasks.math_benchmarks` (gsm8k, math500), `grpo_research.tasks.code_benchmarks`
(humaneval, mbpp, mbpp_sanitized). Importing this module registers the five tasks; it
re-exports the public names of those modules.

Graders, and where they depart from the official ones:

- gsm8k (openai/grade-school-math `dataset.py`): the first number after `####`, else the
  first number inside the last `\\boxed{}`, else the last number in the completion; commas, `$` and a trailing period are dropped and the
  value is compared numerically (Decimal) with the number after `####` in the gold answer.
  Official: exact string after `#### ` only, no fallback.
- math500 (MATH, Hendrycks et al.): the last `\\boxed{}` (or `\\fbox{}`) of the completion
  is judged against the gold `answer` with math_verify (`parse` + `verify`; the gold is
  parsed as `$\\boxed{answer}$`, or as given if that yields nothing). If math_verify finds
  nothing to compare, identical strings (whitespace ignored) still count as equal.
  Departure: a completion without `\\boxed{}` is judged by math_verify's own extraction of
  its final answer (`parse(completion)`), with `formatted=False`; officially it is wrong.
- humaneval (openai/human-eval): runs `prompt + completion + "\\n" + test + "\\n" +
  "check(entry_point)\\n"` in the sandbox. Departure: a completion holding a Markdown code
  fence (how chat models answer) is read from its first fenced block: a block that defines
  the entry point is the whole function, run after the prompt (its imports; the stub is
  redefined); any other block continues the prompt.
- mbpp (google-research mbpp, test split = task ids 11-510): runs `completion + "\\n" +
  test_setup_code + "\\n" + "\\n".join(test_list)`; `challenge_test_list` is not run.
  The setup code goes *after* the completion: the only two records that have any (367,
  927) build trees with the `Node` class the solution defines, so setup-first fails even
  the reference code. mbpp_sanitized (its records with task ids 11-510): `test_imports +
  completion + test_list`. A file holding no task id in 11-510 is evaluated whole.
  Departure: when an MBPP completion holds a Markdown code fence, the first fenced block
  is used as the code (chat models wrap code in fences; gold code never has one).

`finished=False` (generation hit the length limit without EOS) does not by itself fail a
benchmark answer: external predictions carry no EOS, and the official graders ignore it.

Problem ids: gsm8k uses the record's 0-based index in the file ("0", "1", ...) unless the
record carries `task_id` or `id`. math500 uses `unique_id` (e.g. "test/precalculus/807.json",
stable across subsets and reorderings) and also accepts the 0-based index: every problem
lists the extra ids it answers to in `meta["aliases"]` (the `score` CLI honours them).
humaneval uses `task_id` ("HumanEval/0"); mbpp uses the task id as a string ("11").
Blank lines in a JSONL file are not records and do not advance the index.

Constructor options: `data_path`, `hub` and `config` (the dataset name and configuration used
when no local file is given), gsm8k's `train_path`, and for code benchmarks `timeout_s`
(per program) and `workers` (parallel sandbox processes). A missing local file raises
FileNotFoundError.

Training problems: gsm8k and mbpp have train splits (gsm8k `train.jsonl` beside the test
file or `train_path`; the hub's "train" split; mbpp task ids 601-974 in the same file).
Otherwise `train_problems` samples from the evaluation records, with a warning.
"""
from __future__ import annotations

# math before code: the tasks register in this order (gsm8k, math500, humaneval, mbpp, mbpp_sanitized)
from grpo_research.tasks.math_benchmarks import GSM8K, MATH500, MathBenchmark, extract_gsm8k, last_boxed, numbers_equal
from grpo_research.tasks.code_benchmarks import MBPP, CodeBenchmark, HumanEval, MBPPSanitized, extract_code
from grpo_research.tasks.loading import (
    Benchmark,
    DataError,
    Record,
    field,
    load_hub,
    load_source,
    read_records,
    resolve_source,
)

__all__ = [
    "GSM8K",
    "MATH500",
    "MBPP",
    "Benchmark",
    "CodeBenchmark",
    "DataError",
    "HumanEval",
    "MBPPSanitized",
    "MathBenchmark",
    "Record",
    "extract_code",
    "extract_gsm8k",
    "field",
    "last_boxed",
    "load_hub",
    "load_source",
    "numbers_equal",
    "read_records",
    "resolve_source",
]
