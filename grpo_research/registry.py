"""One registry type for every pluggable name: tasks, reward terms, methods, advantage
estimators, surrogates, loss aggregations. A registry is a dict from name to entry that refuses
a name registered twice and names the known choices when asked for an unknown one."""
from __future__ import annotations

from typing import Callable, Generic, TypeVar

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
