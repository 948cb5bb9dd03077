"""pass@k and the `score` command: fixtures written here, and HumanEval's canonical solutions when present."""
from __future__ import annotations

import gzip
import json
import math
import os
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import pytest

from grpo_research.evaluation import aggregate_pass_at_k, mean_ci95, pass_at_k
from grpo_research.cli.score import main as score_main
from grpo_research.evaluation import score as S
from grpo_research.tasks.base import Grade, Problem

REPO = Path(__file__).resolve().parents[1]


def real_benchmarks() -> Path | None:
    env = os.environ.get("GRPO_RESEARCH_BENCHMARKS")
    path = Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
    return path if path.is_dir() else None


REAL = real_benchmarks()


# ---------------------------------------------------------------- pass@k


def test_pass_at_k_matches_the_combinatorial_formula():
    for n in range(1, 16):
        for c in range(n + 1):
            for k in range(1, n + 1):
                direct = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(direct, abs=1e-12), (n, c, k)


def test_pass_at_k_is_the_chance_that_a_random_k_subset_holds_a_pass():
    samples = [1, 0, 0, 1, 0]  # n=5, c=2
    for k in range(1, 6):
        subsets = list(combinations(samples, k))
        assert pass_at_k(5, 2, k) == pytest.approx(sum(any(s) for s in subsets) / len(subsets))


def test_pass_at_k_hand_values_and_large_n():
    assert pass_at_k(1, 1, 1) == 1.0 and pass_at_k(1, 0, 1) == 0.0
    assert pass_at_k(2, 1, 1) == 0.5
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)  # 1 - C(2,2)/C(4,2)
    assert pass_at_k(5, 0, 3) == 0.0 and pass_at_k(5, 3, 3) == 1.0  # n - c < k
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5)  # C(199,100)/C(200,100) = 1/2
    assert pass_at_k(10_000, 10, 5_000) == pytest.approx(1 - 0.5 ** 10, rel=1e-3)  # no overflow
    for bad in [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)]:
        with pytest.raises(ValueError):
            pass_at_k(*bad)


def test_mean_ci95_normal_approximation():
    mean, lo, hi = mean_ci95([0.4, 0.6, 0.5, 0.5])
    half = 1.959963984540054 * math.sqrt((0.01 + 0.01) / 3 / 4)  # z * sd(ddof=1) / sqrt(n)
    assert (mean, lo, hi) == pytest.approx((0.5, 0.5 - half, 0.5 + half))
    assert mean_ci95([1.0] * 5) == (1.0, 1.0, 1.0)
    assert mean_ci95([0.0, 1.0]) == (0.5, 0.0, 1.0)  # clipped
    assert mean_ci95([0.3]) == (0.3, 0.0, 1.0)  # one task: no information on spread
    # one sample per task (greedy): the Wilson interval, honest at 0 % and small n
    from grpo_research.evaluation.metrics import wilson_ci95

    assert aggregate_pass_at_k([(1, 0)] * 3, [1])["1"]["ci95"] == pytest.approx([0.0, 0.5615], abs=1e-4)
    # the score interval's usual worked examples (81/263, 15/148, 0/20, 1/29), to 4 decimals
    for (c, n), expected in (((81, 263), (0.2553, 0.3662)), ((15, 148), (0.0624, 0.1605)),
                             ((0, 20), (0.0, 0.1611)), ((1, 29), (0.0061, 0.1718))):
        assert wilson_ci95(c, n) == pytest.approx(expected, abs=6e-5)
    # at 0 or n successes the bound is the estimate exactly, never a rounding error beyond it
    for n in (1, 3, 6, 7, 24, 100, 263):
        assert wilson_ci95(0, n)[0] == 0.0 and wilson_ci95(n, n)[1] == 1.0
    assert aggregate_pass_at_k([(1, 1), (1, 0)], [1])["1"]["ci95"] == pytest.approx(list(wilson_ci95(1, 2)))
    agg = aggregate_pass_at_k([(2, 1), (2, 2), (2, 0)], [1, 2])
    assert agg["1"]["value"] == pytest.approx(0.5) and agg["2"]["value"] == pytest.approx(2 / 3)
    assert agg["2"]["n_tasks"] == 3 and agg["1"]["ci95"][0] < 0.5 < agg["1"]["ci95"][1]


# ---------------------------------------------------------------- score_predictions / main on fixtures

GSM = [{"question": f"What is {i} + {i}?", "answer": f"{i}+{i}={2 * i}\n#### {2 * i}"} for i in range(4)]


@pytest.fixture
def gsm(tmp_path):
    path = tmp_path / "gsm.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in GSM))
    return path


