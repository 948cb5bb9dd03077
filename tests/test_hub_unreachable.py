"""A hub model name on a machine that cannot reach the hub: refused in one line at once when it is
not cached, loaded from the local cache without download retries when it is. The hub is made
unreachable by pointing HF_ENDPOINT at a closed local port."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CLOSED = "http://127.0.0.1:9"  # nothing listens on the discard port here: connection refused


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy")}
    env.update(HF_ENDPOINT=CLOSED, HF_HOME=str(tmp_path / "hf"), WANDB_MODE="disabled", OMP_NUM_THREADS="1")
    return env


def test_an_uncached_hub_name_is_refused_in_one_line_without_retries(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "grpo_research.cli", "train", "--run-dir", str(run),
                           "model.name_or_path=no-such-org/no-such-model", "tracking.wandb=disabled"],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "model.name_or_path=no-such-org/no-such-model" in lines[0], proc.stderr
    assert "not in the local hub cache, and the hub cannot be reached" in lines[0] and CLOSED in lines[0]
    assert not run.exists()  # nothing written


def test_a_cached_hub_name_loads_from_the_cache_without_retries(tiny_model_dir, tmp_path):
    snapshot = tmp_path / "hf" / "hub" / "models--test-org--tiny" / "snapshots" / ("0" * 40)
    shutil.copytree(tiny_model_dir, snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    code = ("from grpo_research.models import load_causal_lm, count_parameters\n"
            "model, tok = load_causal_lm('test-org/tiny')\n"
            "print('loaded', count_parameters(model))\n")
    proc = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("loaded "), proc.stdout
    assert "Retrying" not in proc.stderr, proc.stderr[-2000:]
