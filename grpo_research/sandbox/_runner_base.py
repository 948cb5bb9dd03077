"""In-sandbox runner, part 1 of 6: what every role shares (see ``_runner.py``).

The host executes the parts in the order of ``_layout.RUNNER_PARTS`` in one namespace, so this
part comes first: the only imports of the runner, its config (``sys.argv[1]``), the Linux
constants, the libc calls and the pipe helpers; then what the verifier's two processes (the
completion C and the tester T) share: the wire protocol and their common set-up.
Standard library only; no new imports (each costs time in every run).
"""

import _signal as signal  # the C module: `signal` would import enum (milliseconds per run)
import marshal
import os
import sys

CFG = marshal.loads(bytes.fromhex(sys.argv[1]))
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
