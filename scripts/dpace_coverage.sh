#!/bin/bash
# D-PACE coverage (docs/BLOCK.md, "Block sizes, seeds and sampling"): decay (DFlash) and D-PACE drafters for
# B ∈ {8, 12, 16} and seeds {0, 1}, one layer, the first run's scale, then evaluated greedy and at T = 0.7.
# Usage: scripts/dpace_coverage.sh [OUT_DIR]   (needs data/train: `python -m spec_core train data --num-prompts 384`)
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
export PYTHONPATH="$PWD"
OUT="${1:-runs/dpace_coverage}"
mkdir -p "$OUT/assets"
COMMON="--steps ${STEPS:-600} --shards ${SHARDS:-12} --batch-seqs 2 --anchors 16 --eval-every 150 --threads 1 --no-progress"
# the first seed of every block size first, then the second seeds (a run that stops early still has B = 8, 12, 16)
for run in 8:0 12:0 16:0 8:1 12:1 16:1; do
  B=${run%:*} seed=${run#*:}
  for loss in decay dpace; do
    name="$loss-b$B-s$seed"
    [ -f "$OUT/assets/$name.json" ] && continue
    nice -n 5 .venv/bin/python -m spec_core train block --loss $loss --block-size $B --seed $seed --name "$name" \
      --out-dir "$OUT/assets" --work-dir "$OUT/checkpoints/$name" $COMMON > "$OUT/$name.log" 2>&1
  done
done
[ -n "${TRAIN_ONLY:-}" ] && exit 0
for T in 0 0.7; do
  nice -n 5 .venv/bin/python -m spec_core analyze block --losses "" --extra "$OUT/assets" --temperature $T \
    --n-prompts 6 --max-new-tokens 64 --shards ${SHARDS:-12} --heldout-blocks 1024 --threads 1 \
    --out "$OUT/analysis_t$T.json" > "$OUT/analysis_t$T.log" 2>&1
done
echo done > "$OUT/ALL_DONE"
