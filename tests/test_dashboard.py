"""`grpo-research dashboard`: the W&B workspace of a study, and whether the offline W&B runs of
the study hold what it plots. The runs' W&B records are read back from their `.wandb`
transaction logs (grpo_research/tracking/wandb_offline.py: W&B's protobuf records), never from
metrics.jsonl; and the W&B history must equal metrics.jsonl row for row."""
import json
import socket
import struct
import zlib

import pytest
import yaml

from grpo_research.cli import main
from grpo_research.tracking import read_metrics
from grpo_research.tracking.dashboard import LINE_PANELS, spec_panels
from grpo_research.tracking.wandb_offline import WandbFileError, offline_runs, read_offline_run, records
from tests.helpers import fast_run

# W&B's own bookkeeping keys in a history row, absent from metrics.jsonl
WANDB_ONLY = {"_runtime", "_timestamp", "_step"}


@pytest.fixture(scope="module")
def mini_study(tiny_model_dir, tmp_path_factory):
    """runs/mini: grpo at two beta values (the swept key), seeds 1-2 of one, and an
    equal-wall-time control, as the study expansion tags them; W&B offline."""
    root = tmp_path_factory.mktemp("dash")
    runs = root / "runs" / "mini"
    specs = [("grpo-beta0.04-seed1", ["algo.beta=0.04", "seed=1"], ["algo.beta=0.04"]),
             ("grpo-beta0.04-seed2", ["algo.beta=0.04", "seed=2"], ["algo.beta=0.04"]),
             ("grpo-beta0.0-seed1", ["algo.beta=0.0", "seed=1"], ["algo.beta=0.0"]),
             ("sft_control-wall-seed1", ["method=sft_control", "seed=1"], ["control=equal_wall_time"])]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_SILENT", "true")
        for run_id, extra, tags in specs:
            rc = main(["train", "--run-dir", str(runs / run_id), f"model.name_or_path={tiny_model_dir}",
                       *fast_run("train.steps=3", "train.eval_every=2", "tracking.wandb=offline",
                                 "tracking.group=mini", f"tracking.tags=[{', '.join(tags)}]", *extra)])
            assert rc == 0, run_id
    return root


def _dashboard(root, *args):
    return main(["dashboard", "--runs", str(root / "runs"), "--results", str(root / "results"), *args])


