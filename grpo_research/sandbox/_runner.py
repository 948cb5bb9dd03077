"""In-sandbox bootstrap ("runner") for :mod:`grpo_research.sandbox`, part 6 of 6: the runner role.

The runner is NOT imported by the host.  It is six files, one per role, executed in one
namespace as if they were one module: the host compiles each part once, in the order of
``_layout.RUNNER_PARTS`` (each under its own file name, so a traceback names the part and its
line), and passes the marshalled config and then each marshalled code object (hex) as
arguments to ``python -I -S -B -c "<exec each in turn>"`` inside the sandbox.  The parts must
therefore only use the standard library and must not rely on anything of the package.  Module
level imports are all in ``_runner_base.py``; a role imports what only it needs inside its
function.  Add none: each import costs time in every run::

    _runner_base.py        config, constants, libc calls, pipe helpers, the verifier's protocol
    _runner_init.py        the "init" role (isolation "unshare")
    _runner_child.py       the child of run_program(str)
    _runner_completion.py  the verifier's completion process C
    _runner_tester.py      the verifier's tester process T
    _runner.py             the runner role, and the entry point (last: it starts the roles)

Process layout inside the sandbox::

    [init]  pid 1 of the pid namespace: bwrap's own reaper, or (isolation
            "unshare") the "init" role, which first builds a minimal
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
            (Verifier: the completion C and the tester T instead; only T, forked
            after C, holds the token and the pipe to the runner.)

The child never sees the nonce nor the result pipe, so nothing it prints, no
exit path and no file it writes can produce a "passed" report.
"""


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
