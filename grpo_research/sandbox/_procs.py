"""A run's processes on the host: finding them through /proc, holding the namespace init by a
pidfd, and killing the whole sandbox (or, in mode "none", whatever escaped it)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time


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


class NsInit:
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


def kill_tree(proc: subprocess.Popen, ns_init: NsInit | None, iso: str) -> None:
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


def sweep(workdir: str) -> None:
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


def signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"SIG{sig}"
