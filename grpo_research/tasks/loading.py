"""Benchmark records from local files (.jsonl, .jsonl.gz, .json, .parquet) or Hugging Face
datasets, with checked fields (`DataError` names file, line and field), and `Benchmark`, the
split handling shared by every benchmark task (see `grpo_research.tasks.benchmarks`).

`load_source` refuses a source with no records and one in which two records carry the same
id (`task_id`, else `unique_id`, else `id`; `11` and `"11"` are one id), naming the file and
both lines; `check_unique_ids` does the same for the problems a loader made (ids that come
from a record's position included)."""
from __future__ import annotations

import gzip
import json
import os
import warnings
from pathlib import Path
from typing import Any

from grpo_research.errors import DataError  # defined with the other user errors; importers use either module
from grpo_research.tasks.base import Problem, TooFewProblems


# ---------------------------------------------------------------- loading

Record = tuple[str, dict[str, Any]]  # (where, e.g. "data/test.jsonl, line 3"; the record)
_SUFFIXES = (".jsonl", ".json", ".gz", ".parquet")


def read_json_lines(lines, label: str, error: type[Exception] = None) -> list[Record]:
    """(where, object) of every non-blank line; a line that is not a JSON object raises `error`
    (default DataError) naming the file and line."""
    error = error or DataError
    records = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{label}, line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise error(f"{where}: invalid JSON ({e.msg})") from None
        if not isinstance(obj, dict):
            raise error(f"{where}: expected a JSON object, got {type(obj).__name__}")
        records.append((where, obj))
    return records