def write_preds(path: Path, rows) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def run_main(args: list[str], capsys) -> tuple[int, str, str]:
    rc = score_main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_score_several_samples_missing_tasks_and_ids(tmp_path, gsm, capsys):
    preds = write_preds(tmp_path / "p.jsonl", [
        {"task_id": 0, "completion": "#### 0"}, {"task_id": "0", "completion": "#### 5"},
        {"task_id": "1", "completion": "so 2"}, {"task_id": 1, "completion": "#### 2", "finished": False},
        {"task_id": "2", "completion": "#### 1"}, {"task_id": 2, "completion": "none"},
    ])
    out = tmp_path / "res" / "gsm.json"
    rc, stdout, err = run_main(["--benchmark", "gsm8k", "--predictions", preds, "--data", gsm, "--out", out], capsys)
    assert rc == 0 and err == "" and "pass@1" in stdout
    summary = json.loads(out.read_text())
    assert summary["benchmark"] == "gsm8k"
    assert (summary["n_tasks"], summary["n_samples"], summary["missing_tasks"]) == (3, 6, 1)
    assert summary["missing_task_ids"] == ["3"]
    assert summary["pass@1"] == pytest.approx(0.5)  # tasks: 1/2, 2/2, 0/2
    assert set(summary["pass@k"]) == {"1", "2"}
    assert summary["pass@k"]["2"]["value"] == pytest.approx(2 / 3)
    lo, hi = summary["pass@k"]["1"]["ci95"]
    assert 0 <= lo < 0.5 < hi <= 1
    assert summary["outcomes"] == {"no_answer": 1, "passed": 3, "wrong_answer": 2}
    rows = [json.loads(line) for line in S.samples_path(out).read_text().splitlines()]
    assert S.samples_path(out).name == "gsm.samples.jsonl"
    assert [(r["task_id"], r["sample"], r["passed"], r["outcome"]) for r in rows] == [
        ("0", 0, True, "passed"), ("0", 1, False, "wrong_answer"), ("1", 0, True, "passed"),
        ("1", 1, True, "passed"), ("2", 0, False, "wrong_answer"), ("2", 1, False, "no_answer")]
    assert rows[1]["extracted"] == "5"
    assert sorted(p.name for p in out.parent.iterdir()) == ["gsm.json", "gsm.samples.jsonl"]  # no temp files left


