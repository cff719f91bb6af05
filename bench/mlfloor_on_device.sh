#!/usr/bin/env bash
# The ML-floor corpus on a device machine's CPUs (no GPU, no network), as run for the figures in
# bench/mlfloor/README.md: every script on its own 2 cores, side by side, GPUs hidden.
# reprobot's own dependencies missing from the image come in as wheels in .whl-tools/ (see
# examples/gpu_gemma4_bnb/README.md); carry that folder with the command.
# Usage: bench/mlfloor_on_device.sh PARTS MAX_TIME [ONLY]
#   PARTS     parts of bench/mlfloor/ joined by commas (train,heldout3,...)
#   MAX_TIME  each reduction's --max-time
#   ONLY      script names joined by commas (default: every script of the parts)
# DEADLINE=S in the environment: start a script only while it can end within S seconds (more
# scripts than core pairs in one 10-minute command; the rest are named, for the next command).
# Writes $OUT/mlfloor.json (one row per script) and prints the table.
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false CUDA_VISIBLE_DEVICES=""
PARTS=${1:?parts}
MAX_TIME=${2:?seconds}
ONLY=${3:-}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/tools .whl-tools/*.whl || exit 1
export PYTHONPATH=/tmp/tools:$(pwd)
python3 -c "import sys, os, torch, transformers, peft, accelerate; print('python', sys.version.split()[0], '| torch', torch.__version__, '| transformers', transformers.__version__, '| peft', peft.__version__, '| accelerate', accelerate.__version__, '| cores', len(os.sched_getaffinity(0)))"
mkdir -p "$OUT"
python3 bench/mlfloor.py --part "$PARTS" ${ONLY:+--only "$ONLY"} --pin 2 --jobs 2 --max-time "$MAX_TIME" \
    ${DEADLINE:+--deadline "$DEADLINE"} \
    --workdir /tmp/mlf --json "$OUT/mlfloor.json"
uptime
