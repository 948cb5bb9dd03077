"""Every run and base model records where it was computed, and a study's report says where its
runs ran, warning when they come from more than one machine (grpo_research.provenance)."""
from __future__ import annotations

import json
import subprocess

import pytest
import torch
import transformers

from grpo_research import provenance as P


def _git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_environment_names_this_process():
    env = P.environment("cpu")
    assert env["torch"] == torch.__version__ and env["transformers"] == transformers.__version__
    assert env["cpu"] == P.cpu_model() and env["cpu"]
    assert env["accelerator"] == "none" and env["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert P.describe(env).startswith(f"{env['cpu']} ({env['cpu_capability']}), torch {torch.__version__}")
    assert env["code"] == P.code_version()


def test_code_version_is_the_commit_and_says_dirty(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    assert P.code_version(repo) is None  # no commit yet
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "commit", "-qm", "one")
    head = _git(repo, "rev-parse", "--short=12", "HEAD")
    assert P.code_version(repo) == head and len(head) == 12
    (repo / "untracked.txt").write_text("run output\n")
    assert P.code_version(repo) == head  # untracked files are not the code
    (repo / "a.py").write_text("x = 2\n")
    assert P.code_version(repo) == head + "+dirty"
    sub = repo / "venv" / "site-packages"  # a package installed inside someone else's checkout
    sub.mkdir(parents=True)
    assert P.code_version(sub) is None
    assert P.code_version(tmp_path / "elsewhere") is None  # not a repository (missing, even)


def _env(cpu, code="abc", torch_v="2.13.0+cpu"):
    return {"cpu": cpu, "accelerator": "none", "torch": torch_v, "transformers": "5.25.0", "python": "3.11.7",
            "os": "Linux x86_64", "code": code}


def test_environments_group_machines_not_commits():
    summaries = [{"environment": _env("AMD EPYC", "abc")}, {"environment": _env("AMD EPYC", "def")},
                 {"environment": _env("Intel Xeon")}, {"environment": _env("AMD EPYC", torch_v="2.11.0")},
                 {"final_accuracy": 0.3}]
    envs = P.environments_of(summaries)
    assert [(e["environment"], e["runs"], e["code"]) for e in envs] == [
        ("AMD EPYC, torch 2.13.0+cpu, transformers 5.25.0", 2, ["abc", "def"]),
        ("Intel Xeon, torch 2.13.0+cpu, transformers 5.25.0", 1, ["abc"]),
        ("AMD EPYC, torch 2.11.0, transformers 5.25.0", 1, ["abc"]),
        ("not recorded", 1, []),
    ]
    text = P.environments_markdown(envs)
    assert "**Warning:**" in text and "- Intel Xeon, torch 2.13.0+cpu, transformers 5.25.0: 1 run(s), code abc" in text
    one = P.environments_markdown(P.environments_of(summaries[:2]))
    assert "Warning" not in one and "2 run(s), code abc, def" in one


def test_base_model_environment_is_read_from_base_info(tmp_path):
    base = tmp_path / "_base" / "tiny"
    base.mkdir(parents=True)
    (base / "base_info.json").write_text(json.dumps({"steps": 5, "environment": _env("Intel Xeon")}))
    got = P.base_model_environments([{"model": {"name_or_path": str(base)}}, {"model": {"name_or_path": "hub/x"}},
                                     {"model": {"name_or_path": str(base)}}, {}])
    assert got == {str(base): "Intel Xeon, torch 2.13.0+cpu, transformers 5.25.0"}
    assert f"- base model `{base}` built on: Intel Xeon" in P.environments_markdown(
        P.environments_of([{"environment": _env("Intel Xeon")}]), got)


@pytest.mark.parametrize("mixed", [False, True])
def test_study_report_says_where_runs_ran(tmp_path, mixed):
    from grpo_research.analysis.study import aggregate_study
    from tests.synthetic_study import write_study

    runs = write_study(tmp_path / "runs" / "toy")
    for i, s in enumerate(sorted(runs.glob("*/summary.json"))):
        summary = json.loads(s.read_text())
        summary["environment"] = _env("Intel Xeon" if mixed and i == 0 else "AMD EPYC")
        s.write_text(json.dumps(summary))
    meta = aggregate_study(runs, tmp_path / "out", n_boot=200)
    final_md = (tmp_path / "out" / "final.md").read_text()
    assert [e["environment"].split(",")[0] for e in meta["environments"]] == (
        ["AMD EPYC", "Intel Xeon"] if mixed else ["AMD EPYC"])
    assert "**Where the runs ran**" in final_md
    assert ("**Warning:**" in final_md) == mixed


def test_environments_html_escapes_and_warns_only_on_mixed_machines():
    one = P.environments_of([{"environment": _env("Xeon <v2>")}])
    text = P.environments_html(one, {"runs/_base/x": "Xeon"})
    assert "Where the runs ran: Xeon &lt;v2&gt;, torch 2.13.0+cpu, transformers 5.25.0 (1 runs, code abc)" in text
    assert "base model <code>runs/_base/x</code> built on Xeon" in text and "Warning" not in text
    two = P.environments_of([{"environment": _env("Xeon")}, {"environment": _env("EPYC")}])
    assert "<b>Warning:</b>" in P.environments_html(two) and P.environments_html([]) == ""


def test_a_damaged_base_info_is_named(tmp_path):
    from grpo_research.errors import UsageError

    base = tmp_path / "_base" / "tiny"
    base.mkdir(parents=True)
    (base / "base_info.json").write_text('{"steps": 5, "environ')
    with pytest.raises(UsageError, match=r"base_info.json: damaged .*rebuild the base model"):
        P.base_model_environments([{"model": {"name_or_path": str(base)}}])
    assert (base / "base_info.json").read_text() == '{"steps": 5, "environ'  # left as it was


def test_kernel_variables_are_recorded_and_group_runs_apart(monkeypatch):
    for k in P.KERNEL_VARS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MKL_CBWR", "")  # set but empty: MKL's own choice, so native
    native = P.environment("cpu")
    assert native["kernels"] == "native" and P.kernel_settings() == "native"
    assert "kernels" not in P.describe(native)
    monkeypatch.setenv("MKL_CBWR", "AVX2")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    env = P.environment("cpu")
    assert env["kernels"] == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2"}  # KERNEL_VARS order
    assert P.kernel_settings({"ONEDNN_MAX_CPU_ISA": "AVX2", "PATH": "/bin"}) == {"ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert P.describe(env) == (f"{env['cpu']} ({env['cpu_capability']}), kernels ATEN_CPU_CAPABILITY=avx2 "
                               f"MKL_CBWR=AVX2, torch {torch.__version__}, transformers {transformers.__version__}")
    # a native run, one written before `kernels` was recorded (native too) and a run with MKL_CBWR set
    summaries = [{"environment": {**_env("Xeon"), "kernels": "native"}}, {"environment": _env("Xeon", "def")},
                 {"environment": {**_env("Xeon"), "kernels": {"MKL_CBWR": "AVX2"}}}]
    envs = P.environments_of(summaries)
    assert [(e["environment"], e["runs"]) for e in envs] == [
        ("Xeon, torch 2.13.0+cpu, transformers 5.25.0", 2),
        ("Xeon, kernels MKL_CBWR=AVX2, torch 2.13.0+cpu, transformers 5.25.0", 1)]
    assert "**Warning:**" in P.environments_markdown(envs)
