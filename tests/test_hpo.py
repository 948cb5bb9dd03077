"""Optuna search (grpo_research/hpo): trials are ordinary run dirs; best.yaml and plots are
written; an interrupted search resumes without losing or repeating finished trials; a trial
left RUNNING by a killed search is retried in its own run dir; pruning kills a bad trial."""
import json
import os
import re
import sys
import textwrap
import threading
import uuid

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from grpo_research.config import load_config
from grpo_research.hpo import SearchSpec, export_study, run_search, suggest_overrides
from grpo_research.hpo.search import open_study
from grpo_research.hpo.storage import make_storage

SPACE = {
    "algo.group_size": {"type": "categorical", "choices": [2, 4]},
    "algo.beta": {"type": "float", "low": 0.0, "high": 0.1},
    "optim.lr": {"type": "float", "low": 1e-4, "high": 1e-2, "log": True},
}


def _spec(tmp_path, model_dir, n_trials, **kw):
    return SearchSpec(
        name="grpo-arith", method="grpo", storage=f"sqlite:///{tmp_path / 'optuna.db'}", out_dir=tmp_path / "out",
        runs_dir=tmp_path / "trials", n_trials=n_trials, budget_samples=8, eval_every_samples=4, space=SPACE,
        sampler_seed=3, pruner={"type": "none"}, exclusive=True, poll_s=0.2,
        overrides=[f"model.name_or_path={model_dir}", "train.eval_size=8", "train.threads=1",
                   "rollout.prompts_per_step=1", "rollout.max_new_tokens=6", "tracking.wandb=disabled"],
        **kw,
    )


def _finished(study):
    return {t.number: t for t in study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))}


@pytest.mark.slow
def test_search_resumes_exports_best_yaml_and_plots(tiny_model_dir, tmp_path):
    study = run_search(_spec(tmp_path, tiny_model_dir, n_trials=2), log=lambda m: None)
    first = _finished(study)
    assert sorted(first) == [0, 1]
    for t in first.values():  # each trial is an ordinary run dir at the trial's budget
        run = tmp_path / "trials" / t.user_attrs["run_dir"]
        cfg = yaml.safe_load((run / "config.yaml").read_text())
        assert cfg["algo"]["group_size"] == t.params["algo.group_size"]
        assert cfg["train"]["steps"] * cfg["algo"]["group_size"] == 8  # 1 prompt x G x steps = budget
        assert cfg["tracking"]["group"] == "hpo-grpo-arith"
        assert json.loads((run / "summary.json").read_text())["final_accuracy"] == t.value

    # a search killed mid-trial leaves a RUNNING trial behind; the next search retries it
    # (same parameters, same run dir) and runs only what is missing
    study.enqueue_trial({"algo.group_size": 2, "algo.beta": 0.05, "optim.lr": 1e-3})
    with pytest.warns(UserWarning, match="Heartbeat"):
        orphan = study.ask()
    suggest_overrides(orphan, SPACE)
    orphan.set_user_attr("run_dir", "trial-0002")
    assert [t.number for t in study.get_trials(states=(TrialState.RUNNING,))] == [2]

    study = run_search(_spec(tmp_path, tiny_model_dir, n_trials=3), log=lambda m: None)
    done = _finished(study)
    assert len(done) == 3
    for n in (0, 1):  # untouched
        assert done[n].params == first[n].params and done[n].value == first[n].value
        assert done[n].datetime_complete == first[n].datetime_complete
    (retry,) = [t for n, t in done.items() if n not in (0, 1)]
    assert retry.user_attrs["run_dir"] == "trial-0002" and retry.params["algo.group_size"] == 2
    assert [t.number for t in study.get_trials(states=(TrialState.FAIL,))] == [2]
    assert sorted(p.name for p in (tmp_path / "trials").iterdir()) == ["trial-0000", "trial-0001", "trial-0002"]

    # a third call has nothing left to run
    before = len(study.trials)
    assert len(run_search(_spec(tmp_path, tiny_model_dir, n_trials=3), log=lambda m: None).trials) == before

    paths = export_study(_spec(tmp_path, tiny_model_dir, n_trials=3))
    best = yaml.safe_load(paths["best"].read_text())
    assert best["method"] == "grpo" and set(best["algo"]) == {"group_size", "beta"} and "lr" in best["optim"]
    cfg = load_config(paths["best"], [])  # best.yaml is a valid run config file
    assert cfg.algo.group_size == study.best_trial.params["algo.group_size"]
    for name in ("optimization_history", "param_importances", "parallel_coordinate", "slice", "intermediate_values"):
        png = paths[name]
        assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "out" / "trials.csv").read_text().count("\n") >= 4


