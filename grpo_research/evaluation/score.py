"""`grpo-research score`: grade external predictions on a benchmark and report pass@k.

    grpo-research score --benchmark NAME --predictions FILE [--data PATH] --out OUT.json
                        [--workers N] [--timeout S]

(the command line: grpo_research/cli/score.py; this module is the library it calls).

Predictions are JSONL rows `{"task_id": ..., "completion": ...}` (optional `"finished"`,
default true); several rows with one task_id are several samples of that task. A task_id
is a problem id of the benchmark or one of its aliases (gsm8k and math500 accept the
record's 0-based index, as an int or a string). Tasks without predictions are reported under
`missing_tasks` / `missing_task_ids`, not scored as failures.

A prediction whose grading hits a `sandbox_error` is graded once more; if it fails again it
is reported as `sandbox_error` (counted under `sandbox_errors`, excluded from pass@k, never
counted as a failure). A task all of whose samples hit sandbox errors is listed under
`unscored_task_ids` and excluded from `n_tasks`.

Outputs, written atomically (temp file, then rename) only after everything is scored:
OUT.json (summary: `pass@1`, `pass@k` for k = 1 .. the smallest number of scored samples
per task, each with a 95% CI, outcome counts; for math benchmarks also `maj@k`, majority
voting over each task's finished samples with an extracted answer, for k = 1, 2, 4, ... up to
that smallest count and the count itself, each with a 95% CI: see
grpo_research.evaluation.metrics) and OUT.samples.jsonl (one row per prediction, in input
order: `task_id` (the canonical problem id), `input_task_id` when the prediction used an
alias, `sample`, `passed`, `outcome`, and `extracted` for math benchmarks).

Bad input (missing file, malformed JSONL line, missing field, unknown benchmark, unknown
task_id) prints one line `error: ...` to stderr, writes nothing and exits with code 2.
"""
from __future__ import annotations

import gzip
import inspect
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from grpo_research.errors import UsageError
from grpo_research.evaluation.metrics import CI_METHOD, aggregate_maj_at_k, aggregate_pass_at_k, answer_key, maj_ks
from grpo_research.files import check_output, write_text_atomic
from grpo_research.tasks.base import TASKS, Problem, Task, get_task

MAX_TIMEOUT_S = 3600.0  # seconds per program: beyond this a limit is a typo (and overflows rlimits)

__all__ = ["MAX_TIMEOUT_S", "UsageError", "check_outputs", "make_task", "predictions_path", "problem_index", "read_predictions", "samples_path",
           "score_predictions", "summary_line", "write_results"]


def _register_tasks() -> None:
    import grpo_research.tasks  # noqa: F401  (built-in tasks)
    import grpo_research.tasks.benchmarks  # noqa: F401
    import grpo_research.tasks.code  # noqa: F401


def problem_index(problems: list[Problem]) -> dict[str, Problem]:
    """Every id and alias (`meta["aliases"]`) -> problem; a real id wins over another's alias."""
    index: dict[str, Problem] = {}
    for p in problems:
        for alias in p.meta.get("aliases", ()):
            index.setdefault(str(alias), p)
    index.update({p.id: p for p in problems})
    return index