def test_pass_at_k_goes_up_to_the_smallest_sample_count(tmp_path, gsm):
    from grpo_research.tasks.base import get_task

    task = get_task("gsm8k", data_path=gsm)
    preds = [{"task_id": "0", "completion": c} for c in ("#### 0", "#### 1", "#### 2")]
    preds += [{"task_id": "1", "completion": c} for c in ("#### 9", "#### 2")]
    summary, rows = S.score_predictions(task, preds)
    assert summary["samples_per_task"] == {"min": 2, "max": 3}
    assert set(summary["pass@k"]) == {"1", "2"}
    assert summary["pass@k"]["1"]["value"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert summary["pass@k"]["2"]["value"] == pytest.approx(((1 - 1 / 3)) / 2 + 1 / 2)


def test_math500_accepts_unique_id_and_line_index(tmp_path, capsys):
    data = tmp_path / "m.jsonl"
    data.write_text("".join(json.dumps({"problem": f"p{i}", "answer": str(i), "unique_id": f"test/x/{i}.json"}) + "\n"
                            for i in range(3)))
    preds = write_preds(tmp_path / "p.jsonl", [
        {"task_id": "test/x/0.json", "completion": "\\boxed{0}"}, {"task_id": 1, "completion": "\\boxed{1}"},
        {"task_id": "2", "completion": "\\boxed{3}"}])
    out = tmp_path / "m.json"
    rc, _, err = run_main(["--benchmark", "math500", "--predictions", preds, "--data", data, "--out", out], capsys)
    assert rc == 0, err
    summary = json.loads(out.read_text())
    assert (summary["n_tasks"], summary["missing_tasks"], summary["pass@1"]) == (3, 0, pytest.approx(2 / 3))
    rows = [json.loads(line) for line in S.samples_path(out).read_text().splitlines()]
    assert [r["task_id"] for r in rows] == ["test/x/0.json", "test/x/1.json", "test/x/2.json"]
    assert "input_task_id" not in rows[0] and rows[1]["input_task_id"] == 1 and rows[2]["input_task_id"] == "2"


class FlakyCodeTask:
    """A code task whose sandbox fails: `flaky` ids once, `broken` ids always."""

    name, kind = "flaky", "code"

    def __init__(self, flaky=(), broken=()):
        self.problems = [Problem(id=str(i), prompt="") for i in range(3)]
        self.flaky, self.broken, self.calls = set(flaky), set(broken), 0

    def heldout_problems(self, n=None):
        return self.problems[:n]

    def grade_many(self, problems, completions, finished):
        self.calls += 1
        out = []
        for p, c in zip(problems, completions):
            if p.id in self.broken or (p.id in self.flaky and self.calls == 1):
                out.append(Grade(False, "sandbox_error", masked=True))
            else:
                out.append(Grade(c == "ok", "passed" if c == "ok" else "failed"))
        return out


def test_sandbox_errors_are_retried_once_then_reported_not_failed():
    task = FlakyCodeTask(flaky={"0"}, broken={"2"})
    preds = [{"task_id": "0", "completion": "ok"}, {"task_id": "1", "completion": "bad"},
             {"task_id": "2", "completion": "ok"}]
    summary, rows = S.score_predictions(task, preds)
    assert task.calls == 2
    assert [r["outcome"] for r in rows] == ["passed", "failed", "sandbox_error"]
    assert rows[2]["passed"] is False
    assert (summary["n_tasks"], summary["n_samples"], summary["n_predictions"]) == (2, 2, 3)
    assert summary["sandbox_errors"] == 1 and summary["unscored_task_ids"] == ["2"]
    assert summary["missing_tasks"] == 0 and summary["pass@1"] == pytest.approx(0.5)


@pytest.mark.parametrize("case, expected", [
    ("missing_predictions", r"error: .*nope\.jsonl: no such file"),
    ("bad_json", r"error: .*p\.jsonl, line 2: invalid JSON"),
    ("missing_field", r"error: .*p\.jsonl, line 2: missing field 'completion'"),
    ("unknown_task", r"error: .*p\.jsonl, line 1: unknown task_id '99' for benchmark 'gsm8k'"),
    ("bad_completion", r"error: .*p\.jsonl, line 1: field 'completion' must be a string"),
    ("unknown_benchmark", r"error: unknown benchmark 'gsm9k'"),
    ("missing_data", r"error: .*absent\.jsonl: no such file"),
    ("bad_data", r"error: .*bad\.jsonl, line 1: missing field 'answer'"),
    ("missing_option", r"error: .*required: --out"),
    ("bad_workers", r"error: argument --workers: invalid int value"),
    ("empty", r"error: .*p\.jsonl: no predictions"),
])
def test_bad_input_is_one_error_line_exit_2_and_no_output(tmp_path, gsm, capsys, case, expected):
    preds = tmp_path / "p.jsonl"
    good = json.dumps({"task_id": 0, "completion": "#### 0"})
    rows = {"bad_json": [good, "{oops"], "missing_field": [good, json.dumps({"task_id": 1})],
            "unknown_task": [json.dumps({"task_id": 99, "completion": "x"})],
            "bad_completion": [json.dumps({"task_id": 1, "completion": 5})], "empty": []}.get(case, [good])
    write_preds(preds, rows)
    (tmp_path / "bad.jsonl").write_text(json.dumps({"question": "q"}) + "\n")
    out = tmp_path / "out" / "r.json"
    args = {"benchmark": "gsm8k", "predictions": preds, "data": gsm, "out": out}
    if case == "missing_predictions":
        args["predictions"] = tmp_path / "nope.jsonl"
    elif case == "unknown_benchmark":
        args["benchmark"] = "gsm9k"
    elif case == "missing_data":
        args["data"] = tmp_path / "absent.jsonl"
    elif case == "bad_data":
        args["data"] = tmp_path / "bad.jsonl"
    elif case == "missing_option":
        del args["out"]
    argv = [x for k, v in args.items() for x in (f"--{k}", v)]
    if case == "bad_workers":
        argv += ["--workers", "many"]
    rc, stdout, err = run_main(argv, capsys)
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert __import__("re").match(expected, err.strip()), err
    assert not (tmp_path / "out").exists()


def test_out_must_not_overwrite_the_predictions(tmp_path, gsm, capsys):
    preds = write_preds(tmp_path / "p.json", [{"task_id": 0, "completion": "#### 0"}])
    rc, _, err = run_main(["--benchmark", "gsm8k", "--predictions", preds, "--data", gsm, "--out", preds], capsys)
    assert rc == 2 and "overwrite" in err


def test_python_dash_m_on_humaneval(tmp_path):
    """`python -m grpo_research.cli score`: the canonical solutions score 1.0 (all 164 when
    the real file is present, else a two-problem fixture)."""
    if REAL is not None:
        data = REAL / "humaneval" / "HumanEval.jsonl.gz"
        records = [json.loads(line) for line in gzip.open(data, "rt")]
    else:
        records = [{"task_id": f"HumanEval/{i}", "prompt": f"def f{i}(x):\n", "entry_point": f"f{i}",
                    "canonical_solution": f"    return x + {i}\n",
                    "test": f"def check(c):\n    assert c(1) == {1 + i}\n"} for i in range(2)]
        data = tmp_path / "he.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in records))
    preds = write_preds(tmp_path / "preds.jsonl",
                        [{"task_id": r["task_id"], "completion": r["canonical_solution"]} for r in records])
    out = tmp_path / "he.json"
    proc = subprocess.run([sys.executable, "-m", "grpo_research.cli", "score", "--benchmark", "humaneval",
                           "--predictions", str(preds), "--data", str(data), "--out", str(out), "--timeout", "20",
                           "--workers", "4"],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(out.read_text())
    assert (summary["n_tasks"], summary["pass@1"], summary["sandbox_errors"]) == (len(records), 1.0, 0)
    assert summary["outcomes"] == {"passed": len(records)}
    rows = [json.loads(line) for line in (tmp_path / "he.samples.jsonl").read_text().splitlines()]
    assert [r["task_id"] for r in rows] == [r["task_id"] for r in records] and all(r["passed"] for r in rows)