FAKE_TRAINER = textwrap.dedent("""
    # stands in for `grpo-research train`: writes eval rows (accuracy = optim.lr) and a summary
    import json, sys, time
    from pathlib import Path
    run = Path(sys.argv[sys.argv.index("--run-dir") + 1])
    lr = float([a.split("=", 1)[1] for a in sys.argv if a.startswith("optim.lr=")][0])
    with open(run / "metrics.jsonl", "a") as f:
        for step in range(4):
            f.write(json.dumps({"step": step, "samples": 8 * step, "eval/accuracy": lr}) + "\\n")
            f.flush()
            time.sleep(0.3)
    (run / "summary.json").write_text(json.dumps({"final_accuracy": lr, "samples": 24, "steps": 3}))
""")


def test_pruning_kills_a_trial_below_the_median(tmp_path):
    fake = tmp_path / "fake_train.py"
    fake.write_text(FAKE_TRAINER)
    spec = SearchSpec(
        name="p", method="grpo", storage=f"sqlite:///{tmp_path / 'p.db'}", out_dir=tmp_path / "out",
        runs_dir=tmp_path / "trials", n_trials=3, budget_samples=16, space={}, poll_s=0.05,
        pruner={"type": "median", "n_startup_trials": 1, "n_warmup_samples": 0}, python=sys.executable,
        train_cmd=[str(fake)], overrides=["tracking.wandb=disabled"],
    )
    study = open_study(spec)
    for lr in (0.5, 0.1, 0.9):  # a good trial, a bad one (pruned), a good one
        study.enqueue_trial({"optim.lr": lr})
    spec.space = {"optim.lr": {"type": "float", "low": 0.01, "high": 1.0}}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = run_search(spec, log=lambda m: None)
    states = [t.state for t in study.trials]
    assert states == [TrialState.COMPLETE, TrialState.PRUNED, TrialState.COMPLETE]
    pruned = study.trials[1]
    assert max(pruned.intermediate_values) < 24  # stopped before its last evaluation
    assert not (tmp_path / "trials" / "trial-0001" / "summary.json").exists()
    assert study.best_value == 0.9


@pytest.mark.skipif(not os.environ.get("GRPO_RESEARCH_PG_URL"),
                    reason="no PostgreSQL URL (eval \"$(scripts/start_postgres.sh)\" sets GRPO_RESEARCH_PG_URL)")
def test_two_workers_share_one_postgres_study(tmp_path):
    fake = tmp_path / "fake_train.py"
    fake.write_text(FAKE_TRAINER)
    name = f"pg-{uuid.uuid4().hex[:8]}"

    def spec():
        return SearchSpec(name=name, method="grpo", storage=os.environ["GRPO_RESEARCH_PG_URL"],
                          out_dir=tmp_path / "out", runs_dir=tmp_path / "trials", n_trials=4, budget_samples=16,
                          space={"optim.lr": {"type": "float", "low": 0.01, "high": 1.0}}, poll_s=0.05,
                          pruner={"type": "none"}, python=sys.executable, train_cmd=[str(fake)],
                          overrides=["tracking.wandb=disabled"], heartbeat_interval=1, grace_period=5)

    workers = [threading.Thread(target=run_search, args=(spec(),), kwargs={"log": lambda m: None}) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    try:
        study = open_study(spec(), create=False)
        done = study.get_trials(states=(TrialState.COMPLETE,))
        assert len(done) >= 4
        assert len({t.user_attrs["run_dir"] for t in done}) == len(done)  # one run dir per trial
    finally:
        optuna.delete_study(study_name=name, storage=os.environ["GRPO_RESEARCH_PG_URL"])


def _pg_search_cmd(name, tmp_path, model_dir, n_trials):
    return [sys.executable, "-m", "grpo_research.cli", "hpo", "search", "--name", name, "--method", "grpo",
            "--out", str(tmp_path / "out"), "--runs", str(tmp_path / "trials"),
            "--storage", os.environ["GRPO_RESEARCH_PG_URL"], "--n-trials", str(n_trials),
            "--budget-samples", "48", "--eval-every-samples", "16", "--pruner", "{type: none}",
            "--space", "{optim.lr: {type: float, low: 0.0001, high: 0.01, log: true}}",
            "--heartbeat-interval", "1", "--grace-period", "4",
            f"model.name_or_path={model_dir}", "train.eval_size=8", "train.threads=1", "rollout.prompts_per_step=2",
            "algo.group_size=4", "rollout.max_new_tokens=6", "tracking.wandb=disabled"]


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("GRPO_RESEARCH_PG_URL"),
                    reason="no PostgreSQL URL (eval \"$(scripts/start_postgres.sh)\" sets GRPO_RESEARCH_PG_URL)")
