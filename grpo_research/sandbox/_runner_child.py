"""In-sandbox runner, part 3 of 6: the child of ``run_program(str)`` (see ``_runner.py``).

The untrusted program in a fresh ``__main__``; only when its module code returned normally does
it write ``ok <token> <pid>`` to its private pipe to the runner.  Uses ``_runner_base.py``.
"""


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
