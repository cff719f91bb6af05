#!/usr/bin/env bash
# The two-GPU reduction of split_llama_peft.py on a device machine with 2 GPUs and no network
# (#44), as run for results/two-gpus/. reprobot's own dependencies missing from the image are
# carried in as wheels in .whl-tools/ (see examples/gpu_gemma4_bnb/README.md).
# Usage: reduce_on_device.sh SECONDS [STATE_TGZ]
#   SECONDS    --max-time of this command's part of the reduction
#   STATE_TGZ  repros.tgz returned by an earlier command, to --resume from
# What comes back under $OUT: repros.tgz (the store), reduce.log, originals.txt (the original on
# one and two GPUs), checks.txt (the final repro run cold on two GPUs and on one) and draft.txt
# (`reprobot file --dry-run`: System Info, lock, "needs 2 GPUs").
set -uo pipefail
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false COLUMNS=160
MAX_TIME=${1:?seconds}
STATE=${2:-}
ROOT=$(pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/tools .whl-tools/*.whl || exit 1
export PYTHONPATH=/tmp/tools:$ROOT
nvidia-smi -L
python3 -c "import torch, transformers, peft, accelerate; print('torch', torch.__version__, 'cuda', torch.version.cuda, '| transformers', transformers.__version__, '| peft', peft.__version__, '| accelerate', accelerate.__version__, '| visible GPUs', torch.cuda.device_count())"
HERE=$ROOT/examples/gpu_two_cards
STORE=/tmp/two/repros
mkdir -p /tmp/two "$OUT"
RESUME=()
if [ -n "$STATE" ]; then
  tar -C /tmp/two -xzf "$STATE"
  RESUME=(--resume)
else
  { for set in 0 0,1; do
      s=$(date +%s)
      ( cd "$HERE" && CUDA_VISIBLE_DEVICES=$set timeout 200 python3 split_llama_peft.py ) > /tmp/two/orig.txt 2>&1
      echo "original on GPUs $set: exit $? in $(( $(date +%s) - s )) s: $(tail -1 /tmp/two/orig.txt | cut -c1-200)"
    done; } | tee "$OUT/originals.txt"
fi
s=$(date +%s)
( cd "$HERE" && python3 -m bot reduce split_llama_peft.py --gpus 0,1 --out "$STORE" "${RESUME[@]}" \
    --jobs 8 --jobs-per-gpu 8 --max-time "$MAX_TIME" ) > "$OUT/reduce.log" 2>&1
rc=$?
echo "reduce exit $rc in $(( $(date +%s) - s )) s"; tail -25 "$OUT/reduce.log"
folder=$(ls -d "$STORE"/*/ 2>/dev/null | head -1)
if [ "$rc" = 0 ] && [ -f "$folder/repro.py" ]; then
  # The maintainer's check, cold: the repro alone in an empty folder on two GPUs, then on one.
  { for set in 0,1 0; do
      d=$(mktemp -d); cp "$folder/repro.py" "$d/"
      s=$(date +%s)
      ( cd "$d" && CUDA_VISIBLE_DEVICES=$set timeout 240 python3 repro.py ) > "$d/out.txt" 2>&1
      echo "repro.py alone on GPUs $set: exit $? in $(( $(date +%s) - s )) s: $(tail -1 "$d/out.txt" | cut -c1-200)"
    done
    echo "--- repro.py"; cat "$folder/repro.py"; } | tee "$OUT/checks.txt"
  # routing's own word first (the failing call is the script's torch.stack), then the draft as it
  # would go to pytorch/pytorch when the user picks it (`--repo`)
  python3 -m bot file --dry-run "$folder" --no-search > "$OUT/draft.txt" 2>&1
  echo "file --dry-run exit $?: $(tail -1 "$OUT/draft.txt" | cut -c1-200)"
  python3 -m bot file --dry-run "$folder" --no-search --repo pytorch >> "$OUT/draft.txt" 2>&1
  echo "file --dry-run --repo pytorch exit $?"; grep -i -E "needs 2|^ *GPU [0-9]|lock" "$OUT/draft.txt" | head -12
fi
tar -C /tmp/two -czf "$OUT/repros.tgz" repros
exit $rc
