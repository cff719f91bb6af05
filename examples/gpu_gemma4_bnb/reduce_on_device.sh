#!/usr/bin/env bash
# The reduction of inference_worker.py on the device machine (one H100, no network), as run for
# results/RESULTS.md. Wheels are carried in from the workspace (see the device README):
#   .whl/        bitsandbytes (CUDA 13 + CPU libraries only)
#   .whl-tools/  reprobot's own dependencies missing from the image (libcst, PyGithub, pip-tools, ...)
# Usage: [REPRO_SCRIPT=examples/gpu_gemma4_bnb/spawn_worker.py] reduce_on_device.sh SECONDS [STATE_DIR [EXTRA_FLAGS...]]
#   SECONDS      --max-time for this session of the reduction
#   STATE_DIR    a repros/<id>/ folder from an earlier session to --resume from ("" for none)
#   EXTRA_FLAGS  more `reprobot reduce` flags (e.g. --no-env for an intermediate session)
# The repro folder comes back as $OUT/repros.tgz (one file: the device returns at most 8), the
# log as $OUT/reduce.log. A finished reduction's repro.py is then run the way a maintainer would,
# copied alone into an empty folder with the Hub offline (bench/run_alone.py): $OUT/alone.log.
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=2
MAX_TIME=${1:?seconds}
STATE=${2:-}
shift $(( $# < 2 ? $# : 2 ))
I="python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target"
$I /tmp/site .whl/*.whl && $I /tmp/tools .whl-tools/*.whl || exit 1
export PYTHONPATH=/tmp/site:/tmp/tools
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
python3 -c "import torch, transformers, peft, accelerate, bitsandbytes as b; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| transformers', transformers.__version__, '| peft', peft.__version__, '| accelerate', accelerate.__version__, '| bitsandbytes', b.__version__)"
mkdir -p "$OUT/repros"
RESUME=()
if [ -n "$STATE" ]; then
  id=$(basename "$STATE")
  cp -r "$STATE" "$OUT/repros/$id"
  RESUME=(--resume)
fi
# The tiny checkpoint and adapter are built next to the script, in each run's own scratch copy of
# this folder: every candidate (and so the final repro) has to build them itself, nothing is left
# over from an earlier run.
python3 -m bot reduce "${REPRO_SCRIPT:-examples/gpu_gemma4_bnb/inference_worker.py}" --out "$OUT/repros" "${RESUME[@]}" \
  --jobs 8 --jobs-per-gpu 8 --max-time "$MAX_TIME" "$@" 2>&1 | tee "$OUT/reduce.log" | tail -40
rc=${PIPESTATUS[0]}
echo "reduce exit $rc"
if [ "$rc" = 0 ]; then
  python3 bench/run_alone.py "$OUT/repros" --timeout 240 2>&1 | tee "$OUT/alone.log"
fi
tar -C "$OUT" -czf "$OUT/repros.tgz" repros && rm -rf "$OUT/repros"
