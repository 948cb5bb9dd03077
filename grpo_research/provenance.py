"""Where a result was computed: the machine, the software and the code version.

The same commit and config give different models on different CPUs (float kernels differ, and
training amplifies the difference: benchmarks/RESULTS.md, "2026-12-05", the main study's GRPO at
34.0 % on one 2-core machine and 43.8 % on another). So every run's `summary.json` and every base
model's `base_info.json` carry `environment()`, and a study's report says which environments its
runs came from and warns when there is more than one.

On one CPU, environment variables read when torch and MKL load pick other kernels and change the
numbers too (benchmarks/RESULTS.md, "2026-12-06 - kernel families on one CPU"):
ATEN_CPU_CAPABILITY (torch's own vectorised kernels), MKL_CBWR and MKL_ENABLE_INSTRUCTIONS (MKL's
matrix products and exp). The environment records them (`kernels`) and a run with any of them set is
described, and grouped, apart from the native runs. ONEDNN_MAX_CPU_ISA is recorded as well, though
the harness's fp32 CPU training runs no oneDNN primitive.
"""
from __future__ import annotations

import os
import platform
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grpo_research.errors import UsageError

PACKAGE_ROOT = Path(__file__).resolve().parent.parent

# the fields that decide the numbers; `code` is compared separately (a code change is a different
# experiment, not a different machine)
MACHINE_KEYS = ("cpu", "cpu_capability", "kernels", "accelerator", "torch", "transformers")

# environment variables that choose the CPU kernels (read once, when the libraries load)
KERNEL_VARS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")
NATIVE = "native"
# The kernel families a study can name (`kernels: [native, avx2]`, grpo_research.studies): the
# variables the pipeline sets for every job of a run on that family (its base build, training and
# evaluations). avx2 sets all four: the combination that changes the most kernels here (matrix
# products, exp and softmax; benchmarks/RESULTS.md, "kernel families on one CPU"). On a CPU
# without AVX-512 it may equal native; the runs' recorded `kernels` and `cpu_capability` say.
KERNEL_FAMILIES: dict[str, dict[str, str]] = {
    NATIVE: {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "ONEDNN_MAX_CPU_ISA": "AVX2"},
}


def kernel_env_prefix(family: str) -> str:
    """The shell prefix that runs a command on kernel family `family`: `env VAR=value ... ` ("" for
    native, which leaves the caller's environment as it is: a run records what it ran on)."""
    if family not in KERNEL_FAMILIES:
        raise UsageError(f"kernel family {family!r} is not one of {', '.join(KERNEL_FAMILIES)}")
    env = KERNEL_FAMILIES[family]
    return ("env " + " ".join(f"{k}={v}" for k, v in env.items()) + " ") if env else ""


def kernel_settings(environ: Mapping[str, str] | None = None) -> dict[str, str] | str:
    """The kernel variables set (non-empty) in `environ` (default: this process's environment), in
    KERNEL_VARS order, or "native" when none is: each library's own choice for this CPU."""
    environ = os.environ if environ is None else environ
    got = {k: environ[k] for k in KERNEL_VARS if environ.get(k, "").strip()}
    return got or NATIVE


def describe_kernels(kernels: Any) -> str:
    """`ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=AVX2` for a record's `kernels`; "" when native or not recorded
    (records written before the field existed ran with whatever was set, most likely nothing)."""
    if not kernels or kernels == NATIVE:
        return ""
    if isinstance(kernels, dict):
        return " ".join(f"{k}={v}" for k, v in kernels.items())
    return str(kernels)


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def git(cwd: str | Path, *args: str) -> str | None:
    """`git *args` run in `cwd`: its stripped stdout, or None when git is missing, fails or times out."""
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def code_version(root: str | Path = PACKAGE_ROOT) -> str | None:
    """The git commit of `root` (short hash, `+dirty` when tracked files differ from it), or None
    when `root` is not a git checkout (an installed wheel) or git is missing."""
    if not Path(root).is_dir():
        return None
    top = git(root, "rev-parse", "--show-toplevel")
    # a package installed into a virtualenv inside some other checkout is not that checkout's code
    if top is None or Path(top).resolve() != Path(root).resolve():
        return None
    head = git(root, "rev-parse", "--short=12", "HEAD")
    if head is None:  # a repository without commits
        return None
    dirty = git(root, "status", "--porcelain", "--untracked-files=no")
    return head + ("+dirty" if dirty else "")


