"""In-sandbox runner, part 5 of 6: the verifier's tester process T (see ``_runner.py``).

Trusted and non-dumpable: runs ``prelude`` and ``tests`` against proxies of the completion's
names and writes the pass token only when the tests ran to their end.  Uses the protocol of
``_runner_base.py``.
"""


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
