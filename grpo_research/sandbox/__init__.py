"""Run untrusted generated Python (model completions + unit tests) in a sandbox.

Public API::

    run_tests(TestProgram(solution, tests, prelude, entry_point), limits) -> SandboxResult  # a verifier
    run_program(code, limits=SandboxLimits()) -> SandboxResult   # code: a str or a TestProgram
    run_programs(codes, limits=SandboxLimits(), workers=None) -> list[SandboxResult]  # input order
    available_isolation() -> "bwrap" | "unshare" | "none"   # what isolation="auto" resolves to

Threat model
------------
A completion is written by a policy that is paid for passing, so it is hostile: it runs first,
knows this harness's source, and will use any way of being graded "passed" without solving the
task (a trailing decorator that swallows the tests, an object whose ``__eq__`` always answers
True, a walk up ``sys._getframe()`` to the runner's pass token, an exit before the tests, a
fork bomb, killing the grader).  Defended: the pass decision, the host's files, processes,
network and secrets, and the machine's process table.  Not defended: the kernel itself (no
seccomp filter), CPU and memory beyond the rlimits below, and everything in mode "none".

The verifier (``TestProgram``; every code task, ``score`` and the ``code_tests`` reward use it)
runs the completion and the tests in two processes inside one sandbox:

* **C** (untrusted) runs ``solution`` as a module of its own: it must compile and run alone,
  so a dangling decorator or an unclosed string is a failure, never a rewrite of the tests.
  It then answers calls.  It is forked before the tests, the token and the tester's pipe
  exist, so none of them is ever in its memory, and it holds only its two channel ends.
* **T** (trusted, non-dumpable, so C can neither ptrace it nor open its descriptors or
  memory through /proc) runs ``prelude`` and ``tests``.  Every name the tests use without
  defining it (the entry point, MBPP's function names and classes) is a proxy of C's name;
  standard-library modules the tests use undefined (``math.isclose``) are T's own imports,
  never C's.  Values cross as marshalled **plain data** of exact builtin types (int, float,
  complex, str, bytes, bool, None, list, tuple, dict, set, frozenset), so every comparison
  the tests make is between builtin values, in T; a subclass is converted to its base type
  (a ``str`` subclass loses its ``__eq__``), anything else stays in C as an opaque reference
  whose equality is identity (calls, attributes, ``len``, iteration, ``bool`` and ``str`` are
  forwarded, so MBPP's ``Pair``/``Node`` tasks still work).  In-place changes to list, dict
  and set arguments are copied back.  Exceptions come back as the builtin type of that name
  (never ``StopIteration``), else as ``RemoteError``.
* "passed" means T ran the tests to their end and wrote its token on a pipe only T and the
  runner hold.  Nothing C prints, writes, forges on its channel or does to its own process
  (``os._exit(0)``, atexit, threads, signals, killing every process it can) can produce it.

Where this departs from the official harnesses (HumanEval's ``execution.py``, MBPP's), which
execute ``prompt + completion + tests`` as one program and share every hole above: values that
are not plain data never compare equal to an expected value (an honest completion returning
a numpy array where a list is expected fails here and may pass there); the tests' undefined
module names are the tester's own; the completion cannot see or change the tests' globals.
Measured on the real files: the gold solutions pass 164/164 (HumanEval), 500/500 (MBPP) and
257/257 (MBPP sanitized) before and after; the corpus of reward hacks in
``tests/reward_hacks.py`` scores 0 on every grading path (see RESULTS.md for the figures).

``run_program(str)`` keeps the older contract: "passed" means the program ran to its very end.
It is not a verifier: the program shares its interpreter with the sentinel (below).

Outcomes (``OUTCOMES``): ``passed`` (the program ran to its very end), ``failed`` (an
exception, a failing assert, ``sys.exit``/``os._exit``/``SystemExit`` of any code, or any
other way of stopping early), ``timeout`` (wall clock, or RLIMIT_CPU), ``memory``
(MemoryError under RLIMIT_AS), ``crashed`` (killed by a signal, e.g. a segfault, or the
program killed its own runner), ``sandbox_error`` (the infrastructure failed; never the
program's fault).  ``SandboxResult.isolation`` says which isolation was in force.

What is isolated, and how
-------------------------
Every program gets its own sandbox, driven by one thread of the caller:

* **bwrap** (preferred; ``apt-get install -y bubblewrap``): new user, pid, mount, network,
  ipc, uts and cgroup namespaces.  The root is an empty tmpfs, remounted read-only, that
  holds only read-only binds of ``/usr`` (+ the merged-/usr links), a few harmless files of
  ``/etc`` (passwd, group, ld.so.cache, localtime, ...; not shadow) and the directories of
  this Python interpreter and its venv; a fresh ``/proc`` (sensitive parts read-only), a
  minimal ``/dev`` (null, zero, full, random, urandom, tty), and size-limited tmpfs for
  ``/tmp``, ``/dev/shm`` and the work directory.  ``/home``, ``/root``, ``/run``, ``/var``,
  the project checkout, sockets and the host's processes are simply not there.  All
  capabilities are dropped, ``no_new_privs`` is set, nested user namespaces are disabled,
  and the network namespace only has a loopback device of its own.
* **unshare** (fallback, needs root): ``unshare --mount --net --pid --ipc --uts --cgroup
  --fork --kill-child`` starts the runner as pid 1 of the new namespaces, whose "init" role
  (``_runner_init.py``) builds the same minimal root itself (tmpfs + read-only bind mounts +
  ``pivot_root``), then drops to a random unprivileged host uid (no capabilities, empty
  bounding set, ``no_new_privs``), so RLIMIT_NPROC applies too.
* **none**: only rlimits, a private work directory, a scrubbed environment and process
  group/subreaper based cleanup.  This is *not* a security boundary (the program runs as
  the caller, e.g. root); tests that need isolation are skipped in this mode.

In every mode: ``python -I -S -B`` of the caller's interpreter (``sys.executable``; the
venv's site-packages are put on ``sys.path`` without running ``.pth`` files); the work dir
is a fresh, empty ``tempfile.mkdtemp()`` directory (a tmpfs at the same path in the
namespace modes), used as cwd, HOME and TMPDIR, and removed afterwards; the environment is
only PATH, LANG/LC_ALL, HOME, TMPDIR, USER/LOGNAME, PYTHONDONTWRITEBYTECODE and
PYTHONIOENCODING (no inherited tokens or keys); stdin is ``/dev/null``; stdout/stderr are
each capped at ``output_bytes`` (the rest is drained and dropped, so floods never block);
rlimits (CPU, AS, FSIZE, NOFILE, CORE=0) are set in the program's process.

Processes never outlive a call.  On the wall-clock deadline the host SIGKILLs the
namespace's init, which makes the kernel kill every process in the pid namespace
(double-forked, ``setsid()`` daemons included) before init itself is gone; the host waits
for that.  When the program returns early, the runner (a child subreaper) kills every
leftover descendant before it reports.  In mode "none" the host stops and kills the whole
process tree below the runner, and if the runner itself died it also kills every process
whose cwd, environment or argv names the run's private directory.  If the caller dies,
bwrap's ``--die-with-parent`` / unshare's ``--kill-child`` and a watchdog in the runner
(deadline + 2 s) end the sandbox.

The pass sentinel
-----------------
Inside the sandbox a trusted runner (``_runner.py``) reads the program from a pipe and
forks the child that executes it in a fresh ``__main__``.  Only when the module code
returned normally does the child send ``ok <token> <pid>`` to the runner over a private
pipe and ``os._exit(0)`` (so atexit hooks never run).  The runner then reads the per-run
nonce from the host (only *after* the fork, so it is never in the program's memory, argv,
environment or files) and writes ``result {nonce, exit status, completed, exception}`` to a
result pipe that the child does not hold.  The runner is non-dumpable, so (in the
namespace modes, where the program has no capabilities) the program can neither open the
runner's file descriptors via ``/proc`` nor read its memory.  ``os._exit(0)``,
``sys.exit(0)``, ``raise SystemExit``, atexit hooks, exiting from a thread or a forked
child, writing to random fds, or printing "passed" therefore all end as ``failed``.

Limits of the design
--------------------
* With bwrap run as root, the sandbox uid (65534 inside) maps to host uid 0 (bwrap maps
  the caller's uid).  Nothing writable of the host is mounted and no capability is
  left, but a kernel bug would be exploited as host root; run the harness as a normal
  user (bwrap works unprivileged where user namespaces are allowed) for defence in depth.
  No seccomp filter is installed, so the whole syscall surface of the kernel is exposed.
* The process cap is RLIMIT_NPROC (64 processes of the sandbox's uid).  The kernel never
  enforces it for host uid 0, which is what bwrap run as root maps the program to; so as root
  "auto" prefers "unshare" (which drops to a random unprivileged uid, and the cap holds:
  tests/test_sandbox.py starts a bounded spawner), and an explicit ``isolation="bwrap"`` as
  root has no process cap: a fork bomb is then stopped only by the wall-clock timeout.
* No cgroups: RLIMIT_AS is per process (a program with several processes can use several
  times ``memory_mb``) and RLIMIT_CPU is per process.  tmpfs sizes
  (``max(4 * file_size_mb, 32)`` MiB each for /tmp, /dev/shm and the work dir) use RAM.
* ``run_program(str)`` only: the sentinel lives in the same process as the untrusted code, so
  a program that walks the interpreter's frames to the token and the pipe can fake
  completion.  Use a ``TestProgram`` wherever a pass is worth something.
* In mode "unshare", nested user namespaces are still allowed (mounts stay locked
  read-only inside them).  Mode "none" isolates nothing beyond rlimits and cleanup; there a
  program that kills its runner and starts a daemon which leaves the work dir and execs
  with a fresh environment can escape the cleanup.
"""

from ._core import available_isolation, run_program, run_programs, run_tests
from ._types import OUTCOMES, SandboxLimits, SandboxResult, TestProgram

__all__ = [
    "OUTCOMES",
    "SandboxLimits",
    "SandboxResult",
    "TestProgram",
    "available_isolation",
    "run_program",
    "run_programs",
    "run_tests",
]
