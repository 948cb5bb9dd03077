"""Output paths are checked before any work: never an input, never unwritable (issue 13, item 3)."""
import os

import pytest

from grpo_research.errors import UsageError
from grpo_research.files import check_output, replace_dir, temp_dir_beside, write_text_atomic


def test_an_output_that_is_an_input_is_refused(tmp_path):
    data = tmp_path / "data.jsonl"
    data.write_text("x\n")
    (tmp_path / "link.jsonl").symlink_to(data)
    os.link(data, tmp_path / "hard.jsonl")
    for out in (data, tmp_path / "link.jsonl", tmp_path / "hard.jsonl", tmp_path / "sub" / ".." / "data.jsonl"):
        with pytest.raises(UsageError, match="is the input"):
            check_output(out, [data])
    assert data.read_text() == "x\n"


@pytest.mark.parametrize("make, needle", [
    (lambda d: (d / "adir").mkdir() or str(d / "adir"), "is a directory"),
    (lambda d: str(d / "new") + "/", "names a directory"),
    (lambda d: (d / "afile").write_text("") or str(d / "afile" / "out.json"), "is a file, not a directory"),
])
def test_unwritable_outputs_are_refused(tmp_path, make, needle):
    with pytest.raises(UsageError, match=needle):
        check_output(make(tmp_path))


def test_a_read_only_directory_is_refused(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user that can write anywhere (root)")
        with pytest.raises(UsageError, match="permission denied"):
            check_output(ro / "out.json")
    finally:
        ro.chmod(0o700)


def test_atomic_writes_leave_old_or_new(tmp_path):
    f = tmp_path / "a.txt"
    write_text_atomic(f, "one")
    write_text_atomic(f, "two")
    assert f.read_text() == "two" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]
    d = tmp_path / "d"
    t = temp_dir_beside(d)
    (t / "x").write_text("1")
    replace_dir(t, d)
    t = temp_dir_beside(d)
    (t / "x").write_text("2")
    replace_dir(t, d)
    assert (d / "x").read_text() == "2" and sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "d"]
