"""Host side of :mod:`grpo_research.sandbox` (see the package docstring for the design): probing
the isolation, running one program (start, feed, drain and cap, deadline, reap) and classifying
what happened.  What a sandbox is made of is in ``_layout``, killing its processes in ``_procs``,
the public types in ``_types``."""

from __future__ import annotations

import ast
import dataclasses
import json
import marshal
import os
import random
import secrets
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ._layout import (BOOTSTRAP, bwrap_argv, python_exe, root_layout, runner_code_hex, sandbox_env,
                      site_paths, tmpfs_bytes, unshare_argv)
from ._procs import NsInit, kill_tree, signame, sweep
from ._types import ISOLATIONS, SandboxLimits, SandboxResult, TestProgram

_NPROC = 64  # RLIMIT_NPROC: processes of the sandbox uid (the kernel ignores it for host uid 0)
_FILENAME = "solution.py"  # what tracebacks show for the program
_RUNNER_ERROR = 125
_READ_CHUNK = 1 << 16
_EXIT_GRACE_S = 0.5  # how long pipes may stay open after the sandbox's main process exited
_REAP_WAIT_S = 3.0


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
            "filename": _FILENAME, "site_paths": site_paths(), "nproc": _NPROC,
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
            prefix = bwrap_argv(workdir, limits, info_w)
        elif iso == "unshare":
            binds, links = root_layout()
            uid = random.randint(1_000_000, 1_999_999)
            cfg["unshare"] = {"new_root": workdir, "uid": uid, "tmpfs_bytes": tmpfs_bytes(limits),
                              "ro_binds": binds, "symlinks": links}
            prefix = unshare_argv()
        elif iso == "none":
            prefix = []
        else:
            raise ValueError(f"unknown isolation {iso!r}")
        # the trailing work dir is unused by the runner: it makes the processes recognisable
        argv = prefix + [python_exe(), "-I", "-S", "-B", "-c", BOOTSTRAP, marshal.dumps(cfg).hex(),
                         *runner_code_hex(), workdir]
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=child_fds, env=sandbox_env(workdir), cwd=workdir, start_new_session=True,
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
            kill_tree(proc, None, iso)
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
    ns_init: NsInit | None = None
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
            kill_tree(proc, ns_init, iso)
        try:
            proc.wait(timeout=_REAP_WAIT_S)
        except subprocess.TimeoutExpired:
            kill_tree(proc, ns_init, iso)
            proc.wait()
        if ns_init is not None:
            ns_init.kill()  # its work is done; make sure nothing of the namespace lingers
            if not ns_init.wait(_REAP_WAIT_S):
                raise RuntimeError(f"sandbox init {ns_init.pid} survived SIGKILL")
    finally:
        if ns_init is not None:
            ns_init.close()
    if iso == "none" and (timed_out or b"\nresult " not in b"\n" + bytes(result_buf)):
        sweep(workdir)  # the runner may have died before killing the program's daemons
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
             proc: subprocess.Popen) -> NsInit | None:
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
    return None if pid is None else NsInit(pid, proc)


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
                       f"sandbox runner killed by signal {sig} ({signame(sig)}); "
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
            return res("timeout", -csig, f"the completion's process: CPU time limit ({signame(csig)})")
        return res("crashed", -csig, f"the completion's process was killed by signal {csig} "
                                     f"({signame(csig)})")
    if sig is not None:
        cpu = float(report.get("cpu_s") or 0.0)
        cpu_limit = max(1, int(limits.cpu_s))
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= cpu_limit - 0.05):
            return res("timeout", -sig, f"CPU time limit exceeded ({cpu:.1f} s, {signame(sig)})")
        return res("crashed", -sig, f"killed by signal {sig} ({signame(sig)})")
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
