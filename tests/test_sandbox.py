"""Tests for grpo_research.sandbox with real hostile programs.

Never add a real fork bomb here: the tests run as root, where RLIMIT_NPROC does not apply.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import tempfile
import textwrap
import time
import types
import uuid

import pytest

from grpo_research import sandbox
from grpo_research.sandbox import (
    OUTCOMES,
    SandboxLimits,
    SandboxResult,
    available_isolation,
    run_program,
    run_programs,
)

FAST = {"timeout_s": 1.5, "cpu_s": 10}


def _mode_works(mode: str) -> bool:
    res = run_program("pass", SandboxLimits(timeout_s=20, isolation=mode))
    return res.outcome == "passed" and res.isolation == mode


ISOLATED_MODES = [m for m in ("bwrap", "unshare") if _mode_works(m)]
ALL_MODES = ISOLATED_MODES + ["none"]
NO_ISOLATION_REASON = (
    "neither bubblewrap nor unshare works on this machine (available_isolation() == 'none'); "
    "network/filesystem/pid isolation cannot be tested"
)

isolated = pytest.mark.parametrize(
    "iso", ISOLATED_MODES or [pytest.param("none", marks=pytest.mark.skip(reason=NO_ISOLATION_REASON))]
)
any_mode = pytest.mark.parametrize("iso", ALL_MODES)


def run(code: str, iso: str, **kw) -> SandboxResult:
    limits = SandboxLimits(isolation=iso, **{**FAST, **kw})
    res = run_program(textwrap.dedent(code), limits)
    assert res.outcome in OUTCOMES
    assert res.isolation == iso
    return res


def _cmdlines_containing(marker: str) -> list[int]:
    hits = []
    me = str(os.getpid()).encode()
    needle = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or name.encode() == me:
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if needle in cmd and stat[stat.rindex(b")") + 2:][:1] != b"Z":
            hits.append(int(name))
    return hits


@pytest.fixture(scope="module", autouse=True)
def private_tempdir():
    """Work dirs of this module's sandboxes live under a unique directory, so we can
    recognise our own sandbox processes (their argv names the work dir) even when other
    sandboxes run on the machine at the same time."""
    base = tempfile.mkdtemp(prefix="sandbox-tests-")
    real = sandbox._core.tempfile
    sandbox._core.tempfile = types.SimpleNamespace(
        mkdtemp=lambda **kw: real.mkdtemp(**{**kw, "dir": base}))
    try:
        yield base
    finally:
        sandbox._core.tempfile = real
    assert os.listdir(base) == []  # every work dir has been removed
    os.rmdir(base)


@pytest.fixture(autouse=True)
def no_sandbox_process_left(private_tempdir):
    """After every test, not a single sandbox process (runner/wrapper) may be alive."""
    yield
    assert _cmdlines_containing(private_tempdir) == []


# --------------------------------------------------------------------------------------
# basics
# --------------------------------------------------------------------------------------
def test_public_api():
    assert OUTCOMES == ("passed", "failed", "timeout", "memory", "crashed", "sandbox_error")
    assert SandboxLimits() == SandboxLimits(10.0, 10, 1024, 16, 64, 65536, "auto")
    assert available_isolation() in ("bwrap", "unshare", "none")
    # as root "unshare" comes first: under bwrap the program would be host uid 0 (no process cap)
    preferred = sorted(ISOLATED_MODES, key=lambda m: m != ("unshare" if os.geteuid() == 0 else "bwrap"))
    assert available_isolation() == (preferred[0] if preferred else "none")
    res = run_program("print('hello')")
    assert res.outcome == "passed" and res.stdout == "hello\n"
    assert res.isolation == available_isolation()
    for name in ("run_program", "run_programs", "available_isolation", "SandboxLimits", "SandboxResult"):
        assert hasattr(sandbox, name)
    with pytest.raises(ValueError):
        run_program("pass", SandboxLimits(isolation="docker"))


SPAWNER = """
import os, time
n = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError as e:
    print("stopped after", n, type(e).__name__)
