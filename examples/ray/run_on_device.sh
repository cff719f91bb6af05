#!/usr/bin/env bash
# Issue #34 on a machine with 2 GPUs: a Ray head of one node holding both GPUs, and
# `reprobot reduce --cluster auto` of
#   1. the GPU example (examples/gpu_gemma4_bnb/inference_worker.py) with ONE GPU per job (2 slots);
#   2. the two-GPU failure (examples/gpu_two_cards/split_llama_peft.py) with BOTH GPUs per job (1 slot).
# Prints what each command printed about the cluster and the result, then the cluster figures
# from reduction.json.
#
#   bash examples/ray/run_on_device.sh [MAX_TIME_1 [MAX_TIME_2]]     (from the repository root)
#
# Needs python3 with torch, transformers, peft and accelerate (the device image's), and wheels
# carried in next to the repository root (installed with --no-index into /tmp/site):
#   .whl-ray/    ray for this python3 (see examples/ray/README.md: slim_wheel.py drops ray/jars so
#                it fits the 64 MiB carry) and its dependencies
#   .whl-tools/  reprobot's own dependencies missing from the image (libcst, rich, ...)
#   .whl/        bitsandbytes, for step 1's example (step 1 is skipped without it)
# Results go to $OUT (default examples/ray/results): one.log, two.log, and the figures.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
T1=${1:-240}
T2=${2:-240}
OUT="${OUT:-$HERE/results}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false COLUMNS=200
for d in .whl-ray .whl-tools .whl; do
  if ls "$ROOT/$d"/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$ROOT/$d"/*.whl || exit 1
  fi
done
export PYTHONPATH="/tmp/site:$ROOT"
cd "$ROOT"
nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader
n=$(nvidia-smi -L 2>/dev/null | wc -l)
if [ "$n" -lt 2 ]; then echo "SKIP: needs 2 GPUs, found $n"; exit 0; fi
python3 - <<'PY' || exit 1
import sys, ray, torch, transformers, peft, accelerate
print("python", sys.version.split()[0], "| ray", ray.__version__, "| torch", torch.__version__, "| transformers",
      transformers.__version__, "| peft", peft.__version__, "| accelerate", accelerate.__version__)
PY
RAY="python3 -c 'import sys; from ray.scripts.scripts import main; sys.argv[0] = \"ray\"; sys.exit(main())'"
PORT=${RAY_PORT:-6390}
eval "$RAY" start --head --port "$PORT" --num-gpus 2 --num-cpus 8 --include-dashboard=false --disable-usage-stats \
  > "$OUT/ray_start.log" 2>&1 || { cat "$OUT/ray_start.log"; exit 1; }
trap 'eval "$RAY" stop --force >/dev/null 2>&1' EXIT
export RAY_ADDRESS="127.0.0.1:$PORT"
echo "ray head: one node, 2 GPUs, 8 CPUs at $RAY_ADDRESS"

figures() {   # the cluster and GPU figures of a reduction's folder
  python3 - "$1" <<'PY'
import json, pathlib, sys
found = list(pathlib.Path(sys.argv[1]).glob("*/reduction.json"))
if not found:
    print("no reduction.json"); sys.exit(0)
red = json.loads(found[0].read_text())
c = red.get("cluster") or {}
print("status:", red.get("status"), "| statements:", red.get("statements_before"), "->", red.get("statements_after"),
      "| runs:", red.get("runs"), "| gpus_per_job:", red.get("gpus_per_job"), "| needs_gpus:", red.get("needs_gpus"))
print("cluster:", json.dumps({k: c.get(k) for k in ("address", "slots_started", "nodes", "runs", "reruns", "cancels",
                                                   "refused", "fallback", "start_seconds", "ship_bytes")}))
w = red.get("warm") or {}
print("warm:", w.get("enabled"), w.get("why_not") or "", "| runs_warm:", w.get("runs_warm"))
PY
}

if python3 -c "import bitsandbytes" >/dev/null 2>&1; then
  echo "== 1. GPU example, one GPU per job (--gpus 0,1: two slots of one GPU)"
  start=$(date +%s)
  python3 -m bot reduce examples/gpu_gemma4_bnb/inference_worker.py --cluster auto --gpus 0,1 --no-env \
    --out "$OUT/one" --max-time "$T1" > "$OUT/one.log" 2>&1
  echo "exit $? in $(( $(date +%s) - start ))s"
  grep -E "cluster|GPU sets|warm start|cold runs|reduced|refused|lost|local slots" "$OUT/one.log"
  figures "$OUT/one"
else
  echo "== 1. skipped: bitsandbytes is not importable (carry its wheel in .whl/)"
fi

echo "== 2. two-GPU failure, both GPUs per job (--gpus 0,1: one slot of two GPUs)"
start=$(date +%s)
( cd examples/gpu_two_cards && python3 -m bot reduce split_llama_peft.py --cluster auto --gpus 0,1 --no-env \
    --out "$OUT/two" --max-time "$T2" ) > "$OUT/two.log" 2>&1
echo "exit $? in $(( $(date +%s) - start ))s"
grep -E "cluster|GPU sets|warm start|cold runs|reduced|needs|refused|lost|local slots" "$OUT/two.log"
figures "$OUT/two"
