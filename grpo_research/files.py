"""Atomic file and directory writes (torch-free): a reader sees the old content or the new,
never a partial file. Every writer of the project that replaces a file uses these."""
from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write `text` to a temporary file beside `path`, fsync it, then rename it over `path`.
    The file gets the usual permissions (0666 less the umask); on any error the temporary file
    is removed and `path` is left as it was."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    try:
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def fsync_path(path: str | os.PathLike) -> None:
    """fsync a file (written and flushed through another handle, e.g. a log) or a directory (its entries)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_dir_beside(path: str | os.PathLike) -> Path:
    """A fresh, empty directory beside `path` (same file system, so a rename can swap it in)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.tmp"))


def replace_dir(tmp: str | os.PathLike, final: str | os.PathLike, old: str | os.PathLike | None = None) -> None:
    """Swap the fully written directory `tmp` in as `final`: the old `final` (if any) is renamed
    aside to `old` first (default: a hidden name beside it) and removed only after the new one is
    in place, so a crash between the renames leaves `old` complete."""
    tmp, final = Path(tmp), Path(final)
    old = Path(old) if old is not None else final.with_name(f".{final.name}.old{os.getpid()}")
    if old.exists():
        shutil.rmtree(old)
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    if old.exists():
        shutil.rmtree(old)


def check_output(out: str | os.PathLike, inputs: list[str | os.PathLike] = (), flag: str = "--out") -> Path:
    """Refuse, before any work, an output path that cannot be written or that is one of the
    command's inputs (the same path, a symlink to it, or a hard link of it): `UsageError` naming
    the flag. Returns the output as a Path; nothing is created (a missing parent is created when
    the output is written)."""
    from grpo_research.errors import UsageError

    text = os.fspath(out)
    if text.endswith(os.sep):
        raise UsageError(f"{flag} {text} names a directory; give a file name")
    out = Path(text)
    if out.is_dir():
        raise UsageError(f"{flag} {out} is a directory; give a file name")
    for inp in inputs:
        if inp is None:
            continue
        inp = Path(inp)
        same = os.path.realpath(inp) == os.path.realpath(out)
        if not same and out.exists() and inp.exists():
            same = os.path.samefile(inp, out)
        if same:
            raise UsageError(f"{flag} {out} is the input {inp}: it would be overwritten; write elsewhere")
    parent = out.parent
    for p in (parent, *parent.parents):
        if p.exists():
            if not p.is_dir():
                raise UsageError(f"{flag} {out}: {p} is a file, not a directory")
            if not os.access(p, os.W_OK | os.X_OK):
                raise UsageError(f"{flag} {out}: cannot write in {p} (permission denied)")
            break
    if out.exists() and not os.access(out, os.W_OK) and not os.access(parent, os.W_OK):
        raise UsageError(f"{flag} {out} cannot be written (permission denied)")
    return out


def check_output_dir(out: str | os.PathLike, inputs: list[str | os.PathLike] = (), flag: str = "--out") -> Path:
    """Refuse, before any work, an output directory that cannot be made or written, or that is one
    of the command's input directories or lies inside one (`UsageError` naming the flag). Returns
    it as a Path; nothing is created."""
    from grpo_research.errors import UsageError

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"{flag} {out} is a file; give a directory")
    real = Path(os.path.realpath(out))
    for inp in inputs:
        if inp is None:
            continue
        src = Path(os.path.realpath(inp))
        if real == src or src in real.parents:
            raise UsageError(f"{flag} {out} is {'the input' if real == src else 'inside the input'} {inp}; write elsewhere")
    for p in (out, *out.parents):
        if p.exists():
            if not p.is_dir():
                raise UsageError(f"{flag} {out}: {p} is a file, not a directory")
            if not os.access(p, os.W_OK | os.X_OK):
                raise UsageError(f"{flag} {out}: cannot write in {p} (permission denied)")
            break
    return out


ENVIRONMENT_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.ENAMETOOLONG, errno.ENOTDIR,
                                errno.EISDIR, errno.EACCES, errno.EPERM, errno.EEXIST})


def is_environment_error(e: BaseException) -> bool:
    """An OSError the machine causes, not the code (full disk, read-only file system, ...)."""
    return isinstance(e, OSError) and e.errno in ENVIRONMENT_ERRNOS


def environment_error(e: OSError, what: str = ""):
    """An OSError of the environment (full disk, read-only file system, a path through a file,
    a name too long, permissions) as a `UsageError` of one line naming `what` and the file."""
    reason = {errno.ENOSPC: "no space left on the device", errno.EROFS: "read-only file system",
              errno.EDQUOT: "disk quota exceeded", errno.ENAMETOOLONG: "file name too long",
              errno.ENOTDIR: "a part of the path is a file, not a directory",
              errno.EISDIR: "is a directory, not a file", errno.EACCES: "permission denied",
              errno.EPERM: "operation not permitted", errno.EEXIST: "exists already"}.get(
        e.errno, e.strerror or type(e).__name__)
    where = f" ({e.filename})" if e.filename else ""
    from grpo_research.errors import UsageError

    return UsageError(f"{what}: {reason}{where}" if what else f"{reason}{where}")


def disk_full(e: BaseException | None) -> bool:
    """ENOSPC, also when torch's checkpoint writer reports it as a RuntimeError (whose message
    or the exception it was raised while handling says so)."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return True
        if "No space left on device" in str(e) or "file write failed" in str(e):
            return True
        e, seen = e.__cause__ or e.__context__, seen + 1
    return False
