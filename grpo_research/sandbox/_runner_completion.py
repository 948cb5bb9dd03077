"""In-sandbox runner, part 4 of 6: the verifier's completion process C (see ``_runner.py``).

Untrusted: runs ``TestProgram.solution`` as its own module, then answers the tester's calls,
exporting plain data and references only.  Uses the protocol of ``_runner_base.py``.
"""


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
