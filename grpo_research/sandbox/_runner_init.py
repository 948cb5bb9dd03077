"""In-sandbox runner, part 2 of 6: the "init" role of isolation "unshare" (see ``_runner.py``).

pid 1 of fresh pid/mount/net/ipc/uts namespaces, still real root: it builds a bwrap-like
minimal read-only root, pivots into it, drops root to the run's unprivileged uid and forks
the runner, then only reaps.  Uses the names of ``_runner_base.py``.
"""


# --------------------------------------------------------------------------------------
# isolation "unshare": we are pid 1 of fresh pid/mount/net/ipc/uts namespaces, real root.
# Build a bwrap-like minimal root, pivot into it, drop root, then act as init.
# --------------------------------------------------------------------------------------
def _touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if not os.path.lexists(path):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


def _ro_bind(src, dst, extra=MS_NOSUID | MS_NODEV):
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        _touch(dst)
    mount(src, dst, None, MS_BIND)
    mount(None, dst, None, MS_REMOUNT | MS_BIND | MS_RDONLY | extra)


def build_root(setup):
    new_root = setup["new_root"]  # an empty host directory used only as a mount point
    workdir = CFG["workdir"]
    uid = setup["uid"]
    size = setup["tmpfs_bytes"]
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=755")

    def R(path):  # host path of `path` inside the new root
        return new_root + path

    os.makedirs(R("/tmp"))  # first: the interpreter or venv may live below /tmp
    mount("tmpfs", R("/tmp"), "tmpfs", MS_NOSUID | MS_NODEV, "size=%d,mode=1777" % size)
    for src, dst in setup["ro_binds"]:
        _ro_bind(src, R(dst))
    for target, link in setup["symlinks"]:
        os.symlink(target, R(link))
    # /dev: a tiny tmpfs with the harmless character devices only (no disks, no /dev/mem)
    os.makedirs(R("/dev"))
    mount("tmpfs", R("/dev"), "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,mode=755")
    for name in ("null", "zero", "full", "random", "urandom", "tty"):
        if os.path.exists("/dev/" + name):
            _touch(R("/dev/" + name))
            mount("/dev/" + name, R("/dev/" + name), None, MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, R("/dev/" + name))
    os.makedirs(R("/dev/shm"))
    mount("tmpfs", R("/dev/shm"), "tmpfs", MS_NOSUID | MS_NODEV, "size=%d,mode=1777" % size)
    # /proc of the new pid namespace, with the dangerous knobs read-only (as bwrap does)
    os.makedirs(R("/proc"))
    mount("proc", R("/proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for sub in ("sys", "sysrq-trigger", "irq", "bus"):
        p = R("/proc/" + sub)
        if os.path.exists(p):
            mount(p, p, None, MS_BIND)
            mount(None, p, None,
                  MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    os.makedirs(R(workdir), exist_ok=True)
    mount("tmpfs", R(workdir), "tmpfs", MS_NOSUID | MS_NODEV,
          "size=%d,mode=700,uid=%d,gid=%d" % (size, uid, uid))
    # pivot_root(new_root) and detach the old root
    os.chdir(new_root)
    nr = SYS_PIVOT_ROOT.get(os.uname().machine)
    if nr is not None:
        _check(_libc.syscall(ctypes.c_long(nr), b".", b"."), "pivot_root")
        _check(_libc.umount2(b".", MNT_DETACH), "umount2(old root)")
    else:  # unknown architecture: chroot (no caps remain afterwards, so no chroot escape)
        os.chroot(".")
    os.chdir("/")
    mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    mount(None, "/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    _libc.sethostname(b"sandbox", 7)


def drop_root(uid):
    for cap in range(64):  # empty the capability bounding set
        if _libc.prctl(PR_CAPBSET_DROP, _UL(cap), _UL(0), _UL(0), _UL(0)) != 0:
            break
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # non-root uid: permitted/effective caps are cleared
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def init_main():
    """pid 1 (isolation "unshare"): set up, then reap until the runner exits."""
    prctl(PR_SET_DUMPABLE, 0)
    # Before the new /proc is mounted, /proc/self still names our pid on the host:
    # the host needs it to kill the namespace on timeout.
    host_pid = int(os.readlink("/proc/self"))
    write_all(RESULT_FD, b"pid %d\n" % host_pid)
    setup = CFG["unshare"]
    try:
        build_root(setup)
        drop_root(setup["uid"])
    except OSError as e:
        die("sandbox setup failed: %s" % e)
    runner_pid = os.fork()
    if runner_pid == 0:
        return  # continue as the runner (pid 2)
    # No Python-level handlers in pid 1: the kernel then drops signals sent from inside.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.close(PAYLOAD_FD)
    os.close(RESULT_FD)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(RUNNER_ERROR)
        if pid == runner_pid:
            code = os.waitstatus_to_exitcode(status)
            os._exit(code if code >= 0 else 128 - code)  # leaving pid 1 kills the namespace