else:
    print("started", n)
"""


def test_a_bounded_spawner_is_stopped_by_the_process_cap():
    """Never a real fork bomb: at most 200 sleeping children, all killed at the end."""
    if not ISOLATED_MODES:
        pytest.skip(NO_ISOLATION_REASON)
    res = run_program(SPAWNER, SandboxLimits(timeout_s=20))
    assert res.outcome == "passed", res
    words = res.stdout.split()
    assert words[:2] == ["stopped", "after"] and int(words[2]) < sandbox._core._NPROC, res.stdout
    assert words[3] == "BlockingIOError"


def test_auto_falls_back_without_bwrap(monkeypatch):
    if "unshare" not in ISOLATED_MODES:
        pytest.skip("unshare does not work here (it needs root)")
    monkeypatch.setattr(sandbox._layout, "bwrap_path", lambda: None)
    monkeypatch.setattr(sandbox._core, "_probe_cache", {})
    assert available_isolation() == "unshare"
    res = run_program("print('hi')")
    assert (res.outcome, res.isolation) == ("passed", "unshare")


def test_this_machine_has_real_isolation():
    if not ISOLATED_MODES:
        pytest.skip(NO_ISOLATION_REASON)
    assert available_isolation() in ("bwrap", "unshare")


@any_mode
def test_pass_and_fail(iso):
    ok = run("""
        def add(a, b):
            return a + b
        assert add(1, 2) == 3
        print("done")
    """, iso)
    assert (ok.outcome, ok.exit_code, ok.stdout) == ("passed", 0, "done\n")
    bad = run("""
        def add(a, b):
            return a - b
        assert add(1, 2) == 3, "wrong sum"
    """, iso)
    assert bad.outcome == "failed" and bad.detail == "AssertionError"
    assert "wrong sum" in bad.stderr and "solution.py" in bad.stderr
    assert run("raise ValueError('boom')", iso).detail == "ValueError"
    assert run("def f(:\n  pass", iso).detail == "SyntaxError"


@any_mode
def test_workdir_env_and_stdin(iso, monkeypatch):
    monkeypatch.setenv("SECRET_TOKEN", "hunter2-" + uuid.uuid4().hex)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-" + uuid.uuid4().hex)
    res = run("""
        import os, sys
        print(os.getcwd())
        assert os.listdir(".") == [], os.listdir(".")
        assert os.environ["HOME"] == os.getcwd()
        assert sys.stdin.read() == ""
        assert sys.flags.isolated
        with open("scratch.txt", "w") as f:   # the work dir itself is writable
            f.write("x" * 1000)
        for key, value in sorted(os.environ.items()):
            print(key, value)
    """, iso)
    assert res.outcome == "passed", res
    cwd = res.stdout.splitlines()[0]
    assert "grpo-sbx-" in cwd and not os.path.exists(cwd)  # removed afterwards
    env = dict(line.split(" ", 1) for line in res.stdout.splitlines()[1:])
    assert set(env) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "USER", "LOGNAME",
                        "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PWD"}
    assert os.environ["SECRET_TOKEN"] not in res.stdout
    assert os.environ["AWS_SECRET_ACCESS_KEY"] not in res.stdout


@isolated
def test_host_env_unreadable_through_proc(iso, monkeypatch):
    secret = "hunter2-" + uuid.uuid4().hex
    monkeypatch.setenv("SECRET_TOKEN", secret)
    res = run(f"""
        import os
        seen = []
        for pid in ["self", "1", "{os.getpid()}", "{os.getppid()}"] + os.listdir("/proc"):
            try:
                with open(f"/proc/{{pid}}/environ", "rb") as f:
                    seen.append(f.read().decode(errors="replace"))
            except OSError:
                pass
        print("\\n".join(seen))
    """, iso)
    assert res.outcome == "passed"
    assert secret not in res.stdout and "SECRET_TOKEN" not in res.stdout


# --------------------------------------------------------------------------------------
# the sentinel: only a program that ran to its end passes
# --------------------------------------------------------------------------------------
EARLY_EXITS = {
    "os._exit(0)": "import os\nos._exit(0)\nassert False\n",
    "sys.exit(0)": "import sys\nsys.exit(0)\nassert False\n",
    "raise SystemExit": "raise SystemExit\n",
    "SystemExit(0) in function": "def f():\n    raise SystemExit(0)\nf()\nassert False\n",
    "KeyboardInterrupt": "raise KeyboardInterrupt\n",
    "atexit hook": textwrap.dedent("""
        import atexit, os
        atexit.register(lambda: os._exit(0))
        atexit.register(print, "passed")
        assert False, "tests failed"
    """),
    "prints passed": 'print("passed")\nprint("PASSED")\nprint("All tests passed")\nassert 1 == 2\n',
    "prints passed then exits 0": 'import os, sys\nprint("PASSED"); sys.stdout.flush()\nos._exit(0)\n',
    "exit from a thread": textwrap.dedent("""
        import os, threading, time
        threading.Thread(target=lambda: os._exit(0)).start()
        time.sleep(5)
    """),
    "forked child finishes": textwrap.dedent("""
        import os
        if os.fork() != 0:
            os._exit(0)   # the direct child leaves early, a grandchild runs to the end
    """),
    "writes to every fd": textwrap.dedent("""
        import os
        for fd in range(3, 64):
            for msg in (b"ok\\n", b"result {}\\n", b"passed\\n"):
                try:
                    os.write(fd, msg)
                except OSError:
                    pass
        os._exit(0)
    """),
    "closes every fd": "import os\nos.closerange(3, 1 << 16)\n",
}


@any_mode
def test_early_exit_is_never_a_pass(iso):
    limits = SandboxLimits(isolation=iso, **FAST)
    results = run_programs(list(EARLY_EXITS.values()), limits, workers=2)
    for (name, _), res in zip(EARLY_EXITS.items(), results, strict=True):
        assert res.outcome == "failed", (name, res)
    by_name = dict(zip(EARLY_EXITS, results, strict=True))
    assert by_name["sys.exit(0)"].detail == "SystemExit: 0"
    assert "sentinel missing" in by_name["os._exit(0)"].detail
    assert "PASSED" in by_name["prints passed then exits 0"].stdout


@isolated
def test_nonce_never_reaches_the_program(iso, monkeypatch):
    """The per-run nonce is not in the program's memory, argv, env or files: the runner
    reads it only after forking the child.  We pin the nonce and scan the child's whole
    address space for it (searching for two halves so the needle itself never exists)."""
    nonce = uuid.uuid4().hex
    monkeypatch.setattr(sandbox._core.secrets, "token_hex", lambda n=16: nonce)
    h1, h2 = nonce[:16].encode(), nonce[16:].encode()
    res = run(f"""
        import os, re
        h1, h2 = {h1!r}, {h2!r}
        hits = scanned = 0
        for pid in ("self", str(os.getppid())):
            for path in ("cmdline", "environ"):
                try:
                    data = open(f"/proc/{{pid}}/{{path}}", "rb").read()
                except OSError:
                    continue
                i = data.find(h1)
                while i >= 0:
                    hits += data[i + 16:i + 32] == h2
                    i = data.find(h1, i + 1)
        with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
            for line in maps:
                addr, perms = line.split()[:2]
                if not perms.startswith("r"):
                    continue
                lo, hi = (int(x, 16) for x in addr.split("-"))
                try:
                    mem.seek(lo)
                    data = mem.read(hi - lo)
                except (OSError, OverflowError, ValueError):
                    continue
                scanned += len(data)
                i = data.find(h1)
                while i >= 0:
                    hits += data[i + 16:i + 32] == h2
                    i = data.find(h1, i + 1)
        print(hits, scanned)
        parent = f"/proc/{{os.getppid()}}"
        for n in range(64):           # the runner's result pipe must be out of reach
            try:
                os.close(os.open(f"{{parent}}/fd/{{n}}", os.O_WRONLY))
                print("PARENT FD OPENED", n)
            except OSError:
                pass
        for name in ("mem", "environ"):
            try:
                open(f"{{parent}}/{{name}}", "rb").read(1)
                print("PARENT MEMORY READ", name)
            except OSError:
                pass
    """, iso, timeout_s=10)
    assert res.outcome == "passed", res
    hits, scanned = map(int, res.stdout.split()[:2])
    assert scanned > 1_000_000 and hits == 0
    assert "PARENT" not in res.stdout  # the runner is not dumpable


# --------------------------------------------------------------------------------------
# timeouts, limits, crashes
# --------------------------------------------------------------------------------------
@any_mode
def test_timeouts(iso):
    programs = [
        "while True:\n    pass\n",
        textwrap.dedent("""
            import signal
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.alarm(1)
            while True:
                pass
        """),
        "import time\ntime.sleep(60)\n",
        "while True:\n    print('spam' * 1000)\n",  # infinite output flood
    ]
    t0 = time.monotonic()
    results = run_programs(programs, SandboxLimits(isolation=iso, timeout_s=1.0), workers=4)
    assert time.monotonic() - t0 < 6
    for res in results:
        assert res.outcome == "timeout", res
        assert 0.9 < res.duration_s < 3.0
        assert len(res.stdout.encode()) <= 65536
    assert results[3].stdout.startswith("spam")


def test_cpu_limit():
    """RLIMIT_CPU is set by the same code in every mode: test it under the default one."""
    iso = available_isolation()
    res, ignoring = run_programs([
        "while True:\n    pass\n",
        "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True:\n    pass\n",
    ], SandboxLimits(isolation=iso, timeout_s=10, cpu_s=1), workers=2)
    assert res.outcome == "timeout" and "SIGXCPU" in res.detail and res.duration_s < 5, res
    # SIGXCPU ignored: the kernel sends SIGKILL at the hard limit (cpu_s + 1)
    assert ignoring.outcome == "timeout" and "CPU" in ignoring.detail and ignoring.duration_s < 6, ignoring


@any_mode
def test_memory(iso):
    results = run_programs([
        "x = bytearray(10**10)\n",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(10**6))\n",
        "s = 'x'\nwhile True:\n    s = s + s\n",
    ], SandboxLimits(isolation=iso, memory_mb=256, timeout_s=10), workers=3)
    for res in results:
        assert res.outcome == "memory", res
        assert res.duration_s < 8


@any_mode
def test_file_and_fd_limits(iso):
    big = run("""
        with open("big.bin", "wb") as f:
            f.write(b"x" * (3 * 1024 * 1024))
    """, iso, file_size_mb=1)
    assert big.outcome == "failed" and "File too large" in big.stderr, big
    many = run("""
        fs = [open("f%d.txt" % i, "w") for i in range(200)]
    """, iso, open_files=32)
    assert many.outcome == "failed" and "Too many open files" in many.stderr, many


@any_mode
def test_crashes(iso):
    results = run_programs([
        "import ctypes\nctypes.string_at(0)\n",
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
        "import os\nos.abort()\n",
        "import os, time\nos.kill(os.getppid(), 9)\ntime.sleep(3)\n",  # kill the parent
        "import os, signal, time\nos.kill(os.getppid(), signal.SIGINT)\ntime.sleep(3)\n",
        "import os, signal, time\nos.kill(os.getppid(), signal.SIGTERM)\ntime.sleep(3)\n",
    ], SandboxLimits(isolation=iso, timeout_s=5), workers=2)
    for res in results:
        assert res.outcome == "crashed", res  # never "sandbox_error": that would not be penalised
    assert results[0].exit_code == -11 and "SIGSEGV" in results[0].detail
    assert results[1].exit_code == -9
    assert "parent" in results[3].detail


def test_signalling_the_runner_is_never_an_infrastructure_error():
    """Whatever signal the program sends its runner, the outcome is the program's."""
    sigs = [s for s in range(1, 32) if s not in (signal.SIGKILL,)]
    codes = [f"import os, time\nos.kill(os.getppid(), {s})\ntime.sleep(0.3)\n" for s in sigs]
    results = run_programs(codes, SandboxLimits(timeout_s=1.5), workers=4)
    for sig, res in zip(sigs, results, strict=True):
        assert res.outcome in ("passed", "crashed", "timeout", "failed"), (sig, res)
        if sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1):
            assert res.outcome == "crashed", (sig, res)


