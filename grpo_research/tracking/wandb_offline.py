"""Read back what an offline W&B run recorded: its `.wandb` transaction log.

wandb >= 0.2x writes runs through its Go core and no longer ships the Python `DataStore`
reader, so the framing is read here (LevelDB log format, the layout of W&B's old
`wandb/sdk/internal/datastore.py`: a 7-byte file header `:W&B` + magic 0xBEE1 + version, then
32 KiB blocks of records, each `crc32 (of type byte and data), length, type` + data, a record
split FIRST/MIDDLE.../LAST across blocks), and every record is decoded by W&B's own protobuf
schema, `wandb.proto.wandb_internal_pb2.Record`. Used to check that the runs hold what the
dashboard plots (tests/test_dashboard.py); nothing here touches the network.
"""
from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any, Iterator

HEADER_LEN = 7
BLOCK_LEN = 32768
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
IDENT, MAGIC = b":W&B", 0xBEE1
_CRC = {t: zlib.crc32(bytes([t])) & 0xFFFFFFFF for t in (FULL, FIRST, MIDDLE, LAST)}


class WandbFileError(ValueError):
    """A `.wandb` file that is not a W&B transaction log, or a corrupt record."""


def record_payloads(path: str | Path) -> Iterator[bytes]:
    """The serialized records of a `.wandb` file, in order (a torn last record is left out)."""
    data = Path(path).read_bytes()
    if len(data) < HEADER_LEN:
        raise WandbFileError(f"{path}: too short for a W&B transaction log")
    ident, magic, _version = struct.unpack("<4sHB", data[:HEADER_LEN])
    if ident != IDENT or magic != MAGIC:
        raise WandbFileError(f"{path}: not a W&B transaction log (header {data[:HEADER_LEN]!r})")
    pos, parts = HEADER_LEN, []
    while pos + HEADER_LEN <= len(data):
        room = BLOCK_LEN - pos % BLOCK_LEN
        if room < HEADER_LEN:  # block trailer: zero padding
            pos += room
            continue
        checksum, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER_LEN])
        if kind == 0 and length == 0:  # zero-filled rest of a block
            pos += room
            continue
        body = data[pos + HEADER_LEN:pos + HEADER_LEN + length]
        if len(body) < length:
            break  # torn last record
        if zlib.crc32(body, _CRC.get(kind, 0)) & 0xFFFFFFFF != checksum:
            raise WandbFileError(f"{path}: bad checksum at byte {pos}")
        pos += HEADER_LEN + length
        if kind == FULL:
            yield body
        elif kind == FIRST:
            parts = [body]
        elif kind == MIDDLE:
            parts.append(body)
        elif kind == LAST:
            parts.append(body)
            yield b"".join(parts)
            parts = []
        else:
            raise WandbFileError(f"{path}: unknown record type {kind} at byte {pos}")


def records(path: str | Path) -> Iterator[Any]:
    """The records of a `.wandb` file as `wandb.proto.wandb_internal_pb2.Record` messages."""
    from wandb.proto import wandb_internal_pb2

    for payload in record_payloads(path):
        rec = wandb_internal_pb2.Record()
        rec.ParseFromString(payload)
        yield rec


def _key(item: Any) -> str:
    return "/".join(item.nested_key) if item.nested_key else item.key


def read_offline_run(path: str | Path) -> dict[str, Any]:
    """What one offline run recorded: {"run": {id, group, tags, job_type, project, name},
    "config": {key: value} (top-level keys, values JSON-decoded), "history": [row, ...] (each
    row a dict of the logged keys, `_step` included), "summary": {key: value}}.

    `path`: a `.wandb` file or an `offline-run-*` directory holding one."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.wandb"))
        if not files:
            raise WandbFileError(f"{path}: no .wandb file")
        path = files[0]
    run: dict[str, Any] = {}
    config: dict[str, Any] = {}
    history: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    for rec in records(path):
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            r = rec.run
            run = {"id": r.run_id, "group": r.run_group, "tags": list(r.tags), "job_type": r.job_type,
                   "project": r.project, "name": r.display_name}
            for item in r.config.update:
                config[_key(item)] = json.loads(item.value_json)
        elif kind == "config":
            for item in rec.config.update:
                config[_key(item)] = json.loads(item.value_json)
        elif kind == "history":
            row = {_key(item): json.loads(item.value_json) for item in rec.history.item}
            if rec.history.HasField("step"):
                row.setdefault("_step", rec.history.step.num)
            history.append(row)
        elif kind == "summary":
            for item in rec.summary.update:
                summary[_key(item)] = json.loads(item.value_json)
    # config values are W&B's {"value": ..., "desc": ...} wrappers
    config = {k: (v["value"] if isinstance(v, dict) and "value" in v else v) for k, v in config.items()}
    return {"run": run, "config": config, "history": history, "summary": summary}


def history_steps(path: str | Path) -> list[int]:
    """The steps of the history records of a `.wandb` file, in order, as far as it can be read:
    a file cut short by a kill (even to its 7-byte header or less) or damaged after some
    records gives the steps before that point."""
    from wandb.proto import wandb_internal_pb2

    steps: list[int] = []
    try:
        for payload in record_payloads(path):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(payload)
            if rec.WhichOneof("record_type") == "history" and rec.history.HasField("step"):
                steps.append(rec.history.step.num)
    except (OSError, WandbFileError, ValueError):  # ValueError: protobuf's DecodeError
        pass
    return steps


def logged_through(run_dir: str | Path, run_id: str) -> int:
    """The last step that W&B's local history of run `run_id` (every `.wandb` file under
    `<run_dir>/wandb/`, offline or online runs) holds, or -1 when it holds none."""
    files = sorted(Path(run_dir).glob(f"wandb/*run-*-{run_id}/*.wandb"))
    return max((s for f in files for s in history_steps(f)), default=-1)


def offline_runs(run_dir: str | Path) -> list[Path]:
    """The offline W&B runs under a run dir (`<run_dir>/wandb/offline-run-*`), oldest first."""
    return sorted(Path(run_dir).glob("wandb/offline-run-*"))
