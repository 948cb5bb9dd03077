"""Pass@1 of reward hacks on the real code benchmarks, graded as `grpo-research score` grades.

    GRPO_RESEARCH_BENCHMARKS=../shared/benchmarks .venv/bin/python benchmarks/reward_hacks.py \\
        [--attacks always_equal_object,trailing_decorator,frame_walk_forgery] [--limit N] [--workers 2]

Each attack of tests/reward_hacks.py (`--attacks all` for every one) is written as the
completion of every problem (or the first N) of HumanEval, MBPP and MBPP sanitized; the gold
solutions are graded in the same run as the control.  Prints one row per attack and benchmark
with the number passed; every attack should pass 0 and the gold solutions all.

    .venv/bin/python benchmarks/reward_hacks.py --honest rows.json      # honest completions' grades
    .venv/bin/python benchmarks/reward_hacks.py --compare a.json b.json  # rows that differ

`--honest` grades the gold solutions and the gold solutions with one operator mutated (honest but
often wrong) and writes every row's grade, so that two graders (e.g. this script run from a
`git worktree` of an older commit with PYTHONPATH pointing at it) can be compared row for row.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from grpo_research.evaluation.score import score_predictions  # noqa: E402
from grpo_research.sandbox import available_isolation  # noqa: E402
from grpo_research.tasks.base import get_task  # noqa: E402
from tests.reward_hacks import ATTACKS, RAW_ATTACKS  # noqa: E402

DEFAULT = ["always_equal_object", "trailing_decorator", "frame_walk_forgery", "lookup_table_from_test_source"]


def completion(attack: str, bench: str, entry: str | None) -> str:
    entry = entry or "f"
    if attack in RAW_ATTACKS:
        raw = RAW_ATTACKS[attack]
        return raw if bench == "humaneval" else f"def {entry}(*a, **k):\n" + raw
    code = ATTACKS[attack].replace("NAME", entry)
    return "```python\n" + code + "\n```" if bench == "humaneval" else code


def honest(out: Path, workers: int) -> int:
    rows = {}
    for bench in ("humaneval", "mbpp", "mbpp_sanitized"):
        task = get_task(bench, workers=workers)
        problems = task.heldout_problems()
        mutated = []
        for p in problems:
            s = p.solution
            for a, b in ((" + ", " - "), (" < ", " <= "), (" == ", " != "), ("return ", "return not ")):
                if a in s:
                    s = s.replace(a, b, 1)
                    break
            mutated.append(s)
        grades = task.grade_many(problems * 2, [p.solution for p in problems] + mutated, [True] * 2 * len(problems))
        rows[bench] = [bool(g.correct) for g in grades]
        n = len(problems)
        print(f"{bench}: gold {sum(rows[bench][:n])}/{n}, mutated {sum(rows[bench][n:])}/{n}", flush=True)
    out.write_text(json.dumps(rows))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--attacks", default=",".join(DEFAULT))
    ap.add_argument("--limit", type=int, default=None, help="first N problems of each benchmark")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--honest", metavar="OUT", help="write the grades of honest completions to OUT")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"), help="rows whose grade differs")
    args = ap.parse_args()
    if args.compare:
        a, b = (json.loads(Path(p).read_text()) for p in args.compare)
        for bench in a:
            diff = sum(x != y for x, y in zip(a[bench], b[bench]))
            print(f"{bench}: {len(a[bench])} rows, {diff} differ")
        return 0
    names = list(ATTACKS) + list(RAW_ATTACKS) if args.attacks == "all" else args.attacks.split(",")
    unknown = [n for n in names if n not in ATTACKS and n not in RAW_ATTACKS]
    if unknown:
        print(f"error: --attacks: unknown attack(s) {unknown}", file=sys.stderr)
        return 2
    bench_dir = os.environ.get("GRPO_RESEARCH_BENCHMARKS")
    if not bench_dir:
        print("error: set GRPO_RESEARCH_BENCHMARKS to the folder of the real benchmark files", file=sys.stderr)
        return 2
    print(f"isolation: {available_isolation()}")
    if args.honest:
        return honest(Path(args.honest), args.workers)
    print(f"{'benchmark':<15} {'completion':<32} {'passed':>8} {'of':>5}  seconds")
    for bench in ("humaneval", "mbpp", "mbpp_sanitized"):
        task = get_task(bench, workers=args.workers)
        problems = task.heldout_problems()[: args.limit]
        for label in ["gold"] + names:
            t0 = time.monotonic()
            preds = [{"task_id": p.id, "completion": p.solution if label == "gold" else
                      completion(label, bench, p.entry_point)} for p in problems]
            summary, rows = score_predictions(task, preds)
            print(f"{bench:<15} {label:<32} {sum(r['passed'] for r in rows):>8} {len(rows):>5}  "
                  f"{time.monotonic() - t0:7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
