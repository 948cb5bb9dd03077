"""Host side of :mod:`grpo_research.sandbox` (see the package docstring for the design).

Kept as one module (over 400 lines): launching, feeding, draining, killing and classifying one
sandboxed run share private state and helpers (the tests patch `_bwrap_path`, `_probe_cache`,
`secrets` and `tempfile` here); splitting it would turn those internals into public API."""

from __future__ import annotations

import ast
import dataclasses
import functools
import json
import marshal
import os
import random
import secrets
import select
import shutil
import signal
import site
import struct
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

OUTCOMES = ("passed", "failed", "timeout", "memory", "crashed", "sandbox_error")
ISOLATIONS = ("auto", "bwrap", "unshare", "none")

_SANDBOX_UID = 65534  # uid shown inside bwrap; "unshare" uses a random unprivileged host uid
_NPROC = 64  # RLIMIT_NPROC: processes of the sandbox uid (the kernel ignores it for host uid 0)
_FILENAME = "solution.py"  # what tracebacks show for the program
_RUNNER_ERROR = 125
_READ_CHUNK = 1 << 16
_EXIT_GRACE_S = 0.5  # how long pipes may stay open after the sandbox's main process exited
_REAP_WAIT_S = 3.0


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 10.0  # wall clock; on expiry the whole sandbox (every descendant) is killed
    cpu_s: int = 10  # RLIMIT_CPU
    memory_mb: int = 1024  # RLIMIT_AS
    file_size_mb: int = 16  # RLIMIT_FSIZE
    open_files: int = 64  # RLIMIT_NOFILE
    output_bytes: int = 65536  # stdout/stderr each capped to this many bytes (the rest is drained)
    isolation: str = "auto"  # "auto" (best available), "bwrap", "unshare", "none"


@dataclass(frozen=True)
class SandboxResult:
    outcome: str  # one of OUTCOMES
    exit_code: int | None  # the program's exit code, -N if killed by signal N, None if unknown
    stdout: str
    stderr: str
    duration_s: float
    isolation: str  # which isolation was actually in force: "bwrap", "unshare" or "none"
    detail: str = ""  # short reason, e.g. "AssertionError", "killed by signal 11 (SIGSEGV)"


@dataclass(frozen=True)
class TestProgram:
    """A completion and the tests that judge it, run in two processes (see "The verifier").

    `solution` is what the completion contributes (with whatever context it needs, e.g. the
    prompt it continues); it must compile and run as a module on its own.  `prelude` (trusted:
    the prompt's helpers, the tests' imports and set-up) and `tests` run in the tester's process,
    where `entry_point` and every name the tests use without defining it are proxies of the
    completion's names."""

    __test__ = False  # not a pytest class, whatever its name

    solution: str
    tests: str
    prelude: str = ""
    entry_point: str | None = None


# --------------------------------------------------------------------------------------
# static configuration
# --------------------------------------------------------------------------------------
# The in-sandbox runner, one file per role, executed in this order in one namespace (at module
# level, where globals are locals, so the parts see each other's names as in one module).  Each
# part is its own argument: one argument may not exceed MAX_ARG_STRLEN (128 KiB), and the whole
# runner as one hex string came within 4 KiB of it.
RUNNER_PARTS = ("_runner_base.py", "_runner_init.py", "_runner_child.py", "_runner_completion.py",
                "_runner_tester.py", "_runner.py")
_BOOTSTRAP = "import marshal,sys\nfor c in sys.argv[2:-1]:exec(marshal.loads(bytes.fromhex(c)))"


@functools.lru_cache(maxsize=1)
def _runner_code_hex() -> tuple[str, ...]:
    """The in-sandbox runner's parts, each compiled once (same interpreter on both sides)."""
    out = []
    for part in RUNNER_PARTS:
        with open(os.path.join(os.path.dirname(__file__), part), encoding="utf-8") as f:
            code = compile(f.read(), f"<grpo-sandbox-runner/{part}>", "exec", dont_inherit=True)
        out.append(marshal.dumps(code).hex())
    return tuple(out)


def _python() -> str:
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
def _site_paths() -> list[str]:
    """site-packages of this interpreter, put on the program's sys.path (no .pth processing)."""
    try:
        paths = site.getsitepackages()
    except AttributeError:  # pragma: no cover - very old virtualenv
        paths = []
    return [p for p in paths if os.path.isdir(p)]


