"""train.threads: auto picks the idle cores of this process's CPUs; N and 0 as given."""
from __future__ import annotations

import os

import psutil
import pytest

from grpo_research.config import load_config
from grpo_research.errors import ConfigError
from grpo_research.trainers import common


def _cpus(monkeypatch, affinity, percents):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(affinity))
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval=None, percpu=False: list(percents))


@pytest.mark.parametrize("affinity, percents, expected", [
    ([0, 1], [0.0, 0.0], 2),          # quiet machine: every core
    ([0, 1], [100.0, 3.0], 1),        # another process owns one core
    ([0, 1], [100.0, 100.0], 1),      # everything busy: still one thread
    ([0, 1], [60.0, 60.0], 1),        # 1.2 cores busy: 0.8 idle rounds to 1
    ([2, 3], [100.0, 100.0, 0.0, 0.0], 2),  # only the CPUs this process may use count (SLURM, taskset)
    ([0, 1, 2, 3], [100.0, 0.0, 50.0, 0.0], 2),  # 1.5 busy of 4: 2.5 idle rounds to 2
])
def test_free_cores_counts_the_idle_cpus_of_this_process(monkeypatch, affinity, percents, expected):
    _cpus(monkeypatch, affinity, percents)
    assert common.free_cores() == expected
    assert common.resolve_threads("auto") == expected
    assert common.resolve_threads(3) == 3 and common.resolve_threads(0) == 0


def test_threads_defaults_to_auto_and_rejects_anything_else():
    assert load_config(None, []).train.threads == "auto"
    assert load_config(None, ["train.threads=2"]).train.threads == 2
    for bad in ("train.threads=fast", "train.threads=-1", "train.threads=1.5"):
        with pytest.raises(ConfigError, match="train.threads"):
            load_config(None, [bad])
