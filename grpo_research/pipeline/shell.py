"""Strings the .smk rules write the plan with: a job's shell-quoted arguments and a wildcard
constraint matching exactly some names."""
from __future__ import annotations

import re
import shlex
from typing import Any, Iterable


def q(items: Iterable[Any]) -> str:
    """Shell-quote a list of arguments."""
    return " ".join(shlex.quote(str(x)) for x in items)


def alternation(names: Iterable[str]) -> str:
    """A wildcard constraint matching exactly these names."""
    return "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) or "(?!x)x"
