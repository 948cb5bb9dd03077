"""In-sandbox bootstrap ("runner") for :mod:`grpo_research.sandbox`.

This file is NOT imported by the host.  The host compiles it once and passes the
marshalled code object (hex) and the marshalled config as arguments to
``python -I -S -B -c "<exec it>"`` inside the sandbox, so it must only use the
standard library and must not rely on anything of the package.  It is therefore one
module whatever its size (over 400 lines): the sandbox executes this single file.

Process layout inside the sandbox::

    [init]  pid 1 of the pid namespace: bwrap's own reaper, or (isolation
            "unshare") this file in "init" role, which first builds a minimal
            read-only root, pivots into it and drops root, then forks:
    runner  this file (trusted).  Non-dumpable, child subreaper.  Reads the
            program from the payload pipe, forks the child, reads the per-run
            nonce only *after* the fork, waits, kills leftover descendants and
            writes the report ``result <repr of a dict with the nonce>`` to the
            result pipe, which the child never holds.
    child   closes the payload/result pipes, sets the rlimits, and executes the
            program in a fresh ``__main__`` module.  Only when the module code
            returned normally does it write ``ok <token> <pid>`` to a private
            pipe to the runner and ``os._exit(0)``; exceptions (SystemExit
            included) are reported as ``exc <TypeName>``.  atexit hooks never run.

The child never sees the nonce nor the result pipe, so nothing it prints, no
exit path and no file it writes can produce a "passed" report.
"""

import _signal as signal  # the C module: `signal` would import enum (milliseconds per run)
import marshal
import os
import sys

CFG = marshal.loads(bytes.fromhex(sys.argv[2]))
sys.argv[1:] = []  # keep code and config out of the child's sys.argv
PAYLOAD_FD = CFG["payload_fd"]
RESULT_FD = CFG["result_fd"]
MODE = CFG["mode"]
RUNNER_ERROR = 125

# prctl / mount constants (Linux UAPI, identical on all architectures)
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
SYS_PIVOT_ROOT = {
    "x86_64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "loongarch64": 41,
    "ppc64le": 203, "ppc64": 203, "s390x": 217, "i386": 217, "i686": 217,
    "armv7l": 218, "armv6l": 218,
}

import ctypes  # noqa: E402  (after the cheap setup above)

_libc = ctypes.CDLL(None, use_errno=True)
_UL = ctypes.c_ulong


def die(msg):
    try:
        os.write(2, ("grpo-sandbox runner error: %s\n" % msg).encode("utf-8", "replace"))
    finally:
        os._exit(RUNNER_ERROR)


def _check(rc, what):
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, "%s: %s" % (what, os.strerror(err)))


def prctl(option, arg2=0, arg3=0):
    _check(_libc.prctl(option, _UL(arg2), _UL(arg3), _UL(0), _UL(0)), "prctl(%d)" % option)


def _enc(s):
    return None if s is None else s.encode()


def mount(src, dst, fstype, flags, data=None):
    enc = _enc
    _check(_libc.mount(enc(src), enc(dst), enc(fstype), _UL(flags), enc(data)),
           "mount(%s -> %s)" % (src, dst))


def write_all(fd, data):
    while data:
        n = os.write(fd, data)
        data = data[n:]


def read_exact(fd, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            die("payload truncated")
        buf += chunk
    return bytes(buf)


def read_to_eof(fd):
    buf = bytearray()
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return bytes(buf)
        buf += chunk


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


# --------------------------------------------------------------------------------------
# runner / child
# --------------------------------------------------------------------------------------
def list_children():
    pid = os.getpid()
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        pass
    kids = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2:].split()[1]) == pid:
                kids.append(int(name))
    return kids