@pytest.mark.parametrize("inherited", ["ignored", "blocked"])
def test_signals_the_host_ignores_or_blocks_still_reach_the_runner(inherited):
    """A host started under nohup (SIGHUP ignored) or with signals blocked in its thread
    passes both to the sandbox through fork and exec; the runner must not keep them, or a
    program that signals it ends as "passed" (seen once in CI)."""
    sigs = [signal.SIGHUP, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2]
    codes = [f"import os, time\nos.kill(os.getppid(), {s})\ntime.sleep(0.3)\n" for s in sigs]
    saved = {s: signal.getsignal(s) for s in sigs}
    try:
        if inherited == "ignored":
            for s in sigs:
                signal.signal(s, signal.SIG_IGN)
            old_mask = None
        else:
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
        results = run_programs(codes, SandboxLimits(timeout_s=1.5), workers=2)
    finally:
        if old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        for s, h in saved.items():
            signal.signal(s, h)
    assert [r.outcome for r in results] == ["crashed"] * len(sigs), results


@any_mode
def test_the_program_starts_with_python_s_usual_signal_handling(iso):
    """KeyboardInterrupt on SIGINT; a closed pipe is BrokenPipeError, not death by SIGPIPE."""
    code = """
        import os, signal
        try:
            os.kill(os.getpid(), signal.SIGINT)
            import time; time.sleep(1)
        except KeyboardInterrupt:
            print("keyboard-interrupt")
        r, w = os.pipe()
        os.close(r)
        try:
            os.write(w, b"x")
        except BrokenPipeError:
            print("broken-pipe")
    """
    res = run(code, iso, timeout_s=5)
    assert res.outcome == "passed", res
    assert res.stdout.split() == ["keyboard-interrupt", "broken-pipe"], res


