#!/usr/bin/env bash
# GPU sets per job (#29) on a machine with 2 (or more) GPUs: the tiny Llama split over two
# cards by max_memory fails only when split; reprobot must measure that it used two GPUs,
# give every job two, confirm and warm-check on the same set, find that one GPU does not show
# the failure ("needs 2 GPUs"), and reduce it. Prints the figures to compare with the report.
#   bash examples/gpu_two_cards/run.sh            (from the repository root; PYTHON=... to choose)
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY=python3
OUT="${OUT:-$HERE/results}"
rm -rf "$OUT"; mkdir -p "$OUT"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export COLUMNS=200

n=$(nvidia-smi -L 2>/dev/null | wc -l)
echo "GPUs: $n"; nvidia-smi -L
if [ "$n" -lt 2 ]; then echo "SKIP: needs 2 GPUs"; exit 0; fi

echo "== 1. the original on one GPU (expect: trains, exit 0)"
( cd "$HERE" && CUDA_VISIBLE_DEVICES=0 "$PY" split_llama_peft.py ) > "$OUT/one_gpu.txt" 2>&1
echo "exit $?"; tail -3 "$OUT/one_gpu.txt"
echo "== 2. the original on two GPUs (expect: Expected all tensors to be on the same device)"
( cd "$HERE" && CUDA_VISIBLE_DEVICES=0,1 "$PY" split_llama_peft.py ) > "$OUT/two_gpus.txt" 2>&1
echo "exit $?"; grep -m1 "device map uses" "$OUT/two_gpus.txt"; tail -1 "$OUT/two_gpus.txt"

echo "== 3. reprobot reduce --gpus 0,1 (GPUs per job measured from the original)"
start=$(date +%s)
( cd "$HERE" && "$PY" -m bot reduce split_llama_peft.py --gpus 0,1 --out "$OUT/repros" --no-env --jobs 2 \
    --jobs-per-gpu 2 --max-time 540 ) > "$OUT/reduce.txt" 2>&1
rc=$?
echo "exit $rc in $(( $(date +%s) - start ))s"; grep -E "GPU sets|warm start|cold runs|reduced|needs|flaky" "$OUT/reduce.txt"
folder=$(ls -d "$OUT"/repros/*/ 2>/dev/null | head -1)
[ -n "$folder" ] || { echo "no repro folder"; tail -30 "$OUT/reduce.txt"; exit 1; }

echo "== 4. figures"
"$PY" - "$folder" <<'PY'
import json, pathlib, sys
f = pathlib.Path(sys.argv[1])
sig = json.loads((f / "signature.json").read_text())
red = json.loads((f / "reduction.json").read_text()) if (f / "reduction.json").is_file() else {}
print("signature:", sig["signature"].get("exc_type"), "|", (sig["record"].get("message") or "")[:120])
print("gpu plan (signature.json):", json.dumps(sig.get("gpus")))
print("needs_gpus:", sig.get("needs_gpus"), "| reduction.json:", red.get("needs_gpus"))
print("gpu_sets:", red.get("gpu_sets"), "| per job:", red.get("gpus_per_job"))
print("status:", red.get("status"), "| statements:", red.get("statements_before"), "->", red.get("statements_after"),
      "| runs:", red.get("runs"), "| cold_fallback:", red.get("cold_fallback"))
w = red.get("warm") or {}
print("warm:", w.get("enabled"), w.get("why_not"), "| runs_warm:", w.get("runs_warm"),
      "| original warm/cold s:", w.get("original_warm_seconds"), w.get("original_cold_seconds"))
print("gpu_not_released:", red.get("gpu_not_released"), "| slot_utilisation:", red.get("slot_utilisation"))
PY

echo "== 5. the repro: on two GPUs it must fail the same way, on one it must not"
if [ -f "$folder/repro.py" ]; then
  cp "$folder/repro.py" "$HERE/.repro_check.py"
  ( cd "$HERE" && CUDA_VISIBLE_DEVICES=0,1 timeout 300 "$PY" .repro_check.py ) > "$OUT/repro_two.txt" 2>&1
  echo "two GPUs: exit $?"; tail -1 "$OUT/repro_two.txt"
  ( cd "$HERE" && CUDA_VISIBLE_DEVICES=0 timeout 300 "$PY" .repro_check.py ) > "$OUT/repro_one.txt" 2>&1
  echo "one GPU: exit $?"; tail -1 "$OUT/repro_one.txt"
  rm -f "$HERE/.repro_check.py"
  echo "--- repro.py"; cat "$folder/repro.py"
fi
exit $rc