def kill_descendants():
    """We are a child subreaper: orphans land here.  Kill until no child remains."""
    while True:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            return
        for pid in list_children():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def child_main(code_bytes, done_w, token, runner_pid):
    """Runs the untrusted program.  Never returns."""
    _write, _exit, _getpid = os.write, os._exit, os.getpid
    try:
        os.close(PAYLOAD_FD)
        os.close(RESULT_FD)
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        prctl(PR_SET_DUMPABLE, 1)  # the runner stays non-dumpable; the program behaves normally
        if os.getppid() != runner_pid:
            _exit(RUNNER_ERROR)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        # As at any Python program's start: KeyboardInterrupt on SIGINT, EPIPE and EFBIG
        # as exceptions rather than deaths by SIGPIPE and SIGXFSZ.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        import builtins
        import resource

        lim = CFG["limits"]
        mb = 1024 * 1024
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu_s"], lim["cpu_s"] + 1))
        fsize = lim["file_size_mb"] * mb
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_NOFILE, (lim["open_files"], lim["open_files"]))
        if os.getuid() != 0:  # only effective for a non-root (kernel) uid
            resource.setrlimit(resource.RLIMIT_NPROC, (CFG["nproc"], CFG["nproc"]))
        os.chdir(CFG["workdir"])
        filename = CFG["filename"]
        source = code_bytes.decode("utf-8", "replace")
        sys.path[:] = [p for p in sys.path if p] + CFG["site_paths"]
        sys.argv[:] = [filename]

        def _exit_builtin(code=None):  # `site` (skipped by -S) normally provides these
            raise SystemExit(code)

        builtins.exit = builtins.quit = _exit_builtin

        class SourceLoader:  # lets linecache (tracebacks, inspect) find the source lazily
            @staticmethod
            def get_source(name):
                return source

        main = type(sys)("__main__")
        main.__dict__.update(__builtins__=builtins, __file__=filename, __loader__=SourceLoader())
        sys.modules["__main__"] = main
        resource.setrlimit(resource.RLIMIT_AS, (lim["memory_mb"] * mb, lim["memory_mb"] * mb))
    except BaseException as e:  # noqa: BLE001
        try:
            _write(done_w, ("setup %s %r\n" % (token, e)).encode("utf-8", "replace")[:300])
        finally:
            _exit(RUNNER_ERROR)

    g = main.__dict__
    del code_bytes
    memory_msg = b"exc MemoryError\n"  # preallocated: no memory may be left when we need it
    ok = False
    try:
        exec(compile(source, filename, "exec", dont_inherit=True), g)
        ok = True
    except BaseException as e:  # noqa: BLE001  (SystemExit/KeyboardInterrupt count as failure)
        detail = "MemoryError"
        try:
            if isinstance(e, MemoryError):
                _write(done_w, memory_msg)
            else:
                detail = type(e).__name__
                if isinstance(e, SystemExit):
                    detail = "SystemExit: %r" % (e.code,)
                _write(done_w, ("exc %s\n" % detail).encode("utf-8", "replace")[:200])
        except BaseException:  # noqa: BLE001
            pass
        try:
            if isinstance(e, MemoryError):
                g.clear()  # free what we can so the traceback can be printed
            for stream in (sys.stdout, sys.__stdout__):
                try:
                    stream.flush()
                except BaseException:  # noqa: BLE001
                    pass
            if isinstance(e, SystemExit):
                sys.__stderr__.write("%s\n" % detail)
            else:
                import traceback

                tb = e.__traceback__
                if tb is not None and tb.tb_frame.f_code is child_main.__code__:
                    tb = tb.tb_next  # hide our own frame
                # like the interpreter: only the innermost sys.tracebacklimit (1000) entries
                limit, n, t = getattr(sys, "tracebacklimit", 1000), 0, tb
                while t is not None:
                    n, t = n + 1, t.tb_next
                for _ in range(n - max(0, int(limit))):
                    tb = tb.tb_next
                traceback.print_exception(type(e), e, tb, file=sys.__stderr__)
            sys.__stderr__.flush()
        except BaseException:  # noqa: BLE001
            pass
        _exit(1)
    if ok:
        for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        try:
            _write(done_w, ("ok %s %d\n" % (token, _getpid())).encode())
        except BaseException:  # noqa: BLE001  (the program closed or replaced our pipe)
            _exit(1)
        _exit(0)
    _exit(1)


# --------------------------------------------------------------------------------------
# verifier mode: the completion and the tests in two processes
# --------------------------------------------------------------------------------------
# The completion ("C") runs its module in one process and then answers calls; the trusted
# tests ("T") run in another, non-dumpable process in which every name the tests take from
# the completion is a proxy.  Values cross as marshalled plain data (exact builtin types);
# anything else stays in C and is known to T only as an opaque reference, compared by
# identity.  The tests, their expected values and the pass token are never in C's memory.
REF = "\x00grpo-ref"
MAX_MSG = 64 << 20
PLAIN_SCALARS = (int, float, complex, str, bytes, bool, type(None))
PLAIN_CONTAINERS = (list, tuple, dict, set, frozenset)


