"""`train.eval_benchmarks` (grpo_research/trainers/bench_eval.py): benchmarks evaluated at every
evaluation point, graded by the path `grpo-research eval` uses, without changing the training."""
import json

import pytest

from grpo_research.cli import main
from grpo_research.tracking import read_metrics
from tests.helpers import deterministic, fast_run

BENCH = "train.eval_benchmarks={arith: {n: 6, k: 4, temperature: 1.0}}"


def _train(run, model_dir, *extra):
    return main(["train", "--run-dir", str(run), f"model.name_or_path={model_dir}",
                 *fast_run("train.steps=3", "train.eval_every=2", *extra)])


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("bench_eval")
    assert _train(root / "plain", tiny_model_dir) == 0
    assert _train(root / "bench", tiny_model_dir, BENCH) == 0
    return root / "plain", root / "bench"


def test_each_evaluation_point_logs_pass_at_k_and_maj_at_k_with_intervals(runs):
    _, bench = runs
    rows = [r for r in read_metrics(bench / "metrics.jsonl") if "eval/accuracy" in r]
    assert [r["step"] for r in rows] == [0, 2, 3]
    for r in rows:
        for key in ("pass@1", "pass@4", "maj@1", "maj@4"):
            v, lo, hi = r[f"eval/arith/{key}"], r[f"eval/arith/{key}_lo"], r[f"eval/arith/{key}_hi"]
            assert 0 <= lo <= v <= hi <= 1, (key, r)
        assert r["eval/arith/pass@1"] <= r["eval/arith/pass@4"]
        record = json.loads((bench / "bench_eval" / "arith" / f"step{r['step']:06d}.json").read_text())
        assert record["evaluated_by"] == {"trainer_step": r["step"]}
        assert record["n_tasks"] == 6 and record["n_predictions"] == 24
        assert record["pass@k"]["4"]["value"] == r["eval/arith/pass@4"]
        assert record["decoding"]["samples"] == 4 and record["decoding"]["temperature"] == 1.0


def test_benchmarks_do_not_change_the_training(runs):
    """The sampler of the benchmarks has its own seed (counter sampler): every training value
    and the held-out accuracy are those of the run without them."""
    plain, bench = runs
    strip = lambda rows: [{k: v for k, v in r.items() if not k.startswith("eval/arith/")}  # noqa: E731
                          for r in deterministic(rows)]
    assert strip(read_metrics(bench / "metrics.jsonl")) == strip(read_metrics(plain / "metrics.jsonl"))


def test_the_samples_are_graded_as_grpo_research_score_grades_them(runs, tmp_path):
    _, bench = runs
    record = bench / "bench_eval" / "arith" / "step000003.json"
    out = tmp_path / "score.json"
    assert main(["score", "--benchmark", "arith", "--predictions", str(record.with_suffix(".predictions.jsonl")),
                 "--out", str(out)]) == 0
    scored, kept = json.loads(out.read_text()), json.loads(record.read_text())
    assert scored["pass@k"] == kept["pass@k"] and scored["maj@k"] == kept["maj@k"]


def test_greedy_entry_equals_grpo_research_eval_of_the_saved_model(tiny_model_dir, tmp_path):
    run = tmp_path / "run"
    assert _train(run, tiny_model_dir, "train.eval_benchmarks={arith: {n: 6}}") == 0
    last = [r for r in read_metrics(run / "metrics.jsonl") if "eval/arith/pass@1" in r][-1]
    out = tmp_path / "eval.json"
    assert main(["eval", "--checkpoint", str(run), "--benchmark", "arith", "--n", "6", "--out", str(out),
                 "--threads", "1"]) == 0
    fresh = json.loads(out.read_text())
    assert fresh["pass@1"] == last["eval/arith/pass@1"]
    kept = (run / "bench_eval" / "arith" / "step000003.predictions.jsonl").read_text()
    assert kept == out.with_suffix(".predictions.jsonl").read_text()


def test_sampled_shares_at_their_offsets_draw_what_the_whole_set_draws(tiny_model_dir):
    """What lets data-parallel processes each evaluate their share: the counter sampler."""
    from grpo_research.evaluation.generate import predict
    from grpo_research.models import load_causal_lm
    from grpo_research.tasks import get_task

    model, tok = load_causal_lm(tiny_model_dir, "float32")
    problems = get_task("arith").heldout_problems(6)
    kw = dict(samples=3, max_new_tokens=8, temperature=1.0, seed=11, sampler="counter")
    whole = predict(model, tok, problems, **kw)
    shares = predict(model, tok, problems[:2], **kw) + predict(model, tok, problems[2:], row_offset=2 * 3, **kw)
    assert shares == whole
    assert predict(model, tok, problems, **{**kw, "seed": 12}) != whole  # the seed matters


@pytest.mark.parametrize("override, message", [
    ("train.eval_benchmarks={nope: {n: 2}}", "'train.eval_benchmarks.nope': must be one of"),
    ("train.eval_benchmarks={arith: {k: 2}}", "'train.eval_benchmarks.arith' needs n"),
    ("train.eval_benchmarks={arith: {n: 2, k: 0}}", "'train.eval_benchmarks.arith.k' = 0 must be at least 1"),
    ("train.eval_benchmarks={arith: {n: 2, temp: 1}}", "'train.eval_benchmarks.arith.temp' is not a key"),
    ("train.eval_benchmarks={arith: {n: 100000000}}", "train.eval_benchmarks.arith.n=100000000"),
])
def test_bad_entries_are_refused_in_one_line_before_training(override, message, tiny_model_dir, tmp_path, capsys):
    run = tmp_path / "run"
    assert _train(run, tiny_model_dir, override) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (run / "metrics.jsonl").exists()


def test_a_benchmark_longer_than_the_context_is_refused(tiny_model_dir, tmp_path, capsys):
    data = tmp_path / "gsm8k.jsonl"
    data.write_text(json.dumps({"question": "Tom has " + "many " * 40 + "apples. How many?",
                                "answer": "He has 3.\n#### 3"}) + "\n")
    assert _train(tmp_path / "run", tiny_model_dir, f"train.eval_benchmarks={{gsm8k: {{n: 1, data: '{data}'}}}}") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "exceeds the model's context of 64 tokens" in err[0], err