@isolated
def test_kill_everything_in_reach(iso):
    """kill(-1, SIGKILL) reaches only the sandbox's own pid namespace."""
    probe = run("import os\nprint(os.getpid(), len([p for p in os.listdir('/proc') if p.isdigit()]))", iso)
    pid, nprocs = map(int, probe.stdout.split())
    assert pid < 10 and nprocs < 10, probe  # really inside a fresh pid namespace
    victim = run("import os, time\nos.kill(-1, 9)\nos.kill(1, 9)\ntime.sleep(3)\n", iso, timeout_s=5)
    assert victim.outcome in ("crashed", "failed"), victim
    assert os.getpid() > 0 and os.path.exists(f"/proc/{os.getpid()}")  # we are still here


@any_mode
def test_output_flood_is_capped(iso):
    res = run("""
        import sys
        chunk = "x" * 1_000_000
        for _ in range(100):
            sys.stdout.write(chunk)
            sys.stderr.write(chunk)
        print("end")
    """, iso, timeout_s=20, output_bytes=10_000)
    assert res.outcome == "passed", res.detail
    assert len(res.stdout) == 10_000 and len(res.stderr) == 10_000
    assert res.duration_s < 10


# --------------------------------------------------------------------------------------
# processes never outlive the call
# --------------------------------------------------------------------------------------
def _spawner(marker: str, then: str) -> str:
    return textwrap.dedent(f"""
        import os, subprocess, sys, time
        MARK = {marker!r}
        sleeper = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
        subprocess.Popen([sys.executable, "-c", sleeper, MARK], start_new_session=True,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        pid = os.fork()
        if pid == 0:                        # classic daemon double fork
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", sleeper, MARK])
            os._exit(0)
        os.waitpid(pid, 0)
        for _ in range(200):                # wait until both daemons are running
            n = 0
            for p in os.listdir("/proc"):
                try:
                    n += MARK.encode() in open(f"/proc/{{p}}/cmdline", "rb").read()
                except (OSError, ValueError):
                    pass
            if n >= 2:
                break
            time.sleep(0.01)
        print("daemons", n, flush=True)
        {then}
    """)