def send_msg(fd, obj):
    data = marshal.dumps(obj)
    write_all(fd, len(data).to_bytes(4, "big") + data)


def recv_msg(fd):
    head = b""
    while len(head) < 4:
        chunk = os.read(fd, 4 - len(head))
        if not chunk:
            raise EOFError("the completion's process closed its channel")
        head += chunk
    n = int.from_bytes(head, "big")
    if n > MAX_MSG:
        raise ValueError("message of %d bytes from the completion's process" % n)
    buf = bytearray()
    while len(buf) < n:
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("the completion's process closed its channel")
        buf += chunk
    return marshal.loads(bytes(buf))


def close_fds_except(keep):
    """Close every descriptor above stderr that is not in `keep`."""
    try:
        fds = [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def setup_child(runner_pid, dumpable):
    """What C and T both do first: die with the runner, the program's usual signals, rlimits."""
    import resource

    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    prctl(PR_SET_DUMPABLE, 1 if dumpable else 0)
    if os.getppid() != runner_pid:
        os._exit(RUNNER_ERROR)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    lim = CFG["limits"]
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu_s"], lim["cpu_s"] + 1))
    fsize = lim["file_size_mb"] * mb
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (lim["open_files"], lim["open_files"]))
    if os.getuid() != 0:
        resource.setrlimit(resource.RLIMIT_NPROC, (CFG["nproc"], CFG["nproc"]))
    os.chdir(CFG["workdir"])
    sys.path[:] = [p for p in sys.path if p] + CFG["site_paths"]
    return resource, lim["memory_mb"] * mb


def fresh_main(filename, source):
    import builtins

    def _exit_builtin(code=None):
        raise SystemExit(code)

    builtins.exit = builtins.quit = _exit_builtin

    class SourceLoader:
        @staticmethod
        def get_source(name):
            return source

    main = type(sys)("__main__")
    main.__dict__.update(__builtins__=builtins, __file__=filename, __loader__=SourceLoader())
    sys.modules["__main__"] = main
    sys.argv[:] = [filename]
    return main.__dict__


def completion_main(code_bytes, req_r, rep_w, runner_pid):
    """C: run the completion's module, then answer the tests' calls.  Never returns.

    Everything after the first line of the completion is untrusted: whatever this process
    sends, the tester only accepts plain data and references."""
    try:
        close_fds_except({req_r, rep_w})
        resource, mem = setup_child(runner_pid, dumpable=True)
        source = code_bytes.decode("utf-8", "replace")
        g = fresh_main(CFG["filename"], source)
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    except BaseException:  # noqa: BLE001
        os._exit(RUNNER_ERROR)
    del code_bytes
    try:
        exec(compile(source, CFG["filename"], "exec", dont_inherit=True), g)
    except BaseException as e:  # noqa: BLE001
        try:
            sys.stdout.flush()
        except BaseException:  # noqa: BLE001
            pass
        try:
            import traceback

            traceback.print_exception(type(e), e, e.__traceback__.tb_next if e.__traceback__ else None,
                                      file=sys.__stderr__)
            sys.__stderr__.flush()
        except BaseException:  # noqa: BLE001
            pass
        try:
            send_msg(rep_w, ("error", type(e).__name__, str(e)[:300]))
        except BaseException:  # noqa: BLE001
            pass
        os._exit(1)
    refs, ref_of = {}, {}

    def export(x, depth=0):
        t = type(x)
        if t in PLAIN_SCALARS:
            return x
        if depth > 200:
            raise RecursionError("value nested too deeply")
        if t is list or t is tuple:
            return t(export(v, depth + 1) for v in x)
        if t is dict:
            return {export(k, depth + 1): export(v, depth + 1) for k, v in x.items()}
        if t is set or t is frozenset:
            return t(export(v, depth + 1) for v in x)
        for base in (bool, int, float, complex, str, bytes):  # e.g. numpy.float64, IntEnum
            if isinstance(x, base):
                return base(x)
        for base in (tuple, list, dict, set, frozenset):  # namedtuple, OrderedDict, Counter ...
            if isinstance(x, base):
                return export(base(x), depth)
        key = id(x)
        if key not in ref_of:
            ref_of[key] = len(refs)
            refs[len(refs)] = x
        return (REF, ref_of[key], t.__name__)

    def imp(x):
        t = type(x)
        if t is tuple and len(x) == 2 and x[0] == REF:
            return refs[x[1]]
        if t is list or t is tuple:
            return t(imp(v) for v in x)
        if t is dict:
            return {imp(k): imp(v) for k, v in x.items()}
        if t is set or t is frozenset:
            return t(imp(v) for v in x)
        return x

    def target(t):
        if t[0] == "name":
            if t[1] not in g:
                raise NameError("name %r is not defined" % t[1])
            return g[t[1]]
        return refs[t[1]]

    send_msg(rep_w, ("ready",))
    while True:
        try:
            req = recv_msg(req_r)
        except BaseException:  # noqa: BLE001  (the tester is done or gone)
            os._exit(0)
        try:
            op, obj = req[0], target(req[1])
            extra = None
            if op == "call":
                args, kwargs = imp(req[2]), imp(req[3])
                val = obj(*args, **kwargs)
                extra = [export(a) if type(a) in (list, dict, set) else None for a in args]
            elif op == "getattr":
                val = getattr(obj, req[2])
            elif op == "setattr":
                setattr(obj, req[2], imp(req[3]))
                val = None
            elif op == "iter":
                val = list(obj)
            elif op == "len":
                val = len(obj)
            elif op == "bool":
                val = bool(obj)
            elif op == "getitem":
                val = obj[imp(req[2])]
            elif op == "str":
                val = str(obj)
            elif op == "repr":
                val = repr(obj)
            else:
                raise ValueError("unknown request %r" % (op,))
            reply = ("ok", export(val), extra)
        except BaseException as e:  # noqa: BLE001
            reply = ("exc", type(e).__name__, str(e)[:300])
        try:
            send_msg(rep_w, reply)
        except BaseException:  # noqa: BLE001
            os._exit(0)


