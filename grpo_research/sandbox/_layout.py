"""What a sandbox is made of: the in-sandbox runner's code, the minimal root (what it binds and
links), the program's environment, and the bwrap / unshare command lines that build it."""

from __future__ import annotations

import ast
import functools
import marshal
import os
import shutil
import site
import subprocess
import sys

from ._types import SandboxLimits

_SANDBOX_UID = 65534  # uid shown inside bwrap; "unshare" uses a random unprivileged host uid


# The in-sandbox runner, one file per role, executed in this order in one namespace (at module
# level, where globals are locals, so the parts see each other's names as in one module).  Each
# part is its own argument: one argument may not exceed MAX_ARG_STRLEN (128 KiB), and the whole
# runner as one hex string came within 4 KiB of it.
RUNNER_PARTS = ("_runner_base.py", "_runner_init.py", "_runner_child.py", "_runner_completion.py",
                "_runner_tester.py", "_runner.py")
BOOTSTRAP = "import marshal,sys\nfor c in sys.argv[2:-1]:exec(marshal.loads(bytes.fromhex(c)))"


@functools.lru_cache(maxsize=1)
def runner_code_hex() -> tuple[str, ...]:
    """The in-sandbox runner's parts, each compiled once (same interpreter on both sides).

    A part's module docstring is for its readers and is not shipped: six of them cost ~9 KB of
    hex that every run would copy through two execs and decode."""
    out = []
    for part in RUNNER_PARTS:
        with open(os.path.join(os.path.dirname(__file__), part), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        if ast.get_docstring(tree, clean=False) is not None:
            del tree.body[0]
        code = compile(tree, f"<grpo-sandbox-runner/{part}>", "exec", dont_inherit=True)
        out.append(marshal.dumps(code).hex())
    return tuple(out)


def python_exe() -> str:
    exe = sys.executable
    if not exe or not os.path.exists(exe):
        raise RuntimeError("sys.executable is not available")
    return os.path.abspath(exe)


def _normalize_dirs(paths) -> list[str]:
    """Absolute, existing, de-duplicated directories, dropping those inside another one."""
    out: list[str] = []
    for p in sorted({os.path.abspath(p) for p in paths if p and os.path.isdir(p)}, key=len):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


@functools.lru_cache(maxsize=1)
def site_paths() -> list[str]:
    """site-packages of this interpreter, put on the program's sys.path (no .pth processing)."""
    try:
        paths = site.getsitepackages()
    except AttributeError:  # pragma: no cover - very old virtualenv
        paths = []
    return [p for p in paths if os.path.isdir(p)]


@functools.lru_cache(maxsize=1)
def root_layout() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
    """What the minimal root shows: read-only binds (src, dst) and symlinks (target, link).

    /usr (+ the merged-/usr compat links), a few harmless files of /etc (no shadow, no
    secrets), and the directories of this Python interpreter and its venv.
    """
    binds: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    dirs = ["/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            links.append((os.readlink(top), top))
        elif os.path.isdir(top):
            dirs.append(top)
    exe = python_exe()
    dirs += [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             os.path.dirname(exe), os.path.dirname(os.path.realpath(exe)), *site_paths()]
    # never expose the host's real root or a whole home tree by accident
    dirs = [d for d in _normalize_dirs(dirs) if d != "/"]
    binds += [(d, d) for d in dirs]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/passwd",
              "/etc/group", "/etc/nsswitch.conf", "/etc/host.conf"):
        if os.path.isfile(f):
            binds.append((os.path.realpath(f), f))
    return tuple(binds), tuple(links)


def sandbox_env(workdir: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": workdir,
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONIOENCODING": "utf-8",
    }


def tmpfs_bytes(limits: SandboxLimits) -> int:
    return max(4 * limits.file_size_mb, 32) * 1024 * 1024


@functools.lru_cache(maxsize=1)
def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def _bwrap_supports(flag: str) -> bool:
    path = bwrap_path()
    if not path:
        return False
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10,
                             check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return flag in (out.stdout + out.stderr)


def bwrap_argv(workdir: str, limits: SandboxLimits, info_fd: int) -> list[str]:
    path = bwrap_path()
    if not path:
        raise FileNotFoundError("bwrap not found on PATH")
    size = str(tmpfs_bytes(limits))
    argv = [path, "--unshare-all", "--unshare-user"]
    if _bwrap_supports("--disable-userns"):
        argv.append("--disable-userns")
    argv += ["--uid", str(_SANDBOX_UID), "--gid", str(_SANDBOX_UID), "--hostname", "sandbox",
             "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    sized = ["--size", size] if _bwrap_supports("--size") else []  # bwrap >= 0.7
    argv += ["--proc", "/proc", "--dev", "/dev",
             *sized, "--tmpfs", "/dev/shm",
             *sized, "--tmpfs", "/tmp"]  # before the binds: the venv may live below /tmp
    binds, links = root_layout()
    for src, dst in binds:
        argv += ["--ro-bind", src, dst]
    for target, link in links:
        argv += ["--symlink", target, link]
    argv += [*sized, "--tmpfs", workdir,
             "--remount-ro", "/", "--remount-ro", "/dev",
             "--chdir", workdir, "--info-fd", str(info_fd), "--"]
    return argv


def unshare_argv() -> list[str]:
    path = shutil.which("unshare")
    if not path:
        raise FileNotFoundError("unshare not found on PATH")
    return [path, "--mount", "--net", "--pid", "--ipc", "--uts", "--cgroup",
            "--fork", "--kill-child", "--propagation", "private", "--"]