@any_mode
@pytest.mark.parametrize("then", ["pass", "time.sleep(60)", "os.kill(os.getppid(), 9); time.sleep(60)"],
                         ids=["returns", "times-out", "kills-parent"])
def test_detached_children_are_killed(iso, then):
    marker = "grpo-sbx-test-" + uuid.uuid4().hex
    res = run(_spawner(marker, then), iso, timeout_s=2.5)
    assert "daemons 2" in res.stdout, res
    expected = {"pass": "passed", "time.sleep(60)": "timeout"}.get(then, "crashed")
    assert res.outcome == expected, res
    assert _cmdlines_containing(marker) == []  # immediately, no grace period


# --------------------------------------------------------------------------------------
# network and filesystem isolation
# --------------------------------------------------------------------------------------
@isolated
def test_no_network(iso):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    port = server.getsockname()[1]
    try:
        res = run(f"""
            import socket
            s = socket.create_connection(("127.0.0.1", {port}), timeout=1)
            s.sendall(b"exfiltrated")
            print("CONNECTED")
        """, iso)
        udp = run(f"""
            import socket
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", {port}))
            socket.create_connection(("10.255.255.1", 80), timeout=1)
            print("CONNECTED")
        """, iso)
        with pytest.raises(BlockingIOError):
            server.accept()
    finally:
        server.close()
    assert res.outcome == "failed" and "CONNECTED" not in res.stdout, res
    assert udp.outcome == "failed" and "CONNECTED" not in udp.stdout, udp


