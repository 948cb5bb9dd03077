#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with the project and its dev extras.
# On CPU machines torch is pinned to the CPU wheel 2.13.0 in the same pip command, so pip
# never pulls a multi-GB CUDA build. Set GRPO_TORCH_SPEC to choose another torch (e.g. on GPUs).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q "${GRPO_TORCH_SPEC:-torch==2.13.0}" -e ".[dev]"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# The code sandbox uses bubblewrap where it can be installed (root on Debian/Ubuntu).
# Without it the sandbox falls back to `unshare` (root) and says so in every result.
bash scripts/install_sandbox_deps.sh >/dev/null || echo "warning: bubblewrap not installed; the code sandbox will use a weaker isolation" >&2
# The report tests open report.html in Debian's headless chromium (tests/test_report_browser.py).
bash scripts/install_browser.sh >/dev/null || echo "warning: chromium not installed; the browser tests of the report will skip" >&2