def read_records(path: str | os.PathLike) -> list[Record]:
    """All records of a local .jsonl, .jsonl.gz, .json (array, or JSON lines) or .parquet file."""
    path = Path(path)
    label = str(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        try:
            rows = pq.read_table(path).to_pylist()
        except FileNotFoundError:
            raise
        except Exception as e:  # noqa: BLE001  (pyarrow's errors for a corrupt file)
            raise DataError(f"{label}: cannot read parquet ({' '.join(str(e).split())})") from None
        return [(f"{label}, record {i}", row) for i, row in enumerate(rows, 1)]
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError, EOFError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise DataError(f"{label}: cannot read ({e})") from None
    inner = Path(path.stem) if path.suffix == ".gz" else path
    if inner.suffix == ".json":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = None  # not one JSON document: read it as JSON lines below
        if isinstance(obj, list):
            for i, rec in enumerate(obj, 1):
                if not isinstance(rec, dict):
                    raise DataError(f"{label}, record {i}: expected a JSON object, got {type(rec).__name__}")
            return [(f"{label}, record {i}", rec) for i, rec in enumerate(obj, 1)]
        if isinstance(obj, dict):
            return [(f"{label}, line 1", obj)]
    return read_json_lines(text.split("\n"), label)  # not splitlines(): U+2028 may sit inside a string


def load_hub(name: str, config: str | None, split: str) -> list[Record]:
    """Records of a Hugging Face dataset split (network or the local `datasets` cache)."""
    import datasets

    from grpo_research.model_source import downloads_off_if_asked

    try:
        with downloads_off_if_asked():
            ds = datasets.load_dataset(name, config, split=split)
    except Exception as e:  # noqa: BLE001  (datasets raises many kinds; report them in one line)
        msg = " ".join(str(e).split())
        raise DataError(f"cannot load dataset {name!r} (config {config!r}, split {split!r}): {msg}") from None
    return [(f"{name} [{split}], record {i}", dict(row)) for i, row in enumerate(ds, 1)]


def _looks_like_path(data: str) -> bool:
    return data.startswith(("/", ".", "~")) or data.endswith(_SUFFIXES) or data.count("/") > 1 or "\\" in data


def resolve_source(data: str | os.PathLike | None, *, subdir: str, filename: str, hub: str) -> Path | str:
    """A local file (Path) or a hub dataset name (str) for `data` (file, folder, hub name or None).

    None means `$GRPO_RESEARCH_BENCHMARKS/<subdir>` when that variable is set, else `hub`.
    """
    if data is None:
        env = os.environ.get("GRPO_RESEARCH_BENCHMARKS")
        data = Path(env) / subdir if env else hub
    path = Path(data).expanduser()
    if path.is_dir():
        path = path / filename
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (looked for {filename} in {data})")
    if path.is_file():
        return path
    if isinstance(data, Path) or _looks_like_path(str(data)):
        raise FileNotFoundError(f"{data}: no such file")
    return str(data)


ID_FIELDS = ("task_id", "unique_id", "id")  # the fields a benchmark record names itself by, in that order


def _place(where: str, label: str) -> str:
    """"line 3" of "data/test.jsonl, line 3"."""
    return where[len(label) + 2:] if where.startswith(label + ", ") else where


def _id_key(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    text = str(value).strip()
    return str(int(text)) if text.isdigit() else str(value)


def check_records(records: list[Record], label: str) -> list[Record]:
    """`records`, refused (DataError naming `label`) when there are none or two share an id."""
    if not records:
        raise DataError(f"{label}: no records (an empty data file)")
    first: dict[str, str] = {}
    for where, rec in records:
        name = next((f for f in ID_FIELDS if rec.get(f) is not None), None)
        if name is None:
            continue
        key = _id_key(rec[name])
        if key in first:
            raise DataError(f"{label}: duplicate {name} {rec[name]!r} ({_place(first[key], label)} and "
                            f"{_place(where, label)}): each record must have its own id")
        first[key] = where
    return records


def check_unique_ids(problems: list[Problem], wheres: list[str], label: str) -> list[Problem]:
    """`problems` (made from the records at `wheres`, in order), refused (DataError naming
    `label` and both records) when two share an id."""
    seen: dict[str, str] = {}
    for p, where in zip(problems, wheres):
        if p.id in seen:
            raise DataError(f"{label}: {_place(seen[p.id], label)} and {_place(where, label)} both have the problem id "
                            f"{p.id!r}: each record must have its own id")
        seen[p.id] = where
    return problems


def load_source(source: Path | str, config: str | None, split: str) -> list[Record]:
    """Records of a resolved source: a local file, or `split` of a hub dataset; none, or two
    with one id, raise DataError naming the source (`check_records`)."""
    records = read_records(source) if isinstance(source, Path) else load_hub(source, config, split)
    return check_records(records, source_label(source, split))


def source_label(source: Path | str, split: str) -> str:
    """How errors name a resolved source: the file, or `name [split]` of a hub dataset."""
    return str(source) if isinstance(source, Path) else f"{source} [{split}]"


def field(where: str, rec: dict, name: str, kind: type | tuple[type, ...] = str, default: Any = ...) -> Any:
    """rec[name], checked; a missing or mistyped field raises DataError naming file, line and field."""
    value = rec.get(name)
    if value is None:
        if default is not ...:
            return default
        raise DataError(f"{where}: missing field {name!r}")
    if not isinstance(value, kind) or isinstance(value, bool):
        expected = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise DataError(f"{where}: field {name!r} must be {expected}, got {type(value).__name__}")
    return value


class Benchmark:
    """Shared split handling: evaluation problems, and a train pool sampled with the trainer's rng."""

    name: str
    _problems: list[Problem]
    _train_pool: list[Problem] | None = None

    def heldout_problems(self, n: int | None = None) -> list[Problem]:
        """The first `n` evaluation problems (all when None); more than there are raises TooFewProblems."""
        if n is not None and n > len(self._problems):
            raise TooFewProblems(f"benchmark {self.name}", len(self._problems), n)
        return list(self._problems if n is None else self._problems[:n])

    def _load_train(self) -> list[Problem] | None:
        return None  # benchmarks with a train split override this

    def train_problems(self, rng, n: int) -> list[Problem]:
        if self._train_pool is None:
            pool = self._load_train()
            if pool is None:
                warnings.warn(f"{self.name}: no train split given; training problems are sampled from the evaluation records",
                              stacklevel=2)
                pool = self._problems
            self._train_pool = pool
        if not self._train_pool:
            raise ValueError(f"{self.name}: no training problems")
        return [rng.choice(self._train_pool) for _ in range(n)]
