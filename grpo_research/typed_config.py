"""Strict, documented dataclass configs (the mechanics behind grpo_research.config, torch-free):
a field helper carrying each key's documentation and range check, the checks themselves, a
strict recursive merge of mappings into dataclasses (unknown keys and wrong types are
`ConfigError`s naming the key and where it came from), YAML files and `a.b=c` overrides."""
from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import field
from pathlib import Path
from typing import Any, Callable

import yaml

from grpo_research.errors import ConfigError


def doc_field(default: Any, help: str, check: Callable[[Any], str | None] | None = None):
    """A config field with its documentation (`help`) and an optional range check (`check`: value -> message or None)."""
    kw: dict[str, Any] = {"metadata": {"help": help, "check": check}}
    if isinstance(default, (dict, list)):
        kw["default_factory"] = lambda d=default: type(d)(d)
    else:
        kw["default"] = default
    return field(**kw)


def gt(lo: float):
    return lambda v: None if v > lo else f"must be > {lo}"


def ge(lo: float):
    return lambda v: None if v >= lo else f"must be >= {lo}"


def open_interval(lo: float, hi: float):
    return lambda v: None if lo < v < hi else f"must be in ({lo}, {hi})"


def closed_interval(lo: float, hi: float):
    return lambda v: None if lo <= v <= hi else f"must be in [{lo}, {hi}]"


def one_of(*choices: Any):
    return lambda v: None if v in choices else f"must be one of {', '.join(map(str, choices))}"


