"""The sandbox's public types: the outcomes, the limits, a result, and a program with its tests."""

from __future__ import annotations

from dataclasses import dataclass

OUTCOMES = ("passed", "failed", "timeout", "memory", "crashed", "sandbox_error")
ISOLATIONS = ("auto", "bwrap", "unshare", "none")


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 10.0  # wall clock; on expiry the whole sandbox (every descendant) is killed
    cpu_s: int = 10  # RLIMIT_CPU
    memory_mb: int = 1024  # RLIMIT_AS
    file_size_mb: int = 16  # RLIMIT_FSIZE
    open_files: int = 64  # RLIMIT_NOFILE
    output_bytes: int = 65536  # stdout/stderr each capped to this many bytes (the rest is drained)
    isolation: str = "auto"  # "auto" (best available), "bwrap", "unshare", "none"


@dataclass(frozen=True)
class SandboxResult:
    outcome: str  # one of OUTCOMES
    exit_code: int | None  # the program's exit code, -N if killed by signal N, None if unknown
    stdout: str
    stderr: str
    duration_s: float
    isolation: str  # which isolation was actually in force: "bwrap", "unshare" or "none"
    detail: str = ""  # short reason, e.g. "AssertionError", "killed by signal 11 (SIGSEGV)"


@dataclass(frozen=True)
class TestProgram:
    """A completion and the tests that judge it, run in two processes (see "The verifier").

    `solution` is what the completion contributes (with whatever context it needs, e.g. the
    prompt it continues); it must compile and run as a module on its own.  `prelude` (trusted:
    the prompt's helpers, the tests' imports and set-up) and `tests` run in the tester's process,
    where `entry_point` and every name the tests use without defining it are proxies of the
    completion's names."""

    __test__ = False  # not a pytest class, whatever its name

    solution: str
    tests: str
    prelude: str = ""
    entry_point: str | None = None
