"""One registry type for every pluggable name: tasks, reward terms, methods, advantage
estimators, surrogates, loss aggregations. A registry is a dict from name to entry that refuses
a name registered twice and names the known choices when asked for an unknown one.
`Option`: a parameter that a registered entry declares for itself (an advantage estimator's),
so that adding the entry needs no edit of the config's fields."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(dict, Generic[T]):
    """`name -> entry`; `kind` names what is registered, for messages ("task", "method", ...)."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def register(self, name: str, entry: T | None = None) -> Callable[[T], T] | T:
        """`@REG.register("name")` above a function or class, or `REG.register("name", entry)`."""

        def add(obj: T) -> T:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            self[name] = obj
            return obj

        return add if entry is None else add(entry)

    def choices(self) -> str:
        """The registered names, sorted, comma-separated (for error messages)."""
        return ", ".join(sorted(self))

    def lookup(self, name: str) -> T:
        """The entry of `name`; KeyError naming the known choices otherwise."""
        if name not in self:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {self.choices()}")
        return self[name]

    def check(self, name: object) -> str | None:
        """None when `name` is registered, else the config-check message."""
        return None if name in self else f"must be one of {self.choices()}"


def _any_value(value: Any) -> str | None:
    return None


@dataclass(frozen=True)
class Option:
    """A parameter a registered entry declares: its default (whose type a value must have; an
    int passes for a float), one line of help for the generated docs, and `check(value)`, the
    reason a value is refused (None: allowed)."""

    default: Any
    help: str
    check: Callable[[Any], str | None] = _any_value

    def problem(self, value: Any) -> str | None:
        """Why `value` is not allowed, or None."""
        kind = type(self.default)
        if isinstance(value, bool) != (kind is bool):
            return f"must be a {kind.__name__}"
        if kind is float:
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                return "must be a finite number"
        elif not isinstance(value, kind):
            return f"must be a {kind.__name__}"
        return self.check(value)
