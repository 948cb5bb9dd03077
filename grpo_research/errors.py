"""The errors a user can cause, in one torch-free module: each is reported as one line,
`error: ...`, with exit status 2 (`USAGE_ERROR`) by the command-line entry points."""
from __future__ import annotations

USAGE_ERROR = 2


class ConfigError(ValueError):
    """A usage error in a config file or a `key=value` override (exit code 2)."""


class UsageError(Exception):
    """A usage error of a command: bad arguments, unreadable or unwritable files (exit code 2)."""


class DataError(ValueError):
    """A benchmark record is malformed; the message names the file, line and field (also
    importable from grpo_research.tasks.loading, where the loaders raise it)."""