def _no_network(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("the offline dashboard opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def _nested(config, dotted):
    node = config
    for part in dotted.split("."):
        node = node[part]
    return node


def _merged_by_step(rows):
    """metrics.jsonl as W&B records it: rows of one step merged (an evaluation row and the training
    row of the same step are one W&B history row), numbers only, `step` as W&B's `_step`."""
    out = {}
    for r in rows:
        row = out.setdefault(r["step"], {"_step": r["step"]})
        row.update({k: v for k, v in r.items() if k != "step" and isinstance(v, (int, float))})
    return [out[s] for s in sorted(out)]


def test_dashboard_panels_are_what_the_offline_runs_recorded(mini_study, monkeypatch, capsys):
    root = mini_study
    _no_network(monkeypatch)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_ENTITY", raising=False)
    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    assert _dashboard(root, "--study", "mini") == 0
    out = capsys.readouterr().out
    assert "grpo-research dashboard --study mini --publish" in out and "wandb sync" in out
    doc = json.loads((root / "results" / "mini" / "wandb_workspace.json").read_text())
    spec = doc["workspace"]
    assert spec["entity"] == "your-entity" and spec["project"] == "grpo-research"
    runset = spec["spec"]["section"]["runSets"][0]
    filters = runset["filters"]["filters"]
    group_filter = [f for f in filters if f["key"] == {"section": "run", "name": "group"}]
    name_filter = [f for f in filters if f["key"] == {"section": "run", "name": "displayName"}]
    assert [f["op"] for f in group_filter] == ["="] and [f["op"] for f in name_filter] == ["NIN"]
    grouping = [(g["section"], g["name"].replace(".value", "", 1)) for g in runset["grouping"]]
    assert grouping == [("config", "method"), ("config", "algo.beta")]

    # what each offline run recorded, from its .wandb file
    recorded = {}
    for run_dir in sorted((root / "runs" / "mini").iterdir()):
        (wb,) = offline_runs(run_dir)
        rec = read_offline_run(wb)
        recorded[run_dir.name] = rec
        # the W&B history is metrics.jsonl, row for row
        history = [{k: v for k, v in row.items() if k not in WANDB_ONLY - {"_step"}} for row in rec["history"]]
        expected = _merged_by_step(read_metrics(run_dir / "metrics.jsonl"))
        assert [h["_step"] for h in history] == [e["_step"] for e in expected], run_dir.name
        for h, e in zip(history, expected):
            assert set(h) == set(e), (run_dir.name, set(h) ^ set(e))
            assert h == pytest.approx(e, rel=1e-12, abs=0), run_dir.name
    # the filter selects exactly the runs of the group minus the equal-wall-time control
    selected = {name for name, rec in recorded.items()
                if rec["run"]["group"] == group_filter[0]["value"] and rec["run"]["name"] not in name_filter[0]["value"]}
    assert selected == {"grpo-beta0.04-seed1", "grpo-beta0.04-seed2", "grpo-beta0.0-seed1"}
    assert recorded["sft_control-wall-seed1"]["run"]["tags"] == ["control=equal_wall_time"]

    panels = spec_panels(spec)
    lines = [p for p in panels if p["type"] == "Run History Line Plot"]
    plotted = {k for p in lines for k in p["keys"]}
    assert {k for k, *_ in LINE_PANELS} <= plotted
    assert any(k.startswith("cost/") for k in plotted)
    logged = {name: set().union(*(row.keys() for row in recorded[name]["history"])) for name in selected}
    for p in lines:  # every panel plots what some run shown recorded; the core curves, every run
        assert p["x"] == "samples" and all("samples" in keys for keys in logged.values())
        assert any(set(p["keys"]) <= keys for keys in logged.values()), p
        if p["keys"][0] in {k for k, *_ in LINE_PANELS}:
            assert all(set(p["keys"]) <= keys for keys in logged.values()), p
    for name in selected:
        rec = recorded[name]
        for section, key in grouping:
            _nested(rec["config"], key)  # KeyError if the run's W&B config lacks a grouping key
        for col in runset["runFeed"]["columnOrder"]:
            where, _, key = col.partition(":")
            if where == "summary":
                assert key in rec["summary"], (name, col)
            elif where == "config":
                _nested(rec["config"], key)
    assert not [p for p in panels if p["type"] == "Parallel Coordinates Plot"]  # not an HPO study


def _fake_run(run_dir, group, tags, wandb="offline", method="grpo", beta=0.04):
    run_dir.mkdir(parents=True)
    cfg = {"method": method, "seed": 1, "algo": {"beta": beta},
           "tracking": {"wandb": wandb, "project": "grpo-research", "group": group, "tags": tags}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(cfg))
    rows = [{"step": 0, "samples": 0, "eval/accuracy": 0.1},
            {"step": 1, "samples": 8, "reward_mean": 0.5, "kl": 0.0, "cost/peak_mem_mb": 10.0}]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_dashboard_of_an_hpo_search_has_parallel_coordinates(tmp_path, monkeypatch):
    _no_network(monkeypatch)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_ENTITY", "team")
    monkeypatch.setenv("WANDB_PROJECT", "proj")
    for i, beta in enumerate((0.01, 0.1)):
        _fake_run(tmp_path / "runs" / "_hpo" / "s" / f"trial-{i:04d}", "hpo-s", [f"algo.beta={beta}"], beta=beta)
    _fake_run(tmp_path / "runs" / "hpo-s" / "grpo-best-seed1", "hpo-s", ["algo.beta=0.1"], beta=0.1)
    assert _dashboard(tmp_path, "--study", "hpo-s") == 0
    doc = json.loads((tmp_path / "results" / "hpo-s" / "wandb_workspace.json").read_text())
    assert (doc["workspace"]["entity"], doc["workspace"]["project"]) == ("team", "proj")
    assert sorted(doc["runs"]) == ["grpo-best-seed1", "trial-0000", "trial-0001"]
    (pc,) = [p for p in spec_panels(doc["workspace"]) if p["type"] == "Parallel Coordinates Plot"]
    assert pc["config"] == ["algo.beta"] and pc["keys"] == ["eval/accuracy"]
    # flags win over W&B's environment variables
    assert _dashboard(tmp_path, "--study", "hpo-s", "--entity", "me", "--project", "p2") == 0
    doc = json.loads((tmp_path / "results" / "hpo-s" / "wandb_workspace.json").read_text())
    assert (doc["workspace"]["entity"], doc["workspace"]["project"]) == ("me", "p2")


@pytest.mark.parametrize("case", ["unknown", "empty", "disabled", "publish_offline"])
def test_dashboard_bad_input_is_one_error_line(tmp_path, monkeypatch, capsys, case):
    _no_network(monkeypatch)
    monkeypatch.setenv("WANDB_MODE", "offline")
    (tmp_path / "runs").mkdir()
    args = ["--study", "mini"]
    if case == "empty":
        (tmp_path / "runs" / "mini" / "half-run").mkdir(parents=True)  # no config.yaml, no metrics
    elif case == "disabled":
        _fake_run(tmp_path / "runs" / "mini" / "grpo-seed1", "mini", [], wandb="disabled")
    elif case == "publish_offline":
        _fake_run(tmp_path / "runs" / "mini" / "grpo-seed1", "mini", [])
        args.append("--publish")
    assert _dashboard(tmp_path, *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert {"unknown": "unknown study", "empty": "no runs", "disabled": "tracking.wandb=disabled",
            "publish_offline": "WANDB_MODE=offline"}[case] in err[0]
    assert not (tmp_path / "results").exists()


def _frame(payloads, block=32768):
    """A `.wandb` file of `payloads` in the LevelDB log framing (records split across blocks)."""
    crc = {t: zlib.crc32(bytes([t])) for t in (1, 2, 3, 4)}
    out = bytearray(struct.pack("<4sHB", b":W&B", 0xBEE1, 0))
    for data in payloads:
        first = True
        while True:
            room = block - len(out) % block
            if room < 7:
                out += b"\0" * room
                continue
            chunk, data = data[:room - 7], data[room - 7:]
            kind = (1 if first else 4) if not data else (2 if first else 3)
            out += struct.pack("<IHB", zlib.crc32(chunk, crc[kind]) & 0xFFFFFFFF, len(chunk), kind) + chunk
            first = False
            if not data:
                break
    return bytes(out)


def test_wandb_file_reader_joins_split_records_and_rejects_corruption(tmp_path):
    from wandb.proto import wandb_internal_pb2

    recs = []
    for step in range(3):
        r = wandb_internal_pb2.Record()
        r.history.step.num = step
        item = r.history.item.add()
        item.key, item.value_json = "note", json.dumps("x" * 50_000)  # spans two blocks
        recs.append(r.SerializeToString())
    path = tmp_path / "run.wandb"
    path.write_bytes(_frame(recs))
    rows = read_offline_run(path)["history"]
    assert [r["_step"] for r in rows] == [0, 1, 2] and all(len(r["note"]) == 50_000 for r in rows)
    assert len(list(records(path))) == 3
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(WandbFileError, match="checksum"):
        list(records(path))
    path.write_bytes(b"not a wandb file")
    with pytest.raises(WandbFileError, match="not a W&B"):
        list(records(path))