@pytest.fixture
def victims(tmp_path):
    """A file outside the sandbox invisible to it (tmp_path) and one in a directory the
    sandbox can see read-only (/usr/local/share)."""
    hidden = tmp_path / "victim.txt"
    hidden.write_text("precious")
    files = [str(hidden)]
    visible_dir = "/usr/local/share"
    fd, visible = None, None
    if os.path.isdir(visible_dir) and os.access(visible_dir, os.W_OK):
        fd, visible = tempfile.mkstemp(prefix="grpo-sandbox-victim-", dir=visible_dir)
        os.write(fd, b"precious")
        os.close(fd)
        files.append(visible)
    yield files
    if visible and os.path.exists(visible):
        os.remove(visible)


@isolated
def test_cannot_touch_host_files(iso, victims, tmp_path):
    res = run(f"""
        import os, sys
        victims = {victims!r}
        done = []
        attempts = [
            lambda p: open(p, "w").write("pwned"),
            lambda p: open(p, "a").write("pwned"),
            lambda p: os.chmod(p, 0o777),
            lambda p: os.rename(p, p + ".moved"),
            lambda p: os.remove(p),
            lambda p: open(os.path.join(os.path.dirname(p), "new.txt"), "w").write("x"),
        ]
        for p in victims:
            for i, attempt in enumerate(attempts):
                try:
                    attempt(p)
                    done.append((p, i))
                except OSError:
                    pass
        # shared host files: only *probe* writability (O_APPEND, nothing written)
        for p in [sys.executable, os.path.realpath(sys.executable), os.path.join(sys.prefix, "pyvenv.cfg")]:
            try:
                os.close(os.open(p, os.O_WRONLY | os.O_APPEND))
                done.append(p)
            except OSError:
                pass
        for d in ["/", "/usr", "/etc", "/root", "/tmp/..", "/dev", sys.prefix]:
            try:
                open(os.path.join(d, "pwned.txt"), "w").write("x")
                done.append(d)
            except OSError:
                pass
        print("DONE", done)
    """, iso)
    assert res.outcome == "passed", res
    assert "DONE []" in res.stdout, res.stdout
    for path in victims:
        with open(path) as f:
            assert f.read() == "precious"
    assert sorted(os.listdir(tmp_path)) == ["victim.txt"]
    assert not os.path.exists(os.path.join(sys.prefix, "pwned.txt"))