def tester_main(spec_bytes, req_w, rep_r, done_w, token, runner_pid):
    """T (trusted): run the tests against proxies of the completion's names.  Never returns."""
    try:
        close_fds_except({req_w, rep_r, done_w})
        resource, mem = setup_child(runner_pid, dumpable=False)
        spec = marshal.loads(spec_bytes)
        import ast
        import builtins

        prelude, tests, entry = spec["prelude"], spec["tests"], spec.get("entry_point")
        g = fresh_main("test.py", prelude + "\n" + tests)
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    except BaseException as e:  # noqa: BLE001
        try:
            write_all(done_w, ("setup %s %r\n" % (token, e)).encode("utf-8", "replace")[:300])
        finally:
            os._exit(RUNNER_ERROR)

    def report(line):
        write_all(done_w, (line + "\n").encode("utf-8", "replace")[:300])

    class RemoteError(Exception):
        """An exception of a type that is not a builtin one, raised in the completion."""

    def rpc(req):
        send_msg(req_w, req)
        rep = recv_msg(rep_r)
        if type(rep) is not tuple or not rep:
            raise RemoteError("malformed reply from the completion's process")
        if rep[0] == "exc" and len(rep) == 3 and type(rep[1]) is str and type(rep[2]) is str:
            cls = getattr(builtins, rep[1], None)
            if (isinstance(cls, type) and issubclass(cls, Exception)
                    and not issubclass(cls, (StopIteration, StopAsyncIteration))):
                raise cls(rep[2])
            raise RemoteError("%s: %s" % (rep[1], rep[2]))
        if rep[0] != "ok" or len(rep) != 3:
            raise RemoteError("malformed reply from the completion's process")
        return load(rep[1]), rep[2]

    def load(x, depth=0):
        t = type(x)
        if t in PLAIN_SCALARS:
            return x
        if depth > 200:
            raise RemoteError("value nested too deeply")
        if t is tuple and len(x) == 3 and x[0] == REF and type(x[1]) is int and type(x[2]) is str:
            return Remote(("ref", x[1]), x[2])
        if t is list or t is tuple:
            return t(load(v, depth + 1) for v in x)
        if t is dict:
            return {load(k, depth + 1): load(v, depth + 1) for k, v in x.items()}
        if t is set or t is frozenset:
            return t(load(v, depth + 1) for v in x)
        raise RemoteError("the completion returned a %s, which is not plain data" % t.__name__)

    def enc(x, depth=0):
        t = type(x)
        if t in PLAIN_SCALARS:
            return x
        if t is Remote:
            return (REF, object.__getattribute__(x, "_t")[1])
        if depth > 200:
            raise TypeError("value nested too deeply")
        if t is list or t is tuple:
            return t(enc(v, depth + 1) for v in x)
        if t is dict:
            return {enc(k, depth + 1): enc(v, depth + 1) for k, v in x.items()}
        if t is set or t is frozenset:
            return t(enc(v, depth + 1) for v in x)
        raise TypeError("cannot pass a %s to the completion's process" % t.__name__)

    def update(arg, new):
        """A list, dict or set the call changed in place: change the tests' copy the same way."""
        new = load(new)
        if type(new) is not type(arg) or new == arg:
            return
        if type(arg) is list:
            arg[:] = new
        else:
            arg.clear()
            arg.update(new)

    class Remote:
        """A name or object of the completion's process; equality is identity."""

        __slots__ = ("_t", "_name", "__weakref__")

        def __init__(self, t, name):
            object.__setattr__(self, "_t", t)
            object.__setattr__(self, "_name", name)

        def _rpc(self, *req):
            return rpc((req[0], object.__getattribute__(self, "_t")) + req[1:])[0]

        def __call__(self, *args, **kwargs):
            val, after = rpc(("call", object.__getattribute__(self, "_t"), enc(args), enc(kwargs)))
            if type(after) is list and len(after) == len(args):
                for a, new in zip(args, after):
                    if new is not None and type(a) in (list, dict, set):
                        update(a, new)
            return val

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return self._rpc("getattr", name)

        def __setattr__(self, name, value):
            self._rpc("setattr", name, enc(value))

        def __iter__(self):
            val = self._rpc("iter")
            if type(val) is not list:
                raise TypeError("iteration of a remote object gave no list")
            return iter(val)

        def __len__(self):
            val = self._rpc("len")
            if type(val) is not int or val < 0:
                raise TypeError("len() of a remote object is not a non-negative int")
            return val

        def __bool__(self):
            val = self._rpc("bool")
            if type(val) is not bool:
                raise TypeError("bool() of a remote object is not a bool")
            return val

        def __getitem__(self, key):
            return self._rpc("getitem", enc(key))

        def __str__(self):
            val = self._rpc("str")
            if type(val) is not str:
                raise TypeError("str() of a remote object is not a str")
            return val

        def __repr__(self):
            val = self._rpc("repr")
            if type(val) is not str:
                raise TypeError("repr() of a remote object is not a str")
            return val

    try:
        ready = recv_msg(rep_r)
    except BaseException as e:  # noqa: BLE001
        report("exc CompletionDied: %s" % type(e).__name__)
        os._exit(1)
    if type(ready) is not tuple or not ready or ready[0] != "ready":
        name = ready[1] if type(ready) is tuple and len(ready) > 1 and type(ready[1]) is str else "?"
        report("exc %s" % name[:100])
        os._exit(1)
    try:
        bound, loaded = set(dir(builtins)), set()
        for node in ast.walk(ast.parse(prelude + "\n" + tests)):
            if isinstance(node, ast.Name):
                (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
            elif isinstance(node, ast.alias):
                bound.add((node.asname or node.name).split(".")[0])
    except BaseException as e:  # noqa: BLE001
        report("setup %s %s" % (token, ("tests: %s: %s" % (type(e).__name__, e))[:200]))
        os._exit(RUNNER_ERROR)
    try:  # the prelude is trusted, but it may call the completion: its errors are failures
        for name in sorted(loaded - bound):
            if name in sys.stdlib_module_names:  # `math.isclose(...)` in a test: our own math
                try:
                    g[name] = __import__(name)
                    continue
                except ImportError:
                    pass
            g[name] = Remote(("name", name), name)
        if prelude:
            exec(compile(prelude, "prelude.py", "exec", dont_inherit=True), g)
        if entry:
            g[entry] = Remote(("name", entry), entry)
        exec(compile(tests, "test.py", "exec", dont_inherit=True), g)
    except BaseException as e:  # noqa: BLE001
        detail = type(e).__name__
        if isinstance(e, SystemExit):
            detail = "SystemExit: %r" % (e.code,)
        try:
            report("exc %s" % detail)
            import traceback

            traceback.print_exception(type(e), e, e.__traceback__, file=sys.__stderr__)
            sys.__stderr__.flush()
        except BaseException:  # noqa: BLE001
            pass
        os._exit(1)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # noqa: BLE001
            pass
    report("ok %s %d" % (token, os.getpid()))
    os._exit(0)


def reset_signals():
    """Every catchable signal to its default action, none blocked."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # reserved by the C library (e.g. 32, 33)
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


def runner_main():
    prctl(PR_SET_DUMPABLE, 0)  # the child (same uid) must not read our memory or fds
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    length = int.from_bytes(read_exact(PAYLOAD_FD, 8), "big")
    code_bytes = read_exact(PAYLOAD_FD, length)
    me = os.getpid()
    # The program may signal us: any signal must act as it does by default (SIGINT, SIGHUP,
    # SIGTERM, SIGUSR1 ... kill us -> "crashed"), never raise KeyboardInterrupt here (an
    # infrastructure failure) nor be ignored or blocked because whoever started the host
    # (nohup, a CI runner, a thread's mask) ignored or blocked it: dispositions set to
    # SIG_IGN and the signal mask survive fork and exec.  Done before the fork: the
    # program starts from defaults too, whatever the host inherited.
    reset_signals()
    completion = None
    if CFG.get("verifier"):
        # C first, before the tests, the token or the tester's pipe exist in our memory
        req_r, req_w = os.pipe()
        rep_r, rep_w = os.pipe()
        completion = os.fork()
        if completion == 0:
            completion_main(code_bytes, req_r, rep_w, me)
        os.close(req_r)
        os.close(rep_w)
        del code_bytes
        spec = read_exact(PAYLOAD_FD, int.from_bytes(read_exact(PAYLOAD_FD, 8), "big"))
        token = os.urandom(16).hex()
        done_r, done_w = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(done_r)
            tester_main(spec, req_w, rep_r, done_w, token, me)
        os.close(req_w)
        os.close(rep_r)
        del spec
    else:
        token = os.urandom(16).hex()
        done_r, done_w = os.pipe()
        child = os.fork()
        if child == 0:
            os.close(done_r)
            child_main(code_bytes, done_w, token, me)
        del code_bytes
    os.close(done_w)
    nonce = read_to_eof(PAYLOAD_FD).decode()  # read only now: never in the child's memory
    os.close(PAYLOAD_FD)

    state = {"timed_out": False}

    def on_alarm(signum, frame):  # safety net if the host vanished without killing us
        state["timed_out"] = True
        try:
            os.kill(child, signal.SIGKILL)
        except OSError:
            pass

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, CFG["runner_deadline_s"])
    _, status, ru = os.wait4(child, 0)
    signal.setitimer(signal.ITIMER_REAL, 0)
    os.set_blocking(done_r, False)
    msg = b""
    try:
        while len(msg) < 4096:
            chunk = os.read(done_r, 4096)
            if not chunk:
                break
            msg += chunk
    except BlockingIOError:
        pass
    os.close(done_r)
    completion_signal = None
    if completion is not None:
        try:
            pid, cstatus = os.waitpid(completion, os.WNOHANG)
            if pid == completion and os.WIFSIGNALED(cstatus):
                completion_signal = os.WTERMSIG(cstatus)
        except ChildProcessError:
            pass
    kill_descendants()

    report = {"nonce": nonce, "cpu_s": ru.ru_utime + ru.ru_stime, "maxrss_kb": ru.ru_maxrss,
              "runner_timeout": state["timed_out"], "exit_code": None, "signal": None,
              "completed": False, "exception": None, "completion_signal": completion_signal}
    if os.WIFSIGNALED(status):
        report["signal"] = os.WTERMSIG(status)
    else:
        report["exit_code"] = os.WEXITSTATUS(status)
    for line in msg.decode("utf-8", "replace").split("\n"):
        if line == "ok %s %d" % (token, child):
            report["completed"] = True
        elif line.startswith("setup %s " % token):
            report["setup_error"] = line[len("setup %s " % token):]
        elif line.startswith("exc ") and report["exception"] is None:
            report["exception"] = line[4:]
    write_all(RESULT_FD, ("result %r\n" % (report,)).encode())
    os._exit(0)


try:
    if MODE == "unshare":
        init_main()
    runner_main()
except SystemExit:
    raise
except BaseException as exc:  # noqa: BLE001
    die(repr(exc))