def test_killed_worker_trial_is_failed_and_retried_by_the_survivor(tiny_model_dir, tmp_path):
    """Two `grpo-research hpo search` workers (real training runs) on one PostgreSQL study; one
    is SIGKILLed while its trial trains. The survivor marks that trial FAIL once its heartbeat is
    stale, retries it with the same parameters in the same run dir, and the study ends with the
    wanted number of COMPLETE trials, none run twice."""
    import subprocess
    import time

    import psutil

    name = f"pg-kill-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "WANDB_MODE": "disabled"}
    victim = subprocess.Popen(_pg_search_cmd(name, tmp_path, tiny_model_dir, 3), env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    survivor = None
    try:
        deadline = time.time() + 120
        while time.time() < deadline:  # the victim's first trial is training (a step logged)
            rows = list((tmp_path / "trials").glob("trial-*/metrics.jsonl"))
            if rows and any(len(p.read_text().splitlines()) >= 2 for p in rows):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the first worker's trial never started training")
        trainer = psutil.Process(victim.pid).children(recursive=True)
        survivor = subprocess.Popen(_pg_search_cmd(name, tmp_path, tiny_model_dir, 3), env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        victim.kill()  # SIGKILL: no chance to clean up; its trial's heartbeat stops
        victim.wait()
        psutil.wait_procs(trainer, timeout=30)  # the orphaned run stops with its worker (PDEATHSIG)
        assert not [p for p in trainer if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        _, err = survivor.communicate(timeout=300)
        assert survivor.returncode == 0, err[-3000:]

        study = optuna.load_study(study_name=name, storage=os.environ["GRPO_RESEARCH_PG_URL"])
        failed = study.get_trials(states=(TrialState.FAIL,))
        done = study.get_trials(states=(TrialState.COMPLETE,))
        assert len(failed) == 1 and len(done) == 3
        (killed,) = failed
        retries = [t for t in done if t.system_attrs.get("failed_trial") == killed.number]
        assert len(retries) == 1, [t.system_attrs for t in done]
        retry = retries[0]
        assert retry.params == killed.params and retry.user_attrs["run_dir"] == killed.user_attrs["run_dir"]
        assert len({t.user_attrs["run_dir"] for t in done}) == 3  # no trial trained twice
        summary = json.loads((tmp_path / "trials" / retry.user_attrs["run_dir"] / "summary.json").read_text())
        assert summary["samples"] == 48 and summary["final_accuracy"] == retry.value
    finally:
        for p in (victim, survivor):
            if p is not None and p.poll() is None:
                p.kill()
        try:
            optuna.delete_study(study_name=name, storage=os.environ["GRPO_RESEARCH_PG_URL"])
        except KeyError:
            pass


@pytest.mark.parametrize("url, needle", [
    ("postgresql+psycopg2://u:secret@127.0.0.1:1/db", "--storage postgresql+psycopg2://u:***@127.0.0.1:1/db: cannot "
                                                      "open the Optuna storage (connection to server"),
    ("nonsense", "not a database URL"),
    ("sqlite:////proc/no/such/optuna.db", "cannot create /proc/no/such"),
])
def test_an_unreachable_storage_is_one_line_and_exit_2(tmp_path, url, needle):
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "grpo_research.cli", "hpo", "search", "--name", "t", "--method", "grpo",
                           "--out", str(tmp_path / "out"), "--n-trials", "1", "--budget-samples", "16",
                           "--storage", url], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr
    assert "secret" not in proc.stderr


def test_an_sqlite_storage_in_a_read_only_directory_is_one_line():
    """The lock file beside the database cannot be created: one line naming the storage, exit 2
    (was a traceback). As root, whom permissions do not stop, the search runs as `nobody`."""
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    as_root = os.geteuid() == 0
    if as_root and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a read-only directory cannot be made")
    base = Path(tempfile.mkdtemp(prefix="hpo-ro-"))  # not under pytest's tmp dir (mode 700): `nobody` reaches it
    read_only = base / "ro"
    read_only.mkdir()
    try:
        base.chmod(0o777)
        read_only.chmod(0o555)
        url = f"sqlite:///{read_only}/optuna.db"
        cmd = [sys.executable, "-m", "grpo_research.cli", "hpo", "search", "--name", "t", "--method", "grpo",
               "--out", str(base / "out"), "--n-trials", "1", "--budget-samples", "16", "--storage", url]
        if as_root:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=base,
                              env={**os.environ, "HOME": str(base)})
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert proc.stderr.startswith(f"error: --storage {url}: cannot write {read_only}/optuna.db.lock "
                                      "(permission denied)"), proc.stderr
        assert list(read_only.iterdir()) == []
    finally:
        read_only.chmod(0o755)
        shutil.rmtree(base)


def _open_at_once(url: str, workers: int = 6) -> list[str]:
    """The errors of `workers` threads opening one storage at the same moment."""
    barrier, errors = threading.Barrier(workers), []

    def open_storage():
        barrier.wait()
        try:
            make_storage(url)
        except Exception as e:  # noqa: BLE001  (any failure is what the tests look for)
            errors.append(repr(e)[:300])

    threads = [threading.Thread(target=open_storage) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return errors


def test_workers_opening_a_fresh_sqlite_file_at_once_do_not_race_on_the_schema(tmp_path):
    """Without the lock file, five of six failed ("table studies already exists")."""
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    assert _open_at_once(url) == []
    optuna.create_study(study_name="after-race", storage=make_storage(url))


@pytest.mark.skipif(not os.environ.get("GRPO_RESEARCH_PG_URL"),
                    reason="no PostgreSQL URL (eval \"$(scripts/start_postgres.sh)\" sets GRPO_RESEARCH_PG_URL)")
def test_workers_opening_a_fresh_postgres_database_at_once_do_not_race_on_the_schema():
    """Six workers create Optuna's schema in a new, empty database at the same moment. Without
    the advisory lock in make_storage five of six failed with UniqueViolation (CREATE TYPE
    studydirection)."""
    import sqlalchemy

    url = sqlalchemy.engine.make_url(os.environ["GRPO_RESEARCH_PG_URL"])
    db = f"race_{uuid.uuid4().hex[:8]}"
    admin = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(sqlalchemy.text(f"CREATE DATABASE {db}"))
    fresh = url.set(database=db).render_as_string(hide_password=False)
    try:
        assert _open_at_once(fresh) == []
        optuna.create_study(study_name="after-race", storage=make_storage(fresh))  # the schema is whole
    finally:
        with admin.connect() as c:
            c.execute(sqlalchemy.text(f"DROP DATABASE {db} WITH (FORCE)"))
        admin.dispose()


def test_export_of_a_study_that_does_not_exist_is_one_line(tmp_path):
    import subprocess

    def export(storage, name="nosuch"):
        return subprocess.run([sys.executable, "-m", "grpo_research.cli", "hpo", "export", "--name", name, "--method",
                               "grpo", "--out", str(tmp_path / "out"), "--storage", storage],
                              capture_output=True, text=True, timeout=120)

    db = tmp_path / "none.db"
    proc = export(f"sqlite:///{db}")
    assert proc.returncode == 2 and "no such database file" in proc.stderr and proc.stderr.count("\n") == 1
    assert not db.exists()  # not created by looking
    optuna.create_study(study_name="other", storage=f"sqlite:///{db}")
    proc = export(f"sqlite:///{db}")
    assert proc.returncode == 2 and "holds no study 'nosuch'; it holds: other" in proc.stderr, proc.stderr


@pytest.mark.parametrize("pruner, needle", [
    ({"type": "medain"}, "unknown type 'medain'"), ({"n_startup": 3}, "expected a mapping of"),
    ({"n_startup_trials": -1}, "n_startup_trials must be an integer of 0 or more"),
    ({"type": "percentile", "percentile": 100}, "percentile must be in (0, 100)"),
])
def test_a_bad_pruner_is_refused_with_its_key(pruner, needle):
    from grpo_research.errors import ConfigError
    from grpo_research.hpo.search import make_pruner

    with pytest.raises(ConfigError, match=re.escape(needle)):
        make_pruner(pruner)