def _task_id(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def score_predictions(
    task: Task, predictions: list[dict], labels: list[str] | None = None, grades: list | None = None,
) -> tuple[dict, list[dict]]:
    """Grade `predictions` on `task`'s held-out problems; return (summary, one row per prediction).

    `grades`: what `task.grade_many` already returned for exactly these predictions (the
    trainer's final evaluation), used instead of grading them again; sandbox errors among them
    are still graded once more.

    `labels` name each prediction in error messages (default "prediction N"). Raises
    UsageError for a missing field or an unknown task_id. Math tasks (`task.kind == "math"`,
    whose grades carry the extracted answer) also get `maj@k`: a finished sample votes for
    `answer_key(grade.extracted)`, an unfinished one or one without an answer does not vote;
    samples are taken in input order (metrics.maj_at_k).
    """
    start = time.monotonic()
    labels = labels or [f"prediction {i}" for i in range(1, len(predictions) + 1)]
    problems = task.heldout_problems()
    index = problem_index(problems)
    chosen: list[Problem] = []
    for label, pred in zip(labels, predictions):
        for name in ("task_id", "completion"):
            if not isinstance(pred, dict) or pred.get(name) is None:
                raise UsageError(f"{label}: missing field {name!r}")
        tid = _task_id(pred["task_id"])
        if tid is None:
            raise UsageError(f"{label}: field 'task_id' must be a string or an integer")
        if not isinstance(pred["completion"], str):
            raise UsageError(f"{label}: field 'completion' must be a string")
        if not isinstance(pred.get("finished", True), bool):
            raise UsageError(f"{label}: field 'finished' must be true or false")
        if tid not in index:
            raise UsageError(f"{label}: unknown task_id {tid!r} for benchmark {task.name!r}")
        chosen.append(index[tid])

    completions = [p["completion"] for p in predictions]
    finished = [p.get("finished", True) for p in predictions]
    if grades is None:
        grades = task.grade_many(chosen, completions, finished)
    elif len(grades) != len(predictions):
        raise ValueError(f"{len(grades)} grades for {len(predictions)} predictions")
    else:
        grades = list(grades)
    retry = [i for i, g in enumerate(grades) if g.masked]
    if retry:  # a sandbox error is an infrastructure failure: try once more
        again = task.grade_many([chosen[i] for i in retry], [completions[i] for i in retry], [finished[i] for i in retry])
        for i, g in zip(retry, again):
            grades[i] = g

    rows: list[dict] = []
    seen: Counter = Counter()
    per_task: dict[str, list[int]] = {}  # id -> [n scored, n correct]
    votes: dict[str, list[tuple[str | None, bool]]] = {}  # id -> (ballot or None, correct) per scored sample
    for pred, problem, grade, done in zip(predictions, chosen, grades, finished):
        row: dict[str, Any] = {"task_id": problem.id}
        if _task_id(pred["task_id"]) != problem.id:
            row["input_task_id"] = pred["task_id"]
        row.update(sample=seen[problem.id], passed=bool(grade.correct and not grade.masked),
                   outcome="sandbox_error" if grade.masked else grade.outcome)
        if task.kind == "math":
            row["extracted"] = grade.extracted
        seen[problem.id] += 1
        rows.append(row)
        counts = per_task.setdefault(problem.id, [0, 0])
        if not grade.masked:
            counts[0] += 1
            counts[1] += int(grade.correct)
            votes.setdefault(problem.id, []).append((answer_key(grade.extracted) if done else None, grade.correct))

    scored = {tid: (n, c) for tid, (n, c) in per_task.items() if n > 0}
    k_max = min((n for n, _ in scored.values()), default=0)
    pass_k = aggregate_pass_at_k(scored.values(), range(1, k_max + 1)) if scored else {}
    majority = {}
    if task.kind == "math":  # grades carry the extracted answer: majority voting over it
        majority["maj@k"] = aggregate_maj_at_k([votes[t] for t in scored], maj_ks(k_max)) if scored else {}
    missing = [p.id for p in problems if p.id not in per_task]
    summary = {
        "benchmark": task.name,
        "n_tasks": len(scored),
        "n_samples": sum(n for n, _ in scored.values()),
        "n_predictions": len(predictions),
        "samples_per_task": {"min": k_max, "max": max((n for n, _ in scored.values()), default=0)},
        "missing_tasks": len(missing),
        "missing_task_ids": missing,
        "pass@1": pass_k["1"]["value"] if pass_k else None,
        "pass@k": pass_k,
        **majority,
        "outcomes": dict(sorted(Counter(r["outcome"] for r in rows).items())),
        "sandbox_errors": sum(r["outcome"] == "sandbox_error" for r in rows),
        "unscored_task_ids": [tid for tid, (n, _) in per_task.items() if n == 0],
        "ci_method": CI_METHOD,
        "elapsed_s": round(time.monotonic() - start, 3),
    }
    return summary, rows


# ---------------------------------------------------------------- files
def read_predictions(path: Path) -> tuple[list[dict], list[str]]:
    """(rows, labels) of a JSONL predictions file; labels are "FILE, line N"."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            lines = f.read().split("\n")  # not splitlines(): U+2028 may sit inside a string
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise UsageError(f"{path}: cannot read ({e})") from None
    from grpo_research.tasks.loading import read_json_lines

    records = read_json_lines(lines, str(path), error=UsageError)
    rows, labels = [r for _, r in records], [where for where, _ in records]
    if not rows:
        raise UsageError(f"{path}: no predictions")
    return rows, labels


def samples_path(out: Path) -> Path:
    """OUT.json -> OUT.samples.jsonl (any other name gets `.samples.jsonl` appended)."""
    stem = out.name[: -len(".json")] if out.name.endswith(".json") else out.name
    return out.with_name(stem + ".samples.jsonl")


def predictions_path(out: Path) -> Path:
    """OUT.json -> OUT.predictions.jsonl (the generated predictions of `grpo-research eval`)."""
    stem = out.name[: -len(".json")] if out.name.endswith(".json") else out.name
    return out.with_name(stem + ".predictions.jsonl")


def check_outputs(out: str, inputs: list, data: str | None, predictions: bool = False) -> Path:
    """OUT (returned as a Path), OUT.samples.jsonl and, with `predictions`, OUT.predictions.jsonl,
    checked before any work: writable, and never one of the inputs (`inputs`: files or folders,
    every file of a folder counted; the data file or every file of the data folder)."""
    given = [Path(p) for p in inputs if p is not None] + ([Path(data)] if data and Path(data).exists() else [])
    files = given + [f for d in given if d.is_dir() for f in d.rglob("*") if f.is_file()]
    out_path = check_output(out, files, "--out")
    check_output(samples_path(out_path), files, "--out (its .samples.jsonl)")
    if predictions:
        check_output(predictions_path(out_path), files, "--out (its .predictions.jsonl)")
    return out_path


def write_results(out: Path, summary: dict, rows: list[dict], predictions: list[dict] | None = None) -> None:
    """OUT.predictions.jsonl (when `predictions` are given), OUT.samples.jsonl, then OUT.json,
    each atomically (the summary last: its presence means the others are complete)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if predictions is not None:
        write_text_atomic(predictions_path(out), "".join(json.dumps(p) + "\n" for p in predictions))
    write_text_atomic(samples_path(out), "".join(json.dumps(r) + "\n" for r in rows))
    write_text_atomic(out, json.dumps(summary, indent=2) + "\n")


def report_sandbox_errors(summary: dict, out: Path) -> bool:
    """Print what the sandbox errors of a scoring mean; False when every graded prediction hit
    one (an infrastructure failure, not wrong answers: the command must fail, exit 1)."""
    if summary["sandbox_errors"] and summary["n_samples"] == 0:
        print(f"error: all {summary['sandbox_errors']} graded predictions hit sandbox errors (an infrastructure failure, "
              f"not wrong answers): nothing was scored; see {samples_path(out)}", file=sys.stderr)
        return False
    if summary["sandbox_errors"]:
        print(f"warning: {summary['sandbox_errors']} predictions hit sandbox errors twice; not scored", file=sys.stderr)
    return True


def summary_line(summary: dict) -> str:
    """`BENCHMARK: pass@1 = V [LOW, HIGH]` (n/a without scored tasks)."""
    p1 = summary["pass@k"].get("1")
    value = f"{p1['value']:.4f} [{p1['ci95'][0]:.4f}, {p1['ci95'][1]:.4f}]" if p1 else "n/a"
    return f"{summary['benchmark']}: pass@1 = {value}"


def make_task(benchmark: str, data: str | None = None, workers: int | None = None,
              timeout: float | None = None) -> Task:
    """The task of a benchmark name, with its data and (code benchmarks) sandbox options;
    a bad name, option or data file raises UsageError."""
    _register_tasks()
    if benchmark not in TASKS:
        raise UsageError(f"unknown benchmark {benchmark!r}; known: {', '.join(sorted(TASKS))}")
    accepted = inspect.signature(TASKS[benchmark]).parameters
    kwargs: dict[str, Any] = {}
    if data is not None:
        if "data_path" not in accepted:
            raise UsageError(f"benchmark {benchmark!r} takes no --data")
        kwargs["data_path"] = data
    if workers is not None:
        if workers < 1:
            raise UsageError("--workers must be at least 1")
        if "workers" in accepted:
            kwargs["workers"] = workers
    if timeout is not None:
        if not 0 < timeout <= MAX_TIMEOUT_S:
            raise UsageError(f"--timeout {timeout:g} must be a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
        if "timeout_s" in accepted:
            kwargs["timeout_s"] = timeout
    from grpo_research.tasks.benchmarks import DataError

    try:
        return get_task(benchmark, **kwargs)
    except (DataError, OSError) as e:
        raise UsageError(str(e)) from None