@isolated
def test_no_privileges_inside(iso):
    res = run("""
        import os, ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        status = open("/proc/self/status").read()
        cap_eff = [l for l in status.splitlines() if l.startswith("CapEff")][0].split()[1]
        print("uid", os.getuid(), "caps", cap_eff)
        CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
        print("unshare", libc.unshare(CLONE_NEWUSER | CLONE_NEWNS))
        print("mount", libc.mount(b"none", b"/", None, 32 | 4096, None))  # remount rw
        print("dev", sorted(os.listdir("/dev")))
        secret_places = ("/root/.ssh", "/home", "/etc/shadow", "/var", "/run")
        print("hidden", [p for p in secret_places if os.path.exists(p)])
    """, iso)
    assert res.outcome == "passed", res
    out = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert out["uid"].split()[0] != "0" and out["uid"].split()[-1] == "0000000000000000"
    assert out["mount"] == "-1"
    assert "sda" not in out["dev"] and "mem" not in out["dev"]
    assert out["hidden"] == "[]"


# --------------------------------------------------------------------------------------
# infrastructure failures and throughput
# --------------------------------------------------------------------------------------
def test_sandbox_errors_are_not_the_programs_fault(monkeypatch):
    def broken(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(sandbox._core.tempfile, "mkdtemp", broken)
    res = run_program("pass", SandboxLimits(isolation="none"))
    assert res.outcome == "sandbox_error" and "work directory" in res.detail
    monkeypatch.undo()

    monkeypatch.setattr(sandbox._layout, "bwrap_path", lambda: "/nonexistent/bwrap")
    res = run_program("pass", SandboxLimits(isolation="bwrap"))
    assert res.outcome == "sandbox_error" and res.isolation == "bwrap"
    monkeypatch.setattr(sandbox._layout, "bwrap_path", lambda: "/bin/false")
    res = run_program("pass", SandboxLimits(isolation="bwrap"))
    assert res.outcome == "sandbox_error" and "no report" in res.detail, res


def test_every_runner_part_is_shipped_and_fits_one_argument():
    """The runner is one file per role, executed in order; each travels as its own argv entry,
    which the kernel caps at MAX_ARG_STRLEN (128 KiB): keep a margin."""
    parts = sandbox._layout.RUNNER_PARTS
    here = os.path.dirname(sandbox.__file__)
    assert sorted(parts) == sorted(f for f in os.listdir(here) if f.startswith("_runner") and f.endswith(".py"))
    assert parts[0] == "_runner_base.py" and parts[-1] == "_runner.py"  # set-up first, entry point last
    assert max(len(h) for h in sandbox._layout.runner_code_hex()) < 96 * 1024


@any_mode
def test_run_programs_parallel_in_order(iso):
    codes = [f"assert {i} % 3 != 0\nprint({i})" for i in range(12)]
    t0 = time.monotonic()
    results = run_programs(codes, SandboxLimits(isolation=iso), workers=2)
    elapsed = time.monotonic() - t0
    assert [r.outcome for r in results] == ["failed" if i % 3 == 0 else "passed" for i in range(12)]
    assert [r.stdout for r in results if r.outcome == "passed"] == [
        f"{i}\n" for i in range(12) if i % 3 != 0]
    assert elapsed < 6, f"12 trivial programs took {elapsed:.2f} s"
    assert run_programs([], SandboxLimits(isolation=iso)) == []