def environment(device: Any = None) -> dict[str, Any]:
    """Machine, software versions and code version of this process (for summary files)."""
    import torch
    import transformers

    accelerator = "none"
    if device is not None and torch.device(device).type == "cuda" and torch.cuda.is_available():
        accelerator = torch.cuda.get_device_name(torch.device(device))
    return {
        "cpu": cpu_model(),
        # the vector instructions torch's CPU kernels dispatch to (VMs often hide the CPU's model)
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        # kernel-choosing variables (ATEN_CPU_CAPABILITY, MKL_CBWR, ...) set for this process, or "native"
        "kernels": kernel_settings(),
        "accelerator": accelerator, "torch": torch.__version__,
        "transformers": transformers.__version__, "python": platform.python_version(),
        "os": f"{platform.system()} {platform.machine()}", "code": code_version(),
    }


def describe(env: dict[str, Any] | None) -> str:
    """One line for a report: `cpu (capability), kernels VAR=value ... + accelerator, torch X, transformers Y`
    (the kernels part only when some kernel variable was set)."""
    if not env:
        return "not recorded"
    where = env.get("cpu", "?") + (f" ({env['cpu_capability']})" if env.get("cpu_capability") else "")
    kernels = describe_kernels(env.get("kernels"))
    where += f", kernels {kernels}" if kernels else ""
    where += ("" if env.get("accelerator") in (None, "none") else f" + {env['accelerator']}")
    return f"{where}, torch {env.get('torch', '?')}, transformers {env.get('transformers', '?')}"


def environments_of(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Distinct machine environments (MACHINE_KEYS) over run summaries, most runs first:
    [{"environment": str, "runs": n, "code": [commits]}]; runs without a record count as
    "not recorded"."""
    groups: dict[str, dict[str, Any]] = {}
    for s in summaries:
        env = s.get("environment")
        key = describe({k: env.get(k) for k in MACHINE_KEYS} if env else None)
        g = groups.setdefault(key, {"environment": key, "runs": 0, "code": []})
        g["runs"] += 1
        code = (env or {}).get("code")
        if code and code not in g["code"]:
            g["code"].append(code)
    return sorted(groups.values(), key=lambda g: -g["runs"])


def base_model_environments(configs: list[dict[str, Any]]) -> dict[str, str]:
    """{model.name_or_path: where it was built} for the runs' starting models that are base models
    built by `grpo-research sft` (a base_info.json beside the weights; paths as the runs saw them)."""
    import json

    out: dict[str, str] = {}
    for cfg in configs:
        path = (cfg.get("model") or {}).get("name_or_path")
        if not path or path in out:
            continue
        info = Path(path) / "base_info.json"
        if info.is_file():
            try:
                record = json.loads(info.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                raise UsageError(f"{info}: damaged ({e}); rebuild the base model (delete its directory first)") from e
            out[path] = describe(record.get("environment") if isinstance(record, dict) else None)
    return out


WARNING = ("the runs come from more than one machine or software stack. The same config and seed can give "
           "different accuracies on a different CPU, so differences between variants may partly be differences "
           "between machines.")


def _entries(envs: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    """(environment, runs, `, code ...` or "") for each environment."""
    return [(e["environment"], e["runs"], f", code {', '.join(e['code'])}" if e["code"] else "") for e in envs]


def environments_markdown(envs: list[dict[str, Any]], bases: dict[str, str] | None = None) -> str:
    """The report's paragraph on where the runs ran (a warning when more than one environment)."""
    if not envs:
        return ""
    lines = [f"- {where}: {n} run(s){code}" for where, n, code in _entries(envs)]
    lines += [f"- base model `{path}` built on: {where}" for path, where in (bases or {}).items()]
    text = "**Where the runs ran** (each run's summary.json `environment`):\n\n" + "\n".join(lines) + "\n"
    return text + (f"\n**Warning:** {WARNING}\n" if len(envs) > 1 else "")


def environments_html(envs: list[dict[str, Any]], bases: dict[str, str] | None = None) -> str:
    """environments_markdown as the HTML reports' paragraph(s)."""
    import html

    if not envs:
        return ""
    where = "; ".join(f"{html.escape(w)} ({n} runs{html.escape(code)})" for w, n, code in _entries(envs))
    where += "".join(f"; base model <code>{html.escape(p)}</code> built on {html.escape(w)}"
                     for p, w in (bases or {}).items())
    text = f"<p class=muted>Where the runs ran: {where}.</p>"
    return text + (f"<p><b>Warning:</b> {html.escape(WARNING)}</p>" if len(envs) > 1 else "")
