"""What every subcommand of `grpo-research` shares: the parser whose errors are one line, the
wrapper that turns usage errors into `error: ...` and exit status 2, and `quiet_libraries`."""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from grpo_research.errors import USAGE_ERROR, ConfigError, UsageError
from grpo_research.studies import StudyError

# What a user can cause (a bad argument, config, file or study): one line, exit status 2.
# Library modules convert the rest of their usage errors (e.g. a benchmark's DataError) to these.
USAGE_ERRORS = (ConfigError, UsageError, StudyError)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise UsageError (reported by `run_command` as one line,
    no usage block); its subparsers are Parsers too."""

    def error(self, message: str):
        raise UsageError(message)


def one_line(error: BaseException) -> str:
    return " ".join(str(error).split())


def report_usage_error(error: BaseException) -> int:
    print(f"error: {one_line(error)}", file=sys.stderr)
    return USAGE_ERROR


def run_command(parser: argparse.ArgumentParser, argv: Sequence[str]) -> int:
    """Parse `argv` and run the chosen command (`args.func(args)`); return its exit status.

    A usage error (USAGE_ERRORS, bad arguments included) prints `error: <message>` on one line
    on stderr and returns 2 (USAGE_ERROR); a command may set `on_usage_error` (called with the
    exit status) as a default of its parser to learn of it, as `train` does for torchrun.
    An environment error (full disk, read-only file system, a path through a file, a name too
    long, permissions: `files.ENVIRONMENT_ERRNOS`) that no command turned into a usage error
    itself is one line too, naming the file, exit status 2."""
    from grpo_research.files import environment_error, is_environment_error

    args = None
    try:
        args = parser.parse_args(list(argv))
        return args.func(args)
    except (*USAGE_ERRORS, OSError) as e:
        if isinstance(e, OSError):
            if not is_environment_error(e):
                raise
            e = environment_error(e)
        code = report_usage_error(e)
        hook = getattr(args, "on_usage_error", None)
        if hook is not None:
            hook(code)
        return code


def quiet_libraries() -> None:
    """No tokenizer fork warnings, transformers' logging at errors only and no progress bars."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
