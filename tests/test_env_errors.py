"""What the environment or a mistyped path can do to `train` (issue 32): each is one line,
`error: ...` naming the path, exit 2, no traceback, before any training and with nothing written
or lost: an empty --run-dir (it would train into the current directory), a non-empty directory
that is not a run dir, a run dir inside a file, a name longer than the file system allows, a
read-only run dir, the model cache being a file or a read-only empty directory, metrics.jsonl
being a directory. The read-only cases mount a real read-only tmpfs (needs root; skipped
otherwise)."""
import subprocess

import pytest

from grpo_research.cli import main
from tests.helpers import fast_run


@pytest.fixture
def read_only_dir(tmp_path):
    """`read_only_dir(name)`: an empty directory on a read-only file system."""
    mounts = []

    def make(name):
        d = tmp_path / name
        d.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(d)],
                          capture_output=True).returncode:
            pytest.skip("cannot mount a read-only tmpfs here (needs root)")
        mounts.append(d)
        return d

    yield make
    for d in mounts:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def _setup(case, tmp_path, read_only_dir):
    """(run dir argument, extra overrides, text the error line must hold)."""
    if case == "empty run dir":
        return "", [], "--run-dir is empty"
    if case == "not a run dir":
        d = tmp_path / "notes"
        d.mkdir()
        (d / "thesis.tex").write_text("mine\n")
        return str(d), [], f"run dir {d} is not empty (thesis.tex) and holds no config.yaml"
    if case == "inside a file":
        (tmp_path / "afile").write_text("x")
        return str(tmp_path / "afile" / "run"), [], f"{tmp_path / 'afile'} is a file, not a directory"
    if case == "name too long":
        return str(tmp_path / ("r" * 300)), [], "is 300 bytes long, more than the 255"
    if case == "read-only run dir":
        d = read_only_dir("ro_run")
        return str(d), [], f"cannot write in {d} (read-only file system)"
    if case == "model cache is a file":
        (tmp_path / "cache").write_text("x")
        return str(tmp_path / "run"), ["model.name_or_path=tiny", f"model.cache_dir={tmp_path / 'cache'}"], \
            f"model cache {tmp_path / 'cache'} (model.cache_dir, GRPO_RESEARCH_CACHE): {tmp_path / 'cache'} is a file"
    if case == "model cache read-only":
        d = read_only_dir("ro_cache")
        return str(tmp_path / "run"), ["model.name_or_path=tiny", f"model.cache_dir={d}"], \
            f"the base model cannot be built in the model cache {d} (model.cache_dir, GRPO_RESEARCH_CACHE): " \
            f"read-only file system ({d}/tiny-arith-"
    if case == "metrics.jsonl a directory":
        d = tmp_path / "run"
        return str(d), [], f"run dir {d}: {d / 'metrics.jsonl'} is a directory, not a file"
    raise AssertionError(case)


CASES = ["empty run dir", "not a run dir", "inside a file", "name too long", "read-only run dir",
         "model cache is a file", "model cache read-only", "metrics.jsonl a directory"]


@pytest.mark.parametrize("case", CASES)
def test_one_line_naming_the_path_and_nothing_written(case, tiny_model_dir, tmp_path, read_only_dir, capsys,
                                                       monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    run, extra, expected = _setup(case, tmp_path, read_only_dir)
    args = ["train", "--run-dir", run, f"model.name_or_path={tiny_model_dir}", *fast_run("train.steps=2"), *extra]
    if case == "metrics.jsonl a directory":
        assert main(args) == 0  # a finished run, then its metrics.jsonl replaced by a directory
        (tmp_path / "run" / "metrics.jsonl").unlink()
        (tmp_path / "run" / "metrics.jsonl").mkdir()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "ro_" not in p.parts[-1])
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    assert expected in err, err
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if "ro_" not in p.parts[-1])
    assert after == before  # nothing written (or removed) anywhere, the current directory included
    assert not list(cwd.iterdir())


def test_sft_out_refuses_the_same_paths(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    for out, expected in (("", "--out is empty"), (str(tmp_path / "afile" / "m"), "is a file, not a directory"),
                          (str(tmp_path / ("m" * 300)), "is 300 bytes long")):
        assert main(["sft", "--out", out]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and expected in err, err