def type_ok(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return any(type_ok(value, a) for a in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp in (list, dict, str, bool):
        return isinstance(value, tp)
    return True


def _coerce_float(value: Any, tp: Any) -> Any:
    """Ints and numeric strings such as `1e-3` (a string to YAML 1.1) become floats for float fields."""
    if float not in (tp, *typing.get_args(tp)) or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def _type_name(tp: Any) -> str:
    return str(tp).replace("typing.", "").replace("<class '", "").replace("'>", "")


def _hints(cls) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def merge(obj: Any, data: dict, where: str, prefix: str = "") -> None:
    """Set fields of dataclass `obj` from `data`, recursively; reject unknown keys and bad types."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: section '{prefix.rstrip('.') or '<root>'}' must be a mapping, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(obj)}
    hints = _hints(type(obj))
    for key, value in data.items():
        full = f"{prefix}{key}"
        if key not in fields:
            known = ", ".join(prefix + k for k in fields)
            raise ConfigError(f"{where}: unknown key '{full}' (known keys here: {known})")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            merge(current, value, where, full + ".")
            continue
        tp = hints[key]
        value = _coerce_float(value, tp)
        if isinstance(value, float) and not math.isfinite(value) and float in (tp, *typing.get_args(tp)):
            raise ConfigError(f"{where}: '{full}' = {value!r} must be a finite number")
        if not type_ok(value, tp):
            raise ConfigError(f"{where}: '{full}' = {value!r} has the wrong type (expected {_type_name(tp)})")
        setattr(obj, key, value)


def check_ranges(obj: Any, prefix: str = "") -> None:
    """Run every field's range check, recursively; raise ConfigError naming the first bad key."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            check_ranges(value, f"{prefix}{f.name}.")
            continue
        check = f.metadata.get("check")
        msg = check(value) if check else None
        if msg:
            raise ConfigError(f"'{prefix}{f.name}' = {value!r} {msg}")


def field_rows(obj: Any, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(dotted key, default, help) of every leaf field, in declaration order."""
    rows = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            rows += field_rows(value, f"{prefix}{f.name}.")
        else:
            rows.append((f"{prefix}{f.name}", value, f.metadata["help"]))
    return rows


MAX_DEPTH = 50  # nesting of mappings and lists in a config value (a config needs 3 or 4)


class Refused(yaml.constructor.ConstructorError):
    """YAML that parses but that a config refuses (duplicate key, alias, too deep)."""


# YAML 1.2 (core schema) floats. PyYAML implements YAML 1.1, for which a float needs a dot and a
# signed exponent: `1e-05` (what json.dumps and repr write for 0.00001), `1E5`, `1.5e5` and `-.5`
# are strings there. Every YAML the project reads goes through NumberLoader (or StrictLoader, built
# on it), so these are numbers everywhere; `1e5x`, `1e`, `.` and `1.0.0` stay strings.
YAML12_FLOAT = re.compile(r"""^(?:[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?
                              |[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$""", re.X)


class NumberLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader with YAML 1.2 floats (YAML12_FLOAT) besides YAML 1.1's: the project's
    one YAML loader (`safe_load`; StrictLoader adds the checks a config file needs)."""


class NumberDumper(yaml.SafeDumper):
    """PyYAML's SafeDumper that knows NumberLoader's floats: a string such as '1e5' is quoted
    (SafeDumper writes it plain, which NumberLoader would read back as a number)."""


for _cls in (NumberLoader, NumberDumper):
    _cls.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_FLOAT, list("-+0123456789."))


def safe_load(text: str) -> Any:
    """`yaml.safe_load` with YAML 1.2 floats (NumberLoader): the project's reader of YAML text."""
    return yaml.load(text, Loader=NumberLoader)  # noqa: S506 (NumberLoader is a SafeLoader)


def safe_dump(data: Any, **kwargs: Any) -> str:
    """`yaml.safe_dump` whose output `safe_load` reads back unchanged (NumberDumper)."""
    return yaml.dump(data, Dumper=NumberDumper, **kwargs)


def yaml11_string_float(text: str) -> bool:
    """Whether `text` is a float to YAML 1.2 that YAML 1.1 reads as a string (`1e-05`, `1E5`), as
    a config read by another YAML 1.1 reader (Snakemake's) holds it."""
    return bool(YAML12_FLOAT.match(text)) and isinstance(yaml.load(text, Loader=yaml.SafeLoader), str)  # noqa: S506


def yaml12_scalar(text: str) -> Any:
    """A plain YAML scalar as YAML 1.2 floats and PyYAML's ints, booleans and null read it;
    text that is not one such scalar comes back unchanged (`1e-05` -> 1e-05, `x=1` -> 'x=1')."""
    try:
        value = safe_load(text) if text.strip() else None
    except (yaml.YAMLError, RecursionError):
        return text
    return value if value is None or isinstance(value, (bool, int, float)) else text


class StrictLoader(NumberLoader):
    """SafeLoader that refuses duplicate keys (the later one would silently win) and aliases
    (`*name`: no config needs them, and nested aliases expand exponentially: a "billion laughs")."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise Refused(None, None, "YAML aliases (*name) are not allowed in a config",
                                                    event.start_mark)
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise Refused(None, None, f"nested more than {MAX_DEPTH} levels deep",
                                                        self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                raise Refused(None, None, f"duplicate key {key!r} (first on line "
                                                        f"{seen[key] + 1})", key_node.start_mark)
            if isinstance(key, (str, int, float, bool)):
                seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep)


def parse_yaml(text: str, where: str) -> Any:
    """YAML text -> Python value with StrictLoader; ConfigError naming `where` (and the line)."""
    try:
        return yaml.load(text, Loader=StrictLoader)  # noqa: S506 (StrictLoader is a SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark is not None else where
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{at}: malformed YAML ({problem})") from None
    except RecursionError:
        raise ConfigError(f"{where}: malformed YAML (nested too deeply)") from None


MAX_CONFIG_BYTES = 16 * 2**20  # a config or study file; larger is not a config


def load_yaml(path: str | Path) -> dict:
    """Parse a YAML config file; malformed YAML names the file and line."""
    path = Path(path)
    if path.exists() and not path.is_file():
        raise ConfigError(f"config file {path} is not a regular file")
    if path.is_file() and path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"config file {path} is {path.stat().st_size:,} bytes, over the limit of {MAX_CONFIG_BYTES:,}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not a text (UTF-8) file") from None
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    if "\x00" in text:
        raise ConfigError(f"config file {path} is not a text file (it holds NUL bytes)")
    data = parse_yaml(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of keys, got {type(data).__name__}")
    return data


def parse_override(item: str) -> tuple[list[str], Any]:
    """`a.b=c` -> (['a', 'b'], yaml-parsed c)."""
    if "=" not in item:
        raise ConfigError(f"override {item!r} must look like key=value (e.g. algo.beta=0.04)")
    key, raw = item.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"override {item!r} has an empty key")
    try:
        value = yaml.load(raw, Loader=StrictLoader) if raw.strip() else ""  # noqa: S506
    except Refused as e:
        raise ConfigError(f"override {key}=...: {e.problem}") from None
    except yaml.YAMLError:
        value = raw  # not YAML: the plain string (a path with a colon, say)
    except RecursionError:
        raise ConfigError(f"override {key}=... is nested too deeply") from None
    return key.split("."), value


def nest(parts: list[str], value: Any) -> dict:
    out: Any = value
    for p in reversed(parts):
        out = {p: out}
    return out
