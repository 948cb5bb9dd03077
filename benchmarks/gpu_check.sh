#!/usr/bin/env bash
# GPU check of the vLLM rollout backend, for a fresh machine with an NVIDIA GPU, python3 and a
# package index: builds a separate venv (default .venv-gpu) with vLLM and this package (extra
# `gpu`; vLLM pins its own torch and transformers), then runs benchmarks/gpu_check.py: a tiny
# model warmed up on arith, a few GRPO steps with vLLM rollouts (weights pushed after every
# update), and prints tokens/s (vLLM and the HF backend) and rollout/logp_drift.
# Budget: about 5 minutes (install 1-3 min with uv, engine start ~20 s eager, steps ~30 s).
#
#   bash benchmarks/gpu_check.sh                  # from anywhere inside the repository
#   GPU_VENV=/tmp/venv bash benchmarks/gpu_check.sh --steps 12 --cuda-graphs
#   bash benchmarks/gpu_check.sh --tests          # also run the GPU-marked tests
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${GPU_VENV:-.venv-gpu}"
t0=$(date +%s)

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || {
  echo "gpu_check: no NVIDIA GPU visible (nvidia-smi failed)" >&2; exit 1; }

RUN_TESTS=0
ARGS=()
for a in "$@"; do
  if [ "$a" = "--tests" ]; then RUN_TESTS=1; else ARGS+=("$a"); fi
done

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import vllm, grpo_research" 2>/dev/null; then
  echo "gpu_check: installing vLLM and grpo-research into $VENV"
  if ! command -v uv >/dev/null 2>&1; then
    python3 -m pip install --quiet uv 2>/dev/null || python3 -m pip install --quiet --user uv 2>/dev/null || true
    export PATH="$HOME/.local/bin:$PATH"
  fi
  if command -v uv >/dev/null 2>&1 || python3 -m uv --version >/dev/null 2>&1; then
    UV="uv"; command -v uv >/dev/null 2>&1 || UV="python3 -m uv"
    $UV venv --quiet --seed "$VENV"
    $UV pip install --quiet --python "$VENV/bin/python" -e ".[gpu,dev]"
  else
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet --upgrade pip
    "$VENV/bin/pip" install --quiet -e ".[gpu,dev]"
  fi
  echo "gpu_check: installed in $(( $(date +%s) - t0 )) s"
fi
"$VENV/bin/python" -c "import torch, transformers, vllm; print(f'# torch {torch.__version__}  transformers {transformers.__version__}  vllm {vllm.__version__}')"

export TOKENIZERS_PARALLELISM=false WANDB_MODE=disabled VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-WARNING}"
timeout "${GPU_CHECK_TIMEOUT:-240}" "$VENV/bin/python" benchmarks/gpu_check.py "${ARGS[@]+"${ARGS[@]}"}"
if [ "$RUN_TESTS" = 1 ]; then
  "$VENV/bin/python" -m pytest -q -m gpu tests/test_vllm_backend.py
fi
echo "gpu_check: done in $(( $(date +%s) - t0 )) s"
