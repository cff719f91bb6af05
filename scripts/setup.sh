#!/usr/bin/env bash
# Creates ./.venv with reprobot, the Hugging Face stack (CPU torch), the optional Ray engine and the
# test tools (the Ray tests run a real local cluster).
# Idempotent: a second run only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch first and alone: on this project's machines 2.13.0 is a CPU build on local disk.
# Elsewhere set PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu for a small CPU wheel.
.venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -c constraints/ci.txt -e ".[hf,test,ray]"
