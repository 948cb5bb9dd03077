#!/usr/bin/env bash
# GPU check for the lent GPU machine as it comes (torch + CUDA, transformers and a few libraries
# preinstalled; no network, no vLLM): installs nothing and runs the package from this checkout.
# benchmarks/gpu_check.py prints (a) 20 GRPO steps of the tiny model on CUDA with its held-out
# accuracy and (b) tokens/s, MFU, peak memory and step time of GRPO vs PPO on a random Llama of
# Qwen2.5-0.5B's size (bf16, micro-batches, gradient checkpointing); then (c) the tests marked
# `gpu`. Budget: under 6 minutes (GPU_CHECK_TIMEOUT bounds part a+b, default 300 s).
#
#   bash benchmarks/gpu_check.sh                  # on the GPU machine, from anywhere in the checkout
#   bash benchmarks/gpu_check.sh --dry-run-cpu    # the same code paths on a CPU, tiny sizes (the test suite runs this)
#   PYTHON=.venv/bin/python bash benchmarks/gpu_check.sh --dry-run-cpu
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
t0=$(date +%s)
DRY=0
for a in "$@"; do [ "$a" = "--dry-run-cpu" ] && DRY=1; done
if [ "$DRY" = 0 ]; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || {
    echo "gpu_check: no NVIDIA GPU visible (nvidia-smi failed); --dry-run-cpu checks the script on a CPU" >&2; exit 1; }
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" WANDB_MODE=disabled TOKENIZERS_PARALLELISM=false
"$PY" -c "import torch, transformers; print(f'# python {__import__(\"sys\").version.split()[0]}  torch {torch.__version__}  transformers {transformers.__version__}  cuda {torch.cuda.is_available()}')"
timeout "${GPU_CHECK_TIMEOUT:-300}" "$PY" benchmarks/gpu_check.py "$@"
echo "# (c) pytest -m gpu"
if [ "$DRY" = 1 ]; then
  # on a CPU the gpu tests skip; collecting them checks they import with what the GPU image has
  "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py --co
else
  timeout 120 "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py
fi
echo "gpu_check: done in $(( $(date +%s) - t0 )) s"
