"""The base-model build (issue 13): it checkpoints and resumes to the same model, and one
process builds a cached base model while the others wait for it."""
import json
import threading
import time

import pytest
import torch
from safetensors.torch import load_file

import grpo_research.trainers.sft as sft
from grpo_research.config import load_config
from grpo_research.locks import DirLock

SMALL = ["model.hidden_size=32", "model.num_layers=1", "model.num_heads=2", "model.intermediate_size=64",
         "model.max_position_embeddings=32", "base.max_steps=12", "base.eval_every=4", "base.check_size=4",
         "base.eval_size=8", "base.stop_accuracy=1.0", "base.batch_size=16", "train.threads=1"]


class Interrupted(Exception):
    pass


def test_an_interrupted_build_resumes_to_the_same_model(tmp_path, monkeypatch, capsys):
    cfg = load_config(None, SMALL)
    ref = tmp_path / "ref"
    sft.train_base_model(cfg, ref, progress=False)
    real = sft._save_build_state
    saves = []

    def save_then_die(work, state):
        real(work, state)
        saves.append(state["step"])
        if state["step"] == 8:
            raise Interrupted  # killed right after the step-8 checkpoint

    monkeypatch.setattr(sft, "_save_build_state", save_then_die)
    out = tmp_path / "out"
    with pytest.raises(Interrupted):
        sft.train_base_model(cfg, out, progress=False)
    assert saves == [4, 8] and not out.exists() and sft.build_dir(out).exists()
    monkeypatch.setattr(sft, "_save_build_state", real)
    capsys.readouterr()
    info = sft.train_base_model(cfg, out, progress=False)
    assert "resuming the build from step 8" in capsys.readouterr().out
    a, b = load_file(out / "model.safetensors"), load_file(ref / "model.safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    assert info["steps"] == 12 and not sft.build_dir(out).exists()  # the build checkpoint is removed


def test_a_second_run_waits_for_the_base_model_being_built(tmp_path, monkeypatch):
    monkeypatch.setenv("GRPO_RESEARCH_CACHE", str(tmp_path))
    cfg = load_config(None, SMALL)
    path = sft.cache_root(cfg) / f"tiny-{cfg.task.name}-{sft.base_model_key(cfg)}"
    holder = DirLock(path.with_name(path.name + ".lock"), "another builder")
    holder.acquire()
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("path", sft.ensure_base_model(cfg, progress=False)))
    t.start()
    time.sleep(1.0)
    assert t.is_alive() and not path.exists()  # waiting, not building beside the other builder
    holder.release()
    t.join(120)
    assert result["path"] == path and (path / "base_info.json").exists()
    from grpo_research.provenance import cpu_model  # where it was built: base models differ across CPUs

    env = json.loads((path / "base_info.json").read_text())["environment"]
    assert env["cpu"] == cpu_model() and env["torch"] == torch.__version__


def test_an_unfinished_build_of_another_config_is_refused(tmp_path, monkeypatch):
    """`sft --out D` killed, then rerun with other overrides: resuming would mix two configs."""
    from grpo_research.errors import UsageError

    real = sft._save_build_state

    def save_then_die(work, state):
        real(work, state)
        raise Interrupted

    monkeypatch.setattr(sft, "_save_build_state", save_then_die)
    out = tmp_path / "out"
    with pytest.raises(Interrupted):
        sft.train_base_model(load_config(None, SMALL), out, progress=False)
    monkeypatch.setattr(sft, "_save_build_state", real)
    with pytest.raises(UsageError, match="holds an unfinished build of a different base-model config"):
        sft.train_base_model(load_config(None, [*SMALL, "base.lr=0.01"]), out, progress=False)
    assert sft.build_dir(out).exists()  # kept: the original build can still resume


def test_two_sft_commands_on_one_out_dir(tmp_path, capsys):
    """The second gets one line naming the holder; nothing it does touches the first's build."""
    from grpo_research.cli import main

    out = tmp_path / "base"
    with DirLock(out.with_name(out.name + ".lock"), "test holder"):
        assert main(["sft", "--out", str(out), *SMALL]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the model build" in err[0] and "is in use by pid" in err[0]
    assert not out.exists() and not sft.build_dir(out).exists()


def test_the_cache_key_ignores_how_rl_poses_prompts():
    """The build trains on raw task prompts: task.prompt_format / system_prompt / few_shot (and
    the evaluation-only option ood_level) must not change the key (adding them would otherwise have rebuilt every cached base model). The
    default config's key is pinned: changing it makes every user rebuild, so it must be a choice."""
    default = sft.base_model_key(load_config(None, []))
    posed = sft.base_model_key(load_config(None, ["task.prompt_format=chat", "task.few_shot=2",
                                                  "task.options={ood_level: 4}"]))  # an evaluation split only
    assert default == posed == "0142d2b829a1"
    assert sft.base_model_key(load_config(None, ["task.eval_level=2"])) != default
