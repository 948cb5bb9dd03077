"""benchmarks/gpu_check.sh --dry-run-cpu: the GPU check's code paths on the CPU at tiny sizes,
with the packages the GPU machine's image lacks made unimportable (as they are there)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ABSENT = ["wandb", "optuna", "snakemake", "math_verify", "datasets", "jsonschema", "vllm"]

# sitecustomize: the path finder no longer sees these packages, so importing one fails and
# importlib.util.find_spec (how transformers asks whether a package is installed) says None
BLOCKER = f'''
import importlib.machinery
import sys
ABSENT = {ABSENT!r}
class _WithoutAbsent(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in ABSENT:
            return None
        return super().find_spec(name, path, target)
sys.meta_path[:] = [_WithoutAbsent if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
'''


@pytest.mark.slow
def test_the_gpu_check_runs_on_a_cpu_without_the_packages_the_gpu_image_lacks(tmp_path):
    block = tmp_path / "block"
    block.mkdir()
    (block / "sitecustomize.py").write_text(BLOCKER)
    env = dict(os.environ, PYTHON=sys.executable, PYTHONPATH=str(block), OMP_NUM_THREADS="1")
    check = subprocess.run([sys.executable, "-c", "import wandb"], env=env, capture_output=True, text=True)
    assert check.returncode != 0 and "No module named 'wandb'" in check.stderr  # the blocker works
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--dry-run-cpu", "--threads", "1",
                           "--workdir", str(tmp_path / "work")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert re.search(r"^tiny_accuracy=\d\.\d{3}->\d\.\d{3} ", out, re.M), out
    for method in ("grpo", "ppo"):
        line = re.search(rf"^big_{method}=step_s (\S+) .*gen_tokens_per_s (\S+) mfu (\S+) mfu_vs_peak \S+ "
                         r"peak_mem_gb (\S+)", out, re.M)
        assert line, out
        assert all(float(v) > 0 for v in line.groups())
    assert re.search(r"^big_ppo_over_grpo=\d+\.\d\d", out, re.M)
    for method in ("grpo", "ppo"):  # (b') LoRA: peft is importable here, so the case runs
        assert re.search(rf"^big_{method}_lora=step_s \S+ ", out, re.M), out
        ratio = re.search(rf"^big_{method}_lora_over_full=model_state (\S+) ", out, re.M)
        assert ratio and 0 < float(ratio.group(1)) < 1, out
    assert re.search(r"\d+ tests? collected", out), out  # (c): tests/test_gpu.py collects with the image's packages
    assert (tmp_path / "work" / "big-ppo" / "summary.json").exists()


def test_the_vllm_check_loop_runs_with_a_stand_in_engine_on_a_cpu():
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "vllm_check.py"), "--dry-run-cpu",
                           "--sft-steps", "5", "--steps", "2"], cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for key in ("vllm_tokens_per_s=", "hf_tokens_per_s=", "logp_drift=", "weight_syncs=2 (steps 2)"):
        assert key in proc.stdout, proc.stdout
    drift = float(re.search(r"^logp_drift=(\S+)", proc.stdout, re.M).group(1))
    assert drift < 1e-4  # the stand-in samples with the trainer's own model: no drift