@functools.lru_cache(maxsize=1)
def _root_layout() -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]:
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
    exe = _python()
    dirs += [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
             os.path.dirname(exe), os.path.dirname(os.path.realpath(exe)), *_site_paths()]
    # never expose the host's real root or a whole home tree by accident
    dirs = [d for d in _normalize_dirs(dirs) if d != "/"]
    binds += [(d, d) for d in dirs]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/passwd",
              "/etc/group", "/etc/nsswitch.conf", "/etc/host.conf"):
        if os.path.isfile(f):
            binds.append((os.path.realpath(f), f))
    return tuple(binds), tuple(links)


def _env(workdir: str) -> dict[str, str]:
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


def _tmpfs_bytes(limits: SandboxLimits) -> int:
    return max(4 * limits.file_size_mb, 32) * 1024 * 1024


@functools.lru_cache(maxsize=1)
def _bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=1)
def _bwrap_supports(flag: str) -> bool:
    path = _bwrap_path()
    if not path:
        return False
    try:
        out = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10,
                             check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return flag in (out.stdout + out.stderr)


def _bwrap_argv(workdir: str, limits: SandboxLimits, info_fd: int) -> list[str]:
    path = _bwrap_path()
    if not path:
        raise FileNotFoundError("bwrap not found on PATH")
    size = str(_tmpfs_bytes(limits))
    argv = [path, "--unshare-all", "--unshare-user"]
    if _bwrap_supports("--disable-userns"):
        argv.append("--disable-userns")
    argv += ["--uid", str(_SANDBOX_UID), "--gid", str(_SANDBOX_UID), "--hostname", "sandbox",
             "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    sized = ["--size", size] if _bwrap_supports("--size") else []  # bwrap >= 0.7
    argv += ["--proc", "/proc", "--dev", "/dev",
             *sized, "--tmpfs", "/dev/shm",
             *sized, "--tmpfs", "/tmp"]  # before the binds: the venv may live below /tmp
    binds, links = _root_layout()
    for src, dst in binds:
        argv += ["--ro-bind", src, dst]
    for target, link in links:
        argv += ["--symlink", target, link]
    argv += [*sized, "--tmpfs", workdir,
             "--remount-ro", "/", "--remount-ro", "/dev",
             "--chdir", workdir, "--info-fd", str(info_fd), "--"]
    return argv


def _unshare_argv() -> list[str]:
    path = shutil.which("unshare")
    if not path:
        raise FileNotFoundError("unshare not found on PATH")
    return [path, "--mount", "--net", "--pid", "--ipc", "--uts", "--cgroup",
            "--fork", "--kill-child", "--propagation", "private", "--"]


# --------------------------------------------------------------------------------------
# process helpers
# --------------------------------------------------------------------------------------
def _proc_table() -> dict[int, int]:
    """pid -> ppid for every process visible on the host."""
    table: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            table[int(name)] = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return table


def _descendants(root: int) -> list[int]:
    table = _proc_table()
    children: dict[int, list[int]] = {}
    for pid, ppid in table.items():
        children.setdefault(ppid, []).append(pid)
    out, stack = [], [root]
    while stack:
        for kid in children.get(stack.pop(), []):
            out.append(kid)
            stack.append(kid)
    return out


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return int(stat[stat.rindex(b")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


class _NsInit:
    """The sandbox's pid-namespace init, held through a pidfd: pids are recycled quickly
    (pid_max may be 32768), a pidfd can neither be misdirected nor miss the exit."""

    def __init__(self, pid: int, wrapper: subprocess.Popen):
        self.pid, self.fd = pid, None
        if wrapper.returncode is not None:  # the wrapper is reaped: pid may be recycled
            return
        try:
            fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            return
        if _ppid(pid) != wrapper.pid:  # not the process we were told about
            os.close(fd)
            return
        self.fd = fd

    def kill(self) -> None:
        if self.fd is not None:
            try:
                signal.pidfd_send_signal(self.fd, signal.SIGKILL)
            except OSError:
                pass

    def wait(self, timeout: float) -> bool:
        """True once the init has exited, i.e. the whole pid namespace is empty."""
        if self.fd is None:
            return True
        readable, _, _ = select.select([self.fd], [], [], timeout)
        return bool(readable)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _kill_tree(proc: subprocess.Popen, ns_init: _NsInit | None, iso: str) -> None:
    """SIGKILL the whole sandbox.

    With a pid namespace, killing its init takes every process of the namespace with it
    (the kernel does not let init exit before they are gone).  Without one ("none"), the
    runner is a child subreaper, so every orphan is still below it: stop the whole tree
    first (nothing can fork while stopped), then kill it, the runner last.
    """
    wrapper_alive = proc.returncode is None  # not reaped: its pid/pgid cannot be recycled
    victims: list[int] = []
    if wrapper_alive and (iso == "none" or ns_init is None or ns_init.fd is None):
        for _ in range(50):
            new = [p for p in _descendants(proc.pid) if p not in victims]
            if not new:
                break
            for p in new:
                _signal(p, signal.SIGSTOP)
            victims += new
    if wrapper_alive:
        _signal(proc.pid, signal.SIGKILL)  # the wrapper first: it must not report anything more
    if ns_init is not None:
        ns_init.kill()
    for p in victims:
        _signal(p, signal.SIGKILL)
    if wrapper_alive:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass


def _sweep(workdir: str) -> None:
    """Mode "none" only, when the runner could not clean up (it was killed): SIGKILL every
    process that still works in, or was started from, this run's private directory."""
    me = os.getpid()
    needle = workdir.encode()
    for _ in range(3):
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == me:
                continue
            try:
                hit = os.readlink(f"/proc/{name}/cwd").startswith(workdir)
                if not hit:
                    with open(f"/proc/{name}/environ", "rb") as f:
                        hit = needle in f.read()
                if not hit:
                    with open(f"/proc/{name}/cmdline", "rb") as f:
                        hit = needle in f.read()
            except OSError:
                continue
            if hit:
                found = True
                _signal(int(name), signal.SIGKILL)
        if not found:
            return
        time.sleep(0.01)


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"SIG{sig}"


# --------------------------------------------------------------------------------------
# isolation probing
# --------------------------------------------------------------------------------------
_probe_lock = threading.Lock()
_probe_cache: dict[str, bool] = {}


def _works(isolation: str) -> bool:
    with _probe_lock:
        if isolation not in _probe_cache:
            ok = False
            try:
                res = _run_resolved("import os\nassert os.getcwd()\n",
                                    SandboxLimits(timeout_s=20.0, isolation=isolation), isolation)
                ok = res.outcome == "passed"
            except Exception:  # noqa: BLE001
                ok = False
            _probe_cache[isolation] = ok
        return _probe_cache[isolation]


def available_isolation() -> str:
    """What "auto" resolves to on this machine (probed once, then cached).

    As root, "unshare" comes first: bwrap maps the caller's uid, so the program would run as
    host uid 0, for which the kernel never enforces RLIMIT_NPROC (no process cap); "unshare"
    drops to a random unprivileged uid after building the root, and the cap holds."""
    order = ("unshare", "bwrap") if os.geteuid() == 0 else ("bwrap", "unshare")
    for iso in order:
        if _works(iso):
            return iso
    return "none"


# --------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------
def run_program(code: "str | TestProgram", limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run one untrusted program (or, given a TestProgram, grade it); see the package docstring."""
    if limits.isolation not in ISOLATIONS:
        raise ValueError(f"isolation must be one of {ISOLATIONS}, got {limits.isolation!r}")
    iso = available_isolation() if limits.isolation == "auto" else limits.isolation
    return _run_resolved(code, limits, iso)


def run_tests(program: TestProgram, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Grade one completion against its tests; "passed" only when the tests ran to their end."""
    if not isinstance(program, TestProgram):
        raise TypeError(f"run_tests needs a TestProgram, got {type(program).__name__}")
    return run_program(program, limits)  # type: ignore[arg-type]


def run_programs(codes: list[str], limits: SandboxLimits = SandboxLimits(),
                 workers: int | None = None) -> list[SandboxResult]:
    """Run in parallel (default workers = os.cpu_count()), results in input order."""
    codes = list(codes)
    if not codes:
        return []
    if limits.isolation == "auto":  # probe once here rather than in every worker
        limits = dataclasses.replace(limits, isolation=available_isolation())
    n = max(1, min(workers or os.cpu_count() or 1, len(codes)))
    if n == 1:
        return [run_program(c, limits) for c in codes]
    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="sandbox") as pool:
        return list(pool.map(lambda c: run_program(c, limits), codes))


def _error(iso: str, t0: float, detail: str, stdout: str = "", stderr: str = "") -> SandboxResult:
    return SandboxResult("sandbox_error", None, stdout, stderr, time.monotonic() - t0, iso,
                         detail[:500])


def _run_resolved(code: "str | TestProgram", limits: SandboxLimits, iso: str) -> SandboxResult:
    t0 = time.monotonic()
    try:
        workdir = tempfile.mkdtemp(prefix="grpo-sbx-")
    except Exception as e:  # noqa: BLE001
        return _error(iso, t0, f"cannot create the work directory: {e}")
    try:
        return _execute(code, limits, iso, workdir, t0)
    except Exception as e:  # noqa: BLE001 - infrastructure failure, never the program's fault
        return _error(iso, t0, f"{type(e).__name__}: {e}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class _Cap:
    """Collects at most `cap` bytes, drops (but keeps draining) the rest."""

    __slots__ = ("buf", "cap", "dropped")

    def __init__(self, cap: int):
        self.buf, self.cap, self.dropped = bytearray(), max(0, cap), 0

    def add(self, data: bytes) -> None:
        room = self.cap - len(self.buf)
        if room > 0:
            self.buf += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))

    def text(self) -> str:
        return self.buf.decode("utf-8", "replace")


def _execute(code: "str | TestProgram", limits: SandboxLimits, iso: str, workdir: str,
             t0: float) -> SandboxResult:
    nonce = secrets.token_hex(16)
    verifier = isinstance(code, TestProgram)
    source = code.solution if verifier else code
    code_bytes = source.encode("utf-8", "surrogatepass")
    payload = struct.pack(">Q", len(code_bytes)) + code_bytes
    if verifier:
        spec = marshal.dumps({"prelude": code.prelude, "tests": code.tests,
                              "entry_point": code.entry_point})
        payload += struct.pack(">Q", len(spec)) + spec
    payload += nonce.encode()
    fds: list[int] = []
    try:
        payload_r, payload_w = os.pipe()
        result_r, result_w = os.pipe()
        fds += [payload_r, payload_w, result_r, result_w]
        child_fds = [payload_r, result_w]
        info_r = info_w = None
        cfg = {
            "mode": iso, "payload_fd": payload_r, "result_fd": result_w, "workdir": workdir,
            "filename": _FILENAME, "site_paths": _site_paths(), "nproc": _NPROC,
            "verifier": verifier,
            "runner_deadline_s": float(limits.timeout_s) + 2.0,
            "limits": {"cpu_s": max(1, int(limits.cpu_s)), "memory_mb": int(limits.memory_mb),
                       "file_size_mb": int(limits.file_size_mb),
                       "open_files": int(limits.open_files)},
        }
        if iso == "bwrap":
            info_r, info_w = os.pipe()
            fds += [info_r, info_w]
            child_fds.append(info_w)
            prefix = _bwrap_argv(workdir, limits, info_w)
        elif iso == "unshare":
            binds, links = _root_layout()
            uid = random.randint(1_000_000, 1_999_999)
            cfg["unshare"] = {"new_root": workdir, "uid": uid, "tmpfs_bytes": _tmpfs_bytes(limits),
                              "ro_binds": binds, "symlinks": links}
            prefix = _unshare_argv()
        elif iso == "none":
            prefix = []
        else:
            raise ValueError(f"unknown isolation {iso!r}")
        # the trailing work dir is unused by the runner: it makes the processes recognisable
        argv = prefix + [_python(), "-I", "-S", "-B", "-c", _BOOTSTRAP, marshal.dumps(cfg).hex(),
                         *_runner_code_hex(), workdir]
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=child_fds, env=_env(workdir), cwd=workdir, start_new_session=True,
        )
    except Exception as e:  # noqa: BLE001
        for fd in fds:
            os.close(fd)
        return _error(iso, t0, f"cannot start the sandbox: {type(e).__name__}: {e}")
    for fd in child_fds:
        os.close(fd)
        fds.remove(fd)
    owned = set(fds)  # payload_w, result_r (+ info_r): each closed exactly once
    try:
        return _supervise(proc, payload, nonce, owned, payload_w, result_r, info_r, limits, iso,
                          workdir, t0)
    finally:
        if proc.poll() is None:  # only after an internal error
            _kill_tree(proc, None, iso)
            proc.wait()
        for f in (proc.stdout, proc.stderr):
            if f is not None:
                f.close()
        for fd in owned:
            os.close(fd)


def _exited(proc: subprocess.Popen) -> bool:
    """Has the wrapper exited?  Does not reap it, so its pid/pgid stay ours to signal."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _supervise(proc: subprocess.Popen, payload: bytes, nonce: str, owned: set[int], payload_w: int,
               result_r: int, info_r: int | None, limits: SandboxLimits, iso: str, workdir: str,
               t0: float) -> SandboxResult:
    """Feed the program, drain and cap the output, enforce the deadline, reap everything."""
    deadline = t0 + float(limits.timeout_s)
    out, err = _Cap(limits.output_bytes), _Cap(limits.output_bytes)
    result_buf, info_buf = bytearray(), bytearray()
    sinks = {proc.stdout.fileno(): out.add, proc.stderr.fileno(): err.add,
             result_r: result_buf.extend}
    if info_r is not None:
        sinks[info_r] = info_buf.extend
    poller = select.poll()
    for fd in sinks:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    os.set_blocking(payload_w, False)
    poller.register(payload_w, select.POLLOUT)
    try:
        pidfd: int | None = os.pidfd_open(proc.pid)  # readable when the wrapper exits
        poller.register(pidfd, select.POLLIN)
    except (AttributeError, OSError):
        pidfd = None
    open_fds = set(sinks)
    pending = memoryview(payload)
    exited_at: float | None = None
    timed_out = False
    ns_init: _NsInit | None = None
    try:
        try:
            while open_fds or exited_at is None:
                now = time.monotonic()
                if exited_at is None and _exited(proc):
                    exited_at = now
                    if not open_fds:
                        break
                limit = deadline if exited_at is None else min(deadline, exited_at + _EXIT_GRACE_S)
                if now >= limit:
                    timed_out = exited_at is None
                    break
                wait_ms = (limit - now) * 1000
                if pidfd is None and exited_at is None:
                    wait_ms = min(wait_ms, 10)
                for fd, ev in poller.poll(max(1, int(wait_ms + 1))):
                    if fd == pidfd:
                        poller.unregister(pidfd)
                        os.close(pidfd)
                        pidfd = None
                    elif fd == payload_w:
                        try:
                            if ev & select.POLLOUT and pending:
                                pending = pending[os.write(payload_w, pending):]
                        except BlockingIOError:
                            continue
                        except OSError:  # the sandbox died before reading the program
                            pending = pending[:0]
                        if not pending or ev & (select.POLLERR | select.POLLHUP):
                            poller.unregister(payload_w)
                            owned.discard(payload_w)
                            os.close(payload_w)  # EOF for the runner
                    else:
                        try:
                            data = os.read(fd, _READ_CHUNK)
                        except BlockingIOError:
                            continue
                        if data:
                            sinks[fd](data)
                        else:
                            poller.unregister(fd)
                            open_fds.discard(fd)
                        if ns_init is None and fd in (info_r, result_r) and iso != "none":
                            ns_init = _ns_init(iso, info_buf, result_buf, proc)
        finally:
            if pidfd is not None:
                os.close(pidfd)

        if timed_out or not _exited(proc):
            _kill_tree(proc, ns_init, iso)
        try:
            proc.wait(timeout=_REAP_WAIT_S)
        except subprocess.TimeoutExpired:
            _kill_tree(proc, ns_init, iso)
            proc.wait()
        if ns_init is not None:
            ns_init.kill()  # its work is done; make sure nothing of the namespace lingers
            if not ns_init.wait(_REAP_WAIT_S):
                raise RuntimeError(f"sandbox init {ns_init.pid} survived SIGKILL")
    finally:
        if ns_init is not None:
            ns_init.close()
    if iso == "none" and (timed_out or b"\nresult " not in b"\n" + bytes(result_buf)):
        _sweep(workdir)  # the runner may have died before killing the program's daemons
    for fd in list(open_fds):  # whatever is still buffered in the pipes after the kill
        try:
            while True:
                data = os.read(fd, _READ_CHUNK)
                if not data:
                    break
                sinks[fd](data)
        except OSError:
            pass
    duration = time.monotonic() - t0
    return _classify(proc.returncode, timed_out, bytes(result_buf), nonce, out, err, limits, iso,
                     duration)


def _ns_init(iso: str, info_buf: bytearray, result_buf: bytearray,
             proc: subprocess.Popen) -> _NsInit | None:
    """The host pid of the namespace init: bwrap's --info-fd JSON, or our init's first line."""
    pid = None
    try:
        if iso == "bwrap" and info_buf.rstrip().endswith(b"}"):
            pid = int(json.loads(bytes(info_buf).decode())["child-pid"])
        elif iso == "unshare":
            for line in bytes(result_buf).decode("utf-8", "replace").splitlines():
                if line.startswith("pid "):
                    pid = int(line[4:])
                    break
    except (ValueError, KeyError, TypeError):
        return None
    return None if pid is None else _NsInit(pid, proc)


def _classify(returncode: int | None, timed_out: bool, result: bytes, nonce: str, out: _Cap,
              err: _Cap, limits: SandboxLimits, iso: str, duration: float) -> SandboxResult:
    """Map what happened to an outcome.  Only a report carrying our nonce is believed."""
    stdout, stderr = out.text(), err.text()

    def res(outcome: str, exit_code: int | None, detail: str) -> SandboxResult:
        return SandboxResult(outcome, exit_code, stdout, stderr, duration, iso, detail)

    if timed_out:
        return res("timeout", None, f"wall-clock timeout after {limits.timeout_s:g} s")
    report = None
    for line in result.decode("utf-8", "replace").splitlines():
        if line.startswith("result "):
            try:
                report = ast.literal_eval(line[7:])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                report = None
    if report is None or not isinstance(report, dict) or "nonce" not in report:
        sig = None
        if returncode is not None and returncode < 0:
            sig = -returncode
        elif returncode is not None and returncode > 128 and iso != "none":
            sig = returncode - 128  # bwrap / our init report "killed by N" as 128+N
        if sig is not None:
            return res("crashed", None,
                       f"sandbox runner killed by signal {sig} ({_signame(sig)}); "
                       "did the program kill its parent?")
        tail = stderr.strip().splitlines()[-1:] or [""]
        return res("sandbox_error", None,
                   f"no report from the sandbox (exit status {returncode}): {tail[0][:300]}")
    # The report is authentic only with our nonce.  The program cannot reach the result
    # pipe, so a mismatch means the infrastructure misbehaved.
    if not secrets.compare_digest(str(report.get("nonce")), nonce):
        return res("sandbox_error", None, "sandbox report is not authentic")
    sig, code = report.get("signal"), report.get("exit_code")
    exc = report.get("exception")
    if report.get("runner_timeout"):
        return res("timeout", None, "wall-clock timeout (enforced inside the sandbox)")
    csig = report.get("completion_signal")
    if csig is not None and not (report.get("completed") and code == 0):
        # the completion's process died while the tests waited on it
        if csig == signal.SIGXCPU:
            return res("timeout", -csig, f"the completion's process: CPU time limit ({_signame(csig)})")
        return res("crashed", -csig, f"the completion's process was killed by signal {csig} "
                                     f"({_signame(csig)})")
    if sig is not None:
        cpu = float(report.get("cpu_s") or 0.0)
        cpu_limit = max(1, int(limits.cpu_s))
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= cpu_limit - 0.05):
            return res("timeout", -sig, f"CPU time limit exceeded ({cpu:.1f} s, {_signame(sig)})")
        return res("crashed", -sig, f"killed by signal {sig} ({_signame(sig)})")
    if exc is not None:
        if exc.split(":")[0] == "MemoryError":
            return res("memory", code, "MemoryError")
        return res("failed", code, exc)
    if report.get("completed") and code == 0:
        return res("passed", 0, "")
    if report.get("setup_error"):  # our own child setup failed before any program code ran
        return res("sandbox_error", None, f"child setup failed: {report['setup_error']}"[:300])
    if code is not None and code != 0 and "MemoryError" in stderr[-2000:]:
        return res("memory", code, "MemoryError")
    return res("failed", code,
               f"exited with code {code} before the end of the program (sentinel missing)")

